"""sharedterm's combine against the contract computed the slow, obvious way: every pair of files compared.

The combine counts pairs a block of files at a time with numpy (see the module's docstring); the oracle
here holds Python sets and loops over every pair, so the two share no code but ``family``. They are compared
on the real Foam vault, on real code from this interpreter's site-packages, on corpora where a file meets more
files than it scores, and on random corpora with blocks forced to a few files, so every block boundary is
crossed.
"""

from __future__ import annotations

import math
import re
import sysconfig
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.testing.detectors import parse_files
from xerj_detectors import sharedterm

FOAM = Path(__file__).parents[1].parent / "shared/corpora/foam-docs"


def terms_of(words: bytes) -> set[str]:
    """A file's terms from its summary (its words, NUL-joined) as the module docstring defines them: words of 3 to 40
    characters holding a letter."""
    return {word for word in words.decode().split("\0") if 3 <= len(word) <= 40 and re.search(r"[^\W\d_]", word)}


def by_definition(partials: list[tuple[str, bytes] | None]) -> tuple[dict, dict]:
    """``(state data, counters)`` as the module docstring defines them, pair by pair."""
    units = sorted(p for p in partials if p is not None)
    total = len(units)
    sets = [terms_of(words) for _, words in units]
    df = Counter(term for terms in sets for term in terms)
    rarest = sorted((t for t, n in df.items() if n >= 2 and n * 100 <= total * sharedterm.MAX_SHARE_PERCENT),
                    key=lambda t: (df[t], t))
    rank = {term: place for place, term in enumerate(rarest)}
    held = [sorted((t for t in terms if t in rank), key=rank.__getitem__) for terms in sets]
    signature = [set(terms[:sharedterm.SIGNATURE_TERMS]) for terms in held]
    distinctive = [set(terms) for terms in held]
    hits = [[len(signature[i] & distinctive[j]) if i != j else 0 for j in range(total)] for i in range(total)]
    strong = sharedterm.MIN_FAMILIES
    best = [sorted((j for j in range(total) if hits[i][j] >= strong), key=lambda j: (-hits[i][j], j))
            [:sharedterm.CANDIDATES_PER_FILE] for i in range(total)]
    meeting = {(min(i, j), max(i, j)) for i in range(total) for j in range(total) if hits[i][j] >= strong}
    scored = {(min(i, j), max(i, j)) for i in range(total) for j in best[i]}
    candidates = []
    for a, b in scored:
        shared = sorted(distinctive[a] & distinctive[b], key=rank.__getitem__)
        if len(shared) >= strong and len({sharedterm.family(t) for t in shared}) >= strong:
            score = math.fsum(math.log(total / df[t]) for t in shared)
            candidates.append((-score, a, b, tuple(shared)))
    candidates.sort()
    degree = [0] * total
    capped = len(meeting) - len(scored)
    accepted = defaultdict(list)
    for _score, a, b, shared in candidates:
        if degree[a] >= sharedterm.MAX_LINKS or degree[b] >= sharedterm.MAX_LINKS:
            capped += 1
            continue
        degree[a] += 1
        degree[b] += 1
        accepted[units[a][0]].append((units[b][0], shared))
    return {path: sorted(links) for path, links in accepted.items()}, {"edges_capped": capped}


def combined(partials: list) -> tuple[dict, dict]:
    state = sharedterm.SharedtermDetector().combine(partials, None)
    return state.data, state.counters


def summaries(files: dict[str, bytes]) -> list:
    detector = sharedterm.SharedtermDetector()
    return [detector.summarize(docs) for docs in parse_files(files).values()]


def filler(index: int, words: str) -> bytes:
    return (f"# Note {index}\n\n" + " ".join(f"w{index}x{k}" for k in range(6)) + f" {words}\n").encode()


def test_the_foam_vault():
    files = {str(p.relative_to(FOAM)): p.read_bytes() for p in sorted(FOAM.rglob("*.md"))}
    partials = summaries(files)
    data, counters = combined(partials)
    assert data, "the vault's notes share distinctive terms"
    assert (data, counters) == by_definition(partials)


def test_real_code():
    site = Path(sysconfig.get_paths()["purelib"])
    every = [p for p in sorted(site.rglob("*.py")) if p.is_file() and p.stat().st_size <= 128 * 1024]
    paths = every[::max(1, len(every) // 300)][:300]  # spread over every installed package
    assert len(paths) >= 200
    partials = summaries({str(p.relative_to(site)): p.read_bytes() for p in paths})
    data, counters = combined(partials)
    assert data and counters["edges_capped"]
    assert (data, counters) == by_definition(partials)


@pytest.mark.parametrize("blocks", [False, True])
def test_files_meeting_more_files_than_they_score(blocks, monkeypatch):
    # 40 of 400 files share three terms and 30 more two of them: each meets more files than the 16 it scores
    extra = {i: "gammaterm deltaterm epsilonterm" for i in range(0, 400, 10)}
    extra.update({i: "gammaterm deltaterms" for i in range(5, 305, 10)})
    partials = summaries({f"notes/n{i:03d}.md": filler(i, extra.get(i, "")) for i in range(400)})
    if blocks:  # a block of counting spans three files, one of marking one file, a run of pairs one pair
        monkeypatch.setattr(sharedterm, "_BLOCK_CELLS", 3 * 400)
        monkeypatch.setattr(sharedterm, "_MARK_CELLS", 1)
        monkeypatch.setattr(sharedterm, "_LOOKUPS", 1)
    data, counters = combined(partials)
    assert counters["edges_capped"] > 0
    assert (data, counters) == by_definition(partials)


_WORDS = [f"{stem}{end}" for stem in ("box", "trajectory", "glass", "kimchi", "brine", "lattice", "orbit", "quill")
          for end in ("", "es", "s")] + [f"rare{n}" for n in range(60)] + ["ab", "1234", "_9_", "a" * 41]  # no terms


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from(_WORDS), max_size=20), min_size=30, max_size=150),
       st.integers(1, 9), st.integers(1, 64), st.integers(1, 80))
def test_random_corpora_in_small_blocks(corpus, rows, marks, lookups):
    partials = [(f"f{n:03d}", "\0".join(terms).encode()) for n, terms in enumerate(corpus)] + [None]
    expected = by_definition(partials)  # most such corpora link files, about half cap some
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sharedterm, "_BLOCK_CELLS", rows * len(corpus))
        patch.setattr(sharedterm, "_MARK_CELLS", marks)
        patch.setattr(sharedterm, "_LOOKUPS", lookups)
        assert combined(partials) == expected
    assert combined(partials) == expected


@pytest.mark.parametrize("compiled", [True, False])
def test_the_inverted_index_lists_each_terms_files_in_order_whichever_sort_builds_it(monkeypatch, compiled):
    """Each term's files, in file order, and where each term's start: by the compiled counting sort or by numpy's
    stable argsort, the same index as a dict of lists over the kept entries."""
    from xerj_core import termrank
    from xerj_detectors import sharedterm

    monkeypatch.setattr(termrank, "ENABLED", compiled)
    rng = np.random.default_rng(12)
    for files, width in ((0, 5), (1, 1), (40, 7), (300, 1_000)):
        sizes = rng.integers(0, 30, files)
        terms = np.concatenate([np.sort(rng.choice(width, min(int(s), width), replace=False))
                                for s in sizes]).astype(np.int32) if files else np.empty(0, np.int32)
        file_of = np.repeat(np.arange(files, dtype=np.int32), [min(int(s), width) for s in sizes])
        keep = rng.random(len(terms)) < 0.7
        holders, starts = sharedterm._inverted(file_of, terms, keep, width)
        want: dict[int, list[int]] = {}
        for file, term in zip(file_of[keep].tolist(), terms[keep].tolist()):
            want.setdefault(term, []).append(file)
        assert len(starts) == width + 1 and starts[0] == 0 and starts[-1] == len(holders)
        assert {t: holders[starts[t]:starts[t + 1]].tolist() for t in range(width) if starts[t + 1] > starts[t]} \
            == want
