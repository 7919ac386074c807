"""Edge ids as 16-byte keys (xerj_core.graph.idkeys): a fixed set of them answers as the set of strings it holds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from xerj_core.graph.idkeys import KEY, IdSet, ids_of_keys, keys_of, keys_of_text


def _ids(rng: random.Random, n: int) -> list[str]:
    # random ids, ids ending in zero bytes (a 16-byte string key pads with them), ids sharing a half
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(n)]
    return ids + [ids[0][:28] + "0000", "0" * 32, "0" * 31 + "1", ids[1][:16] + "0" * 16, "f" * 16 + ids[2][16:]]


def test_an_id_set_answers_as_the_set_of_its_strings():
    rng = random.Random(5)
    pool = _ids(rng, 200) + ["meta", "rj-" + "0" * 32, "A" * 32, " " + "0" * 31, "é" * 16, "0" * 31, "0" * 33]
    for _ in range(30):
        chosen = {rng.choice(pool) for _ in range(rng.randrange(0, 60))}
        found = IdSet.of([*chosen, *chosen])  # repeats are held once
        assert set(found) == chosen and len(found) == len(chosen) and bool(found) == bool(chosen)
        assert [eid in found for eid in pool] == [eid in chosen for eid in pool]
        assert 7 not in found
        derived = [eid for eid in pool if eid in chosen and len(eid) == 32 and eid == eid.lower()
                   and eid.strip() == eid and eid.isalnum()]
        assert found.holds(keys_of(derived)).all()
        other = {rng.choice(pool) for _ in range(rng.randrange(0, 60))}
        assert set(found | IdSet.of(other)) == chosen | other
        assert set(found | IdSet()) == set(IdSet() | found) == chosen  # one side without keys: kept as it is
        assert set(IdSet.of(["meta"]) | found) == chosen | {"meta"}
    assert not IdSet() and list(IdSet()) == [] and len(IdSet()) == 0 and not IdSet().holds(keys_of(pool[:3])).any()
    odd = IdSet.of(["0" * 31, "0" * 33])  # 64 hex digits in all: two ids, neither derived
    assert not len(odd.keys) and set(odd) == {"0" * 31, "0" * 33}


def test_keys_read_from_stored_text_are_the_keys_of_the_ids_it_spells():
    rng = random.Random(6)
    ids = _ids(rng, 50)
    rows = [eid.encode() for eid in ids]
    # a blank row (the tail's, in a packed segment), a capital, a space, a byte past 'f': none spells a key
    odd = [b"\0" * 32, b"A" * 32, b" " + b"0" * 31, b"g" * 32, b"0" * 31 + b"/", b"0" * 31 + b":"]
    mixed = rows[:20] + odd + rows[20:]
    keys, spelled = keys_of_text(np.frombuffer(b"".join(mixed), np.uint8).reshape(-1, 32))
    assert spelled.tolist() == [row not in odd for row in mixed]
    assert keys.dtype == KEY and keys.tobytes() == keys_of(ids).tobytes()
    assert ids_of_keys(keys) == ids  # zero bytes at a key's end kept


def test_an_id_sets_keys_are_sorted_and_distinct():
    rng = random.Random(7)
    ids = _ids(rng, 100)
    found = IdSet(keys_of(ids + ids[:10]))
    assert ids_of_keys(found.keys) == sorted(set(ids))
    with pytest.raises(ValueError):
        keys_of(["A" * 32])
