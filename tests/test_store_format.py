"""The store format stamp: a new or older data directory is stamped with this xerj's format; a newer one is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import lmdb
import pytest

from xerj_core.errors import StoreFormatUnsupported
from xerj_core.store import format as store_format
from xerj_core.store.store import Store


def _stamp_of(path) -> bytes | None:
    env = lmdb.open(str(path), max_dbs=32, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return txn.get(store_format.FORMAT_KEY, db=env.open_db(b"aux", txn=txn, create=False))
    finally:
        env.close()


def _restamp(path, version: int | None) -> None:
    env = lmdb.open(str(path), max_dbs=32)
    try:
        with env.begin(write=True) as txn:
            aux = env.open_db(b"aux", txn=txn)
            if version is None:
                txn.delete(store_format.FORMAT_KEY, db=aux)
            else:
                txn.put(store_format.FORMAT_KEY, version.to_bytes(4, "big"), db=aux)
    finally:
        env.close()


def _write_one(path) -> None:
    store = Store(path)
    try:
        store.create_index("notes")
        store.put("notes", {"text": "kept across the upgrade"}, "a")
    finally:
        store.close()


def test_a_new_data_directory_carries_the_current_format(tmp_path):
    _write_one(tmp_path)
    assert _stamp_of(tmp_path) == store_format.FORMAT_VERSION.to_bytes(4, "big")


def test_an_unstamped_directory_opens_and_is_stamped(tmp_path):
    _write_one(tmp_path)
    _restamp(tmp_path, None)  # as written before the stamp existed
    store = Store(tmp_path)
    try:
        assert store.env.format_found == store_format.UNSTAMPED
        assert store.get("notes", "a")[0] == {"text": "kept across the upgrade"}
    finally:
        store.close()
    assert _stamp_of(tmp_path) == store_format.FORMAT_VERSION.to_bytes(4, "big")


def test_a_newer_format_is_refused_naming_both_and_left_as_it_was(tmp_path):
    _write_one(tmp_path)
    newer = store_format.FORMAT_VERSION + 1
    _restamp(tmp_path, newer)
    before = (tmp_path / "data.mdb").read_bytes()
    with pytest.raises(StoreFormatUnsupported) as caught:
        Store(tmp_path)
    reason = caught.value.reason
    assert f"store format {newer}" in reason and f"formats up to {store_format.FORMAT_VERSION}" in reason
    assert str(tmp_path) in reason
    assert (tmp_path / "data.mdb").read_bytes() == before
    # The refusal released the environment: once restamped, the same process opens it.
    _restamp(tmp_path, store_format.FORMAT_VERSION)
    store = Store(tmp_path)
    try:
        assert store.get("notes", "a")[0] == {"text": "kept across the upgrade"}
    finally:
        store.close()


@pytest.mark.parametrize("command", [["autoindex", "{folder}", "--data-dir", "{data}"],
                                     ["serve", "--data-dir", "{data}", "--port", "0"]])
def test_the_commands_refuse_a_newer_format_with_the_reason_and_no_trace(tmp_path, command):
    data, folder = tmp_path / "data", tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nsee [[b]]\n")
    _write_one(data)
    _restamp(data, store_format.FORMAT_VERSION + 7)
    args = [part.format(folder=folder, data=data) for part in command]
    done = subprocess.run([sys.executable, "-m", "xerj_core", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XERJ_API_KEY": ""})
    assert done.returncode == 2, done.stderr
    assert f"holds store format {store_format.FORMAT_VERSION + 7}" in done.stderr
    assert "Traceback" not in done.stderr
