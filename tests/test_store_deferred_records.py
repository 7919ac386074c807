"""Records the write plan does not batch (a list value, a lone shape) leave their new keyword values to the
batch's one ordinals pass, and every dictionary still numbers its terms as single puts number them."""

from __future__ import annotations

import itertools
import random

import numpy as np

from xerj_core.store import Store
from xerj_core.store.columns import KIND_ORD, column_kind

from .test_store_bulk import bulked, outcomes, put_one_by_one
from .test_store_compaction import WORDS

MAPPING = {"properties": {
    "path": {"type": "keyword"},
    "tags": {"type": "keyword"},
    "kind": {"type": "keyword", "fields": {"raw": {"type": "keyword"}}},
    "text": {"type": "text"},
    "n": {"type": "long"},
}}
LONG = "v" * 600  # too long for a dictionary key: left out, and counted, at each of its places


def _docs(seed: int) -> list[tuple[dict, str]]:
    rng = random.Random(seed)
    docs: list[tuple[dict, str]] = []
    shapes = itertools.permutations(["tags", "path", "n", "text"])
    for i in range(150):
        # like documents: the plan prepares them together (misses left to the pass)
        docs.append(({"path": f"p{rng.randrange(60)}", "text": " ".join(rng.choices(WORDS, k=3)), "n": i}, f"d{i}"))
        if i % 3 == 0:  # a list value (an autoindex card's imports): WritePlan.values, its misses in their places
            tags = [rng.choice([f"t{rng.randrange(30)}", f"new{i}", LONG, f"t{i % 7}"]) for _ in range(rng.randrange(5))]
            docs.append(({"path": f"c{i}", "tags": tags + tags[:1], "text": "a card"}, f"card{i}"))
        if i % 11 == 4:  # a shape of its own (its keys' order): the plan's one-pass record, its one ordinal per
            # field left to the pass
            values = {"tags": f"lone{i}" if i % 2 else LONG, "path": f"lp{i}", "n": i, "text": "lone"}
            docs.append(({key: values[key] for key in next(shapes)}, f"lone{i}"))
        if i % 13 == 6:  # a multi-field: WritePlan.values feeds ``kind.raw`` from ``kind``
            docs.append(({"kind": rng.choice(["x", f"k{i}"]), "tags": [f"m{i}", "t1"]}, f"multi{i}"))
        if i % 29 == 7:  # refused (not a number), with a list: takes no ordinal
            docs.append(({"tags": [f"bad{i}"], "n": "not a number"}, f"bad{i}"))
        if i % 37 == 9:  # a new field: the generic path, made one at a time in its place
            docs.append(({"path": f"g{i}", f"extra{i}": "x", "tags": [f"gen{i}"]}, f"gen{i}"))
    return docs


def _columns(store: Store) -> dict:
    """Every field's raw column arrays and every keyword dictionary's terms in ordinal order."""
    out = {}
    with store.reader("t") as r:
        for path, spec in r.mapping.fields.items():
            column = r.column(path)
            out[path] = [np.asarray(a).tolist() for a in (column.values, column.present, column.extra_rows,
                                                          column.extra_ords)]
            if column_kind(spec) == KIND_ORD:
                out[path, "terms"] = list(r.field_dictionary(path).terms)
        out["live"] = {r.id_of(int(row)): (int(row), r.get(r.id_of(int(row)))) for row in r.live_rows()}
    return out


def test_records_made_apart_leave_their_new_keywords_to_the_batch_pass_and_equal_single_puts(tmp_path, monkeypatch):
    from xerj_core.store import write as write_module

    docs = _docs(5)
    monkeypatch.setattr(write_module.IndexWrite, "_put_batch", lambda self, *a: None)  # the records path
    made: list[str] = []  # documents made one at a time (record_for), by their path field
    passes: list[int] = []  # the ordinals passes over prepared records, by how many they resolve
    record_for, resolve_many = write_module.IndexWrite.record_for, write_module.IndexWrite._resolve_many
    monkeypatch.setattr(write_module.IndexWrite, "record_for",
                        lambda self, doc: made.append(doc.get("path")) or record_for(self, doc))
    monkeypatch.setattr(write_module.IndexWrite, "_resolve_many",
                        lambda self, prepared: passes.append(len(prepared)) or resolve_many(self, prepared))
    with Store(tmp_path / "bulk", tail_rows=16) as bulk, Store(tmp_path / "single", tail_rows=16) as single:
        for store in (bulk, single):
            store.create_index("t", MAPPING)
        results = bulked(bulk, "t", docs, 70)
        bulk_made, bulk_passes = list(made), [n for n in passes if n]
        expected = put_one_by_one(single, "t", docs)
        assert outcomes(results) == outcomes(expected)
        assert sum(isinstance(r, Exception) for r in results) == sum(doc_id.startswith("bad") for _d, doc_id in docs)
        assert _columns(bulk) == _columns(single)
        assert bulk.skipped_counts("t") == single.skipped_counts("t") and bulk.skipped_counts("t")["keywords"] >= 20
    # only the documents the generic path takes (a new field) are made one at a time, and only they cut the
    # batch's pass: one pass per bulk and one more per such document at most
    generic = [doc["path"] for doc, doc_id in docs if doc_id.startswith("gen")]
    assert bulk_made == generic
    assert len(bulk_passes) <= -(-len(docs) // 70) + len(generic)


def test_the_pass_judges_keyword_lengths_at_their_bounds_as_single_puts_do(tmp_path):
    """The batch's ordinals pass takes a short string value as fitting without asking ``keyword_indexed``: at
    the bounds (``ignore_above`` characters, four bytes a character within the key's room, and wide characters
    past the room in bytes but not in characters) every value is kept or left out exactly as single puts do."""
    mapping = {"properties": {"path": {"type": "keyword"}, "tags": {"type": "keyword"},
                              "short": {"type": "keyword", "ignore_above": 12}}}
    room = 511 - 4 - 1  # limits.keyword_room less the dictionary's name: about 500 bytes
    lengths = [11, 12, 13, room // 4 - 20, room // 4, room // 4 + 1, room // 3, room // 2, room - 20, room, 600]
    docs: list[tuple[dict, str]] = []
    for i, n in enumerate(lengths):
        for char in ("a", "é", "\u20ac"):  # one, two and three UTF-8 bytes a character
            value = f"{i}{char}" + char * (n - 2)
            # one value per field (the plan's batched records) and a list (records made apart)
            docs.append(({"path": f"p{i}{char}", "tags": value, "short": value}, f"one{i}{char}"))
            docs.append(({"path": f"c{i}{char}", "tags": [value, f"t{i}"], "short": [f"s{i}", value]},
                         f"list{i}{char}"))
    with Store(tmp_path / "bulk", tail_rows=16) as bulk, Store(tmp_path / "single", tail_rows=16) as single:
        for store in (bulk, single):
            store.create_index("t", mapping)
        results = bulked(bulk, "t", docs, 40)
        expected = put_one_by_one(single, "t", docs)
        assert outcomes(results) == outcomes(expected)
        assert _columns(bulk) == _columns(single)
        assert bulk.skipped_counts("t") == single.skipped_counts("t")
        assert bulk.skipped_counts("t")["keywords"] >= 20
