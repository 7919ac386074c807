"""The ids a run wants (xerj_core.autoindex.wanted) hold and answer as a set of the numbers they spell."""

from __future__ import annotations

import random

import numpy as np
import pytest

from xerj_core.autoindex.wanted import WantedIds
from xerj_core.graph.idkeys import derived, is_derived, keys_of, keys_of_numbers


def _ids(rng: random.Random, n: int) -> list[str]:
    # besides random ids: ids ending in zero bytes (a 16-byte string key pads with them) and ids sharing their
    # first or last half with another
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(n)]
    ids += [ids[0][:30] + "00", ids[0][:28] + "0000", ids[0][:16] + "0" * 16, "0" * 32, "0" * 31 + "1"]
    ids += [ids[1][:16] + f"{rng.getrandbits(64):016x}" for _ in range(5)]
    ids += [f"{rng.getrandbits(64):016x}" + ids[2][16:] for _ in range(5)]
    return ids


@pytest.mark.parametrize("recent", [1, 3, 4096])
def test_wanted_ids_answer_as_a_set_of_their_numbers(monkeypatch, recent):
    monkeypatch.setattr(WantedIds, "RECENT", recent)
    rng = random.Random(recent)
    pool = _ids(rng, 300)
    wanted, oracle = WantedIds(), set()
    for _ in range(40):
        batch = [rng.choice(pool) for _ in range(rng.randrange(0, 30))]
        keys = keys_of(batch)
        assert wanted.holds(keys).tolist() == [int(eid, 16) in oracle for eid in batch]
        expected = []
        for eid in batch:  # one at a time, as a run once did
            expected.append(int(eid, 16) not in oracle)
            oracle.add(int(eid, 16))
        if rng.random() < 0.5:
            assert wanted.take_new(keys).tolist() == expected
        else:
            wanted.add(keys)
        assert wanted.numbers() == oracle and len(wanted) == len(oracle)
    absent = [eid for eid in _ids(rng, 50) if int(eid, 16) not in oracle]
    assert not wanted.holds(keys_of(absent)).any()
    assert wanted.numbers() == {int.from_bytes(k.ljust(16, b"\0"), "big")
                                for k in keys_of_numbers(sorted(oracle)).tolist()}


def test_only_derived_ids_have_keys():
    good = f"{7:032x}"
    for bad in ["A" * 32, "0" * 31, "0" * 33, " " + "0" * 31, "g" * 32, "0" * 30 + " 1"]:
        assert not is_derived(bad)
        with pytest.raises(ValueError):
            keys_of([good, bad])
    with pytest.raises(ValueError):
        keys_of(["0" * 31, "0" * 33])  # 64 hex digits in all, in two ids neither of which is one
    found, keys = derived(["x", good, "F" * 32, "rj-" + good])
    assert found == [good] and keys.tolist() == [bytes.fromhex(good).rstrip(b"\0")]
    assert keys_of([]).dtype == np.dtype("S16") and len(keys_of([])) == 0
