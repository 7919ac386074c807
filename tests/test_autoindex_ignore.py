"""Autoindex honours .gitignore and .xerjignore as git does: git itself is the oracle, on made and real trees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import ignore
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.walk import IGNORED, UNREADABLE, FileEntry, Skipped, walk
from xerj_core.cli import build_cli
from xerj_core.engine import Engine

REPO = Path(__file__).resolve().parent.parent
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
# git with no user or system configuration read, nor a user's default excludes file (~/.config/git/ignore): the
# walk reads neither, so the oracle must not
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": os.devnull,
           "XDG_CONFIG_HOME": os.devnull}


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def walked(root: Path, **options) -> tuple[set[str], dict[str, Skipped]]:
    seen = list(walk(root, **options))
    return ({e.rel_path for e in seen if isinstance(e, FileEntry)},
            {e.rel_path: e for e in seen if isinstance(e, Skipped)})


def git_keeps(root: Path, *, cwd: Path | None = None) -> set[str]:
    """The files under ``root`` git would offer to add (untracked, not ignored), root-relative, hidden ones left
    out as the walk leaves them out."""
    out = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z", "--", "."],
                         cwd=cwd or root, env=GIT_ENV, capture_output=True, check=True).stdout
    return {rel for rel in out.decode().split("\0") if rel and not any(p.startswith(".") for p in rel.split("/"))}


def live_edges(engine, brain: str) -> set[tuple[str, str]]:
    found = set()
    with engine.store.reader(f".xerj-memory-{brain}-edges") as r:
        for row in r.live_rows():
            source = r.document(int(row))[1]
            if "src" in source and "invalid_at" not in source:
                found.add((source["src"], source["dst"]))
    return found


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)


# A tree with the rules' corners: directory-only patterns, globs, anchoring, `**`, negation in the same file and in
# a deeper one, a file that cannot be taken back from an ignored directory, escapes, trailing spaces, blank lines.
TRICKY = {
    ".gitignore": "# build output\n\nbuild/\n*.log\n!keep.log\n/top.txt\ndocs/**/draft-*.md\n\\#hash.md\n"
                  "trailing.md   \nnode_modules\nlib/*\n!lib/keep/\n",
    "a.md": "# a\n", "keep.log": "kept\n", "debug.log": "no\n", "top.txt": "no\n", "sub/top.txt": "kept\n",
    "#hash.md": "no\n", "trailing.md": "no\n",
    "build/out.py": "x = 1\n", "src/build/gen.py": "x = 2\n",
    "docs/draft-1.md": "no\n", "docs/deep/more/draft-2.md": "no\n", "docs/final.md": "kept\n",
    "web/node_modules/pkg/index.js": "no\n",
    "lib/a.py": "no\n", "lib/keep/b.py": "kept\n",
    # lines pathspec refuses and git passes over (a lone `!`, a trailing backslash) count as lines and match nothing
    "sub/.gitignore": "!\n!debug.log\nwhy\\\n*.md\n", "sub/debug.log": "taken back by the deeper file\n",
    "sub/notes.md": "no\n", "sub/code.py": "kept\n",
    "build/.gitignore": "!out.py\n",  # inside an ignored directory: never read, out.py stays out
    "data/.xerjignore": "*.csv\n!wanted.log\n", "data/x.csv": "no\n", "data/wanted.log": "taken back\n",
    "data/y.json": "kept\n",
}


def tricky(root: Path) -> Path:
    return make(root, {rel: text for rel, text in TRICKY.items() if text is not None})


def test_the_walk_leaves_out_what_each_ignore_file_says_and_names_the_line(tmp_path):
    files, skipped = walked(tricky(tmp_path / "t"))
    assert files == {"a.md", "keep.log", "sub/top.txt", "docs/final.md", "lib/keep/b.py", "sub/debug.log",
                     "sub/code.py", "data/wanted.log", "data/y.json"}
    assert {rel: s.kind for rel, s in skipped.items()} == dict.fromkeys(
        ["build", "debug.log", "top.txt", "#hash.md", "trailing.md", "src/build", "docs/draft-1.md",
         "docs/deep/more/draft-2.md", "web/node_modules", "lib/a.py", "sub/notes.md", "data/x.csv"], IGNORED)
    # blank lines and comments count: each reason names its file, line and pattern
    assert skipped["build"].reason == "ignored by .gitignore line 3: build/"
    assert skipped["lib/a.py"].reason == "ignored by .gitignore line 11: lib/*"
    assert skipped["sub/notes.md"].reason == "ignored by sub/.gitignore line 4: *.md"
    assert skipped["data/x.csv"].reason == "ignored by data/.xerjignore line 1: *.csv"
    # an ignored directory is one skip, not entered
    assert not any(rel.startswith("build/") for rel in skipped)


@needs_git
def test_the_walk_keeps_what_git_keeps_on_a_tree_of_corner_cases(tmp_path):
    root = tricky(tmp_path / "t")
    (root / "data" / ".xerjignore").rename(root / "data" / ".gitignore")  # git reads only its own name
    git_init(root)
    assert walked(root)[0] == git_keeps(root)


@needs_git
def test_the_walk_keeps_what_git_keeps_on_this_checkout(tmp_path):
    """Real ignore files over a real tree: this checkout's own, with whatever the install built into it."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    git_init(root)
    files, skipped = walked(root)
    assert files == git_keeps(root)
    assert len(files) > 300
    ignored = {rel for rel, s in skipped.items() if s.kind == IGNORED}
    built = {str(p.relative_to(root)) for p in root.rglob("*.so")} | {
        str(p.relative_to(root)) for p in root.glob("*.egg-info")}
    assert all(rel in ignored or any(rel.startswith(d + "/") for d in ignored) for rel in built)


@needs_git
def test_a_subfolder_of_a_repository_takes_the_rules_above_it_unless_they_leave_it_out(tmp_path):
    repo = make(tmp_path / "repo", {
        ".gitignore": "node_modules/\nbuild/\n*.tmp\n", "web/.gitignore": "dist/\n",
        "web/src/app.js": "x\n", "web/src/a.tmp": "no\n", "web/src/dist/b.js": "no\n",
        "web/src/node_modules/m/index.js": "no\n", "web/src/secret.md": "no\n",
        "build/notes.md": "# built on purpose\n", "build/gen.tmp": "no\n"})
    git_init(repo)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("secret.md\n")
    src = repo / "web" / "src"
    files, skipped = walked(src)
    assert files == {"app.js"} == git_keeps(src, cwd=src)
    assert skipped["a.tmp"].reason == f"ignored by {repo / '.gitignore'} line 3: *.tmp"
    assert skipped["dist"].reason == f"ignored by {repo / 'web' / '.gitignore'} line 1: dist/"
    assert skipped["secret.md"].reason == f"ignored by {repo / '.git' / 'info' / 'exclude'} line 1: secret.md"
    # a folder the repository leaves out, named on purpose, is walked under its own rules only
    assert walked(repo / "build")[0] == {"notes.md", "gen.tmp"}
    assert ignore.scope_of(repo / "build").rules == ()


def test_a_home_kept_in_git_that_ignores_everything_still_indexes_a_folder_named_in_it(tmp_path):
    """Dotfiles kept in a repository at ~ often ignore `*` and add files by force; ~/notes is still a folder."""
    home = make(tmp_path / "home", {".gitignore": "*\n", "notes/a.md": "# A\n", "notes/sub/b.md": "# B\n"})
    (home / ".git").mkdir()
    assert walked(home / "notes")[0] == {"a.md", "sub/b.md"}
    assert {rel: s.kind for rel, s in walked(home)[1].items()} == {"notes": IGNORED}


def test_no_ignore_walks_everything_but_hidden_entries(tmp_path):
    root = tricky(tmp_path / "t")
    files, skipped = walked(root, ignore_files=False)
    assert not any(s.kind == IGNORED for s in skipped.values())
    assert files == {rel for rel, text in TRICKY.items()
                     if text is not None and not any(p.startswith(".") for p in rel.split("/"))}


def test_python_bytecode_caches_are_one_ignored_skip_each_unless_no_ignore(tmp_path):
    """A folder without a .gitignore (installed packages, the standard library) holds a __pycache__ beside its
    modules: each is left out as one skip, not one "no format" skip per .pyc; --no-ignore walks them."""
    root = make(tmp_path / "site", {"pkg/mod.py": "x = 1\n", "pkg/__pycache__/mod.cpython-311.pyc": "\0",
                                    "__pycache__/top.cpython-311.pyc": "\0", "notes/__pycache__.md": "# a note\n"})
    files, skipped = walked(root)
    assert files == {"pkg/mod.py", "notes/__pycache__.md"}
    assert {rel: (s.kind, s.reason) for rel, s in skipped.items()} == {
        rel: (IGNORED, "Python's compiled-bytecode cache (__pycache__), which no format reads")
        for rel in ("__pycache__", "pkg/__pycache__")}
    assert walked(root, ignore_files=False)[0] == files | {"pkg/__pycache__/mod.cpython-311.pyc",
                                                           "__pycache__/top.cpython-311.pyc"}


def test_an_unreadable_ignore_file_fails_the_directory_and_the_walk_goes_on(tmp_path, monkeypatch):
    root = make(tmp_path / "t", {".gitignore": "*.log\n", "a.md": "# a\n", "b.log": "x\n"})

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(ignore, "compile_file", refuse)
    files, skipped = walked(root)
    assert files == {"a.md", "b.log"}  # nothing is guessed: the run indexes it and reports the failure
    assert skipped["."].kind == UNREADABLE
    assert skipped["."].reason == "unreadable ignore file .gitignore: Permission denied"


def test_a_run_removes_what_a_new_gitignore_leaves_out_and_reports_it(tmp_path, pm):
    root = make(tmp_path / "proj", {"src/app.py": "import os\n", "venv/lib/site.py": "import sys\n",
                                   "venv/lib/pkg.py": "from . import site\n", "notes.md": "# Notes\n[[app]]\n",
                                   "old.md": "# Old\n"})
    with Engine(tmp_path / "data", pm) as engine:
        first = run(engine, root, brain="p", pm=pm)
        assert first.files_indexed == 5 and first.skipped_by_kind == {}
        assert any(src.startswith("venv/") for src, _dst in live_edges(engine, "p"))
        (root / ".gitignore").write_text("venv/\nold.md\n")
        second = run(engine, root, brain="p", pm=pm)
        # a directory's files and a file of its own, each indexed before, are removed
        assert second.files_removed == 3 and second.files_indexed == 0
        assert second.skipped_by_kind == {"ignored": 2}
        assert second.files_skipped == [{"path": "old.md", "kind": "ignored",
                                         "reason": "ignored by .gitignore line 2: old.md"},
                                        {"path": "venv", "kind": "ignored",
                                         "reason": "ignored by .gitignore line 1: venv/"}]
        names = set()
        for index in engine.store.index_names():
            if index.startswith("ax-"):
                with engine.store.reader(index) as r:
                    names |= {r.document(int(row))[1]["ax_path"] for row in r.live_rows()}
        assert not any(str(name).startswith("venv/") for name in names) and "old.md" not in names
        assert second.edges_invalidated > 0  # their edges are retired, not deleted
        assert not any(node.startswith(("venv/", "old.md")) for edge in live_edges(engine, "p") for node in edge)
        assert {"src/app.py", "notes.md"} <= names
        # taken back by a .xerjignore: indexed again
        (root / ".xerjignore").write_text("!venv/\n!old.md\n")
        third = run(engine, root, brain="p", pm=pm)
        assert third.files_indexed == 3 and third.skipped_by_kind == {}


def test_the_cli_honours_ignore_files_unless_told_not_to(tmp_path, pm):
    root = make(tmp_path / "proj", {"a.md": "# A\n", "out.log": "x\n", ".gitignore": "*.log\n"})
    runner = CliRunner()
    base = ["autoindex", str(root), "--data-dir", str(tmp_path / "data"), "--json", "--workers", "1"]
    result = runner.invoke(build_cli(pm), base)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["skipped_by_kind"] == {"ignored": 1} and summary["files_indexed"] == 1
    result = runner.invoke(build_cli(pm), [*base, "--no-ignore"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["files_indexed"] == 1 and "ignored" not in summary["skipped_by_kind"]
