"""``panic.watch`` with ``since`` replays every missed event, in order (issue 23; docs/PROTOCOL.md,
"Watching"): at history sizes of 1,000 and 10,000, from 0, the middle and one before the end,
with permessage-deflate (and over wss:// when ``Tests/run-all`` runs this module again with
``VIGIL_E2E_SCHEME=wss``), while live updates arrive during the replay, and on a cluster node
after another node was killed.

Before the fix, a replay larger than ``panic.conflate_above_bytes`` (64 KiB) was conflated like a
slow watcher's live locations: the watcher got a few hundred events of a thousand, with no gap.
Each test here reads every message and compares it with what the owner sent; none depends on
timing, and ``vigil_conflations_total`` must not move.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import time

import pytest

import pinclient as pc
import transport
import wsraw
from natsproc import NatsServer
from test_panic import PanicClient

SESSION = {"messages_per_second": 100000, "message_burst": 200000}
PANIC = {"stale_after_ms": 600000, "ended_grace_ms": 600000, "max_streams": 1000,
         "max_watch_tokens": 8, "max_watchers_on_start": 4}


def config(history: int) -> dict:
    return pc.pins_config(session=SESSION, panic=dict(PANIC, history_events=history))


def lat(seq: int) -> float:
    return round(10 + seq / 100000, 6)


def update_to(owner: PanicClient, stream: str, first: int, through: int, batch: int = 500) -> None:
    """Sends the updates that take seqs ``first`` ... ``through`` (the stream is at ``first - 1``)."""
    for start in range(first, through + 1, batch):
        seqs = range(start, min(start + batch, through + 1))
        refs = [owner.send_request("panic.update", stream=stream, lat=lat(s), lon=20.0, accuracy_m=8.5, heading=123.4)
                for s in seqs]
        got = [owner.await_reply(r)["seq"] for r in refs]
        assert got == list(seqs), f"updates answered {got[:3]}... for {seqs}"


def started_stream(owner: PanicClient, events: int) -> tuple[str, str]:
    """A red stream with ``events`` events (seq 1 is the start); returns (stream, watch token)."""
    st = owner.start(lat=lat(1), lon=20.0, watchers=2)
    update_to(owner, st["stream"], 2, events)
    return st["stream"], st["watch_tokens"][0]


def read_through(client: PanicClient, last: int, timeout: float = 60.0) -> list[dict]:
    """The events after the reply (those queued while waiting for it first) up to the one with seq
    ``last``: a replay that lost events ends early there, and ``assert_exact`` names what is missing."""
    out = list(client.events)
    client.events.clear()
    deadline = time.monotonic() + timeout
    while not out or out[-1].get("seq", 0) < last:
        left = deadline - time.monotonic()
        assert left > 0, f"{len(out)} events within {timeout} s, the last {out[-1:]}; expected through seq {last}"
        msg = client.recv_json(left)
        assert msg["type"] not in ("ok", "error"), f"a reply among the replayed events: {msg!r}"
        out.append(msg)
    return out


def assert_exact(events: list[dict], stream: str, seqs: range, statuses: dict[int, str] | None = None) -> None:
    statuses = statuses or {}
    got = [e.get("seq") for e in events]
    if got != list(seqs):
        missing = sorted(set(seqs) - set(got))
        raise AssertionError(f"replay: {len(got)} events, expected {len(seqs)} ({seqs.start}..{seqs.stop - 1}); "
                             f"first {got[:5]}, missing {missing[:10]}{'...' if len(missing) > 10 else ''}")
    for e in events:
        assert e["stream"] == stream, e
        if e["seq"] in statuses:
            assert e["type"] == "panic.status" and e["status"] == statuses[e["seq"]], e
        elif e["seq"] > 1:
            assert e["type"] == "panic.location" and e["lat"] == pytest.approx(lat(e["seq"]), abs=1e-9), e


def watch_and_check(port: int, stream: str, token: str, since: int, last: int) -> None:
    with PanicClient(port, compression="deflate", timeout=30) as w:
        assert w.compressed, "the server did not agree to permessage-deflate"
        r = w.watch(stream, token, since=since)
        assert not r.get("gap", False) and r["state"]["seq"] == last, {k: v for k, v in r.items() if k != "state"}
        assert_exact(read_through(w, last), stream, range(since + 1, last + 1))
        w.quiet()


@pytest.mark.parametrize("history", [1000, 10000])
def test_a_replay_is_every_event_after_since(vigild, history):
    d = vigild(config(history))
    with PanicClient(d.port, timeout=30) as owner:
        stream, token = started_stream(owner, history)  # the history holds seq 1 ... history
        for since in (0, history // 2, history - 1):
            watch_and_check(d.port, stream, token, since, history)
        # 6 more: seq 1 ... 6 leave the history; since=6 is the oldest replay still whole
        update_to(owner, stream, history + 1, history + 6)
        watch_and_check(d.port, stream, token, 6, history + 6)
        with PanicClient(d.port) as w:
            r = w.watch(stream, token, since=5)
            assert r.get("gap") is True and r["state"]["seq"] == history + 6, {k: v for k, v in r.items() if k != "state"}
            w.quiet()
    assert d.metric("vigil_conflations_total") == 0
    assert d.metric("vigil_panic_replays_total") == 4
    assert d.metric("vigil_panic_replayed_events_total") == history + history // 2 + 1 + history


def test_the_largest_history_the_config_allows(vigild):
    """``panic.history_events`` at its maximum, 100,000: the reply's trail cannot fit a reply and
    is cut to its newest points (``trail_truncated``); the replay from 0 is all 100,000 events."""
    d = vigild(config(100000))
    with PanicClient(d.port, timeout=60) as owner:
        stream, token = started_stream(owner, 100000)
        with PanicClient(d.port, compression="deflate", timeout=60) as w:
            r = w.watch(stream, token, since=0)
            state = r["state"]
            assert not r.get("gap", False) and state["seq"] == 100000
            assert state.get("trail_truncated") is True and state["trail"][-1]["seq"] == 100000, len(state["trail"])
            seqs = [p["seq"] for p in state["trail"]]
            assert seqs == list(range(100001 - len(seqs), 100001))
            assert_exact(read_through(w, 100000, timeout=120), stream, range(1, 100001))
            w.quiet()
    assert d.metric("vigil_conflations_total") == 0


def test_the_reports_cases_with_history_1000(vigild):
    """The figures of the report: 1,006 events since 6 (11 came), since 706 (53 came), and 700
    updates since 0 (288 came, from seq 414)."""
    d = vigild(config(1000))
    with PanicClient(d.port, timeout=30) as owner:
        small, token = started_stream(owner, 701)
        watch_and_check(d.port, small, token, 0, 701)
        stream, token = started_stream(owner, 1006)
        watch_and_check(d.port, stream, token, 6, 1006)
        watch_and_check(d.port, stream, token, 706, 1006)
    assert d.metric("vigil_conflations_total") == 0


class StalledWatcher(wsraw.RawConn):
    """A watcher on a raw socket (TLS in a wss run) that reads only when the test says so: no
    library reads ahead in a thread, and its 4 KiB receive buffer backs the server up at once."""

    @classmethod
    def open(cls, port: int) -> "StalledWatcher":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        if transport.SCHEME == "wss":
            sock.connect(("127.0.0.1", transport.TLS_PORTS[port]))
            sock = transport.client_context().wrap_socket(sock, server_hostname="localhost")
        else:
            sock.connect(("127.0.0.1", port))
        conn = cls(sock)
        conn.send(wsraw.upgrade_request("/v1", protocols="vigil.v1"))
        assert conn.read_response(10).status == 101
        assert json.loads(conn.read_frame(10).payload)["type"] == "welcome"
        return conn

    def _fill(self, deadline: float) -> bool:
        # A TLS socket may hold decrypted bytes that select() does not see.
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            self.buf += self.sock.recv(self.sock.pending())
            return True
        return super()._fill(deadline)

    def message(self, timeout: float = 30.0) -> dict:
        frame = self.read_frame(timeout)
        assert frame.opcode == wsraw.OP_TEXT, frame
        return json.loads(frame.payload)


def replay_outgrowing_the_kernel() -> int:
    """A history whose replay is larger than the most the kernel may buffer for a socket
    (``tcp_wmem``'s maximum, 4 MiB by default, at ~170 bytes an event, with room to spare): a
    watcher that reads nothing then holds its replay in the daemon whatever this machine's TCP
    autotuning does."""
    wmem_max = int(open("/proc/sys/net/ipv4/tcp_wmem").read().split()[2])
    return min(100000, max(10000, (2 * wmem_max) // 170 // 1000 * 1000))


def test_live_updates_during_a_replay_follow_it_in_order(vigild):
    """The watcher asks for its whole trail and reads nothing for a while: the replay waits for it
    (the daemon says it is still in progress), and the owner's updates and a status change
    meanwhile come after the replay, once each, in order."""
    n = replay_outgrowing_the_kernel()
    d = vigild(config(n))
    with PanicClient(d.port, timeout=30) as owner:
        stream, token = started_stream(owner, n)
        owner.events.clear()
        w = StalledWatcher.open(d.port)
        try:
            w.send_frame(wsraw.OP_TEXT, json.dumps({"op": "panic.watch", "ref": 1, "stream": stream,
                                                    "watch_token": token, "since": 0}).encode())
            assert owner.event_of("panic.watchers", timeout=10)["count"] == 1  # the watch was answered
            assert d.metric("vigil_panic_replays_in_progress") == 1
            update_to(owner, stream, n + 1, n + 20)
            assert owner.ok("panic.status", stream=stream, status="amber")["seq"] == n + 21
            update_to(owner, stream, n + 22, n + 30)
            # still replaying: the watcher has read nothing yet, so the updates were not sent live
            assert d.metric("vigil_panic_replays_in_progress") == 1
            r = w.message()
            assert r["type"] == "ok" and r["ref"] == 1 and not r.get("gap", False) and r["state"]["seq"] == n
            events = []
            while not events or events[-1]["seq"] < n + 30:
                events.append(w.message())
            assert_exact(events, stream, range(1, n + 31), {n + 21: "amber"})
            assert d.metric("vigil_panic_replays_in_progress") == 0
            update_to(owner, stream, n + 31, n + 31)  # live again
            assert_exact([w.message()], stream, range(n + 31, n + 32))
        finally:
            w.close()
    assert d.metric("vigil_conflations_total") == 0


# ---------------------------------------------------------------------------------------
# a cluster node's replay

def node_config(nats_url: str, node_id: str) -> dict:
    cfg = config(1000)
    cfg["cluster"] = {"urls": [nats_url], "name": "E2E", "node_id": node_id, "request_timeout_ms": 2000}
    return cfg


def wait_until(what, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)
    return value


def healthz(d) -> dict:
    from wsraw import http_get
    return json.loads(http_get(d.admin_port, "/healthz").body)


def test_a_watcher_moving_to_another_node_after_a_kill_9_gets_the_whole_replay(vigild, tmp_path):
    """Owner on B, watcher on A; A is killed with SIGKILL after 300 events; the stream goes on to
    1,000 events; the watcher watches on B with since = the last seq it had. Before: "replay seq
    563 after 0"."""
    nats = NatsServer(tmp_path / "nats").start()
    try:
        a, b = vigild(node_config(nats.url, "a")), vigild(node_config(nats.url, "b"))
        for node in (a, b):
            wait_until(f"node {node.port} writable", lambda: healthz(node)["cluster"]["writable"])
        with PanicClient(b.port, timeout=30) as owner:
            st = owner.start(lat=lat(1), lon=20.0, watchers=1)
            stream, token = st["stream"], st["watch_tokens"][0]
            w = PanicClient(a.port, compression="deflate", timeout=30)
            wait_until("the stream on A", lambda: w.request("panic.watch", stream=stream, watch_token=token)["type"] == "ok")
            update_to(owner, stream, 2, 300)
            seen = read_through(w, 300)
            assert_exact(seen, stream, range(2, 301))
            a.signal(signal.SIGKILL)
            a.wait(10)
            a.reported = True  # killed on purpose: not a teardown failure
            w.close()
            update_to(owner, stream, 301, 1000)
            moved = PanicClient(b.port, compression="deflate", timeout=30)
            try:
                r = moved.watch(stream, token, since=seen[-1]["seq"])
                assert not r.get("gap", False) and r["state"]["seq"] == 1000, {k: v for k, v in r.items() if k != "state"}
                assert_exact(read_through(moved, 1000), stream, range(301, 1001))
                moved.quiet()
                r = PanicClient(b.port, timeout=30)
                try:
                    assert not r.watch(stream, token, since=0).get("gap", False)
                    assert_exact(read_through(r, 1000), stream, range(1, 1001))
                finally:
                    r.close()
            finally:
                moved.close()
        assert b.metric("vigil_conflations_total") == 0
    finally:
        nats.kill()
