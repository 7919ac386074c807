"""resolve_indices: comma lists, wildcards, _all, exclusions, hidden dot indices, missing names."""

from __future__ import annotations

import pytest

from xerj_core.errors import IllegalArgument, IndexNotFound
from xerj_core.query.resolve import resolve_indices
from xerj_core.store import Store

NAMES = ["logs-2024", "logs-2025", "notes", ".xerj-memory-alice", ".xerj-memory-alice-edges", ".hidden"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Store(tmp_path_factory.mktemp("resolve") / "data") as s:
        for name in NAMES:
            s.create_index(name)
        yield s


def test_everything_visible(store):
    for expression in (None, "", "_all", "*"):
        assert resolve_indices(store, expression) == ["logs-2024", "logs-2025", "notes"]


def test_lists_and_wildcards_keep_order_without_duplicates(store):
    assert resolve_indices(store, "notes,logs-*") == ["notes", "logs-2024", "logs-2025"]
    assert resolve_indices(store, "logs-2025, logs-*,notes") == ["logs-2025", "logs-2024", "notes"]
    assert resolve_indices(store, ["notes", "logs-2024"]) == ["notes", "logs-2024"]
    assert resolve_indices(store, "*-2024") == ["logs-2024"]


def test_exclusions(store):
    assert resolve_indices(store, "*,-logs-*") == ["notes"]
    assert resolve_indices(store, "logs-*,-logs-2024") == ["logs-2025"]


def test_hidden_indices_need_a_dot_pattern_or_their_name(store):
    assert ".hidden" not in resolve_indices(store, "*")
    assert resolve_indices(store, ".xerj-memory-*") == [".xerj-memory-alice", ".xerj-memory-alice-edges"]
    assert resolve_indices(store, ".xerj-memory-*,-*-edges") == [".xerj-memory-alice"]
    assert resolve_indices(store, ".hidden") == [".hidden"]
    assert set(resolve_indices(store, "*", expand_wildcards="all")) == set(NAMES)
    assert resolve_indices(store, "*", expand_wildcards="none") == []
    with pytest.raises(IllegalArgument):
        resolve_indices(store, "*", expand_wildcards="sideways")


def test_missing_names_and_empty_expansions(store):
    with pytest.raises(IndexNotFound) as caught:
        resolve_indices(store, "notes,nope")
    assert caught.value.index == "nope"
    assert resolve_indices(store, "notes,nope", ignore_unavailable=True) == ["notes"]
    assert resolve_indices(store, "zzz*") == []
    with pytest.raises(IndexNotFound):
        resolve_indices(store, "zzz*", allow_no_indices=False)
    with pytest.raises(IndexNotFound):
        resolve_indices(store, "nope", ignore_unavailable=True, allow_no_indices=False)


def test_an_allowed_predicate_restricts_wildcards_only(store):
    only_notes = lambda name: name == "notes"  # noqa: E731
    assert resolve_indices(store, "*", allowed=only_notes) == ["notes"]
    # A concrete name is kept for authorization to refuse explicitly.
    assert resolve_indices(store, "logs-2024", allowed=only_notes) == ["logs-2024"]
