"""Every query type, sort and aggregation against a brute-force Python evaluation of hypothesis-generated documents.

The oracle below reads the documents as plain Python values and knows nothing
of columns, postings, segments or ordinals; the engine must agree with it on
the matched set, on every score (to 1e-5) and on every bucket.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from collections import Counter
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.query.evaluate import filter_mask
from xerj_core.query.service import SearchService
from xerj_core.store import Store

K1, B = 1.2, 0.75
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "zeta", "Alpha", "BETA"]
QUERY_WORDS = ["alpha", "beta", "gamma", "delta", "omega", "zeta", "kappa", "ALPHA"]
TAGS = ["red", "green", "blue", "Red", "", "x y"]
TEXT_FIELDS = ("title", "body")
DAY = 86_400_000
BASE = 1_704_067_200_000  # 2024-01-01T00:00:00Z
MAPPING = {"properties": {
    "title": {"type": "text"}, "body": {"type": "text"}, "tag": {"type": "keyword"}, "n": {"type": "long"},
    "f": {"type": "float"}, "d": {"type": "date"}, "b": {"type": "boolean"},
    "vec": {"type": "dense_vector", "dims": 3},
}}
# XERJ_QUERY_EXAMPLES=500 for a deeper run than the default quick one.
HYPOTHESIS = settings(max_examples=int(os.environ.get("XERJ_QUERY_EXAMPLES", "40")), deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


def iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def values_of(doc: dict, field: str) -> list:
    value = doc.get(field)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [v for v in items if v is not None]


def date_ms(value) -> int:
    if isinstance(value, int):
        return value
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)


def wildcard_matches(pattern: str, text: str, fold: bool) -> bool:
    """ES wildcard semantics by dynamic programming over (pattern, text) positions: ``*`` any run, ``?`` one
    character, a backslash takes the next character literally."""
    items = []  # (kind, char): "*", "?" or a literal
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            items.append(("lit", next(chars, "\\")))
        else:
            items.append((char, char) if char in "*?" else ("lit", char))
    if fold:
        text = text.lower()
        items = [(kind, char.lower()) for kind, char in items]
    reach = {0}  # text positions reachable after the items so far
    for kind, char in items:
        if kind == "*":
            reach = set(range(min(reach), len(text) + 1)) if reach else set()
        elif kind == "?":
            reach = {at + 1 for at in reach if at < len(text)}
        else:
            reach = {at + 1 for at in reach if at < len(text) and text[at] == char}
    return len(text) in reach


# -- the oracle ------------------------------------------------------------------------------------

class Oracle:
    """Brute-force ES semantics over ``{_id: source}``."""

    def __init__(self, docs: dict[str, dict], order: dict[str, int]) -> None:
        self.docs = docs
        self.order = order  # _id -> append sequence of its live version (the engine's row order)
        self.stats = {}
        for field in TEXT_FIELDS:
            lengths = {i: len(self.field_tokens(d, field)) for i, d in docs.items()}
            with_tokens = [n for n in lengths.values() if n > 0]
            df = Counter(t for d in docs.values() for t in set(self.field_tokens(d, field)))
            self.stats[field] = (len(with_tokens), (sum(with_tokens) / len(with_tokens)) if with_tokens else 1.0, df)

    @staticmethod
    def field_tokens(doc: dict, field: str) -> list[str]:
        return [t for v in values_of(doc, field) for t in tokens(str(v))]

    def weight(self, doc: dict, field: str, term: str) -> float:
        toks = self.field_tokens(doc, field)
        tf = toks.count(term)
        if tf == 0:
            return 0.0
        n_docs, avgdl, df = self.stats[field]
        idf = math.log(1 + (n_docs - df[term] + 0.5) / (df[term] + 0.5))
        return idf * tf / (tf + K1 * (1 - B + B * len(toks) / avgdl))

    def run(self, query: dict, doc: dict, doc_id: str) -> tuple[bool, float]:
        (kind, body), = query.items()
        return getattr(self, "q_" + kind)(body, doc, doc_id)

    def q_match_all(self, body, doc, doc_id):
        return True, 1.0

    def q_match(self, body, doc, doc_id):
        (field, spec), = body.items()
        spec = spec if isinstance(spec, dict) else {"query": spec}
        if field == "tag":
            return spec["query"] in values_of(doc, "tag"), 1.0
        terms = Counter(tokens(spec["query"]))
        clauses = sum(terms.values())
        if not clauses:
            return False, 0.0
        matched = sum(m for t, m in terms.items() if t in self.field_tokens(doc, field))
        if spec.get("operator") == "and":
            required = clauses
        else:
            required = max(1, msm(spec.get("minimum_should_match"), clauses, 1))
        if matched < required or matched == 0:
            return False, 0.0
        return True, sum(m * self.weight(doc, field, t) for t, m in terms.items())

    def q_match_phrase(self, body, doc, doc_id):
        (field, spec), = body.items()
        spec = spec if isinstance(spec, dict) else {"query": spec}
        boost = spec.get("boost", 1.0)
        if field == "tag":
            return spec["query"] in values_of(doc, "tag"), boost
        words = tokens(spec["query"])
        if len(words) == 1:
            ok, score = self.q_term({field: words[0]}, doc, doc_id)
            return ok, score * boost
        # each value of the field apart (a phrase never spans two), overlapping occurrences each counted
        freq = sum(1 for value in values_of(doc, field) for toks in [tokens(str(value))]
                   for at in range(len(toks)) if toks[at:at + len(words)] == words)
        if not freq:
            return False, 0.0
        n_docs, avgdl, df = self.stats[field]
        weight = sum(math.log(1 + (n_docs - df[w] + 0.5) / (df[w] + 0.5)) for w in words)
        norm = K1 * (1 - B + B * len(self.field_tokens(doc, field)) / avgdl)
        return True, boost * weight * freq / (freq + norm)

    def q_match_phrase_prefix(self, body, doc, doc_id):
        """The words side by side, the last any of the first ``max_expansions`` words of the field (over live
        documents) it begins; Lucene's weight: every such word's idf summed."""
        (field, spec), = body.items()
        spec = spec if isinstance(spec, dict) else {"query": spec}
        words = tokens(spec["query"])
        if not words:
            return False, 0.0
        *fixed, last = words
        n_docs, avgdl, df = self.stats[field]
        expansions = sorted(w for w in df if w.startswith(last))[:spec.get("max_expansions", 50)]
        size = len(fixed)
        freq = sum(1 for value in values_of(doc, field) for toks in [tokens(str(value))]
                   for at in range(len(toks) - size) if toks[at:at + size] == fixed and toks[at + size] in expansions)
        if not freq:
            return False, 0.0
        weight = sum(math.log(1 + (n_docs - df[w] + 0.5) / (df[w] + 0.5)) for w in [*fixed, *expansions])
        norm = K1 * (1 - B + B * len(self.field_tokens(doc, field)) / avgdl)
        return True, spec.get("boost", 1.0) * weight * freq / (freq + norm)

    def q_match_bool_prefix(self, body, doc, doc_id):
        (field, spec), = body.items()
        spec = spec if isinstance(spec, dict) else {"query": spec}
        words = tokens(spec["query"])
        if not words:
            return False, 0.0
        clauses = [{"term": {field: w}} for w in words[:-1]] + [{"prefix": {field: words[-1]}}]
        required = len(clauses) if spec.get("operator") == "and" else spec.get("minimum_should_match")
        ok, score = self.q_bool({"should": clauses, **({} if required is None else {"minimum_should_match": required})},
                                doc, doc_id)
        return ok, score * spec.get("boost", 1.0)

    def q_term(self, body, doc, doc_id):
        (field, value), = body.items()
        if field in TEXT_FIELDS:
            w = self.weight(doc, field, value)
            return w > 0, w
        return self.equals(doc, field, value), 1.0

    def equals(self, doc, field, value) -> bool:
        have = values_of(doc, field)
        if field == "d":
            return bool(have) and date_ms(have[0]) == value
        if field in ("n", "f", "b"):
            return bool(have) and have[0] == value
        return value in have

    def q_terms(self, body, doc, doc_id):
        (field, values), = body.items()
        return any(self.equals(doc, field, v) for v in values), 1.0

    def terms_of(self, doc, field) -> list[str]:
        """What a term-level pattern is tested on: a keyword's values, a text field's words."""
        return self.field_tokens(doc, field) if field in TEXT_FIELDS else values_of(doc, field)

    def q_prefix(self, body, doc, doc_id):
        (field, spec), = body.items()
        value, fold = (spec["value"], spec.get("case_insensitive", False)) if isinstance(spec, dict) else (spec, False)
        boost = spec.get("boost", 1.0) if isinstance(spec, dict) else 1.0
        have = [v.lower() for v in self.terms_of(doc, field)] if fold else self.terms_of(doc, field)
        wanted = value.lower() if fold else value
        return any(v[:len(wanted)] == wanted for v in have), boost

    def q_wildcard(self, body, doc, doc_id):
        (field, spec), = body.items()
        pattern, fold = (spec["value"], spec.get("case_insensitive", False)) if isinstance(spec, dict) \
            else (spec, False)
        boost = spec.get("boost", 1.0) if isinstance(spec, dict) else 1.0
        return any(wildcard_matches(pattern, v, fold) for v in self.terms_of(doc, field)), boost

    def q_ids(self, body, doc, doc_id):
        return doc_id in body["values"], 1.0

    def q_exists(self, body, doc, doc_id):
        return bool(values_of(doc, body["field"])), 1.0

    def q_range(self, body, doc, doc_id):
        (field, bounds), = body.items()
        have = values_of(doc, field)
        if not have:
            return False, 0.0
        if field == "tag":
            candidates = have
        elif field == "d":
            candidates = [date_ms(have[0])]
        else:
            candidates = [have[0]]
        bounds = {k: (date_ms(v) if field == "d" else v) for k, v in bounds.items()}

        def inside(x):
            return ((("gt" not in bounds) or x > bounds["gt"]) and (("gte" not in bounds) or x >= bounds["gte"])
                    and (("lt" not in bounds) or x < bounds["lt"]) and (("lte" not in bounds) or x <= bounds["lte"]))

        return any(inside(x) for x in candidates), 1.0

    def q_dis_max(self, body, doc, doc_id):
        found = [self.run(clause, doc, doc_id) for clause in body["queries"]]
        scores = [s for ok, s in found if ok]
        if not scores:
            return False, 0.0
        best = max(scores)
        return True, best + body.get("tie_breaker", 0.0) * (sum(scores) - best)

    def q_bool(self, body, doc, doc_id):
        if not any(body.get(k) for k in ("must", "filter", "should", "must_not")):
            return True, 1.0
        score = 0.0
        for clause in as_list(body.get("must")):
            ok, s = self.run(clause, doc, doc_id)
            if not ok:
                return False, 0.0
            score += s
        for clause in as_list(body.get("filter")):
            if not self.run(clause, doc, doc_id)[0]:
                return False, 0.0
        for clause in as_list(body.get("must_not")):
            if self.run(clause, doc, doc_id)[0]:
                return False, 0.0
        should = as_list(body.get("should"))
        if should:
            default = 0 if (body.get("must") or body.get("filter")) else 1
            required = msm(body.get("minimum_should_match"), len(should), default)
            hits = 0
            for clause in should:
                ok, s = self.run(clause, doc, doc_id)
                if ok:
                    hits += 1
                    score += s
            if hits < required:
                return False, 0.0
        elif msm(body.get("minimum_should_match"), 0, 0) > 0:
            return False, 0.0  # more optional clauses required than there are: nothing matches
        if not (body.get("must") or should):
            score = 0.0 if (body.get("filter") or body.get("must_not")) else 1.0
        return True, score

    def search(self, query: dict) -> dict[str, float]:
        found = {}
        for doc_id, doc in self.docs.items():
            ok, score = self.run(query, doc, doc_id)
            if ok:
                found[doc_id] = score
        return found


def as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def msm(spec, count: int, default: int) -> int:
    if spec is None:
        return default
    spec = str(spec)
    if spec.endswith("%"):
        raw = count * int(spec[:-1]) / 100
        result = count + math.trunc(raw) if raw < 0 else math.trunc(raw)
    else:
        value = int(spec)
        result = count + value if value < 0 else value
    return max(result, 0)


# -- strategies ------------------------------------------------------------------------------------

text_value = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)
tag_value = st.sampled_from(TAGS)
floats = st.sampled_from([x * 0.25 for x in range(-8, 9)])
dates = st.integers(0, 3 * DAY).map(lambda x: BASE + x // 60_000 * 60_000)
vectors = st.lists(st.integers(-3, 3), min_size=3, max_size=3).filter(any).map(lambda v: [float(x) for x in v])

documents = st.fixed_dictionaries({}, optional={
    "title": text_value,
    "body": st.one_of(text_value, st.lists(text_value, max_size=2)),
    "tag": st.one_of(tag_value, st.lists(tag_value, max_size=3)),
    "n": st.integers(-5, 5),
    "f": floats,
    "d": st.one_of(dates, dates.map(iso)),
    "b": st.booleans(),
    "vec": vectors,
})
ids = st.sampled_from([str(i) for i in range(12)])
# A first batch of distinct documents, then overwrites and deletes (dead rows the engine must skip).
operations = st.tuples(
    st.lists(documents, min_size=4, max_size=14).map(lambda docs: [("put", str(i), d) for i, d in enumerate(docs)]),
    st.lists(st.one_of(st.tuples(st.just("put"), ids, documents), st.tuples(st.just("delete"), ids)), max_size=8),
).map(lambda parts: parts[0] + parts[1])

query_text = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3).map(" ".join)
# Phrases of words the documents hold (repeats included), so that many of them are found.
phrase_text = st.lists(st.sampled_from(["alpha", "beta", "gamma", "Alpha", "omega", "kappa"]), min_size=1,
                       max_size=3).map(" ".join)
msm_spec = st.sampled_from([None, "1", "2", "-1", "50%", "-30%", 2])


def bounds(values):
    keys = st.sets(st.sampled_from(["gt", "gte", "lt", "lte"]), min_size=1, max_size=2)
    return keys.flatmap(lambda ks: st.fixed_dictionaries({k: values for k in ks}))


leaf_queries = st.one_of(
    st.just({"match_all": {}}),
    st.builds(lambda f, q, op: {"match": {f: {"query": q, "operator": op}}}, st.sampled_from(TEXT_FIELDS),
              query_text, st.sampled_from(["or", "and"])),
    st.builds(lambda f, q, m: {"match": {f: {"query": q, **({} if m is None else {"minimum_should_match": m})}}},
              st.sampled_from(TEXT_FIELDS), query_text, msm_spec),
    st.builds(lambda t: {"match": {"tag": t}}, tag_value),
    st.builds(lambda f, w: {"term": {f: w}}, st.sampled_from(TEXT_FIELDS), st.sampled_from(QUERY_WORDS)),
    st.builds(lambda t: {"term": {"tag": t}}, tag_value),
    st.builds(lambda v: {"term": {"n": v}}, st.integers(-5, 5)),
    st.builds(lambda v: {"term": {"b": v}}, st.booleans()),
    st.builds(lambda v: {"term": {"f": v}}, floats),
    st.builds(lambda vs: {"terms": {"tag": vs}}, st.lists(tag_value, max_size=3)),
    st.builds(lambda vs: {"terms": {"n": vs}}, st.lists(st.integers(-5, 5), max_size=3)),
    st.builds(lambda vs: {"ids": {"values": vs}}, st.lists(ids, max_size=4)),
    st.builds(lambda f: {"exists": {"field": f}}, st.sampled_from(["title", "body", "tag", "n", "f", "d", "b", "vec"])),
    st.builds(lambda b: {"range": {"n": b}}, bounds(st.integers(-6, 6))),
    st.builds(lambda b: {"range": {"f": b}}, bounds(floats)),
    st.builds(lambda b: {"range": {"d": b}}, bounds(st.one_of(dates, dates.map(iso)))),
    st.builds(lambda b: {"range": {"tag": b}}, bounds(tag_value)),
    st.builds(lambda f, q: {"match_phrase": {f: q}}, st.sampled_from(TEXT_FIELDS), phrase_text),
    st.builds(lambda f, q, b: {"match_phrase": {f: {"query": q, "boost": b}}}, st.sampled_from(TEXT_FIELDS),
              phrase_text, st.sampled_from([1.0, 2.5])),
    st.builds(lambda t: {"match_phrase": {"tag": t}}, tag_value),
    st.builds(lambda v: {"prefix": {"tag": v}}, st.sampled_from(["", "r", "R", "re", "gr", "x ", "blue", "z"])),
    st.builds(lambda v, c: {"prefix": {"tag": {"value": v, "case_insensitive": c}}},
              st.sampled_from(["r", "RE", "g", "x"]), st.booleans()),
    st.builds(lambda v, c: {"wildcard": {"tag": {"value": v, "case_insensitive": c}}},
              st.sampled_from(["r*", "*e*", "?ed", "*", "R?d", "x*y", "b\\lue", "*n", "??", ""]), st.booleans()),
    st.builds(lambda f, q, b: {"match_phrase_prefix": {f: {"query": q, "boost": b}}}, st.sampled_from(TEXT_FIELDS),
              st.sampled_from(["alpha be", "gam", "Beta ALP", "zeta", "omega z", "alpha beta g", "x", "de"]),
              st.sampled_from([1.0, 2.0])),
    st.builds(lambda f, q, op, m: {"match_bool_prefix": {f: {"query": q, "operator": op,
                                                             **({} if m is None else {"minimum_should_match": m})}}},
              st.sampled_from(TEXT_FIELDS), st.sampled_from(["alpha be", "gam", "beta ALP", "omega zeta d", "x"]),
              st.sampled_from(["or", "and"]), st.sampled_from([None, 2, "50%"])),
    # on a text field: the words as indexed (lowercased), each tested alone
    st.builds(lambda f, v, c, b: {"prefix": {f: {"value": v, "case_insensitive": c, "boost": b}}},
              st.sampled_from(TEXT_FIELDS), st.sampled_from(["", "al", "Al", "be", "bet", "ze", "z", "omegaa"]),
              st.booleans(), st.sampled_from([1.0, 3.0])),
    st.builds(lambda f, v, c: {"wildcard": {f: {"value": v, "case_insensitive": c}}}, st.sampled_from(TEXT_FIELDS),
              st.sampled_from(["*eta", "?eta", "*", "a*a", "AL*", "g?mm?", "*m*", "alpha", "d\\elta", "???"]),
              st.booleans()),
)


def _bool(parts):
    must, flt, should, must_not, m = parts
    body = {}
    for key, value in (("must", must), ("filter", flt), ("should", should), ("must_not", must_not)):
        if value:
            body[key] = value
    if m is not None:
        body["minimum_should_match"] = m
    return {"bool": body}


queries = st.recursive(
    leaf_queries,
    lambda children: st.one_of(
        st.tuples(st.lists(children, max_size=2), st.lists(children, max_size=2), st.lists(children, max_size=3),
                  st.lists(children, max_size=1), st.sampled_from([None, None, 1, 2, "50%", "-1"])).map(_bool),
        st.builds(lambda qs, tie: {"dis_max": {"queries": qs, **({} if tie is None else {"tie_breaker": tie})}},
                  st.lists(children, min_size=1, max_size=3), st.sampled_from([None, 0.0, 0.3, 1.0]))),
    max_leaves=6,
)


# -- fixtures --------------------------------------------------------------------------------------

class Loaded:
    def __init__(self, ops) -> None:
        self.dir = tempfile.mkdtemp(prefix="xerj-query-")
        self.store = Store(self.dir, tail_rows=3)
        self.store.create_index("docs", MAPPING)
        self.service = SearchService(self.store)
        docs: dict[str, dict] = {}
        order: dict[str, int] = {}
        for seq, op in enumerate(ops):
            if op[0] == "put":
                self.store.put("docs", op[2], op[1])
                docs[op[1]] = op[2]
                order[op[1]] = seq
            else:
                self.store.delete("docs", op[1])
                docs.pop(op[1], None)
                order.pop(op[1], None)
        self.oracle = Oracle(docs, order)

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Loaded":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def hits_of(response) -> dict[str, float]:
    return {h["_id"]: h["_score"] for h in response["hits"]["hits"]}


# -- tests -----------------------------------------------------------------------------------------

@HYPOTHESIS
@given(operations, st.lists(queries, min_size=1, max_size=4))
def test_queries_agree_with_brute_force(ops, query_list):
    with Loaded(ops) as loaded:
        for query in query_list:
            expected = loaded.oracle.search(query)
            response = loaded.service.search("docs", {"query": query, "size": 100, "track_total_hits": True})
            got = hits_of(response)
            assert set(got) == set(expected), query
            for doc_id, score in expected.items():
                assert got[doc_id] == pytest.approx(score, abs=1e-5, rel=1e-5), (query, doc_id)
            assert response["hits"]["total"] == {"value": len(expected), "relation": "eq"}
            scores = [h["_score"] for h in response["hits"]["hits"]]
            assert scores == sorted(scores, reverse=True)
            assert loaded.service.count("docs", {"query": query})["count"] == len(expected)
            with loaded.store.reader("docs") as reader:
                mask = filter_mask(reader, query)
                assert {reader.id_of(int(r)) for r in np.flatnonzero(mask)} == set(expected)


@HYPOTHESIS
@given(operations, st.sampled_from(["n", "f", "d", "tag", "b"]), st.booleans(), st.sampled_from(["_last", "_first"]),
       st.integers(0, 4), st.integers(1, 6))
def test_field_sort_agrees_with_brute_force(ops, field, descending, missing, offset, size):
    with Loaded(ops) as loaded:
        oracle = loaded.oracle
        body = {"sort": [{field: {"order": "desc" if descending else "asc", "missing": missing}}],
                "from": offset, "size": size}
        response = loaded.service.search("docs", body)

        def sort_value(doc):
            have = values_of(doc, field)
            if not have:
                return None
            if field == "tag":
                return max(have) if descending else min(have)
            if field == "d":
                return date_ms(have[0])
            if field == "b":
                return int(have[0])
            return have[0]

        present = [(sort_value(d), oracle.order[i], i) for i, d in oracle.docs.items() if sort_value(d) is not None]
        absent = sorted((oracle.order[i], i) for i, d in oracle.docs.items() if sort_value(d) is None)
        present.sort(key=lambda t: t[1])
        present.sort(key=lambda t: t[0], reverse=descending)
        ranked = [(v, i) for v, _, i in present]
        nulls = [(None, i) for _, i in absent]
        ranked = nulls + ranked if missing == "_first" else ranked + nulls
        expected = ranked[offset:offset + size]
        got = [(h["sort"][0], h["_id"]) for h in response["hits"]["hits"]]
        assert got == [(float(v) if field == "f" and v is not None else v, i) for v, i in expected]
        assert response["hits"]["total"]["value"] == len(oracle.docs)
        assert all(h["_score"] is None for h in response["hits"]["hits"])


@HYPOTHESIS
@given(operations, st.one_of(st.none(), queries), st.integers(1, 5), st.sampled_from(["tag", "n", "b", "d"]),
       st.sampled_from(["hour", "day", "1h", "6h", "1d"]))
def test_aggregations_agree_with_brute_force(ops, query, size, terms_field, interval):
    with Loaded(ops) as loaded:
        oracle = loaded.oracle
        matched = oracle.search(query) if query is not None else {i: 1.0 for i in oracle.docs}
        docs = [oracle.docs[i] for i in matched]
        histogram = ({"calendar_interval": interval} if interval in ("hour", "day")
                     else {"fixed_interval": interval})
        body = {"size": 0, "aggs": {
            "t": {"terms": {"field": terms_field, "size": size}},
            "h": {"date_histogram": {"field": "d", **histogram}, "aggs": {"top": {"max": {"field": "n"}}}},
            "vc": {"value_count": {"field": "tag"}},
            "card": {"cardinality": {"field": "tag"}},
            "card_n": {"cardinality": {"field": "n"}},
            "lo": {"min": {"field": "f"}},
            "hi": {"max": {"field": "d"}},
            "hi_n": {"max": {"field": "n"}},
        }}
        if query is not None:
            body["query"] = query
        aggs = loaded.service.search("docs", body)["aggregations"]

        # terms: distinct values per document, count desc then key asc; numbers and booleans as numbers
        counts: Counter = Counter()
        for doc in docs:
            have = values_of(doc, terms_field)
            if terms_field in ("n", "b") and have:
                have = [int(have[0])]
            elif terms_field == "d" and have:
                have = [date_ms(have[0])]
            counts.update(set(have))
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        assert [(b["key"], b["doc_count"]) for b in aggs["t"]["buckets"]] == ordered[:size]
        assert aggs["t"]["sum_other_doc_count"] == sum(c for _, c in ordered[size:])
        assert aggs["t"]["doc_count_error_upper_bound"] == 0

        # date_histogram: floor keys, empty buckets filled between the first and the last
        step = {"hour": 3_600_000, "1h": 3_600_000, "6h": 6 * 3_600_000, "day": DAY, "1d": DAY}[interval]
        by_key: dict[int, list] = {}
        for doc in docs:
            have = values_of(doc, "d")
            if have:
                by_key.setdefault(date_ms(have[0]) // step * step, []).append(doc)
        buckets = aggs["h"]["buckets"]
        if by_key:
            keys = list(range(min(by_key), max(by_key) + 1, step))
            assert [b["key"] for b in buckets] == keys
            for bucket in buckets:
                in_bucket = by_key.get(bucket["key"], [])
                assert bucket["doc_count"] == len(in_bucket)
                assert bucket["key_as_string"] == iso(bucket["key"])
                ns = [values_of(d, "n")[0] for d in in_bucket if values_of(d, "n")]
                assert bucket["top"]["value"] == (float(max(ns)) if ns else None)
        else:
            assert buckets == []

        tags_per_doc = [set(values_of(d, "tag")) for d in docs]
        assert aggs["vc"]["value"] == sum(len(t) for t in tags_per_doc)
        assert aggs["card"]["value"] == (len(set().union(*tags_per_doc)) if tags_per_doc else 0)
        assert aggs["card_n"]["value"] == len({values_of(d, "n")[0] for d in docs if values_of(d, "n")})
        fs = [values_of(d, "f")[0] for d in docs if values_of(d, "f")]
        assert aggs["lo"]["value"] == (min(fs) if fs else None)
        ds = [date_ms(values_of(d, "d")[0]) for d in docs if values_of(d, "d")]
        assert aggs["hi"]["value"] == (float(max(ds)) if ds else None)
        if ds:
            assert aggs["hi"]["value_as_string"] == iso(max(ds))
        ns = [values_of(d, "n")[0] for d in docs if values_of(d, "n")]
        assert aggs["hi_n"]["value"] == (float(max(ns)) if ns else None)


def _cosine_score(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (1 + float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))) / 2


@pytest.mark.usefixtures("knn_first_pass")
@HYPOTHESIS
@given(operations, vectors, st.integers(1, 6), st.one_of(st.none(), leaf_queries), st.booleans())
def test_knn_agrees_with_brute_force(ops, vector, k, flt, in_query):
    with Loaded(ops) as loaded:
        oracle = loaded.oracle
        allowed = oracle.search(flt) if flt is not None else {i: 1.0 for i in oracle.docs}
        candidates = {i: _cosine_score(oracle.docs[i]["vec"], vector) for i in allowed if "vec" in oracle.docs[i]}
        expected = sorted(candidates.values(), reverse=True)[:k]
        clause = {"field": "vec", "query_vector": vector, "k": k, "num_candidates": max(k, 10)}
        if flt is not None:
            clause["filter"] = flt
        body = {"query": {"knn": clause}} if in_query else {"knn": clause}
        response = loaded.service.search("docs", {**body, "size": 10})
        got = response["hits"]["hits"]
        assert [h["_score"] for h in got] == pytest.approx(expected, abs=1e-6)
        for hit in got:
            assert hit["_id"] in candidates
            assert hit["_score"] == pytest.approx(candidates[hit["_id"]], abs=1e-6)
        assert response["hits"]["total"]["value"] == len(expected)


@HYPOTHESIS
@given(operations, queries, st.integers(0, 5), st.integers(0, 5))
def test_pages_are_slices_of_the_full_ranking(ops, query, offset, size):
    with Loaded(ops) as loaded:
        full = loaded.service.search("docs", {"query": query, "size": 100})["hits"]["hits"]
        page = loaded.service.search("docs", {"query": query, "from": offset, "size": size})["hits"]["hits"]
        assert [h["_id"] for h in page] == [h["_id"] for h in full[offset:offset + size]]


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="abAB*?\\x", max_size=8), st.text(alphabet="abABx*?\\", max_size=10), st.booleans())
def test_the_wildcard_matcher_agrees_with_the_oracles(pattern, term, fold):
    """The engine's piece-by-piece matcher against the oracle's dynamic programming, on patterns dense in stars,
    question marks and escapes."""
    from xerj_core.query import dsl
    from xerj_core.query.multiterm import pattern_test

    assert pattern_test(dsl.Pattern("wildcard", "k", pattern, case_insensitive=fold))(term) == \
        wildcard_matches(pattern, term, fold)


def test_the_pieces_between_stars_never_overlap():
    from xerj_core.query import dsl
    from xerj_core.query.multiterm import pattern_test

    twice = pattern_test(dsl.Pattern("wildcard", "k", "*ab*ab*"))
    assert [twice(term) for term in ("ab", "aba", "abab", "xabyabz")] == [False, False, True, True]
    ends = pattern_test(dsl.Pattern("wildcard", "k", "ab*ba"))  # the first and last pieces may not share a letter
    assert [ends(term) for term in ("aba", "abba", "abxba")] == [False, True, True]
    assert pattern_test(dsl.Pattern("wildcard", "k", "a\\"))("a\\")  # a trailing backslash stands for itself
