"""MCP benchmark: what `xerj mcp` over stdio adds to recall and ego, against the same calls over HTTP.

Run: python tests/bench/bench_mcp.py [--memories N] [--rounds R] [--realtime] [--hops R]

A secured `xerj serve` (one worker) gets N memories in namespace `bench` and
a brain of N/2 edges; a key scoped to that namespace is minted. Each round
times one `xerj_memory_recall` and one `xerj_brain_ego` through the SDK's stdio
client (`xerj mcp --url ... --api-key ...`), the very same requests over one
keep-alive HTTP connection (the baseline), and each tool's floor, in a
shuffled order so outside load hits them all alike. The figure is MCP's p50
minus HTTP's p50 per call (target: at most 2 ms); the ratio is MCP's p50 over
HTTP's.

A tool's floor is the same call with a misspelled argument, refused inside
`xerj mcp`: the SDK's stdio transport and dispatch on both ends, before any
request reaches xerj. On a loaded machine every process wake-up waits for a
core; an MCP call has two wake-ups more than an HTTP one (the `xerj mcp`
process, for the request and for the server's answer) and the floor has two,
so `added - floor` is then the steadier figure. The `xerj mcp` process's CPU
time per call is
inflated by the load far less than wall time is. `--realtime` (root) runs the
benchmark's processes under SCHED_FIFO, so that other work on a shared
machine does not delay their wake-ups; both sides of each comparison run so.

After the rounds, one ego answer is costed in process, step by step, on each
side: what the baseline's client does with it (``json.loads``), what `xerj mcp`
does (parse it, the SDK's per-version sieve of the result, the wire line) and
what the SDK's stdio client does with that line (its JSON-RPC parse, beside the
same line parsed as a response alone, its sieve, its result model and its
output schema check): the part of "added" that grows with the answer; the
answer's bytes over HTTP and on the MCP wire, with and without the text twin.

Then (``--hops R``, default 100) R more calls of each tool are timed hop by hop
from timestamps both processes take on one clock (``mcp_hops.py``): where the
time MCP adds goes, and whose code spends it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil
from mcp import Client, StdioServerParameters

NS = "bench"
WORDS = ("starter flour rye water salt oven crust crumb proof knead dough yeast levain bake loaf hydration "
         "autolyse fold shape score steam bench banneton").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Http:
    """One keep-alive connection: the cheapest honest HTTP client there is."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"ApiKey {key}", "Content-Type": "application/json"}

    def __call__(self, method: str, path: str, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:300]!r}")
        return json.loads(data)


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    xerj = shutil.which("xerj") or str(Path(sys.executable).with_name("xerj"))
    proc = subprocess.Popen([xerj, "serve", "--data-dir", str(data_dir), "--port", str(port), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        key_file = data_dir / "admin.key"
        if key_file.exists():
            try:
                Http(port, key_file.read_text().strip())("GET", "/")
                return proc
            except (OSError, RuntimeError):
                pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("xerj serve did not start")


def seed(admin: Http, memories: int) -> str:
    rng = random.Random(5)
    lines = []
    for i in range(memories):
        doc = {"text": " ".join(rng.choice(WORDS) for _ in range(12)), "stored_at": 1_767_225_600_000 + i}
        lines.append(json.dumps({"index": {"_index": f".xerj-memory-{NS}"}}))
        lines.append(json.dumps(doc))
    # The first store creates the namespace with its mapping; the rest go in through _bulk.
    admin("POST", f"/_memory/{NS}", {"text": "the starter is fed at dawn"})
    admin.conn.request("POST", "/_bulk?refresh=true", body="\n".join(lines) + "\n",
                       headers={**admin.headers, "Content-Type": "application/x-ndjson"})
    resp = admin.conn.getresponse()
    resp.read()
    nodes = max(10, memories // 10)
    for i in range(memories // 2):
        src = i % nodes
        dst = (src + 1 + rng.randrange(nodes - 1)) % nodes
        admin("POST", f"/_graph/{NS}/link", {"src": f"n{src}", "dst": f"n{dst}",
                                             "type": rng.choice(["wikilink", "mdlink", "sequence"])})
    minted = admin("POST", "/_security/api_key", {"name": "bench-agent", "role_descriptors": {"b": {"indices": [
        {"names": [f".xerj-memory-{NS}", f".xerj-memory-{NS}-edges"], "privileges": ["read", "write"]}]}}})
    return minted["encoded"]


# Each call: the tool and its arguments, and the same request over HTTP.
CALLS = {
    "recall": lambda q, n: (("xerj_memory_recall", {"namespace": NS, "query": q, "k": 10}),
                            ("POST", f"/_memory/{NS}/_recall", {"query": q, "k": 10})),
    "ego": lambda q, n: (("xerj_brain_ego", {"brain": NS, "node": n, "hops": 2}),
                         ("GET", f"/_graph/{NS}/ego?node={n}&hops=2&direction=both&include_nodes=true", None)),
}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(proc: psutil.Process) -> float:
    """The process's CPU time: the scheduler's nanosecond count where Linux has it, else user + system ticks."""
    try:
        with open(f"/proc/{proc.pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except OSError:
        times = proc.cpu_times()
        return times.user + times.system


def raw_get(http: Http, path: str) -> bytes:
    http.conn.request("GET", path, headers=http.headers)
    return http.conn.getresponse().read()


def _median_us(call, calls: int = 300) -> float:
    samples = []
    for _ in range(calls):
        started = time.process_time_ns()
        call()
        samples.append(time.process_time_ns() - started)
    return statistics.median(samples) / 1e3


def answer_costs(body: bytes, version: str, output_schema: dict | None) -> dict[str, float]:
    """CPU µs (medians) that one answer costs each side's code, in this process, beyond the transport.

    The line is the one ``xerj mcp`` writes for this answer (its own functions: the text twin is the
    answer's text, the SDK's runner sieves the result for ``version``); the client side is the SDK's
    stdio client's own steps on that line, in its order.
    """
    import orjson
    from jsonschema import Draft202012Validator
    from mcp.types import CallToolResult, JSONRPCResponse, jsonrpc_message_adapter
    from mcp_types import methods
    from pydantic import TypeAdapter
    from xerj_mcp.stdio import wire_line

    data = orjson.loads(body)
    result = {"content": [{"type": "text", "text": body.decode()}], "structuredContent": data,
              "isError": False, "resultType": "complete"}
    sieved = methods.serialize_server_result("tools/call", version, result)
    line = wire_line(JSONRPCResponse(jsonrpc="2.0", id=7, result=sieved))
    text = line.decode()
    raw = jsonrpc_message_adapter.validate_json(text, by_name=False).result
    single = TypeAdapter(JSONRPCResponse)
    schema = Draft202012Validator(output_schema or {})
    bare = methods.serialize_server_result("tools/call", version, {**result, "content": []})
    return {
        "line bytes": len(line),
        "line bytes without the text twin": len(wire_line(JSONRPCResponse(jsonrpc="2.0", id=7, result=bare))),
        "baseline: json.loads of the HTTP body": _median_us(lambda: json.loads(body)),
        "server: orjson.loads of the answer": _median_us(lambda: orjson.loads(body)),
        "server: the SDK's result sieve": _median_us(
            lambda: methods.serialize_server_result("tools/call", version, result)),
        "server: the wire line (orjson)": _median_us(
            lambda: wire_line(JSONRPCResponse(jsonrpc="2.0", id=7, result=sieved))),
        "client: the SDK's JSON-RPC parse of the line": _median_us(
            lambda: jsonrpc_message_adapter.validate_json(text, by_name=False)),
        "  (the same line parsed as a response alone)": _median_us(lambda: single.validate_json(text, by_name=False)),
        "client: the SDK's result sieve": _median_us(lambda: methods.validate_server_result("tools/call", version, raw)),
        "client: the result model": _median_us(lambda: CallToolResult.model_validate(raw, by_name=False)),
        "client: the output schema check": _median_us(lambda: list(schema.iter_errors(raw["structuredContent"]))),
    }


async def measure(port: int, key: str, rounds: int) -> tuple[dict[str, dict[str, list[float]]],
                                                             dict[str, dict[str, float]], dict[str, float], bytes]:
    xerj = shutil.which("xerj") or str(Path(sys.executable).with_name("xerj"))
    params = StdioServerParameters(command=xerj, args=["mcp", "--url", f"http://127.0.0.1:{port}", "--api-key", key])
    http_call = Http(port, key)
    rng = random.Random(9)
    calls = CALLS
    sides = ("http", "mcp", "floor")
    times = {name: {side: [] for side in sides} for name in calls}
    cpu = {name: {"mcp": 0.0, "floor": 0.0} for name in calls}
    me = psutil.Process()
    async with Client(params, read_timeout_seconds=120) as client:
        mcp_proc = next(p for p in me.children(recursive=True) if "mcp" in p.cmdline())
        for i in range(rounds + 20):  # the first 20 warm every path up and are not counted
            query, node = " ".join(rng.sample(WORDS, 2)), f"n{rng.randrange(50)}"
            jobs = [(name, side) for name in calls for side in sides]
            rng.shuffle(jobs)
            for name, side in jobs:
                (tool, args), request = calls[name](query, node)
                before = cpu_seconds(mcp_proc)
                t0 = time.perf_counter()
                if side == "http":
                    http_call(*request)
                else:
                    # The floor: the same tool with a misspelled argument, refused without leaving `xerj mcp`.
                    result = await client.call_tool(tool, {**args, "misspelled": 1} if side == "floor" else args)
                    if result.is_error != (side == "floor"):
                        raise SystemExit(f"{tool}: {result.content[0].text}")
                elapsed = (time.perf_counter() - t0) * 1000
                if i >= 20:
                    times[name][side].append(elapsed)
                    if side != "http":
                        cpu[name][side] += cpu_seconds(mcp_proc) - before
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        version = client.protocol_version
    body = raw_get(http_call, calls["ego"]("", "n1")[1][1])
    costs = answer_costs(body, version, tools["xerj_brain_ego"].output_schema)
    return times, {name: {side: spent * 1000 / rounds for side, spent in by.items()} for name, by in cpu.items()}, \
        costs, body


# (from event, to event, what happens in between, whose code it is)
HOPS = (("call", "client write", "the SDK client: request model, dispatch, the line", "SDK client"),
        ("client write", "server read", "pipe, and `xerj mcp` wakes up", "pipes and wake-ups"),
        ("server read", "server parsed", "`xerj mcp`: the SDK's parse of the request line", "SDK server"),
        ("server parsed", "server tool", "`xerj mcp`: the SDK's dispatch, middleware, argument model", "SDK server"),
        ("server tool", "server sent", "`xerj mcp`: the tool builds and sends its HTTP request", "xerj mcp's own"),
        ("server sent", "server answered", "`xerj serve` answers (loopback HTTP round trip)", "xerj serve"),
        ("server answered", "server loaded", "`xerj mcp`: orjson parses the answer", "xerj mcp's own"),
        ("server loaded", "server returned", "`xerj mcp`: the tool wraps the answer as its result", "xerj mcp's own"),
        ("server returned", "server write", "`xerj mcp`: the SDK's output check and result sieve", "SDK server"),
        ("server write", "server line", "`xerj mcp`: the wire line (orjson)", "xerj mcp's own"),
        ("server line", "server written", "`xerj mcp`: the line into the pipe", "xerj mcp's own"),
        ("server written", "client chunk", "pipe, and the client wakes up", "pipes and wake-ups"),
        ("client chunk", "client chunk*", "the client reads the rest of the line", "SDK client"),
        ("client chunk*", "client parse", "the client splits the line off", "SDK client"),
        ("client parse", "client parsed", "the SDK client's JSON-RPC parse", "SDK client"),
        ("client parsed", "done", "the SDK client: dispatch, result sieve, model, output schema check", "SDK client"))


async def hop_timeline(port: int, key: str, calls: dict, rounds: int) -> dict[str, dict]:
    """Each hop's median over ``rounds`` calls of each tool, from timestamps both processes take (mcp_hops.py)."""
    import mcp_hops

    mcp_hops.client_hooks()
    with tempfile.NamedTemporaryFile(prefix="xerj-hops-", suffix=".tsv", delete=False) as f:
        path = f.name
    params = StdioServerParameters(
        command=sys.executable, args=[str(Path(mcp_hops.__file__)), "mcp", "--url", f"http://127.0.0.1:{port}",
                                      "--api-key", key], env={"XERJ_BENCH_HOPS": path})
    http_call = Http(port, key)
    rng = random.Random(11)
    spans: dict[str, list[tuple[int, int]]] = {name: [] for name in calls}
    http_times: dict[str, list[float]] = {name: [] for name in calls}
    async with Client(params, read_timeout_seconds=120) as client:
        for i in range(rounds + 20):
            query, node = " ".join(rng.sample(WORDS, 2)), f"n{rng.randrange(50)}"
            for name, make in calls.items():
                (tool, args), request = make(query, node)
                t0 = time.perf_counter()
                http_call(*request)
                http_ms = (time.perf_counter() - t0) * 1000
                start = mcp_hops.now()
                mcp_hops.stamp("call")
                await client.call_tool(tool, args)
                mcp_hops.stamp("done")
                if i >= 20:
                    spans[name].append((start, mcp_hops.now()))
                    http_times[name].append(http_ms)
    server = mcp_hops.read_stamps(path)
    os.unlink(path)
    stamps = sorted(mcp_hops.STAMPS + server, key=lambda s: s[1])
    out = {}
    for name, windows in spans.items():
        per_hop: dict[str, list[float]] = {label: [] for _, _, label, _ in HOPS}
        sizes: dict[str, int] = {}
        totals = []
        for start, end in windows:
            seen: dict[str, int] = {}
            for event, ns, size in stamps:
                if start <= ns <= end:
                    if event == "client chunk" and event in seen:
                        event = "client chunk*"
                    seen[event] = ns
                    if size:
                        sizes[event] = size
            seen.setdefault("client chunk*", seen.get("client chunk", 0))
            if not all(a in seen and b in seen for a, b, _, _ in HOPS):
                continue
            for a, b, label, _ in HOPS:
                per_hop[label].append((seen[b] - seen[a]) / 1e3)
            totals.append((seen["done"] - seen["call"]) / 1e3)
        out[name] = {"hops": {label: statistics.median(v) for label, v in per_hop.items() if v},
                     "total": statistics.median(totals), "http": statistics.median(http_times[name]) * 1000,
                     "calls": len(totals), "sizes": sizes}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--realtime", action="store_true",
                        help="run this process and its children (xerj serve, xerj mcp) under SCHED_FIFO (root): on a "
                             "shared machine other work then no longer delays their wake-ups, for both sides alike")
    parser.add_argument("--hops", type=int, default=100, metavar="R",
                        help="after the rounds, R calls of each tool timed hop by hop (0: none)")
    args = parser.parse_args()
    if args.realtime:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))
    with tempfile.TemporaryDirectory(prefix="xerj-bench-mcp-") as tmp:
        port = free_port()
        server = start_server(Path(tmp) / "data", port)
        try:
            admin = Http(port, (Path(tmp) / "data" / "admin.key").read_text().strip())
            key = seed(admin, args.memories)
            load_before = os.getloadavg()[0]
            times, cpu, costs, body = anyio.run(measure, port, key, args.rounds)
            hops = anyio.run(hop_timeline, port, key, CALLS, args.hops) if args.hops else {}
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    print(f"bench_mcp: {args.memories} memories, {args.memories // 2} edges, {args.rounds} shuffled rounds; "
          f"one gunicorn worker; load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, "
          f"on {os.cpu_count()} CPUs{'; SCHED_FIFO' if args.realtime else ''}")
    print(f"{'call':<8}{'HTTP p50':>10}{'MCP p50':>10}{'added':>9}{'ratio':>8}{'floor':>9}{'added-floor':>13}"
          f"{'HTTP p95':>10}{'MCP p95':>10}{'mcp CPU':>10}   target: added p50 <= 2 ms")
    for name, got in times.items():
        h50, m50, f50 = (statistics.median(got[side]) for side in ("http", "mcp", "floor"))
        print(f"{name:<8}{h50:>8.2f}ms{m50:>8.2f}ms{m50 - h50:>7.2f}ms{m50 / h50:>7.2f}x{f50:>7.2f}ms"
              f"{m50 - h50 - f50:>11.2f}ms{pct(got['http'], 0.95):>8.2f}ms{pct(got['mcp'], 0.95):>8.2f}ms"
              f"{cpu[name]['mcp']:>8.2f}ms   {'met' if m50 - h50 <= 2 else 'MISSED'}")
    print("floor: the same tool refused for a misspelled argument inside `xerj mcp` (no HTTP), its CPU there: "
          + ", ".join(f"{name} {by['floor']:.2f}ms" for name, by in cpu.items()))
    print("mcp CPU: the `xerj mcp` process's CPU time per call")
    print(f"\nwhat one ego answer ({len(body)} bytes over HTTP; {costs.pop('line bytes')} bytes on the MCP wire, of "
          f"which the line without its text twin {costs.pop('line bytes without the text twin')}) costs each side's "
          f"code, in process, CPU µs medians:")
    for name, spent in costs.items():
        print(f"  {spent:8.1f}  {name}")
    server = sum(v for k, v in costs.items() if k.startswith("server:"))
    client = sum(v for k, v in costs.items() if k.startswith("client:"))
    print(f"  server {server:.0f} µs, client {client:.0f} µs, against the baseline's parse "
          f"{costs['baseline: json.loads of the HTTP body']:.0f} µs")

    for name, got in hops.items():
        print(f"\n{name}, hop by hop ({got['calls']} calls, medians in µs; the stamps themselves cost a few µs): "
              f"MCP {got['total']:.0f} against HTTP {got['http']:.0f}, added {got['total'] - got['http']:.0f}; "
              f"HTTP answer {got['sizes'].get('server loaded', 0)} bytes, MCP line "
              f"{got['sizes'].get('server line', 0)} bytes")
        for label, spent in got["hops"].items():
            print(f"  {spent:8.1f}  {label}")
        backend = got["hops"][HOPS[5][2]]
        print(f"  {got['total'] - backend:8.1f}  all but `xerj serve`'s answer; HTTP's client side beyond that answer "
              f"~{got['http'] - backend:.0f}")
        owners: dict[str, float] = {}
        for _, _, label, owner in HOPS:
            if owner != "xerj serve":
                owners[owner] = owners.get(owner, 0.0) + got["hops"][label]
        print("  by whose code (sums of medians): " + ", ".join(f"{owner} {spent:.0f}" for owner, spent in owners.items())
              + f"; less the HTTP baseline's own client ~{got['http'] - backend:.0f}")


if __name__ == "__main__":
    main()
