#!/usr/bin/env python3
"""The measuring push service of benchmarks/notice_latency.py: an asyncio HTTP/1.1 server on
loopback that takes Web Push requests as fast as one Python process can and stamps each one.

    taskset -c 1 python3 benchmarks/notice_receiver.py --origins 1

It listens on ORIGINS ports of 127.0.0.1 (each port an origin of its own to the daemon's HTTP
client) and on one control port, and prints one JSON line once ready:
``{"ports": [P1, ...], "control": C}``. It stops when its standard input closes (so it never
outlives the benchmark that started it) or when the control port is asked to ``/quit``.

Every request on a push port is answered ``201 Created`` with a ``Location`` and no body, on a
kept-alive connection (vigild's client sends one request at a time on each). Recorded for each
request, with ``time.monotonic_ns()`` (CLOCK_MONOTONIC, the same clock as the benchmark's in
another process): when its first bytes arrived (``head_ns``: the request line, in the same read
as the whole head in practice; see below), when its whole head had arrived (``head_done_ns``) and
when its whole body had (``body_ns``, the ``Content-Length`` read), the connection, the path, the
raw head and the body. It checks nothing: the benchmark verifies the requests afterwards with
Tests/e2e/pushservice.py's ``verify_vapid`` and ``decrypt``, outside the measured time.

The stamps are taken in ``data_received``, that is when the event loop got to the socket after
the kernel had the bytes: the receiver's own delay is in them, and its CPU time is reported
beside them so that one can tell whether it kept up. A ``asyncio.Protocol`` rather than streams:
one callback per read and no task per request.

Control (plain HTTP/1.0 GET on the control port, one request per connection):
``/wait?count=N&timeout=S`` answers ``{"count": n}`` once N requests are recorded or S seconds
passed; ``/take`` answers every record (bodies and heads base64) and forgets them;
``/quit`` stops the server.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import time
import urllib.parse

RESPONSE = b"HTTP/1.1 201 Created\r\nLocation: /m/%d\r\nContent-Length: 0\r\n\r\n"
MAX_HEAD = 16384
MAX_BODY = 65536


class State:
    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.connections = 0
        self.messages = 0
        self.errors: list[str] = []
        self.waiters: list[tuple[int, asyncio.Future]] = []

    def recorded(self) -> None:
        n = len(self.records)
        if self.waiters:
            still = []
            for count, fut in self.waiters:
                if n >= count and not fut.done():
                    fut.set_result(n)
                elif not fut.done():
                    still.append((count, fut))
            self.waiters = still


class PushProtocol(asyncio.Protocol):
    def __init__(self, state: State, port: int) -> None:
        self.state = state
        self.port = port
        self.buf = b""
        self.head_ns = 0
        self.head_done_ns = 0
        self.head = b""
        self.need = -1  # body bytes still wanted; -1: reading a head

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.state.connections += 1
        self.conn = self.state.connections

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        if not self.buf and self.need < 0:
            self.head_ns = now
        self.buf += data
        while True:
            if self.need < 0:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.fail("head too long")
                    return
                self.head, self.buf = self.buf[:end + 4], self.buf[end + 4:]
                self.head_done_ns = now
                self.need = self.content_length(self.head)
                if self.need < 0:
                    return
            if len(self.buf) < self.need:
                return
            body, self.buf = self.buf[:self.need], self.buf[self.need:]
            self.need = -1
            st = self.state
            st.messages += 1
            path = self.head.split(b" ", 2)[1].decode("ascii", "replace")
            st.records.append((path, self.head_ns, self.head_done_ns, now, self.port, self.conn, self.head, body))
            self.transport.write(RESPONSE % st.messages)
            st.recorded()
            if not self.buf:
                return
            self.head_ns = now  # the next request arrived in the same read

    def content_length(self, head: bytes) -> int:
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    n = int(value.strip())
                except ValueError:
                    break
                if 0 <= n <= MAX_BODY:
                    return n
                break
        self.fail("no valid Content-Length")
        return -1

    def fail(self, why: str) -> None:
        self.state.errors.append(why)
        self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        self.transport.close()


async def control(state: State, stop: asyncio.Event, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = (await reader.readline()).decode()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        target = urllib.parse.urlsplit(line.split(" ")[1])
        query = dict(urllib.parse.parse_qsl(target.query))
        if target.path == "/wait":
            count, timeout = int(query["count"]), float(query.get("timeout", "30"))
            if len(state.records) < count:
                fut = asyncio.get_running_loop().create_future()
                state.waiters.append((count, fut))
                try:
                    await asyncio.wait_for(fut, timeout)
                except asyncio.TimeoutError:
                    pass
            out = {"count": len(state.records)}
        elif target.path == "/take":
            records, state.records = state.records, []
            out = {"connections": state.connections, "errors": state.errors,
                   "records": [[p, h, hd, b, port, c, base64.b64encode(head).decode(), base64.b64encode(body).decode()]
                               for p, h, hd, b, port, c, head, body in records]}
        elif target.path == "/quit":
            out = {"bye": True}
            stop.set()
        else:
            out = {"error": "unknown"}
        data = json.dumps(out).encode()
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        await writer.drain()
    finally:
        writer.close()


async def serve(origins: int) -> None:
    loop = asyncio.get_running_loop()
    state = State()
    stop = asyncio.Event()
    servers = []
    ports = []
    for _ in range(origins):
        holder: dict = {}
        server = await loop.create_server(lambda h=holder: PushProtocol(state, h["port"]), "127.0.0.1", 0, backlog=256)
        holder["port"] = server.sockets[0].getsockname()[1]
        servers.append(server)
        ports.append(holder["port"])
    ctl = await asyncio.start_server(lambda r, w: control(state, stop, r, w), "127.0.0.1", 0)
    print(json.dumps({"ports": ports, "control": ctl.sockets[0].getsockname()[1], "pid": os.getpid()}), flush=True)
    # Stop when the benchmark goes away (its end of our stdin closes), whatever killed it.
    await loop.connect_read_pipe(lambda: EOFWatcher(stop), sys.stdin)
    await stop.wait()
    for s in servers + [ctl]:
        s.close()


class EOFWatcher(asyncio.Protocol):
    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop

    def eof_received(self):
        self.stop.set()

    def connection_lost(self, exc) -> None:
        self.stop.set()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--origins", type=int, default=1, help="ports to listen on, each an origin of its own")
    args = ap.parse_args()
    asyncio.run(serve(args.origins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
