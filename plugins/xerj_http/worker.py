"""The gunicorn worker ``xerj serve`` runs: threads for requests, a poller for idle sockets, ES-shaped server errors.

gunicorn's ``gthread`` worker already keeps kept-alive connections in a
selector, but hands every freshly accepted connection to a thread that waits
up to five seconds for its first bytes: a thousand idle connections then
queue real requests behind them. Here a new connection goes to the poller
first and reaches a thread only once it is readable; a thread reading a
request gives up on a client silent for ``READ_TIMEOUT`` seconds (headers or
body). Errors gunicorn answers itself (a bad request line, a request line or
headers over the limits) get the same JSON body as every other error.
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from functools import partial

import orjson
from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import ThreadWorker

from xerj_core.errors import es_error_body

# Seconds a thread waits on a silent client mid-request before closing the connection.
READ_TIMEOUT = 30.0


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


class XerjThreadWorker(ThreadWorker):
    """``gthread`` with new connections parked in the poller and JSON bodies on gunicorn's own errors."""

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
        from gunicorn.workers.gthread import TConn

        return TConn(self.cfg, sock, client, server)

    def handle_error(self, req, client, addr, exc):
        status, phrase, error_type, reason = server_error(exc)
        if status >= 500 and not isinstance(exc, http_errors.UnsupportedTransferCoding):
            self.log.exception("error handling request")
        else:
            self.log.info("invalid request from %s: %s", (addr or ("",))[0], exc)
        write_json_error(client, status, phrase, error_type, reason)
