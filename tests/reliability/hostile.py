"""Scenario 4: hostile input — fixed cases against a real server, a zip-bomb-like PDF, schemathesis and atheris.

Each fixed case must get an answer below 500 (a 504 only for a query bounded
by its timeout), within its time bound, with the workers' peak memory under
``MEMORY_BOUND``. schemathesis and the coverage-guided fuzzer run in --full only.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

from tests.reliability.common import Client, Result, cleanup, count_signal_deaths, start_server, workdir

MEMORY_BOUND = 1536 << 20  # bytes of peak resident memory per worker
CASE_SECONDS = 30.0


def _raw(port: int, data: bytes, *, send_all: bool = True, timeout: float = 60.0) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was all sent: the status line is what counts
        answer = b""
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split()[1]) if answer.startswith(b"HTTP/") else -1


def _peak_rss(server) -> int:
    peak = 0
    for pid in server.workers():
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) * 1024)
    return peak


def fixed_cases() -> Result:
    result = Result("hostile input, fixed cases", "one server, --workers 2, open mode")
    root = workdir()
    server = start_server(root, workers=2, secured=False)
    c = Client(server.port, timeout=120)
    begin = time.monotonic()
    try:
        c.call("PUT", "/h/_doc/1", {"text": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab river stone"})
        lines = []
        for n in range(20000):
            lines.append('{"index": {"_index": "h", "_id": "%d"}}' % n)
            lines.append(json.dumps({"text": f"word{n} " + "filler " * 60}))
        ten_mb = ("\n".join(lines) + "\n").encode()
        deep = b'{"query": ' + b'{"bool": {"must": [' * 10000 + b"]}}" * 10000 + b"}"
        many = {"query": {"bool": {"should": [{"term": {"text": f"w{n}"}} for n in range(100000)]}}}
        cases = [
            ("10 MB _bulk body", lambda: c.call("POST", "/_bulk", raw=ten_mb,
                                                 headers={"Content-Type": "application/x-ndjson"})[0], {200}),
            ("200 MB body, refused from its Content-Length", lambda: _raw(
                server.port, b"PUT /h/_doc/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 209715200\r\n\r\n" + b" " * 65536), {413}),
            ("JSON nested 10,000 deep", lambda: c.call("POST", "/h/_search", raw=deep)[0], {400}),
            ("NaN in a document", lambda: c.call("PUT", "/h/_doc/nan", raw=b'{"x": NaN}')[0], {400}),
            ("Infinity in a query", lambda: c.call("POST", "/h/_search",
                                                    raw=b'{"query": {"range": {"n": {"gte": Infinity}}}}')[0], {400}),
            ("invalid UTF-8 in the raw path",
             lambda: _raw(server.port, b"GET /h/_doc/\xff\xfe HTTP/1.1\r\n\r\n"), {400}),
            ("invalid percent-encoded path", lambda: c.call("PUT", "/h/_doc/%FF%FE", {"a": 1})[0], {400}),
            ("invalid UTF-8 in a header", lambda: _raw(
                server.port, b"GET /h/_doc/1 HTTP/1.1\r\nHost: x\r\nX-Opaque-Id: \xff\xfe\r\n\r\n"), {200, 400}),
            ("invalid UTF-8 in a body", lambda: c.call("PUT", "/h/_doc/bad", raw=b'{"x": "\xff\xfe"}')[0], {400}),
            ("100,000-clause bool", lambda: c.call("POST", "/h/_search", many)[0], {200, 400}),
            ("catastrophic regexp", lambda: c.call("POST", "/h/_search", {
                "query": {"regexp": {"text": "(a+)+(a+)+(a+)+(a+)+c"}}})[0], {200, 400, 504}),
            # on a text field the pattern runs over every word the text was indexed with
            ("leading-wildcard storm", lambda: c.call("POST", "/h/_search", {
                "query": {"wildcard": {"text": "*a*a*a*a*a*a*a*a*a*a*a*a*c"}}})[0], {200}),
            # on a keyword the pattern runs over terms ("aaa...ab river stone", 29 a's): a regular expression
            # with .* per star backtracked exponentially there (0.2 s at 24 a's, doubling with each more)
            ("leading-wildcard storm on a keyword", lambda: c.call("POST", "/h/_search", {
                "query": {"wildcard": {"text.keyword": "*a*a*a*a*a*a*a*a*a*a*a*a*c"}}})[0], {200}),
        ]
        for name, run, expected in cases:
            start = time.monotonic()
            try:
                status = run()
            except Exception as exc:
                status = -1
                result.notes.append(f"{name}: {exc!r}")
                c.close()
            took = time.monotonic() - start
            result.latencies.append(took)
            result.requests += 1
            if status not in expected or took > CASE_SECONDS:
                result.errors += 1
                result.notes.append(f"{name}: {status} in {took:.1f}s (expected {sorted(expected)})")
            else:
                result.notes.append(f"{name}: {status} in {took:.2f}s")
        peak = _peak_rss(server)
        result.notes.append(f"peak worker memory {peak >> 20} MB (bound {MEMORY_BOUND >> 20} MB)")
        if peak > MEMORY_BOUND:
            result.errors += 1
        if "WORKER TIMEOUT" in server.log_path.read_text():
            result.errors += 1
            result.notes.append("a worker timed out")
    finally:
        server.stop()
        count_signal_deaths(result, root)
        cleanup(root)
    result.duration = time.monotonic() - begin
    return result


def _zip_bomb_pdf(expanded: int) -> bytes:
    stream = zlib.compress(b"0" * expanded, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def zip_bomb_pdf() -> Result:
    """A 1 GB page stream compressed to about a megabyte, parsed by the PDF format under a 2 GB address limit."""
    result = Result("zip-bomb-like PDF", "1 GB of page content deflated to ~1 MB, PDF format parser")
    root = workdir()
    begin = time.monotonic()
    try:
        pdf = root / "bomb.pdf"
        pdf.write_bytes(_zip_bomb_pdf(1 << 30))
        code = ("import resource, sys, time\n"
                "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
                "from xerj_core.autoindex.builtin_formats.pdf import PdfFormat\n"
                "from xerj_core.autoindex.formats import FormatError\n"
                "data = open(sys.argv[1], 'rb').read()\n"
                "try:\n    docs = PdfFormat().parse('bomb.pdf', data, 0)\n"
                "    print('parsed', sum(len(d.text or '') for d in docs))\n"
                "except FormatError as exc:\n    print('refused', exc)\n"
                "from xerj_core.store.residency import peak_rss_mb\n"
                "print('peak', int(peak_rss_mb() * 1024))\n")
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", code, str(pdf)], capture_output=True, text=True, timeout=300)
        took = time.monotonic() - start
        result.latencies.append(took)
        result.requests = 1
        peak_kb = int(proc.stdout.split("peak")[-1]) if "peak" in proc.stdout else -1
        outcome = proc.stdout.splitlines()[0][:160] if proc.stdout else proc.stderr[-300:]
        result.notes.append(f"{outcome}; exit {proc.returncode} in {took:.1f}s, peak {peak_kb >> 10} MB")
        if proc.returncode != 0 or peak_kb < 0 or peak_kb > MEMORY_BOUND >> 10:
            result.errors += 1
    finally:
        cleanup(root)
    result.duration = time.monotonic() - begin
    return result


def schemathesis_run(max_examples: int) -> Result:
    result = Result("schemathesis over /_xerj/openapi.json", f"{max_examples} examples per operation")
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        result.notes.append("schemathesis is not installed (the test extra): skipped")
        return result
    root = workdir()
    server = start_server(root, workers=2, secured=False)
    begin = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run",
                               f"http://127.0.0.1:{server.port}/_xerj/openapi.json",
                               "--checks", "not_a_server_error", f"--max-examples={max_examples}",
                               # NDJSON bodies have no serializer in the CLI; tests/test_http_openapi.py
                               # runs those operations with its own.
                               "--exclude-path-regex", "_bulk|_msearch"],
                              capture_output=True, text=True, timeout=3600, cwd=root)  # its cache stays there
        tail = proc.stdout.strip().splitlines()[-3:]
        result.notes.append(" / ".join(tail)[:400])
        result.requests = max_examples
        if proc.returncode != 0:
            result.errors += 1
    finally:
        server.stop()
        count_signal_deaths(result, root)
        cleanup(root)
    result.duration = time.monotonic() - begin
    return result


def atheris_run(seconds: int) -> Result:
    result = Result("atheris on the format and query DSL parsers", f"{seconds} s per target")
    try:
        import atheris  # noqa: F401
    except ImportError:
        result.notes.append("atheris is not installed (pip install atheris; it needs clang and libFuzzer to "
                            "build): skipped")
        return result
    begin = time.monotonic()
    crashes = Path(__file__).resolve().parents[2] / "tests" / "reliability" / "crashes"
    crashes.mkdir(exist_ok=True)
    for target in ("markdown", "html", "email", "pdf", "latex", "bibtex", "query"):
        # A crashing input is kept under tests/reliability/crashes/, not dropped in the working directory.
        proc = subprocess.run([sys.executable, "-m", "tests.reliability.fuzz", target, f"-max_total_time={seconds}",
                               f"-artifact_prefix={crashes}/{target}-"], capture_output=True, text=True)
        result.requests += 1
        last = (proc.stderr.strip().splitlines() or [""])[-1][:200]
        result.notes.append(f"{target}: exit {proc.returncode}: {last}")
        if proc.returncode != 0:
            result.errors += 1
    result.duration = time.monotonic() - begin
    return result
