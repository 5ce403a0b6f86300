"""Several vigild nodes as one service over NATS JetStream (issue 16, docs/CLUSTER.md).

Every test starts its own nats-server -js (Debian's package, Tests/setup-deps) on a loopback
port and its own vigild nodes pointed at it; clients are Python ``websockets`` connections
(``pinclient``). A node is ready for writes once its admin ``/healthz`` says
``cluster.writable`` (connected, stream found, caught up): the tests wait for that event,
never for a fixed time.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

import pinclient as pc
from natsproc import NatsCluster, NatsServer
from pinclient import PinClient
from test_load import LIFTED, assert_clean, check, load_binary  # noqa: F401 (fixture)
from test_load_nodes import MAP_ARGS, run_nodes
from test_panic import PanicClient, assert_location
from wsraw import http_get

LIMITS = dict(
    session={"messages_per_second": 1000, "message_burst": 2000},
    pins={"writes_per_minute": 60000, "write_burst": 5000},
    panic={"history_events": 50, "stale_after_ms": 600000, "ended_grace_ms": 600000,
           "max_streams": 1000, "max_watch_tokens": 8, "max_watchers_on_start": 4},
)


@pytest.fixture
def nats(tmp_path):
    server = NatsServer(tmp_path / "nats").start()
    yield server
    server.kill()


def node_config(nats_urls, node_id: str, state_dir=None) -> dict:
    cfg = pc.pins_config(**LIMITS)
    cfg["cluster"] = {"urls": list(nats_urls), "name": "E2E", "node_id": node_id, "request_timeout_ms": 2000}
    if state_dir is not None:
        cfg["state"] = {"directory": str(state_dir), "snapshot_interval_s": 3600}
    return cfg


def health(d) -> dict:
    return json.loads(http_get(d.admin_port, "/healthz").body)


def wait_until(what, predicate, timeout: float = 20.0, poll: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(poll)


def wait_writable(d, timeout: float = 20.0) -> dict:
    return wait_until(f"node on port {d.port} writable", lambda: (h := health(d))["cluster"]["writable"] and h, timeout)


def wait_applied(nodes, timeout: float = 20.0) -> int:
    """Until every node has applied the same last sequence; returns it."""
    def same():
        seqs = {health(d)["cluster"]["applied_seq"] for d in nodes}
        lasts = {health(d)["cluster"]["last_seq"] for d in nodes}
        return len(seqs) == 1 and seqs == lasts and seqs.pop() or None
    return wait_until("every node applied the stream", same, timeout)


@pytest.fixture
def cluster(vigild, nats, tmp_path):
    """start(n, state=False) -> n writable nodes on the test's nats-server."""
    def start(n: int, *, state: bool = False, first: int = 1):
        nodes = []
        for i in range(first, first + n):
            cfg = node_config([nats.url], f"n{i}", tmp_path / f"state-n{i}" if state else None)
            nodes.append(vigild(cfg))
        for d in nodes:
            wait_writable(d)
        return nodes
    return start


@pytest.fixture
def clients():
    made: list[PinClient] = []

    def make(node, cls=PinClient):
        c = cls(node.port)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def test_a_subscriber_gets_exactly_the_writes_made_on_other_nodes(cluster, clients):
    a, b, c = cluster(3)
    sub = clients(a)
    assert sub.subscribe_bbox(52.0, 13.0, 53.0, 14.0) == []
    pb, pc_ = clients(b), clients(c)
    made_b = pb.ok("pin.create", pin=dict(lat=52.5, lon=13.4, title="on b", category="hazard"))
    made_c = pc_.ok("pin.create", pin=dict(lat=52.6, lon=13.5, title="on c", category="sighting"))
    pc_.ok("pin.create", pin=dict(lat=10.0, lon=10.0, title="outside the view"))
    added = [sub.event(), sub.event()]
    assert sorted(e["pin"]["id"] for e in added) == sorted([made_b["pin"]["id"], made_c["pin"]["id"]])
    assert all(e["type"] == "pin.added" for e in added), added
    # an edit on C of B's pin, with B's token: the token's digest is replicated state
    pc_.ok("pin.update", id=made_b["pin"]["id"], edit_token=made_b["edit_token"], changes={"title": "edited on c"})
    ev = sub.event()
    assert ev["type"] == "pin.updated" and ev["pin"]["title"] == "edited on c", ev
    pb.ok("pin.delete", id=made_c["pin"]["id"], edit_token=made_c["edit_token"])
    ev = sub.event()
    assert ev["type"] == "pin.removed" and ev["pin"]["id"] == made_c["pin"]["id"], ev
    sub.quiet()
    # every node holds the same pins
    wait_applied([a, b, c])
    for d in (a, b, c):
        seen = clients(d).subscribe_bbox(52.0, 13.0, 53.0, 14.0)
        assert [(p["id"], p["title"]) for p in seen] == [(made_b["pin"]["id"], "edited on c")], seen


def test_a_panic_owner_on_one_node_and_watchers_on_two_others(cluster, clients):
    a, b, c = cluster(3)
    owner = clients(a, PanicClient)
    st = owner.start(lat=48.0, lon=2.0, watchers=2)
    s, tokens = st["stream"], st["watch_tokens"]
    wb, wc = clients(b, PanicClient), clients(c, PanicClient)
    for w, token in ((wb, tokens[0]), (wc, tokens[1])):
        r = wait_until("the stream reached the watcher's node",
                       lambda: (r := w.request("panic.watch", stream=s, watch_token=token))["type"] == "ok" and r)
        assert r["state"]["seq"] == 1, r
    # watchers are connections on other nodes: the owner still learns how many there are
    wait_until("the owner hears of both watchers", lambda: owner.event_of("panic.watchers", timeout=10)["count"] == 2)
    for i in range(2, 7):
        assert owner.ok("panic.update", stream=s, lat=48.0 + i / 100, lon=2.0)["seq"] == i
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 7
    for w in (wb, wc):
        for i in range(2, 7):
            assert_location(w.event_of("panic.location"), s, i, 48.0 + i / 100, 2.0)
        ev = w.event_of("panic.status")
        assert ev["seq"] == 7 and ev["status"] == "amber", ev
        w.quiet()


def test_a_watcher_moving_to_another_node_with_since_gets_exactly_what_it_missed(cluster, clients):
    a, b, c = cluster(3)
    owner = clients(a, PanicClient)
    st = owner.start(lat=1.0, lon=1.0)
    s, token = st["stream"], st["watch_tokens"][0]
    wb = clients(b, PanicClient)
    wait_until("the stream on B", lambda: wb.request("panic.watch", stream=s, watch_token=token)["type"] == "ok")
    assert owner.ok("panic.update", stream=s, lat=1.1, lon=1.1)["seq"] == 2
    assert_location(wb.event_of("panic.location"), s, 2, 1.1, 1.1)
    wb.close()
    for i in range(3, 6):
        assert owner.ok("panic.update", stream=s, lat=1.0 + i / 10, lon=1.0)["seq"] == i
    wait_applied([a, b, c])
    wc = clients(c, PanicClient)
    r = wc.watch(s, token, since=2)
    assert not r.get("gap", False) and r["state"]["seq"] == 5, r
    for i in range(3, 6):
        assert_location(wc.event_of("panic.location"), s, i, 1.0 + i / 10, 1.0)
    wc.quiet()
    # and the owner resumes on B after losing A
    owner.close()
    ob = clients(b, PanicClient)
    r = ob.ok("panic.resume", stream=s, owner_token=st["owner_token"])
    assert r["state"]["seq"] == 5, r
    assert ob.ok("panic.update", stream=s, lat=2.0, lon=2.0)["seq"] == 6
    assert_location(wc.event_of("panic.location"), s, 6, 2.0, 2.0)


def test_pipelined_writes_and_two_nodes_editing_one_pin_converge(cluster, clients):
    a, b = cluster(2)
    wa, wb = clients(a), clients(b)
    made = wa.ok("pin.create", pin=dict(lat=40.0, lon=-3.0, title="t0"))
    pid, tok = made["pin"]["id"], made["edit_token"]
    # one client pipelining 20 edits of its pin: all ok, in order
    refs = [wa.send_request("pin.update", id=pid, edit_token=tok, changes={"title": f"a{i}"}) for i in range(20)]
    for ref in refs:
        assert wa.await_reply(ref)["type"] == "ok"
    # two nodes editing at once: each write ok or conflict, never lost silently; all converge
    ra = [wa.send_request("pin.update", id=pid, edit_token=tok, changes={"description": f"from a {i}"}) for i in range(10)]
    rb = [wb.send_request("pin.update", id=pid, edit_token=tok, changes={"description": f"from b {i}"}) for i in range(10)]
    outcomes = [wa.await_reply(r) for r in ra] + [wb.await_reply(r) for r in rb]
    for o in outcomes:
        assert o["type"] == "ok" or (o["type"] == "error" and o["code"] == "conflict"), o
    wait_applied([a, b])
    views = [clients(d).subscribe_bbox(39.0, -4.0, 41.0, -2.0) for d in (a, b)]
    assert views[0] == views[1] and len(views[0]) == 1, views
    final = views[0][0]["description"]
    winners = [o for o in outcomes if o["type"] == "ok"]
    assert any(o["pin"]["description"] == final for o in winners), (final, winners)


def test_losing_nats_refuses_writes_and_keeps_serving(cluster, clients, nats):
    (a,) = cluster(1)
    c = clients(a)
    c.subscribe_bbox(0.0, 0.0, 1.0, 1.0)
    made = c.ok("pin.create", pin=dict(lat=0.5, lon=0.5, title="before"))
    assert c.event()["type"] == "pin.added"
    nats.kill()
    wait_until("the node saw NATS go", lambda: not health(a)["cluster"]["connected"])
    err = c.error("pin.create", pin=dict(lat=0.5, lon=0.5, title="during"))
    assert err["code"] == "unavailable" and err["retry_after_ms"] > 0, err
    # reads go on
    assert [p["id"] for p in clients(a).subscribe_bbox(0.0, 0.0, 1.0, 1.0)] == [made["pin"]["id"]]
    nats.start()
    wait_writable(a, timeout=30)
    c.ok("pin.create", pin=dict(lat=0.6, lon=0.6, title="after"))
    assert c.event()["pin"]["title"] == "after"


def test_kill_9_with_writes_in_flight_loses_no_acknowledged_write(vigild, nats, tmp_path, clients):
    cfgs = [node_config([nats.url], f"n{i}", tmp_path / f"state-n{i}") for i in (1, 2)]
    a, b = vigild(cfgs[0]), vigild(cfgs[1])
    wait_writable(a)
    wait_writable(b)
    writer = clients(a)
    acked: list[str] = []
    stop = threading.Event()

    def write():
        try:
            i = 0
            while not stop.is_set():
                refs = [writer.send_request("pin.create", pin=dict(lat=30.0 + (i + k) % 100 / 1000, lon=30.0, title=f"w{i + k}"))
                        for k in range(10)]
                i += 10
                for ref in refs:
                    r = writer.await_reply(ref, timeout=5)
                    if r["type"] == "ok":
                        acked.append(r["pin"]["id"])
        except Exception:  # the node died under the writer: expected
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    wait_until("some writes acknowledged", lambda: len(acked) >= 200, timeout=30)
    a.signal(signal.SIGKILL)
    a.wait(10)
    stop.set()
    t.join(10)
    a.reported = True  # killed on purpose: not a teardown failure
    assert len(acked) >= 200
    got = {p["id"] for p in clients(b).subscribe_bbox(29.0, 29.0, 31.0, 31.0)}
    assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged writes missing on the other node"
    a2 = vigild(cfgs[0])
    wait_writable(a2)
    wait_applied([a2, b])
    again = {p["id"] for p in clients(a2).subscribe_bbox(29.0, 29.0, 31.0, 31.0)}
    assert again == got, (len(again), len(got))


def test_a_node_started_late_converges(cluster, clients, vigild, nats, tmp_path):
    a, b = cluster(2)
    w = clients(a)
    for i in range(50):
        w.ok("pin.create", pin=dict(lat=20.0 + i / 100, lon=20.0, title=f"p{i}"))
    owner = clients(b, PanicClient)
    st = owner.start(lat=5.0, lon=5.0)
    for i in range(5):
        owner.ok("panic.update", stream=st["stream"], lat=5.0 + i / 10, lon=5.0)
    (late,) = cluster(1, first=4)
    wait_applied([a, b, late])
    views = [sorted((p["id"], p["title"]) for p in clients(d).subscribe_bbox(19.0, 19.0, 21.0, 21.0)) for d in (a, b, late)]
    assert views[0] == views[1] == views[2] and len(views[0]) == 50
    r = clients(late, PanicClient).watch(st["stream"], st["watch_tokens"][0])
    assert r["state"]["seq"] == 6, r
    # and every node reports the same state digest at the same stream sequence
    seq = wait_applied([a, b, late])

    def digests():
        got = [json.loads(http_get(d.admin_port, "/state/digest").body) for d in (a, b, late)]
        return got if all(g["cluster_sequence"] == seq for g in got) else None
    got = wait_until("digests taken at the last sequence", digests, timeout=30, poll=0.3)
    assert len({g["digest"] for g in got}) == 1, got
    assert got[0]["pins"] == 50 and got[0]["streams"] == 1, got[0]


def test_a_nats_server_of_three_dies_during_writes_and_nothing_acknowledged_is_lost(vigild, tmp_path, clients):
    with NatsCluster(tmp_path) as nats3:
        urls = nats3.urls
        cfgs = []
        for i in (1, 2):
            cfg = node_config(urls if i == 1 else urls[::-1], f"n{i}")
            cfg["cluster"]["replicas"] = 3
            cfgs.append(cfg)
        a, b = vigild(cfgs[0]), vigild(cfgs[1])
        wait_writable(a, timeout=40)
        wait_writable(b, timeout=40)
        # A write JetStream acknowledged just before the kill is answered once the node's consumer
        # is back, after the stream's new leader is elected: within the failover bound of 10 s
        # (docs/CLUSTER.md "Failover").
        writer = PinClient(a.port, timeout=40)
        try:
            acked: list[str] = []
            ack_times: list[float] = []
            refused = 0
            killed_at = None
            deadline = time.monotonic() + 60
            i = 0
            while len(acked) < 300:
                assert time.monotonic() < deadline, f"only {len(acked)} writes acknowledged in 60 s ({refused} refused)"
                r = writer.request("pin.create", pin=dict(lat=60.0 + i % 100 / 1000, lon=10.0, title=f"w{i}"))
                i += 1
                if r["type"] == "ok":
                    acked.append(r["pin"]["id"])
                    ack_times.append(time.monotonic())
                else:
                    assert r["code"] == "unavailable" and r["retry_after_ms"] > 0, r
                    refused += 1
                    time.sleep(r["retry_after_ms"] / 1000)  # what a client is told to do
                if len(acked) == 100 and killed_at is None:
                    nats3.kill(0)  # the server node A is connected to (the first of its list)
                    killed_at = time.monotonic()
        finally:
            writer.close()
        after = [t for t in ack_times if t > killed_at]
        pause = (after[0] - killed_at) if after else float("inf")
        print(f"\nwrites resumed {pause * 1000:.0f} ms after the NATS server was killed; {refused} refused meanwhile")
        assert pause < 10.0, f"writes did not resume within 10 s ({pause:.1f} s)"
        wait_applied([a, b], timeout=30)
        got = {p["id"] for p in clients(b).subscribe_bbox(59.0, 9.0, 61.0, 11.0)}
        assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged writes missing"


def test_a_missed_check_in_is_decided_once_for_the_whole_cluster(cluster, clients):
    """Every node notices the deadline; the decision goes through the stream once (one message
    id from every node), so every watcher on every node sees one escalation with one seq."""
    a, b, c = cluster(3)
    owner = clients(a, PanicClient)
    due_at = pc.now_ms() + 1500
    st = owner.ok("panic.start", status="amber", lat=52.52, lon=13.405, due_at=due_at, watchers=2)
    s = st["stream"]
    watchers = []
    for d, token in ((b, st["watch_tokens"][0]), (c, st["watch_tokens"][1])):
        w = clients(d, PanicClient)
        wait_until("the stream on the watcher's node",
                   lambda: w.request("panic.watch", stream=s, watch_token=token)["type"] == "ok")
        watchers.append(w)
    sent = set()
    for w in watchers:
        ev = w.event_of("panic.status", timeout=10)
        assert ev["reason"] == "missed_check_in" and ev["seq"] == 2 and ev["at"] == due_at, ev
        assert ev["sent_at"] >= due_at, ev
        sent.add(ev["sent_at"])
        w.quiet(0.5)
    seq = wait_applied([a, b, c])
    assert seq == 2, (seq, [health(d)["cluster"] for d in (a, b, c)])  # the start and one escalation: the copies from other nodes were dropped
    owner_events = [e for e in owner.drain() if e["type"] == "panic.status"]
    assert [e["reason"] for e in owner_events] == ["missed_check_in"]
    # One record: when it was sent is the deciding node's clock, the same on every node.
    sent.add(owner_events[0]["sent_at"])
    assert len(sent) == 1, sent


def test_a_node_joining_after_retention_dropped_the_stream_start_restores_a_cluster_snapshot(vigild, nats, tmp_path, clients):
    """The stream keeps 1 MiB (`max_bytes`): after ~1.6 MB of records its start is gone. Node A
    (state directory, a snapshot every second) publishes its snapshot to the cluster's object
    store; node B, started afterwards with nothing, cannot catch up from the stream alone,
    restores that snapshot, consumes the rest, and ends with A's digest."""
    def cfg(node, state):
        c = node_config([nats.url], node, tmp_path / f"state-{node}" if state else None)
        c["cluster"].update({"max_bytes": 1048576, "snapshot_publish_interval_s": 1})
        c["pins"]["description_max_bytes"] = 4000
        if state:
            c["state"]["snapshot_interval_s"] = 1
        return c
    a = vigild(cfg("n1", True))
    wait_writable(a)
    w = clients(a)
    refs = [w.send_request("pin.create", pin=dict(lat=45.0 + i / 10000, lon=7.0, title=f"p{i}", description="x" * 1000))
            for i in range(1400)]
    for ref in refs:
        r = w.await_reply(ref)
        assert r["type"] == "ok", r
    last = health(a)["cluster"]["applied_seq"]
    assert last == 1400
    start = a.line_count()
    while True:  # the first snapshot published that holds every write
        m = a.wait_for_log(r'cluster: snapshot published.* sequence=(\d+)', timeout=30, start=start)
        if int(m.group(1)) >= last:
            break
        start = a.line_count()
    b = vigild(cfg("n2", False))
    b.wait_for_log("state restored from a cluster snapshot", timeout=30)
    wait_writable(b)
    seq = wait_applied([a, b])
    got = wait_until("digests at the same sequence",
                     lambda: (g := [json.loads(http_get(d.admin_port, "/state/digest").body) for d in (a, b)])
                     and all(x["cluster_sequence"] == seq for x in g) and g, timeout=30, poll=0.3)
    assert got[0]["digest"] == got[1]["digest"] and got[0]["pins"] == 1400, got
    # and B takes writes that A sees
    made = clients(b).ok("pin.create", pin=dict(lat=45.5, lon=7.5, title="on b"))
    sub = clients(a)
    assert made["pin"]["id"] in {p["id"] for p in sub.subscribe_bbox(45.4, 7.4, 45.6, 7.6)}


def test_vigil_load_map_and_panic_over_three_nodes_pass_their_exactness_checks(vigild, nats, tmp_path, load_binary):
    """vigil-load with one --url per node: publishers, subscribers, owners and watchers spread
    over three nodes (watchers never on their owner's node), every check with the several-node
    rules (docs/BENCHMARKS.md, "vigil-load over several nodes")."""
    binary = load_binary
    nodes = []
    for i in (1, 2, 3):
        cfg = json.loads(json.dumps(LIFTED))
        cfg["cluster"] = {"urls": [nats.url], "name": "E2E", "node_id": f"n{i}"}
        nodes.append(vigild(cfg))
    for d in nodes:
        wait_writable(d)
    urls = [f"ws://127.0.0.1:{d.port}/v1" for d in nodes]
    proc, result = run_nodes(binary, urls, tmp_path, *MAP_ARGS)
    assert_clean(proc, result)
    assert [n["url"] for n in result["nodes"]] == urls and all(n["delivered"] > 0 for n in result["nodes"])
    exact = check(result, "viewport exactness")
    assert exact["checked"] == 20 and exact["counters"]["lost"] == 0 and exact["counters"]["wrong"] == 0
    assert exact["counters"]["events"] > 0
    (tmp_path / "result.json").unlink()
    proc, result = run_nodes(binary, urls, tmp_path, "panic", "--streams", "30", "--watchers", "2", "--rate", "5",
                             "--reconnects", "5", "--duration", "3", "--cluster-checks")
    assert_clean(proc, result)
    assert result["messages"]["sent"] > 0 and all(n["delivered"] > 0 for n in result["nodes"])
