"""What the end-to-end tests' stand-ins for outside HTTP services share (pushservice.py,
webhookreceiver.py): a threaded HTTP/1.1 server on loopback, plain or TLS with the test CA of
transport.py; answers a test sets in advance (a status, ``Retry-After``, a stall that holds the
request, a dropped connection); records guarded by one lock that a test can wait on.

A stand-in subclasses ``StandIn`` and implements ``serve(request)``: it checks the request as the
real service would, records what it saw, and answers through the ``Request`` helpers.
"""

from __future__ import annotations

import collections
import dataclasses
import http.server
import select
import socket
import ssl
import threading
import time
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Answer:
    """What a stand-in does with a request that passed its checks: a status (201, 404, 410, 429,
    500…, with ``Retry-After`` when given), or hold it (``stall``) until released, or close the
    connection without a word (``drop``)."""
    status: int = 200
    retry_after: int | None = None
    stall: bool = False
    drop: bool = False


STALL = Answer(stall=True)
DROP = Answer(drop=True)


def too_many(retry_after: int = 1) -> Answer:
    return Answer(429, retry_after=retry_after)


class Answers:
    """The answers for the next requests, one each, then ``default`` for the rest."""

    def __init__(self, default: Answer):
        self.queue: collections.deque[Answer] = collections.deque()
        self.default = default

    def set(self, *answers: Answer, always: Answer | None = None) -> None:
        self.queue.extend(answers)
        if always is not None:
            self.default = always

    def next(self) -> Answer:
        return self.queue.popleft() if self.queue else self.default


class Refused(Exception):
    """A request the stand-in refuses: the status it answers and why."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


class StandIn:
    """The server, its thread and its lock. ``origin`` is ``http://127.0.0.1:PORT``, or
    ``https://localhost:PORT`` with ``tls`` (the test CA's certificate names localhost)."""

    def __init__(self, *, tls: bool = False, clock: Callable[[], float] = time.time, name: str = "standin"):
        self.clock = clock
        self.lock = threading.Condition()
        self.stalled = 0
        self._release = threading.Event()
        self.closing = False
        self.server = _Server(("127.0.0.1", 0), _Handler, self)
        if tls:
            import transport  # the e2e suite's test CA; only the TLS variant needs it
            _, cert, key = transport.material()
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert), str(key))
            # The handshake happens in the request's thread (Request.setup): a silent client must
            # not hold the accepting thread.
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        host = "localhost" if tls else "127.0.0.1"
        self.origin = f"{'https' if tls else 'http'}://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def serve(self, request: Request) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with self.lock:
            self.closing = True
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def release_stalled(self) -> None:
        """Lets every held request, and every later stall, go on as a success."""
        self._release.set()

    def wait(self, predicate: Callable[..., bool], timeout: float = 10.0) -> bool:
        """Waits until ``predicate(self)`` holds, checked whenever something is recorded."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def record(self, kind: str, item) -> None:
        """Appends ``item`` to the list attribute ``kind`` and wakes the waiters."""
        with self.lock:
            getattr(self, kind).append(item)
            self.lock.notify_all()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, standin: StandIn):
        self.standin = standin
        super().__init__(address, handler)

    def handle_error(self, request, client_address):
        # A client that fails its TLS handshake or vanishes mid-request is the client's business;
        # what the tests check is in the records.
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    """One connection's requests (HTTP/1.1 keep-alive), each handed to the stand-in."""
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # the records are the output, not stderr
        pass

    def setup(self):
        super().setup()
        self.connection.settimeout(30)
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def do_POST(self):
        self.server.standin.serve(Request(self))

    def do_GET(self):
        Request(self).reply(405, b"only POST", extra={"Allow": "POST"})

    do_PUT = do_DELETE = do_PATCH = do_GET


class Request:
    """One request as a stand-in sees it, with the ways to answer it."""

    def __init__(self, handler: _Handler):
        self._handler = handler
        self.path = handler.path
        self.headers = handler.headers  # case-insensitive lookups
        self.header_dict = dict(handler.headers.items())

    def body(self, limit: int) -> bytes:
        """The body, at most ``limit`` bytes; ``Refused`` (411 or 413) otherwise, and the
        connection is closed after the answer since the rest is left unread."""
        if self.headers.get("Transfer-Encoding"):
            self._handler.close_connection = True
            raise Refused(411, "a Content-Length is required")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._handler.close_connection = True
            raise Refused(411, "no Content-Length")
        if int(length) > limit:
            self._handler.close_connection = True
            raise Refused(413, f"body of {length} bytes, more than {limit}")
        return self._handler.rfile.read(int(length))

    def hold(self) -> bool:
        """Holds the request until released (True) or, over plain HTTP, until the client goes
        away (False). Over TLS a peek cannot tell a close_notify from data, so a held TLS request
        waits for the release or the stand-in's close."""
        standin = self._handler.server.standin
        plain = not isinstance(self._handler.connection, ssl.SSLSocket)
        with standin.lock:
            standin.stalled += 1
            standin.lock.notify_all()
        try:
            while not standin._release.wait(0.05):
                if plain and self._peer_closed():
                    return False
            return not standin.closing
        finally:
            with standin.lock:
                standin.stalled -= 1
                standin.lock.notify_all()

    def _peer_closed(self) -> bool:
        connection = self._handler.connection
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        try:
            return connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def drop(self) -> None:
        """Closes the connection with no answer at all."""
        self._handler.close_connection = True
        try:
            self._handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def reply(self, status: int, body: bytes = b"", *, extra: dict | None = None) -> None:
        handler = self._handler
        try:
            handler.send_response(status)
            for name, value in (extra or {}).items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", str(len(body)))
            if handler.close_connection:
                handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            handler.close_connection = True

    def answer(self, answer: Answer, outcome: Callable[[int | None], None], *, success_headers: dict | None = None) -> None:
        """Carries out ``answer``. ``outcome`` hears the status before it is written, or None before
        a drop (also for a stall the client gave up on), so a test that saw the answer finds it
        recorded; a released stall is answered with ``answer.status``."""
        if answer.drop or (answer.stall and not self.hold()):
            outcome(None)
            self.drop()
            return
        outcome(answer.status)
        if answer.status < 300:
            self.reply(answer.status, extra=success_headers)
        else:
            extra = {"Retry-After": str(answer.retry_after)} if answer.retry_after is not None else {}
            self.reply(answer.status, f"answered {answer.status} as told".encode(), extra=extra)
