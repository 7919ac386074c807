"""The compiled hop loop (``xerj_core.graph.hoprun``) against a plain-Python reading of the same runs.

Random tables in each width the edge table stores (int32 or int64 offsets and packed entries), frontiers and
earlier frontiers from one node to many (the loop matches few nodes by comparison and many through a byte per
node), with and without the both-ways in bit and the expiry cut; then the inputs it must refuse.
"""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.graph import hoprun

pytestmark = pytest.mark.skipif(not hoprun.available(), reason="the compiled hop loop was not built")

SHIFT = 10  # far ends below 1 << SHIFT, the in bit at 1 << SHIFT, an expiry rank above it
LOW, INBIT = (1 << SHIFT) - 1, 1 << SHIFT


def table(rng: np.random.Generator, nodes: int, off_type: type, packed_type: type) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(0, 6, nodes)
    off = np.zeros(nodes + 1, off_type)
    np.cumsum(lengths, out=off[1:])
    far = rng.integers(0, nodes, int(off[-1]))
    inbit = rng.integers(0, 2, far.size) * INBIT
    rank = rng.integers(0, 4, far.size) << (SHIFT + 1)
    return off, (rank | inbit | far).astype(packed_type)


def expected(off, packed, frontier, previous, inbit, alive_from):
    places, entries, expired = [], [], 0
    met_in, before = set(frontier.tolist()), set(previous.tolist())
    for node in frontier.tolist():
        for place in range(int(off[node]), int(off[node + 1])):
            entry = int(packed[place])
            far = entry & LOW
            if (inbit and entry & inbit and far in met_in) or far in before:
                continue
            if entry < alive_from:
                expired += 1
                continue
            places.append(place)
            entries.append(entry)
    return places, entries, expired


@pytest.mark.parametrize("off_type", [np.int32, np.int64])
@pytest.mark.parametrize("packed_type", [np.int32, np.int64])
@pytest.mark.parametrize("frontier_size", [1, 3, 8, 9, 200])
@pytest.mark.parametrize("previous_size", [0, 1, 8, 9, 150])
def test_the_loop_keeps_what_a_plain_reading_keeps(off_type, packed_type, frontier_size, previous_size):
    rng = np.random.default_rng([frontier_size, previous_size, np.dtype(off_type).itemsize,
                                 np.dtype(packed_type).itemsize])
    off, packed = table(rng, 600, off_type, packed_type)
    for inbit in (0, INBIT):
        for alive_from in (0, 2 << (SHIFT + 1)):
            frontier = np.sort(rng.choice(600, frontier_size, replace=False)).astype(np.int64)
            previous = np.sort(rng.choice(600, previous_size, replace=False)).astype(np.int64)
            places, entries, expired = hoprun.read_runs(off, packed, frontier, previous=previous, low=LOW,
                                                        inbit=inbit, alive_from=alive_from)
            want = expected(off, packed, frontier, previous, inbit, alive_from)
            assert (places.tolist(), entries.tolist(), expired) == want
            assert entries.dtype == packed.dtype and places.dtype == np.int64


def test_no_previous_and_a_frontier_given_as_a_strided_view():
    off, packed = table(np.random.default_rng(1), 100, np.int32, np.int32)
    frontier = np.arange(0, 100, dtype=np.int64)[::7]
    places, entries, expired = hoprun.read_runs(off, packed, frontier, previous=None, low=LOW, inbit=INBIT,
                                                alive_from=0)
    assert (places.tolist(), entries.tolist(), expired) == expected(off, packed, frontier, np.empty(0, np.int64),
                                                                    INBIT, 0)


def test_bad_input_is_refused_not_read_past():
    off, packed = table(np.random.default_rng(2), 50, np.int64, np.int32)
    none = np.empty(0, np.int64)
    with pytest.raises(ValueError, match="outside the offsets"):
        hoprun.read_runs(off, packed, np.array([50], np.int64), previous=none, low=LOW, inbit=0, alive_from=0)
    with pytest.raises(ValueError, match="outside the offsets"):
        hoprun.read_runs(off, packed, np.array([-1], np.int64), previous=none, low=LOW, inbit=0, alive_from=0)
    last = np.flatnonzero(np.diff(off))[-1:].astype(np.int64)  # the node whose run ends the entries
    with pytest.raises(ValueError, match="past the packed entries"):
        hoprun.read_runs(off, packed[:-1], last, previous=none, low=LOW, inbit=0, alive_from=0)
    backwards = off.copy()
    backwards[int(last[0])] = backwards[int(last[0]) + 1] + 1
    with pytest.raises(ValueError, match="past the packed entries"):
        hoprun.read_runs(backwards, packed, last, previous=none, low=LOW, inbit=0, alive_from=0)
    with pytest.raises(TypeError, match="int32 or int64"):
        hoprun.read_runs(off.astype(np.float64), packed, np.array([0], np.int64), previous=none, low=LOW, inbit=0,
                         alive_from=0)
    with pytest.raises(TypeError, match="int32 or int64"):
        hoprun.read_runs(off, packed.astype(np.uint32), np.array([0], np.int64), previous=none, low=LOW, inbit=0,
                         alive_from=0)
