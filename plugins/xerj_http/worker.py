"""The gunicorn worker ``xerj serve`` runs: threads for requests, a poller for idle sockets, ES-shaped server errors.

gunicorn's ``gthread`` worker already keeps kept-alive connections in a
selector, but hands every freshly accepted connection to a thread that waits
up to five seconds for its first bytes: a thousand idle connections then
queue real requests behind them, and a few dozen clients that stop halfway
through their headers hold every thread. Here a connection, new or kept
alive, stays in the poller until its whole request head has arrived (the
bytes read meanwhile are handed to gunicorn's parser), so only requests that
can be parsed at once take a thread; a client that never finishes its head is
closed when its keep-alive deadline passes. A thread reading a body gives up
on a client silent for ``READ_TIMEOUT`` seconds. Errors gunicorn answers
itself (a bad request line, a request line or headers over the limits) get
the same JSON body as every other error.
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from functools import partial

import orjson
from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import TConn, ThreadWorker

from xerj_core.errors import es_error_body

# Seconds a thread waits on a silent client mid-request before closing the connection.
READ_TIMEOUT = 30.0

# Bytes of a request head gathered in the poller; a longer head goes to a thread, whose parser
# refuses it against gunicorn's limits (or reads it, when the limits were raised).
HEAD_GATHER_LIMIT = 64 << 10

# A head ends with an empty line; a bare-LF one is left for the parser to judge rather than held.
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


class _TimedSocket(socket.socket):
    """A client socket whose blocking mode carries a timeout, so no read or write blocks a thread for ever.

    gunicorn switches a connection to blocking before reading a request;
    here that means "blocking, at most ``READ_TIMEOUT`` seconds per call".
    """

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(READ_TIMEOUT)
        else:
            super().setblocking(False)


def server_error(exc: BaseException) -> tuple[int, str, str, str]:
    """``(status, reason phrase, error type, reason)`` for an error gunicorn raises before the app runs."""
    text = str(exc)
    if isinstance(exc, (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName,
                        http_errors.ConfigurationProblem)):
        pass  # the application's or the configuration's fault, not the client's: a 500 below
    elif isinstance(exc, http_errors.LimitRequestLine):
        return 414, "URI Too Long", "too_long_http_line_exception", f"the request line is too long: {text}"
    elif isinstance(exc, http_errors.LimitRequestHeaders):
        return (431, "Request Header Fields Too Large", "too_long_http_header_exception",
                f"the request headers are too large: {text}")
    elif isinstance(exc, http_errors.UnsupportedTransferCoding):
        return 501, "Not Implemented", "illegal_argument_exception", f"unsupported transfer coding: {text}"
    elif isinstance(exc, http_errors.ExpectationFailed):
        return 417, "Expectation Failed", "illegal_argument_exception", text
    elif isinstance(exc, http_errors.ParseException):
        kind = type(exc).__name__
        return 400, "Bad Request", "illegal_argument_exception", f"invalid HTTP request ({kind}): {text}"
    return (500, "Internal Server Error", "internal_server_error",
            "internal server error; the server log has the details")


def write_json_error(sock: socket.socket, status: int, phrase: str, error_type: str, reason: str) -> None:
    body = orjson.dumps(es_error_body(status, error_type, reason))
    head = (f"HTTP/1.1 {status} {phrase}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    try:
        sock.setblocking(True)
        sock.sendall(head + body)
    except OSError:
        pass


class _HeadConn(TConn):
    """A connection that carries the bytes of a request head the poller read before a thread took it."""

    def __init__(self, cfg, sock, client, server):
        super().__init__(cfg, sock, client, server)
        self.head = bytearray()

    def init(self) -> None:
        super().init()
        if self.head:
            self.parser.unreader.unread(bytes(self.head))
            self.head = bytearray()

    def gather(self) -> bool | None:
        """Read what the client sent so far: True once the head is complete, None if the client left."""
        try:
            data = self.sock.recv(HEAD_GATHER_LIMIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return None
        if not data:
            return None
        start = max(0, len(self.head) - 3)
        self.head += data
        tail = self.head[start:]
        return any(end in tail for end in _HEAD_ENDS) or len(self.head) >= HEAD_GATHER_LIMIT


class XerjThreadWorker(ThreadWorker):
    """``gthread`` with connections held in the poller until their request head is in, and JSON errors."""

    def accept(self, listener):
        try:
            raw, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        client_sock = _TimedSocket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        self.nr_conns += 1
        conn = self._make_conn(client_sock, client_addr, listener.getsockname())
        client_sock.setblocking(False)
        # Wait for the first bytes in the poller, not in a thread: an idle connection costs no thread.
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(client_sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def _make_conn(self, sock, client, server):
        return _HeadConn(self.cfg, sock, client, server)

    def on_pending_socket_readable(self, conn, client):
        if self._head_ready(conn, client, self.pending_conns):
            super().on_pending_socket_readable(conn, client)

    def on_client_socket_readable(self, conn, client):
        if self._head_ready(conn, client, self.keepalived_conns):
            super().on_client_socket_readable(conn, client)

    def _head_ready(self, conn, client, waiting) -> bool:
        """Whether ``conn`` may go to a thread now; a client that left is closed and forgotten here.

        Under TLS the bytes are not readable here, so the connection goes to a thread as gunicorn does.
        A connection whose head is incomplete stays registered, keeping its deadline in ``waiting``.
        """
        if self.cfg.is_ssl or not isinstance(conn, _HeadConn):
            return True
        state = conn.gather()
        if state is None:
            self.poller.unregister(client)
            waiting.remove(conn)
            self.nr_conns -= 1
            conn.close()
            return False
        return state

    def handle_error(self, req, client, addr, exc):
        status, phrase, error_type, reason = server_error(exc)
        if status >= 500 and not isinstance(exc, http_errors.UnsupportedTransferCoding):
            self.log.exception("error handling request")
        else:
            self.log.info("invalid request from %s: %s", (addr or ("",))[0], exc)
        write_json_error(client, status, phrase, error_type, reason)
