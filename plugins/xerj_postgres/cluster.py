"""A throwaway PostgreSQL cluster on loopback, under a temporary directory: for tests, benchmarks and CI.

``python -m xerj_postgres.cluster`` starts one and prints ``XERJ_TEST_PG_URL=...``
(and the directory to remove); ``with Cluster() as url:`` does the same in code.
Debian's server binaries (``/usr/lib/postgresql/<major>/bin``) are found on
their own; the server refuses to run as root, so as root it runs as the
``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path


def find_bindir() -> Path | None:
    """The newest installed server's binaries (``initdb``, ``pg_ctl``), or None when none is installed."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent  # a symlink on PATH (/usr/local/bin) to the real folder
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """``initdb`` + ``pg_ctl start`` on a free loopback port; :meth:`stop` removes everything again."""

    def __init__(self, root: str | Path | None = None, *, port: int | None = None, bindir: Path | None = None,
                 durable: bool = False) -> None:
        """``durable``: keep fsync and synchronous commit on (benchmarks); tests throw the cluster away, so off."""
        self.bindir = bindir or find_bindir()
        if self.bindir is None:
            raise RuntimeError("no PostgreSQL server is installed (apt-get install postgresql)")
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="xerj-pg-"))
        self.data = self.root / "data"
        self.port = port or free_port()
        self.durable = durable
        self.user = "postgres" if os.geteuid() == 0 else None
        self.url = f"postgresql://{self.user or pwd.getpwuid(os.geteuid()).pw_name}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise RuntimeError(f"{args[0]} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")

    def start(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.root, self.user, self.user)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user or pwd.getpwuid(os.geteuid()).pw_name,
                  "--no-sync", "-E", "UTF8", "--locale", "C")
        with open(self.data / "postgresql.conf", "a") as conf:
            # Loopback only, sockets in our own folder; fsync off: the cluster is thrown away after the run.
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.root}'\nmax_connections = 200\nshared_buffers = 128MB\n"
                       "wal_level = replica\nmax_wal_senders = 4\n")
            if not self.durable:
                conf.write("fsync = off\nfull_page_writes = off\nsynchronous_commit = off\n")
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")
        return self.url

    def start_replica_of(self, primary: str) -> str:
        """Start this cluster as a streaming replica of the cluster at ``primary`` (``pg_basebackup -R``)."""
        from urllib.parse import urlsplit

        parts = urlsplit(primary)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.root, self.user, self.user)
        self._run("pg_basebackup", "-D", str(self.data), "-R", "-X", "stream", "-h", parts.hostname or "127.0.0.1",
                  "-p", str(parts.port or 5432), "-U", parts.username or "postgres", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nunix_socket_directories = '{self.root}'\nhot_standby = on\n")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")
        self.url = f"postgresql://{parts.username or 'postgres'}@127.0.0.1:{self.port}{parts.path or '/postgres'}"
        return self.url

    def stop(self) -> None:
        if self.data.exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    """``start [DIR]`` prints the URL and directory; ``stop DIR`` stops and removes it."""
    if argv[:1] == ["stop"] and len(argv) == 2:
        cluster = Cluster(argv[1])
        cluster.stop()
        return 0
    cluster = Cluster(argv[0] if argv else None)
    url = cluster.start()
    print(f"XERJ_TEST_PG_URL={url}")
    print(f"XERJ_TEST_PG_DIR={cluster.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
