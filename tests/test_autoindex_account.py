"""Every file seen lands in exactly one column of the account; failures set the exit status."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.progress import RunProgress
from xerj_core.cli import build_cli
from xerj_core.plugins import get_plugin_manager

LATIN1 = "# Café\n\nUne note écrite en Latin-1, déjà vieille, à relire.\n"


def columns(summary) -> int:
    return summary.files_indexed + summary.files_unchanged + len(summary.files_skipped) + len(summary.files_failed)


@pytest.fixture
def messy(tmp_path):
    folder = tmp_path / "messy"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSee [[b]].\n")
    (folder / "b.md").write_text("# B\n")
    (folder / "notes.txt").write_text("plain\n")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    (folder / "tool.bin").write_bytes(bytes(range(256)))
    (folder / "old.md").write_bytes(LATIN1.encode("latin-1"))
    (folder / "locked.md").write_text("# Locked\n")
    (folder / "gone.md").symlink_to(folder / "nowhere.md")
    (folder / "junk.txt").write_bytes(b"bad " + bytes(range(128, 256)) * 2)
    return folder


@pytest.fixture
def unreadable(monkeypatch):
    """locked.md cannot be read (a mode change would not stop a test running as root)."""
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.md":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)


def test_the_account_of_a_folder_adds_up(engine, messy, unreadable):
    summary = run(engine, messy)
    assert summary.files_seen == 9 == columns(summary), summary.to_json()
    assert summary.files_indexed == 4 and summary.files_unchanged == 0
    failed = {f["path"]: f["reason"] for f in summary.files_failed}
    assert failed.keys() == {"locked.md", "junk.txt"} and "Permission denied" in failed["locked.md"]
    assert summary.skipped_by_kind == {"broken_symlink": 1, "no_format": 2}
    assert {f["path"] for f in summary.files_skipped if f["kind"] == "no_format"} == {"photo.png", "tool.bin"}
    assert "undecodable" in failed["junk.txt"]
    card = engine.store.get(summary.datasets[0], "old.md")[0]
    assert card["title"] == "Café" and card["encoding"] != "utf-8"
    again = run(engine, messy)
    assert again.files_seen == 9 == columns(again) and again.files_indexed == 0 and again.files_unchanged == 4
    assert again.skipped_by_kind == summary.skipped_by_kind


def test_json_lists_skipped_and_failed_and_failures_exit_1(tmp_path, messy):
    cli = build_cli(get_plugin_manager())
    args = ["autoindex", str(messy), "--data-dir", str(tmp_path / "data"), "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    body = json.loads(result.stdout)
    assert {f["path"] for f in body["files_skipped"]} >= {"photo.png", "tool.bin", "gone.md"}
    assert all(f["reason"] for f in body["files_skipped"] + body["files_failed"])
    assert "junk.txt" in {f["path"] for f in body["files_failed"]}
    assert body["files_seen"] == (body["files_indexed"] + body["files_unchanged"] + len(body["files_skipped"])
                                  + len(body["files_failed"]))
    allowed = CliRunner().invoke(cli, [*args, "--allow-failures"])
    assert allowed.exit_code == 0, allowed.output
    text = CliRunner().invoke(cli, args[:-1])
    assert "3 skipped (broken symlink 1, no format 2)" in text.stdout and "failed junk.txt" in text.stdout


def notes(folder: Path, count: int) -> Path:
    folder.mkdir()
    for n in range(count):
        (folder / f"n{n:03}.md").write_text(f"# Note {n}\n")
    return folder


def test_piped_progress_prints_a_line_per_n_files_with_total_and_rate(engine, tmp_path):
    folder = notes(tmp_path / "many", 300)
    stream = io.StringIO()
    progress = RunProgress(stream, terminal=False, every=100)
    run(engine, folder, progress=progress, workers=1)
    progress.close()
    lines = stream.getvalue().splitlines()
    # files are accounted a parse batch (64) at a time: a line once each hundred is passed, and a last one
    assert [line.split()[1] for line in lines] == ["128/300", "256/300", "300/300"]
    assert "files/s, ETA" in lines[0] and lines[-1].endswith("edges: done")


def test_terminal_progress_is_a_bar_with_total_rate_and_eta(engine, tmp_path):
    folder = notes(tmp_path / "few", 5)
    stream = io.StringIO()
    progress = RunProgress(stream, terminal=True, min_interval=0)
    run(engine, folder, progress=progress)
    drawn = stream.getvalue()
    progress.close()
    assert "5/5" in drawn and "file/s" in drawn and "autoindex" in drawn
