"""The PostgreSQL backend beyond the contract: several servers over one database, the edges table and SQL hops,
migrations and a newer schema, a database down at start, connections lost mid-request, a streaming replica."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import XerjError
from xerj_core.store import BulkOp

from .test_http_serve import Server, free_port, request

psycopg = pytest.importorskip("psycopg")

T0 = 1_767_225_600_000
XERJ = [sys.executable, "-c", "from xerj_core.cli import main; main()"]


def engine_on(url: str, local: Path, **config) -> Engine:
    return Engine(local, config=EngineConfig(store_url=url, tail_rows=8, **config))


class PgServer(Server):
    """``xerj serve --store URL`` in a subprocess (open mode, one worker)."""

    def __init__(self, url: str, data_dir: Path, log: Path) -> None:
        super().__init__(data_dir, log, 1, extra=("--store", url))

    @staticmethod
    def maps_data(pid: int) -> bool:
        return True  # a worker answering has opened its engine: the indices are not a file it maps


def test_two_servers_over_one_database_see_each_others_writes_at_once(pg_store_url, tmp_path):
    a = PgServer(pg_store_url, tmp_path / "a", tmp_path / "a.log")
    try:
        b = PgServer(pg_store_url, tmp_path / "b", tmp_path / "b.log")
        try:
            for i in range(20):
                writer, reader = (a, b) if i % 2 else (b, a)
                status, _ = request(writer.port, "PUT", f"/notes/_doc/n{i}", {"text": f"note number {i}", "i": i})
                assert status == 201
                status, body = request(reader.port, "GET", f"/notes/_doc/n{i}")
                assert status == 200 and body["_source"]["i"] == i
                status, body = request(reader.port, "POST", "/notes/_search",
                                       {"query": {"match": {"text": "note"}}, "size": 0})
                assert body["hits"]["total"]["value"] == i + 1
            status, _ = request(a.port, "POST", "/_graph/kb/link",
                                {"src": "x.md", "dst": "y.md", "type": "cites", "valid_at": T0})
            assert status in (200, 201)
            status, body = request(b.port, "GET", f"/_graph/kb/ego?node=x.md&as_of={T0 + 1}")
            assert status == 200 and body["neighbors"] == ["y.md"]
        finally:
            b.stop()
    finally:
        a.stop()


def test_the_edges_table_holds_the_live_edges_and_answers_a_sql_two_hop(pg_store_url, tmp_path):
    with engine_on(pg_store_url, tmp_path / "local") as engine:
        for src, dst in [("a", "b"), ("b", "c"), ("b", "d"), ("c", "e"), ("x", "a")]:
            engine.graph.link("kb", {"src": src, "dst": dst, "type": "cites", "valid_at": T0})
        _, gone = engine.graph.link("kb", {"src": "a", "dst": "z", "type": "cites", "valid_at": T0})
        engine.graph.unlink("kb", gone["edge_id"], T0 + 10)
        reach, _ = engine.graph.reachable("kb", ["a"], hops=2, as_of=T0 + 20, direction="out")
        with psycopg.connect(pg_store_url) as conn:
            rows = conn.execute("SELECT src, dst, invalid_at FROM xerj_edges ORDER BY src, dst").fetchall()
            two_hop = {r[0] for r in conn.execute(
                "SELECT e2.dst FROM xerj_edges e1 JOIN xerj_edges e2 ON e2.ix = e1.ix AND e2.src = e1.dst "
                "WHERE e1.src = 'a' AND e1.valid_at <= %(t)s AND (e1.invalid_at IS NULL OR e1.invalid_at > %(t)s) "
                "AND e2.valid_at <= %(t)s AND (e2.invalid_at IS NULL OR e2.invalid_at > %(t)s) "
                "UNION SELECT dst FROM xerj_edges WHERE src = 'a' AND valid_at <= %(t)s "
                "AND (invalid_at IS NULL OR invalid_at > %(t)s)", {"t": T0 + 20})}
            docs = conn.execute("SELECT count(*) FROM xerj_docs d JOIN xerj_ids i ON i.ix = d.ix AND i.row = d.row "
                                "WHERE d.source::jsonb ->> 'src' = 'b'").fetchone()[0]
    # the unlinked edge is there, invalidated (a new version of its row); every other edge is live
    assert ("a", "z", T0 + 10) in rows and len(rows) == 6
    assert two_hop == {"b", "c", "d"} == set(reach) - {"a"}
    assert docs == 2


def test_a_newer_schema_is_refused_naming_both_versions(pg_store_url, tmp_path):
    from xerj_postgres.schema import SCHEMA_VERSION

    engine_on(pg_store_url, tmp_path / "local").close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        conn.execute("INSERT INTO xerj_schema (version, description, xerj_version) VALUES (99, 'future', '9.0')")
    with pytest.raises(XerjError) as caught:
        engine_on(pg_store_url, tmp_path / "local")
    assert caught.value.status == 503
    assert "schema version 99" in caught.value.reason and f"up to {SCHEMA_VERSION}" in caught.value.reason
    for argv in (["db", "upgrade", "--store", pg_store_url],
                 ["serve", "--store", pg_store_url, "--data-dir", str(tmp_path / "d"), "--insecure"]):
        done = subprocess.run([*XERJ, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "schema version 99" in done.stderr and "Traceback" not in done.stderr


def test_db_upgrade_applies_then_reports_current(pg_store_url):
    first = subprocess.run([*XERJ, "db", "upgrade", "--store", pg_store_url], capture_output=True, text=True)
    again = subprocess.run([*XERJ, "db", "upgrade", "--store", pg_store_url], capture_output=True, text=True)
    status = subprocess.run([*XERJ, "db", "status", "--store", pg_store_url], capture_output=True, text=True)
    assert first.returncode == again.returncode == status.returncode == 0
    assert "schema upgraded to version 1" in first.stdout and "schema is current" in again.stdout
    assert "database schema version 1" in status.stdout


@pytest.mark.parametrize("command", [["serve", "--insecure"], ["autoindex", "."]])
def test_a_database_down_at_start_is_one_clear_error_and_exit_2(tmp_path, command):
    url = f"postgresql://nobody@127.0.0.1:{free_port()}/nothing"
    done = subprocess.run([*XERJ, *command, "--store", url, "--data-dir", str(tmp_path / "d")], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert "is unavailable" in done.stderr and url in done.stderr
    assert "Traceback" not in done.stderr


def _terminate_backends(url: str) -> int:
    """Ends every other client connection and returns how many. With a timeout ``pg_terminate_backend`` returns
    once the backend has exited, not when the signal is sent, and a second pass ends a connection the server's
    pool was still opening during the first: under load, either would otherwise serve the next request."""
    ended = 0
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(2):
            ended += conn.execute("SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE "
                                  "pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchone()[0]
            time.sleep(0.2)
    return ended


def test_a_connection_lost_mid_request_is_503_and_the_pool_recovers(pg_store_url, tmp_path):
    server = PgServer(pg_store_url, tmp_path / "a", tmp_path / "a.log")
    try:
        assert request(server.port, "PUT", "/notes/_doc/1", {"text": "kept"})[0] == 201
        assert _terminate_backends(pg_store_url) >= 1
        status, body = request(server.port, "GET", "/notes/_doc/1")
        assert status == 503, body
        assert body["error"]["type"] == "store_unavailable_exception" and "is unavailable" in body["error"]["reason"]
        time.sleep(0.5)  # the pool replaces its broken connections
        assert request(server.port, "GET", "/notes/_doc/1")[1]["_source"] == {"text": "kept"}
        assert request(server.port, "PUT", "/notes/_doc/2", {"text": "after"})[0] == 201
    finally:
        server.stop()


def test_a_write_lost_mid_transaction_is_503_and_nothing_half_written(pg_store_url, tmp_path):
    from xerj_core.store import BulkOp

    with engine_on(pg_store_url, tmp_path / "local") as engine:
        engine.store.put("docs", {"v": 0}, "first")

        def kill_then_write(txn):
            txn.put("docs", {"v": 1}, "second")
            _terminate_backends(pg_store_url)
            txn.put("docs", {"v": 2}, "third")  # a lookup on the dead connection

        with pytest.raises(XerjError) as caught:
            engine.store.transact(kill_then_write)
        assert caught.value.status == 503
        time.sleep(0.2)
        assert engine.store.get("docs", "second") is None and engine.store.count("docs") == 1
        engine.store.bulk([BulkOp("index", "docs", "third", {"v": 3})])
        assert engine.store.count("docs") == 2


def test_reads_on_a_streaming_replica_see_this_servers_writes(pg_store_url, tmp_path):
    """A replica made with pg_basebackup; every read after a write (read-your-writes) finds it."""
    from xerj_postgres.cluster import Cluster

    replica = Cluster()  # under /tmp: the server user must reach it (pytest's tmp_path is private)
    try:
        replica_url = replica.start_replica_of(pg_store_url) + pg_store_url[pg_store_url.index("?"):]
    except RuntimeError as exc:
        replica.stop()
        pytest.skip(f"no streaming replica could be made here: {exc}")
    try:
        with engine_on(pg_store_url, tmp_path / "local", read_url=replica_url) as engine:
            with engine.store.read_txn() as raw:
                assert raw.conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]  # reads go to the replica
            for i in range(30):
                engine.store.put("rw", {"i": i}, f"d{i}")
                assert engine.store.get("rw", f"d{i}") == ({"i": i}, 1)
                assert engine.store.count("rw") == i + 1
    finally:
        replica.stop()


def test_autoindex_and_a_server_on_the_same_database(pg_store_url, tmp_path):
    """``xerj autoindex --store`` writes the Foam vault into the database; a server on it answers for the brain."""
    from .conftest import CORPORA

    done = subprocess.run([*XERJ, "autoindex", str(CORPORA / "foam-docs"), "--brain", "foam", "--store", pg_store_url,
                           "--data-dir", str(tmp_path / "cli")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(pg_store_url) as conn:
        edges = conn.execute("SELECT count(*) FROM xerj_edges").fetchone()[0]
    assert edges > 100
    server = PgServer(pg_store_url, tmp_path / "srv", tmp_path / "srv.log")
    try:
        status, body = request(server.port, "GET", "/_graph/foam/overview")
        assert status == 200 and body["edges"]["live"] == edges
    finally:
        server.stop()


def test_an_edited_note_writes_only_its_card_and_changed_section_in_the_database(pg_store_url, tmp_path):
    """The standing documents of a changed file are read back in one prefetch and compared on the database too."""
    import json
    import shutil

    from .conftest import CORPORA

    vault = tmp_path / "vault"
    shutil.copytree(CORPORA / "foam-docs", vault, copy_function=shutil.copy2)

    def autoindex() -> dict:
        done = subprocess.run([*XERJ, "autoindex", str(vault), "--brain", "edited", "--store", pg_store_url,
                               "--data-dir", str(tmp_path / "cli"), "--json"], capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = autoindex()
    note = vault / "user/frequently-asked-questions.md"
    note.write_text(note.read_text() + "Fermenting kohlrabi answers this too.\n")
    again = autoindex()
    assert first["documents"] > 600 and again["documents"] == 2 and again["documents_kept"] >= 3


def _ego(engine: Engine, node: str, at: int) -> dict:
    """ego's answer without the instants each store wrote at (two stores, two clocks)."""
    answer = engine.graph.ego("kb", {"node": node, "hops": 2, "as_of": at})
    for edge in answer["edges"]:
        edge.pop("created_at", None), edge.pop("recorded_at", None)
    return answer


def test_ego_on_an_unchanged_store_is_one_round_trip_and_a_stale_guess_runs_again(pg_store_url, tmp_path,
                                                                                   monkeypatch):
    """ego starts on the last snapshot's records and opens its snapshot with its document fetch (one round trip);
    after another process wrote, that guess is wrong and ego runs again on the new snapshot: never a stale answer."""
    from xerj_postgres import env as pg_env

    trips: list[str] = []
    opened = pg_env.ReadTxn.open
    executed = pg_env._Guarded.execute

    def open_(txn, statement=None):
        trips.append("open")
        return opened(txn, statement)

    def execute(guarded, *args, **kwargs):
        trips.append("statement")
        return executed(guarded, *args, **kwargs)

    monkeypatch.setattr(pg_env.ReadTxn, "open", open_)
    monkeypatch.setattr(pg_env._Guarded, "execute", execute)
    with engine_on(pg_store_url, tmp_path / "a") as a, engine_on(pg_store_url, tmp_path / "b") as b:
        for src, dst in [("a", "b"), ("b", "c"), ("c", "d"), ("x", "a")]:
            a.graph.link("kb", {"src": src, "dst": dst, "type": "cites", "valid_at": T0})
        with Engine(tmp_path / "lmdb", config=EngineConfig(tail_rows=8)) as lmdb:
            for src, dst in [("a", "b"), ("b", "c"), ("c", "d"), ("x", "a")]:
                lmdb.graph.link("kb", {"src": src, "dst": dst, "type": "cites", "valid_at": T0})
            first = _ego(a, "a", T0 + 1)  # the process's first read after its writes opens as before
            trips.clear()
            again = _ego(a, "a", T0 + 1)
            assert trips == ["open"]  # the document fetch went with BEGIN: nothing else reached the server
            assert again == first == _ego(lmdb, "a", T0 + 1)
            b.graph.link("kb", {"src": "b", "dst": "e", "type": "cites", "valid_at": T0})
            lmdb.graph.link("kb", {"src": "b", "dst": "e", "type": "cites", "valid_at": T0})
            trips.clear()
            moved = _ego(a, "a", T0 + 1)
            assert trips[0] == "open" and len(trips) > 1  # the guess was wrong: the read ran again
            assert "e" in moved["neighbors"]
            assert moved == _ego(lmdb, "a", T0 + 1)
            # a read that raises on a stale guess (the brain did not exist yet) is checked before it is believed
            a.graph.ego("kb", {"node": "a"})
            b.graph.link("kb2", {"src": "p", "dst": "q", "type": "cites", "valid_at": T0})
            assert a.graph.ego("kb2", {"node": "p", "as_of": T0 + 1})["neighbors"] == ["q"]


def test_a_key_range_deleted_in_a_write_is_gone_for_its_reads_and_after_its_commit(pg_store_url, tmp_path):
    """``delete_prefix`` (how a merge drops a segment) hides the range at once, keeps what is written under it
    afterwards, and leaves the neighbouring ranges alone."""
    from xerj_postgres.store import PgStore

    with PgStore(pg_store_url, local_dir=tmp_path / "local") as store:
        env = store.env

        def fill(txn):
            for prefix in (b"p1", b"p2", b"p3"):
                for i in range(3):
                    txn.put(prefix + bytes([i]), prefix + b"v", db="post")

        env.write(fill)

        def clear(txn):
            txn.put(b"p2\x09", b"pending", db="post")  # written before the range goes, so it goes too
            assert txn.delete_prefix(b"p2", db="post")
            assert txn.get(b"p2\x00", db="post") is None and txn.get(b"p2\x09", db="post") is None
            with txn.cursor(db="post") as cur:
                assert cur.set_range(b"p2") and cur.key() == b"p3\x00"
            txn.put(b"p2\x05", b"new", db="post")
            assert not txn.delete_prefix(b"x", db="ids")  # the id map is walked key by key instead
            with txn.cursor(db="post") as cur:
                assert [k for k, _v in cur] == [b"p1\x00", b"p1\x01", b"p1\x02", b"p2\x05",
                                                b"p3\x00", b"p3\x01", b"p3\x02"]

        env.write(clear)
        with store.read_txn() as raw, raw.cursor(db="post") as cur:
            assert list(cur) == [(b"p1\x00", b"p1v"), (b"p1\x01", b"p1v"), (b"p1\x02", b"p1v"), (b"p2\x05", b"new"),
                                 (b"p3\x00", b"p3v"), (b"p3\x01", b"p3v"), (b"p3\x02", b"p3v")]


def test_ego_node_summaries_are_fetched_in_batches_not_node_by_node(pg_store_url, tmp_path, monkeypatch):
    from xerj_core.graph.brain import nodes_index
    from xerj_postgres import env as pg_env

    statements: list[str] = []
    executed = pg_env._Guarded.execute
    monkeypatch.setattr(pg_env._Guarded, "execute",
                        lambda guarded, *args, **kwargs: statements.append(args[0]) or executed(guarded, *args, **kwargs))
    edges = [("hub", f"n{i}") for i in range(30)]
    answers = []
    for engine in (engine_on(pg_store_url, tmp_path / "pg"), Engine(tmp_path / "lmdb", config=EngineConfig(tail_rows=8))):
        with engine:
            for i in range(0, 30, 2):  # every other node has a document; the rest are dangling
                engine.store.put(nodes_index("kb"), {"title": f"note {i}", "text": f"body {i}"}, f"n{i}")
            for src, dst in edges:
                engine.graph.link("kb", {"src": src, "dst": dst, "type": "cites", "valid_at": T0})
            engine.graph.ego("kb", {"node": "hub", "as_of": T0 + 1, "include_nodes": True})  # the caches, warm
            statements.clear()
            answer = engine.graph.ego("kb", {"node": "hub", "as_of": T0 + 1, "include_nodes": True})
            for edge in answer["edges"]:
                edge.pop("created_at", None), edge.pop("recorded_at", None)
            answers.append(answer)
            if len(answers) == 1:
                assert len(statements) <= 4, statements  # ids, then documents: not one round trip per node
    assert answers[0] == answers[1]
    assert answers[0]["not_shown"]["dangling_nodes"] == 16 and len(answers[0]["nodes"]) == 15  # the hub has none


def test_a_write_commits_synchronously_even_when_the_server_default_is_off(pg_store_url, tmp_path):
    """Sessions whose default is synchronous_commit off: xerj's own write transactions still wait for their WAL
    to be on disk, so an acknowledged write survives a crash whatever the server's default."""
    from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

    from xerj_postgres.store import PgStore

    parts = urlsplit(pg_store_url)
    query = parse_qs(parts.query)
    query["options"] = [" ".join(query.get("options", []) + ["-csynchronous_commit=off"])]
    url = urlunsplit(parts._replace(query=urlencode(query, doseq=True, quote_via=quote)))
    with psycopg.connect(url) as conn:
        session_default = conn.execute("SHOW synchronous_commit").fetchone()[0]
    with PgStore(url, local_dir=tmp_path / "local") as store:
        seen = store.env.write(lambda txn: txn.conn.execute("SHOW synchronous_commit").fetchone()[0])
        store.put("notes", {"text": "kept"}, "n1")
        assert store.get("notes", "n1") == ({"text": "kept"}, 1)
    assert session_default == "off" and seen == "on"


def test_a_large_write_streams_its_rows_and_stores_what_lmdb_stores(pg_store_url, tmp_path, monkeypatch):
    """A bulk large enough to stream its new rows while the rest is prepared: a document written twice in it (a
    streamed row then replaced), an index deleted after its rows were streamed, and a write failing after
    streaming (nothing of it stays) leave the database answering exactly as LMDB does."""
    from xerj_postgres import kv
    from xerj_core.store import BulkOp

    streamed = []
    original = kv.Streamer.send
    monkeypatch.setattr(kv.Streamer, "send", lambda self, db, puts: streamed.append((db, len(puts))) or
                        original(self, db, puts))
    monkeypatch.setattr(kv.Txn, "STREAM_MIN", 64)
    monkeypatch.setattr("xerj_core.store.write.DEFERRED_CHUNK", 128)
    ops = [BulkOp("index", "docs", f"d{i % 900}", {"text": f"word{i % 37} note {i}", "n": i}) for i in range(1000)]
    ops += [BulkOp("index", "gone", f"g{i}", {"text": "x"}) for i in range(300)]
    with engine_on(pg_store_url, tmp_path / "pg") as pg, Engine(tmp_path / "lmdb", config=EngineConfig(
            tail_rows=8)) as lmdb:
        for engine in (pg, lmdb):
            engine.store.bulk(ops)

            def fails(txn):
                txn.index("docs").put_many([({"text": "never"}, f"f{i}", "index") for i in range(500)])
                raise RuntimeError("after streaming")

            with pytest.raises(RuntimeError):
                engine.store.transact(fails)

            def delete_after_streaming(txn):
                txn.index("gone").put_many([({"text": "y"}, f"h{i}", "index") for i in range(300)])
                txn.delete_index("gone")

            engine.store.transact(delete_after_streaming)
            engine.store.bulk(ops[:400])
        assert {db for db, _n in streamed} >= {"src", "ids"}
        body = {"query": {"match": {"text": "word3 note"}}, "size": 20, "sort": ["_score", "n"]}
        answers = [e.search.search("docs", body)["hits"] for e in (pg, lmdb)]
        assert answers[0] == answers[1] and answers[0]["total"]["value"] == 900
        for doc_id in ("d0", "d99", "d899", "f0"):
            assert pg.store.get("docs", doc_id) == lmdb.store.get("docs", doc_id)
        assert not pg.store.exists("gone") and pg.store.get("docs", "f1") is None
        with psycopg.connect(pg_store_url) as conn:
            # the rows streamed and then replaced in the same bulk were deleted again: one row per live document
            assert conn.execute("SELECT count(*) FROM xerj_ids").fetchone()[0] == 900
            assert conn.execute("SELECT count(*) FROM xerj_docs").fetchone()[0] == 900


def test_merges_read_the_segments_this_process_wrote_from_memory_and_another_writer_ends_that(pg_store_url,
                                                                                               tmp_path, monkeypatch):
    """A write process keeps the sealed segments it wrote (columns and postings), so its next merges read none of
    them from the server; once another process has written, it reads them afresh. Every step answers as LMDB,
    which gets the same writes: overwrites and deletes merged into kept segments, a compaction, a stale cache."""
    from xerj_core.store import BulkOp
    from xerj_postgres import kv

    def ops(lo, hi, salt):
        return [BulkOp("index", "docs", f"d{i}", {"text": f"word{(i * salt) % 23} note{i % 5} {salt}", "n": i})
                for i in range(lo, hi)]

    with engine_on(pg_store_url, tmp_path / "a") as a, engine_on(pg_store_url, tmp_path / "b") as b, \
            Engine(tmp_path / "lmdb", config=EngineConfig(tail_rows=8)) as lmdb:
        segment_tables = {id(a.store.env.tables[name]) for name in ("cols", "post")}
        fetched = []
        for method in ("scan", "send_many", "get", "load"):
            original = getattr(type(a.store.env.tables["post"]), method)

            def counted(self, conn, *args, original=original, method=method):
                found = original(self, conn, *args)
                if id(self) in segment_tables and (method != "scan" or len(found) > kv.PROBE_BATCH):
                    fetched.append(method)  # a point read, or a scan beyond a probe past a kept segment's end
                return found

            monkeypatch.setattr(type(a.store.env.tables["post"]), method, counted)

        def both(writer, batch):
            for engine in (writer, lmdb):
                items = engine.store.bulk(batch)
                assert not any(item.error for item in items)

        def same():
            for query in ("word3 note1", "note4", "word7", "3"):
                body = {"query": {"match": {"text": query}}, "size": 30, "sort": ["_score", "n"]}
                assert a.search.search("docs", body)["hits"] == lmdb.search.search("docs", body)["hits"]
            assert a.store.count("docs") == lmdb.store.count("docs")

        both(a, ops(0, 100, 1))
        fetched.clear()
        both(a, ops(100, 260, 2) + ops(10, 40, 3))  # merges of segments a wrote, overwrites among them
        assert fetched == []
        same()
        for engine in (a, lmdb):
            engine.store.delete("docs", "d5")
            engine.store.forcemerge("docs")
        fetched.clear()
        both(a, ops(260, 330, 4))
        assert fetched == []
        same()
        both(b, ops(0, 50, 5) + ops(330, 400, 5))  # another process writes: what a keeps is stale
        fetched.clear()
        both(a, ops(400, 480, 6))
        assert fetched  # read afresh from the tables
        same()


def counted_statements(monkeypatch) -> list[str]:
    """The SQL of every statement the PostgreSQL store executes from now on, in order (cleared by the caller)."""
    from xerj_postgres import env as pg_env

    statements: list[str] = []
    executed = pg_env._Guarded.execute
    def counted(guarded, *args, **kwargs):
        statements.append(args[0])
        return executed(guarded, *args, **kwargs)
    monkeypatch.setattr(pg_env._Guarded, "execute", counted)
    return statements


def notes_on_both(pg_store_url, tmp_path, texts: list[str]):
    """An engine on PostgreSQL, then one on LMDB (8-row tails: several segments), each open, with ``texts`` in an
    index ``notes`` (ids ``n0``, ``n1``, ...)."""
    lmdb_engine = Engine(tmp_path / "lmdb", config=EngineConfig(tail_rows=8))
    for engine in (engine_on(pg_store_url, tmp_path / "pg"), lmdb_engine):
        with engine:
            engine.store.create_index("notes", {"properties": {"text": {"type": "text"}}})
            engine.store.bulk([BulkOp("index", "notes", f"n{i}", {"text": text}) for i, text in enumerate(texts)])
            yield engine


def test_a_phrase_reads_its_candidate_rows_in_batches_and_finds_what_lmdb_finds(pg_store_url, tmp_path, monkeypatch):
    """match_phrase reads the source of every row holding its words: on PostgreSQL that is a batched fetch, not a
    round trip per row, and the hits and scores are LMDB's."""
    statements = counted_statements(monkeypatch)
    texts = [f"note {i}: the graph view {'shows' if i % 3 else 'hides'} view graph links" for i in range(60)]
    answers = []
    for engine in notes_on_both(pg_store_url, tmp_path, texts):
        body = {"query": {"match_phrase": {"text": "graph view hides"}}, "size": 100, "_source": False}
        engine.search.search("notes", body)  # the caches, warm
        statements.clear()
        found = engine.search.search("notes", body)["hits"]["hits"]
        answers.append({hit["_id"]: round(hit["_score"], 9) for hit in found})
        if len(answers) == 1:
            assert 0 < len(statements) <= 6, statements  # 60 candidate rows: not one round trip each
    assert answers[0] == answers[1] and set(answers[0]) == {f"n{i}" for i in range(0, 60, 3)}


def test_a_text_pattern_fetches_its_terms_postings_at_once_and_finds_what_lmdb_finds(pg_store_url, tmp_path,
                                                                                     monkeypatch):
    """A prefix or wildcard on a text field lists each segment's words once, then fetches the postings of the
    words it matched in every segment in one round trip, not one per word and segment."""
    statements = counted_statements(monkeypatch)
    texts = [f"note{i} graph{i % 7} {'graphical' if i % 2 else 'photograph'}" for i in range(60)]
    answers = []
    for engine in notes_on_both(pg_store_url, tmp_path, texts):
        engine.store.put("notes", {"text": "graph0 in the tail"}, "tail")
        found = {}
        for query in ({"prefix": {"text": "graph"}}, {"wildcard": {"text": "note?"}}, {"wildcard": {"text": "*3"}}):
            body = {"query": query, "size": 100, "_source": False}
            engine.search.search("notes", body)  # each segment's words, listed
            statements.clear()
            found[str(query)] = sorted(hit["_id"] for hit in engine.search.search("notes", body)["hits"]["hits"])
            if not answers:
                assert 0 < len(statements) <= 4, (query, statements)
        answers.append(found)
    assert answers[0] == answers[1]
    assert answers[0][str({"wildcard": {"text": "note?"}})] == [f"n{i}" for i in range(10)]
    assert len(answers[0][str({"prefix": {"text": "graph"}})]) == 61


def test_delete_by_query_deletes_what_it_matched_as_on_lmdb(pg_store_url, tmp_path):
    texts = [f"note {i} {'keep' if i % 3 else 'drop'}" for i in range(40)]
    answers = []
    for engine in notes_on_both(pg_store_url, tmp_path, texts):
        status, body = engine.search.delete_by_query("notes", {"query": {"match": {"text": "drop"}}},
                                                     params={"scroll_size": "5"})
        left = engine.search.search("notes", {"size": 100, "_source": False})["hits"]["hits"]
        answers.append((status, body["deleted"], body["batches"], sorted(hit["_id"] for hit in left)))
    assert answers[0] == answers[1]
    assert answers[0][:3] == (200, 14, 3) and len(answers[0][3]) == 26
