"""`xerj mcp` in process: the SDK's own client against the MCPServer, over xerj's secured app with a scoped key."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from falcon import testing
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from xerj_http.app import create_app  # noqa: E402
from xerj_mcp.backend import AppBackend, HttpBackend, open_embedded  # noqa: E402
from xerj_mcp.server import OPEN_MODE, build_server  # noqa: E402
from xerj_mcp.tools import TOOL_NAMES  # noqa: E402

A, B = "alice", "bob"


def admin_headers(engine) -> dict[str, str]:
    return {"Authorization": "ApiKey " + (engine.data_dir / "admin.key").read_text().strip()}


@pytest.fixture
def world(engine, pm):
    """A secured app with alice's and bob's memories and edges, and a key scoped to alice alone."""
    app = create_app(engine, pm)
    admin = admin_headers(engine)
    seeded: dict = {"app": app}
    for who in (A, B):
        for text in (f"{who} feeds the sourdough starter twice a day", f"{who} keeps the rye flour cold",
                     f"{who} bakes on sundays"):
            r = testing.simulate_post(app, f"/_memory/{who}", json={"text": text}, headers=admin)
            assert r.status_code == 201, r.text
        r = testing.simulate_post(app, f"/_graph/{who}/link", headers=admin, json={
            "src": f"{who}-starter", "dst": f"{who}-bread", "type": "feeds",
            "evidence": {"quote": "the starter raises the bread", "source": "bread.md", "offset": 3}})
        assert r.status_code == 201, r.text
        seeded[who] = r.json["edge_id"]
    r = testing.simulate_post(app, "/_security/api_key", headers=admin, json={
        "name": "alice-agent", "role_descriptors": {"a": {"indices": [
            {"names": [f".xerj-memory-{A}", f".xerj-memory-{A}-edges"], "privileges": ["read", "write"]}]}}})
    assert r.status_code == 200, r.text
    seeded["key"] = r.json["encoded"]
    yield seeded
    app.close()


def run(backend, script, **build):
    """Run ``script(client)`` against an MCPServer over ``backend``, with the SDK's in-process client."""
    async def main():
        server = await build_server(backend, **build)
        async with Client(server) as client:
            return await script(client)
    return anyio.run(main)


async def call(client, name, **arguments):
    return await client.call_tool(name, arguments)


def text(result) -> str:
    return result.content[0].text


def test_tools_are_listed_with_descriptions_typed_arguments_and_output_schemas(world):
    async def script(client):
        return (await client.list_tools()).tools, client.instructions

    tools, instructions = run(AppBackend(world["app"], world["key"]), script)
    by_name = {t.name: t for t in tools}
    # This build serves the review routes, so their tools are listed too.
    assert set(by_name) == set(TOOL_NAMES)
    for tool in tools:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        for prop, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), (tool.name, prop)
    recall = by_name["xerj_memory_recall"].input_schema
    assert recall["required"] == ["namespace", "query"]
    assert recall["properties"]["k"]["maximum"] == 100
    assert set(recall["properties"]) >= {"mode", "fusion", "filter", "recency_weight", "as_of", "trust", "graph"}
    graph = recall["$defs"]["GraphCoupling"]["properties"]
    assert set(graph) >= {"mode", "seeds", "hops", "types", "weight", "as_of", "min_confidence"}
    ego = by_name["xerj_brain_ego"].input_schema["properties"]
    assert set(ego) >= {"brain", "node", "hops", "direction", "types", "as_of", "include_expired", "trust",
                        "min_confidence"}
    link = by_name["xerj_brain_link"].input_schema["properties"]
    assert "valid_at" in link and "created_at" not in link
    assert by_name["xerj_memory_recall"].annotations.read_only_hint is True
    assert by_name["xerj_memory_forget"].annotations.destructive_hint is True
    assert OPEN_MODE.strip() not in instructions


def test_the_ego_of_a_note_lists_the_links_its_sections_hold(engine, pm, tmp_path):
    """An autoindexed note's links sit on its sections: the tool expands from them unless told not to."""
    from xerj_core.autoindex.pipeline import run as index

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nIntro.\n\n## Links\n\nSee [[b]].\n")
    (folder / "b.md").write_text("# B\n\nThe other note.\n")
    index(engine, folder, brain="notes")
    app = create_app(engine, pm)

    async def script(client):
        return (await call(client, "xerj_brain_ego", brain="notes", node="a.md"),
                await call(client, "xerj_brain_ego", brain="notes", node="a.md", sections=False))

    try:
        found, plain = run(AppBackend(app, (engine.data_dir / "admin.key").read_text().strip()), script)
    finally:
        app.close()
    links = [(e["src"], e["dst"]) for e in found.structured_content["edges"] if e["type"] == "wikilink"]
    assert links == [("a.md#links", "b.md")] and "a.md#links" in found.structured_content["sections"]
    assert not [e for e in plain.structured_content["edges"] if e["type"] == "wikilink"]


def test_every_tool_answers_its_happy_path_with_structured_results(world):
    async def script(client):
        out = {}
        out["store"] = await call(client, "xerj_memory_store", namespace=A, text="alice proofs the dough overnight",
                                  metadata={"topic": "bread"})
        out["dedup"] = await call(client, "xerj_memory_store", namespace=A, text="alice proofs the dough overnight",
                                  dedup=True)
        out["recall"] = await call(client, "xerj_memory_recall", namespace=A, query="sourdough starter", k=2)
        out["filtered"] = await call(client, "xerj_memory_recall", namespace=A, query="dough", mode="hybrid",
                                     fusion="linear", filter={"term": {"metadata.topic.keyword": "bread"}})
        out["list"] = await call(client, "xerj_memory_list", namespace=A, size=2)
        out["forget"] = await call(client, "xerj_memory_forget", namespace=A,
                                   id=out["store"].structured_content["_id"])
        out["link"] = await call(client, "xerj_brain_link", brain=A, src="alice-bread", dst="alice-oven",
                                 type="baked_in", valid_at="2026-01-01T00:00:00Z",
                                 evidence={"quote": "into the oven", "source": "bread.md"})
        out["ego"] = await call(client, "xerj_brain_ego", brain=A, node="alice-starter", hops=2)
        out["overview"] = await call(client, "xerj_brain_overview", brain=A)
        out["unlink"] = await call(client, "xerj_brain_unlink", brain=A,
                                   edge_id=out["link"].structured_content["edge_id"])
        out["search"] = await call(client, "xerj_search", index=f".xerj-memory-{A}", query="rye", size=1)
        out["dsl"] = await call(client, "xerj_search", index=f".xerj-memory-{A}",
                                body={"query": {"match": {"text": "sundays"}}})
        hit = out["search"].structured_content["hits"][0]
        out["get"] = await call(client, "xerj_get_document", index=hit["_index"], id=hit["_id"])
        out["indices"] = await call(client, "xerj_list_indices")
        return out

    out = run(AppBackend(world["app"], world["key"]), script)
    for name, result in out.items():
        assert not result.is_error, (name, result.content)
        assert isinstance(result.structured_content, dict), name
    assert out["store"].structured_content["created"] is True
    assert out["dedup"].structured_content["created"] is False
    assert out["dedup"].structured_content["_id"] == out["store"].structured_content["_id"]
    recall = out["recall"].structured_content
    assert recall["k"] == 2 and "sourdough" in recall["hits"][0]["text"]
    assert [h["text"] for h in out["filtered"].structured_content["hits"]] == ["alice proofs the dough overnight"]
    listed = out["list"].structured_content
    assert listed["total"] == 4 and len(listed["memories"]) == 2 and listed["left_out"] == 2
    assert out["forget"].structured_content["forgotten"] is True
    assert out["link"].structured_content["created"] is True
    ego = out["ego"].structured_content
    assert {(e["src"], e["dst"]) for e in ego["edges"]} == {("alice-starter", "alice-bread"),
                                                            ("alice-bread", "alice-oven")}
    assert ego["edges"][0]["evidence"]["quote"]
    assert out["overview"].structured_content["edges"]["live"] == 2
    assert out["unlink"].structured_content["invalidated"] is True
    search = out["search"].structured_content
    assert search["total"] == 1 and search["left_out"] == 0
    assert search["hits"][0]["highlight"]["text"] == ["alice keeps the <em>rye</em> flour cold"]
    assert not any("vector" in key for key in search["hits"][0]["_source"])
    assert out["dsl"].structured_content["hits"][0]["_source"]["text"] == "alice bakes on sundays"
    assert out["get"].structured_content["found"] is True
    assert out["get"].structured_content["_source"]["text"] == "alice keeps the rye flour cold"
    # The key sees its own two indices and nothing of bob's.
    assert [i["index"] for i in out["indices"].structured_content["indices"]] == [
        f".xerj-memory-{A}", f".xerj-memory-{A}-edges"]


def test_each_tool_refuses_with_the_servers_reason(world):
    async def script(client):
        return {
            "store": await call(client, "xerj_memory_store", namespace=A, text="x", metadata={"a": 1},
                                dedup_threshold=0.5),
            "recall": await call(client, "xerj_memory_recall", namespace=A, query="starter",
                                 graph={"mode": "blend", "hops": 3}),
            "list": await call(client, "xerj_memory_list", namespace="Not A Name"),
            "forget": await call(client, "xerj_memory_forget", namespace=A, id="no-such-memory"),
            "ego": await call(client, "xerj_brain_ego", brain=A, node="alice-starter", hops=3),
            "ego_no_node": await call(client, "xerj_brain_ego", brain=A),
            "overview": await call(client, "xerj_brain_overview", brain=B),
            "link": await call(client, "xerj_brain_link", brain=A, src="same", dst="same", type="t"),
            "unlink": await call(client, "xerj_brain_unlink", brain=A, edge_id="f" * 32),
            "search": await call(client, "xerj_search", query="a", body={"query": {"match_all": {}}}),
            "get": await call(client, "xerj_get_document", index=f".xerj-memory-{A}", id="missing"),
        }

    out = run(AppBackend(world["app"], world["key"]), script)
    for name, result in out.items():
        assert result.is_error, name
        assert "Traceback" not in text(result) and "Error executing tool" not in text(result), name
    assert "dedup_threshold" in text(out["store"])
    hop_cap = text(out["ego"])
    assert hop_cap.startswith("hops is capped at 2") and text(out["recall"]) == hop_cap
    assert "Not A Name" in text(out["list"])
    assert "no-such-memory" in text(out["forget"])
    assert "node" in text(out["ego_no_node"])
    assert text(out["overview"]).startswith("action [indices:data/read/graph/overview] is unauthorized")
    assert "src" in text(out["link"])
    assert text(out["unlink"]) == f"edge '{'f' * 32}' does not exist in brain '{A}'"
    assert "not both" in text(out["search"])
    assert "missing" in text(out["get"])


def test_a_key_for_one_namespace_gets_the_same_refusal_on_another_as_http_403(world):
    http = testing.simulate_post(world["app"], f"/_memory/{B}/_recall", json={"query": "starter", "k": 10},
                                 headers={"Authorization": f"ApiKey {world['key']}"})
    assert http.status_code == 403

    async def script(client):
        return [await call(client, "xerj_memory_recall", namespace=B, query="starter"),
                await call(client, "xerj_memory_store", namespace=B, text="planted"),
                await call(client, "xerj_brain_ego", brain=B, node="bob-starter"),
                await call(client, "xerj_search", index=f".xerj-memory-{B}", query="starter"),
                await call(client, "xerj_search", query="starter")]

    recall, store, ego, search, fan_out = run(AppBackend(world["app"], world["key"]), script)
    assert recall.is_error and text(recall) == http.json["error"]["reason"]
    for refused in (store, ego, search):
        assert refused.is_error and f".xerj-memory-{B}" in text(refused) and "unauthorized" in text(refused)
    # A search over everything narrows to what the key reads: alice's rows, none of bob's.
    hits = fan_out.structured_content["hits"]
    assert hits and all(h["_index"] in (f".xerj-memory-{A}", f".xerj-memory-{A}-edges") for h in hits)
    listed = testing.simulate_get(world["app"], f"/_memory/{B}", headers=admin_headers_of(world))
    assert listed.json["total"] == 3  # the refused store wrote nothing


def admin_headers_of(world) -> dict[str, str]:
    return {"Authorization": "ApiKey " + (world["app"].admin_key_path).read_text().strip()}


def test_bad_arguments_are_tool_errors_that_name_them(world):
    async def script(client):
        return [await call(client, "xerj_memory_recall", namespace=A, query="x", querry="y"),
                await call(client, "xerj_memory_recall", namespace=A, query=5),
                await call(client, "xerj_brain_ego", brain=A, node="alice-starter", hops="two"),
                await call(client, "xerj_memory_recall", namespace=A, query="x", k=1000),
                await call(client, "xerj_memory_recall", namespace=A),
                await call(client, "xerj_memory_recall", namespace=A, query="x", graph={"mode": "blend", "hop": 1})]

    unknown, wrong_type, wrong_hops, too_many, missing, nested = run(AppBackend(world["app"], world["key"]), script)
    assert text(unknown).startswith("unknown argument(s) [querry] for tool [xerj_memory_recall]")
    assert text(wrong_type) == "invalid arguments for tool [xerj_memory_recall]: query: 5 is not of type 'string'"
    assert "hops" in text(wrong_hops)
    assert "k: 1000 is greater than the maximum of 100" in text(too_many)
    assert "'query' is a required property" in text(missing)
    assert "hop" in text(nested) and nested.is_error
    assert all(r.is_error for r in (unknown, wrong_type, wrong_hops, too_many, missing, nested))


def test_a_server_that_is_down_is_a_tool_error_that_says_so():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = HttpBackend(f"http://127.0.0.1:{port}", "a-key", timeout=2)

    async def script(client):
        return await call(client, "xerj_memory_recall", namespace=A, query="x"), client.instructions

    result, instructions = run(backend, script)
    assert result.is_error
    assert text(result).startswith(f"the xerj server at http://127.0.0.1:{port} is not reachable")
    assert "xerj serve" in text(result)


def test_embedded_data_dir_is_open_mode_and_says_every_namespace_is_reachable(tmp_path):
    backend = open_embedded(tmp_path / "data")

    async def script(client):
        stored = await call(client, "xerj_memory_store", namespace=B, text="bob's note")
        other = await call(client, "xerj_memory_recall", namespace=A, query="note")
        unknown = await call(client, "xerj_brain_overview", brain="nothing-here")
        return client.instructions, stored, other, unknown

    try:
        instructions, stored, other, unknown = run(backend, script)
    finally:
        anyio.run(backend.aclose)
    assert OPEN_MODE.strip() in instructions
    assert stored.structured_content["created"] is True
    assert other.is_error and "alice" in text(other)
    assert text(unknown) == "brain [nothing-here] does not exist"


def test_search_passages_mark_what_the_server_matched(world, engine):
    """A phrase only where its words lie side by side, the words a wildcard matched, each string field around
    them; a body's own highlight is kept, and highlight=False asks for none."""
    index = f".xerj-memory-{A}"
    long_text = "x " * 100 + "the starter rises, starter dough " + "y " * 100
    r = testing.simulate_post(world["app"], f"/_memory/{A}", json={"text": long_text},
                              headers=admin_headers(engine))
    assert r.status_code == 201, r.text

    async def script(client):
        return [(await call(client, "xerj_search", index=index, **arguments)).structured_content for arguments in (
            {"query": '"starter rises"'}, {"query": "sourd*"}, {"query": "rye", "highlight": False},
            {"body": {"query": {"match": {"text": "rye"}}, "highlight": {"fields": {"text": {}},
                                                                       "pre_tags": ["["], "post_tags": ["]"]}}})]

    phrase, wildcard, plain, own = run(AppBackend(world["app"], world["key"]), script)
    passage = phrase["hits"][0]["highlight"]["text"][0]
    assert "<em>starter</em> <em>rises</em>, starter dough" in passage and len(passage) < 200
    assert wildcard["hits"][0]["highlight"]["text"] == [f"{A} feeds the <em>sourdough</em> starter twice a day"]
    assert "highlight" not in plain["hits"][0]
    assert own["hits"][0]["highlight"]["text"] == [f"{A} keeps the [rye] flour cold"]


def test_results_are_json_all_the_way(world):
    async def script(client):
        return await call(client, "xerj_brain_overview", brain=A)

    result = run(AppBackend(world["app"], world["key"]), script)
    assert json.loads(text(result))["brain"] == A


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: (st.lists(inner, max_size=3)
                                    | st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                     max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(servers=st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k != "xerj"), _json, max_size=4),
       others=st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k != "mcpServers"), _json,
                              max_size=3),
       indent=st.sampled_from([None, 2, 4, "\t"]), ascii_only=st.booleans(), replace=st.booleans())
def test_the_entry_is_spliced_in_and_every_other_byte_is_kept(servers, others, indent, ascii_only, replace):
    from xerj_mcp.jsonsplice import members, set_member

    document = {**others, "mcpServers": {**servers, **({"xerj": {"old": True}} if replace else {})}}
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    entry = {"command": "/usr/bin/xerj", "args": ["mcp", "--url", "http://127.0.0.1:9200"], "env": {"K": "v"}}
    result = set_member(text, ("mcpServers", "xerj"), entry)
    assert json.loads(result) == {**others, "mcpServers": {**servers, "xerj": entry}}
    # Every other member's value keeps its original text.
    found, _ = members(text, 0)
    spans = {key: text[start:end] for key, _ks, start, end in found if key != "mcpServers"}
    inner = next(m for m in found if m[0] == "mcpServers")
    spans.update({("srv", key): text[start:end] for key, _ks, start, end in members(text, inner[2])[0]
                  if key != "xerj"})
    for span in spans.values():
        assert span in result
    assert result.startswith(text[:inner[2]])


def test_an_open_mode_server_is_named_as_such_in_the_instructions(engine, pm):
    app = create_app(engine, pm, insecure=True)

    async def script(client):
        return client.instructions

    try:
        assert OPEN_MODE.strip() in run(AppBackend(app), script)
    finally:
        app.close()


def test_a_result_is_the_servers_answer_itself_and_its_text_twin_is_that_json(world):
    """The structured content is the HTTP API's body, key for key; the text twin is the same JSON."""
    now = int(time.time() * 1000)  # one instant for both sides: an answer names the as_of it was read at

    async def script(client):
        return (await call(client, "xerj_brain_ego", brain=A, node=f"{A}-starter", hops=2, as_of=now),
                await call(client, "xerj_memory_recall", namespace=A, query="rye flour", as_of=now))

    ego, recall = run(AppBackend(world["app"], world["key"]), script)
    headers = {"Authorization": f"ApiKey {world['key']}"}
    over_http = testing.simulate_get(world["app"], f"/_graph/{A}/ego", headers=headers, params={
        "node": f"{A}-starter", "hops": "2", "direction": "both", "include_nodes": "true", "as_of": str(now),
        "sections": "true"}).json  # the tool expands a note from its sections unless told not to
    assert ego.structured_content == over_http
    assert json.loads(text(ego)) == over_http
    recalled = testing.simulate_post(world["app"], f"/_memory/{A}/_recall", headers=headers,
                                     json={"query": "rye flour", "k": 10, "as_of": now}).json
    assert recall.structured_content == recalled


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.text(), JSON_VALUES, max_size=6), meta=st.none() | st.dictionaries(st.text(), st.text()))
def test_a_plain_json_result_dumps_as_pydantic_would(data, meta):
    """The runner's dump skips walking the structured content; what it gives is what pydantic gives."""
    from mcp.types import CallToolResult, TextContent

    from xerj_mcp.server import PlainJsonResult

    fields = {"content": [TextContent(type="text", text=json.dumps(data))], "structured_content": data, "_meta": meta}
    fast, slow = PlainJsonResult(**fields), CallToolResult(**fields)
    for kwargs in ({"by_alias": True, "mode": "json", "exclude_none": True}, {"mode": "json"}, {},
                   {"by_alias": True, "mode": "json", "exclude_unset": True}):
        assert fast.model_dump(**kwargs) == slow.model_dump(**kwargs), kwargs


class _Answers:
    """A backend that answers every request with one canned body."""

    describe = "a canned backend"

    def __init__(self, body):
        self.body = body

    async def request(self, method, path, params=None, body=None):
        return 200, self.body

    async def aclose(self):
        return None


def test_an_answer_that_does_not_fit_the_output_schema_is_still_refused():
    """Results are not re-validated by the tools, so the SDK's own check against the output model must hold."""
    async def script(client):
        return await call(client, "xerj_brain_ego", brain=A, node="x")

    for broken in ({"brain": A, "hops": "two", "edges": [], "neighbors": [], "not_shown": {}},
                   {"brain": A, "hops": 1, "edges": "none", "neighbors": [], "not_shown": {}},
                   {"brain": A, "hops": 1, "neighbors": [], "not_shown": {}},
                   ["not", "an", "object"]):
        result = run(_Answers(broken), script, open_mode=False, review=True)
        assert result.is_error, broken
    fits = {"brain": A, "hops": 1, "edges": [{"src": "x"}], "neighbors": [], "not_shown": {}, "more": 1}
    result = run(_Answers(fits), script, open_mode=False, review=True)
    assert not result.is_error and result.structured_content == fits


class _Wire:
    """A socket stand-in: records each sendall and hands out one canned HTTP response a few bytes at a time."""

    def __init__(self, response: bytes) -> None:
        self.sent: list[bytes] = []
        self.response = response

    def sendall(self, data) -> None:
        self.sent.append(bytes(data))

    def recv(self, size: int) -> bytes:
        piece, self.response = self.response[:7], self.response[7:]
        return piece

    def close(self) -> None:
        return None


def test_a_request_leaves_in_one_write_and_json_round_trips():
    """Head and body in one sendall: two writes on a TCP_NODELAY socket are two segments and two wake-ups."""
    from xerj_mcp.backend import HttpClient

    body = b'{"hits":[{"_id":"a","text":"caf\\u00e9"}]}'
    wire = _Wire(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    client = HttpClient("http://127.0.0.1:1", "k")
    client._local.sock = wire
    status, payload = client.send("POST", "/_memory/a/_recall", {"explain": False}, {"query": "café", "k": 3})
    assert (status, payload) == (200, {"hits": [{"_id": "a", "text": "café"}]})
    assert len(wire.sent) == 1
    head, _, sent_body = wire.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /_memory/a/_recall?explain=false HTTP/1.1\r\n")
    assert b"Authorization: ApiKey k" in head and json.loads(sent_body) == {"query": "café", "k": 3}
    assert f"Content-Length: {len(sent_body)}".encode() in head


def test_a_kept_alive_connection_closed_while_idle_is_reopened_and_every_framing_is_read():
    """Requests share one connection while the server keeps it; dropped while idle, the request goes again on a
    new one. Bodies come with a length, chunked, and running to the close; an answer cut short is the server
    being unreachable."""
    import socket
    import threading

    from xerj_mcp.backend import BackendUnavailable, HttpClient

    connections = [  # per connection, one answer per request; then the server closes it
        [b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"n": 1}',
         b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"n\r\n5\r\n": 2}\r\n0\r\n\r\n'],
        [b'HTTP/1.1 201 Created\r\nContent-Length: 8\r\n\r\n{"n": 3}',
         b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"n": 4}'],
        [b'HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{"n"'],
    ]
    heads: list[list[bytes]] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for answers in connections:
            conn, _ = listener.accept()
            heads.append([])
            with conn:
                for answer in answers:
                    heads[-1].append(conn.recv(65536))
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = HttpClient(f"http://127.0.0.1:{listener.getsockname()[1]}", "k", timeout=10)
    try:
        assert client.send("GET", "/a") == (200, {"n": 1})
        assert client.send("GET", "/b") == (200, {"n": 2})
        assert client.send("POST", "/c", body={"x": 1}) == (201, {"n": 3})  # the idle-closed one, sent again
        assert client.send("DELETE", "/d") == (200, {"n": 4})
        with pytest.raises(BackendUnavailable, match="not reachable"):
            client.send("GET", "/e")
    finally:
        client.close()
        listener.close()
    thread.join(10)
    assert [[h.split(b" ", 2)[:2] for h in on_one] for on_one in heads] == [
        [[b"GET", b"/a"], [b"GET", b"/b"]], [[b"POST", b"/c"], [b"DELETE", b"/d"]], [[b"GET", b"/e"]]]
    assert heads[1][0].endswith(b'\r\n\r\n{"x":1}') and b"Content-Length: 7\r\n" in heads[1][0]


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_stdout_pipe_is_widened_so_a_large_answer_leaves_in_one_write():
    """At the default 64 KiB a 2-hop ego answer and its text twin leave in pieces, the client reading between."""
    import subprocess
    import sys

    script = ("import asyncio, fcntl, sys\n"
              "from xerj_mcp.stdio import stdio_streams\n"
              "async def main():\n"
              "    async with stdio_streams() as (lines, out):\n"
              "        fd = out._transport.get_extra_info('pipe').fileno()\n"
              "        sys.stderr.write(str(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)))\n"
              "asyncio.run(main())\n")
    ran = subprocess.run([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stderr) >= 1 << 20


def test_search_leaves_a_pages_links_out_of_its_hits_unless_the_body_asks_for_the_source(world, engine):
    """A web page's ``links`` are the href detector's input, hundreds a page: like embeddings they stay out of
    xerj_search's hits, and a body that asks for ``_source`` gets them."""
    links = [{"href": f"p{i}.html", "offset": i} for i in range(300)]
    engine.store.put(f".xerj-memory-{A}", {"text": "a page about hydration", "links": links}, "page")

    async def script(client):
        plain = await call(client, "xerj_search", index=f".xerj-memory-{A}", query="hydration")
        asked = await call(client, "xerj_search", index=f".xerj-memory-{A}",
                           body={"query": {"match": {"text": "hydration"}}, "_source": True})
        return plain.structured_content["hits"], asked.structured_content["hits"]

    plain, asked = run(AppBackend(world["app"], world["key"]), script)
    assert [(h["_id"], sorted(h["_source"])) for h in plain] == [("page", ["text"])]
    assert asked[0]["_source"]["links"] == links


def test_a_long_text_is_shown_a_window_at_a_time_in_search_hits_and_document_reads(world, engine):
    """A brain's card can hold a whole file (a 60 MB log is one document): search hits and document reads show a
    bounded window of its text and say how long the whole is, and a read goes on from where the last stopped."""
    words = " ".join(f"w{i:06d}" for i in range(30_000))  # 239,999 characters
    engine.store.put(f".xerj-memory-{A}", {"text": "hydration log " + words}, "log")
    engine.store.put(f".xerj-memory-{A}", {"text": "short hydration note"}, "note")

    async def script(client):
        found = await call(client, "xerj_search", index=f".xerj-memory-{A}", query="hydration")
        wider = await call(client, "xerj_search", index=f".xerj-memory-{A}", query="hydration", text_chars=5)
        first = await call(client, "xerj_get_document", index=f".xerj-memory-{A}", id="log")
        later = await call(client, "xerj_get_document", index=f".xerj-memory-{A}", id="log", text_from=20_000,
                           text_chars=14)
        short = await call(client, "xerj_get_document", index=f".xerj-memory-{A}", id="note")
        too_many = await call(client, "xerj_search", index=f".xerj-memory-{A}", query="x", text_chars=10**9)
        return found, wider, first, later, short, too_many

    found, wider, first, later, short, too_many = run(AppBackend(world["app"], world["key"]), script)
    whole = len("hydration log " + words)
    hits = {h["_id"]: h for h in found.structured_content["hits"]}
    assert hits["log"]["_source"]["text"] == ("hydration log " + words)[:2000]
    assert hits["log"]["text_clipped"] == {"from": 0, "shown": 2000, "chars": whole}
    assert "text_clipped" not in hits["note"] and hits["note"]["_source"]["text"] == "short hydration note"
    assert "hydration" in json.dumps(hits["log"].get("highlight"))  # the passages that matched are still there
    assert {h["_id"]: h["_source"]["text"] for h in wider.structured_content["hits"]} == {"log": "hydra",
                                                                                          "note": "short"}
    assert first.structured_content["text_clipped"] == {"from": 0, "shown": 20_000, "chars": whole}
    assert len(first.structured_content["_source"]["text"]) == 20_000 and len(text(first)) < 25_000
    assert later.structured_content["_source"]["text"] == ("hydration log " + words)[20_000:20_014]
    assert later.structured_content["text_clipped"] == {"from": 20_000, "shown": 14, "chars": whole}
    assert short.structured_content.get("text_clipped") is None
    assert too_many.is_error and "text_chars" in text(too_many)
