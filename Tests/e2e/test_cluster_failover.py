"""Failover within the bound (issue 27, docs/CLUSTER.md "Failover"): on a 3-server NATS cluster
the test starts itself (loopback), with three vigild nodes each on a different server, kill -9
one server of each role in turn — the stream's leader, the server delivering node n1's stream
(its ordered consumer), node n2's own server — while every node writes. After each kill every
node answers writes again within 10 s, with only `ok` or `unavailable` + `retry_after_ms` in
between (a write never goes unanswered); `/healthz` says `writable: false` with its reason
meanwhile; at the end no acknowledged write is missing and none is applied twice, and every node
holds the same state.

The harness (`FailoverRun`) is shared with benchmarks/cluster_failover.py.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import urllib.request

from natsproc import NatsCluster
from pinclient import PinClient
from test_cluster import health, node_config, wait_applied, wait_until, wait_writable
from test_load import LIFTED, assert_clean, check, load_binary  # noqa: F401 (fixture)
from wsraw import http_get

BOUND_S = 10.0
ROLES = ("stream-leader", "consumer", "connection")
PACE_S = 0.1  # between one ok and the next write, per writer


def jsz(server) -> dict:
    url = f"http://127.0.0.1:{server.monitor_port}/jsz?accounts=true&streams=true&consumers=true"
    with urllib.request.urlopen(url, timeout=2) as r:
        return json.loads(r.read())


def stream_detail(server, name: str = "E2E") -> dict | None:
    for account in jsz(server).get("account_details") or []:
        for s in account.get("stream_detail") or []:
            if s.get("name") == name:
                return s
    return None


class Writer(threading.Thread):
    """Sequential `pin.create`s on one node (one per PACE_S), each with a unique title and an `idem` key; an
    `unavailable` is retried (same title, same key) after its `retry_after_ms`, as a client is
    told. Every reply is recorded with the time its request was sent."""

    def __init__(self, node, label: str, lat: float):
        super().__init__(daemon=True)
        self.node, self.label, self.lat = node, label, lat
        self.stop = threading.Event()
        self.log: list[tuple[float, float, str]] = []  # (sent, answered, "ok" | "unavailable")
        self.acked: dict[str, str] = {}  # title -> pin id
        self.problems: list[str] = []
        self.unavailable = 0

    def run(self) -> None:
        client = PinClient(self.node.port, timeout=15)
        try:
            i = 0
            while not self.stop.is_set():
                title = f"{self.label}-{i}"
                key = secrets.token_hex(12)
                i += 1
                while not self.stop.is_set():
                    sent = time.monotonic()
                    try:
                        r = client.request("pin.create", idem=key,
                                           pin=dict(lat=self.lat + (i % 500) / 10000, lon=10.0, title=title))
                    except Exception as e:  # a TimeoutError is a write left unanswered
                        self.problems.append(f"{title}: {type(e).__name__}: {str(e)[:200]}")
                        return
                    answered = time.monotonic()
                    if r["type"] == "ok":
                        self.log.append((sent, answered, "ok"))
                        self.acked[title] = r["pin"]["id"]
                        self.stop.wait(PACE_S)  # a steady load, not a flood of pins
                        break
                    if r.get("code") != "unavailable" or not r.get("retry_after_ms", 0) > 0:
                        self.problems.append(f"{title}: neither ok nor unavailable with retry_after_ms: {r}")
                        return
                    self.log.append((sent, answered, "unavailable"))
                    self.unavailable += 1
                    self.stop.wait(r["retry_after_ms"] / 1000)  # what the client is told to do
        finally:
            client.close()

    def first_ok_sent_after(self, t: float) -> float | None:
        for sent, answered, what in list(self.log):
            if what == "ok" and sent >= t:
                return answered
        return None


class HealthWatch(threading.Thread):
    """Each node's `/healthz` every 100 ms: (time, writable, refusal)."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.stop = threading.Event()
        self.seen: list[list[tuple[float, bool, str | None]]] = [[] for _ in nodes]

    def run(self) -> None:
        while not self.stop.is_set():
            for i, d in enumerate(self.nodes):
                try:
                    c = health(d)["cluster"]
                    self.seen[i].append((time.monotonic(), c["writable"], c.get("refusal")))
                except (OSError, ValueError, KeyError):
                    pass
            self.stop.wait(0.1)

    def refusals_since(self, t: float) -> list[tuple[int, str]]:
        return [(i, r) for i, seen in enumerate(self.seen) for (at, w, r) in list(seen) if at >= t and not w and r]

    def longest_unwritable(self, t: float) -> float:
        worst = 0.0
        for seen in self.seen:
            start = None
            for at, w, _ in list(seen):
                if at < t:
                    continue
                if not w and start is None:
                    start = at
                elif w and start is not None:
                    worst = max(worst, at - start)
                    start = None
        return worst


class FailoverRun:
    """Three NATS servers, three vigild nodes (node i first on server i), a writer on each node
    and a health watcher; `kill(role)` kills the server holding the role and measures."""

    def __init__(self, workdir, start_node, *, name: str = "E2E"):
        self.nats = NatsCluster(workdir, 3, name).start()
        self.servers = self.nats.servers
        self.by_name = {s.name: s for s in self.servers}
        self.writers, self.watch = [], None
        try:
            self._start(start_node)
        except BaseException:
            self.close()
            raise

    def _start(self, start_node) -> None:
        urls = [s.url for s in self.servers]
        self.nodes = []
        for i in range(3):
            cfg = node_config(urls[i:] + urls[:i], f"n{i + 1}")
            cfg["cluster"]["replicas"] = 3
            self.nodes.append(start_node(cfg))
        for d in self.nodes:
            wait_writable(d, timeout=60)
        self.writers = [Writer(d, f"n{i + 1}", 60.0 + i) for i, d in enumerate(self.nodes)]
        self.watch = HealthWatch(self.nodes)
        for t in (*self.writers, self.watch):
            t.start()
        self.wait_steady()

    def leader(self):
        """The live server a live server names as the stream's leader (None during an election)."""
        for s in self.servers:
            if s.proc and s.proc.poll() is None:
                try:
                    detail = stream_detail(s)
                except OSError:
                    continue
                name = detail and (detail.get("cluster") or {}).get("leader")
                server = self.by_name.get(name or "")
                if server and server.proc and server.proc.poll() is None:
                    return server
        return None

    def roles(self) -> dict[str, set[str]]:
        """Server name -> the roles it holds now (from the nodes' `/healthz`, the stream's
        leader cross-checked with a live server's `/jsz`)."""
        held: dict[str, set[str]] = {s.name: set() for s in self.servers}
        hs = [health(d)["cluster"] for d in self.nodes]
        leader = self.leader()
        if leader:
            held[leader.name].add("stream-leader")
        for i, h in enumerate(hs):
            if h["consumer"]["server"] in held:
                held[h["consumer"]["server"]].add(f"consumer of n{i + 1}")
            if h["server"] in held:
                held[h["server"]].add(f"connection of n{i + 1}")
        return held

    def target(self, role: str) -> str:
        if role == "consumer":
            # Preferably a server delivering some node's stream while neither leading the stream
            # nor carrying that node's connection: the loss only the consumer rules detect.
            for name, rs in self.roles().items():
                if "stream-leader" not in rs and any(f"consumer of n{k}" in rs and f"connection of n{k}" not in rs
                                                     for k in (1, 2, 3)):
                    return name
        want = {"stream-leader": "stream-leader", "consumer": "consumer of n1", "connection": "connection of n2"}[role]

        def find():
            return next((name for name, rs in self.roles().items() if want in rs), None)
        return wait_until(f"a server holding {want}", find, timeout=20, poll=0.2)

    def consumer_resets(self) -> list[int]:
        """Per node, `vigil_cluster_consumer_resets_total` summed over its reasons."""
        counts = []
        for d in self.nodes:
            text = http_get(d.admin_port, "/metrics").body.decode()
            counts.append(int(sum(float(line.split()[-1]) for line in text.splitlines()
                                  if line.startswith("vigil_cluster_consumer_resets_total{"))))
        return counts

    def kill(self, role: str) -> dict:
        name = self.target(role)
        held = sorted(self.roles()[name])
        server = self.by_name[name]
        resets_before = self.consumer_resets()
        killed_at = time.monotonic()
        server.kill()
        deadline = killed_at + 30
        while True:
            firsts = [w.first_ok_sent_after(killed_at) for w in self.writers]
            if all(x is not None for x in firsts):
                break
            self.check_writers()
            if time.monotonic() > deadline:
                state = []
                for i, (d, w) in enumerate(zip(self.nodes, self.writers)):
                    try:
                        h = health(d)["cluster"]
                    except OSError as e:
                        h = str(e)
                    state.append(f"n{i + 1}: last replies {[(round(a - killed_at, 2), round(b - killed_at, 2), x) for a, b, x in w.log[-3:]]}; "
                                 f"healthz {h}")
                raise AssertionError(f"after killing {name} ({held}) not every node wrote again within 30 s:\n" + "\n".join(state))
            time.sleep(0.05)
        resumed = [f - killed_at for f in firsts]
        time.sleep(0.3)  # the watcher's samples around the last resumption (it samples every 100 ms)
        refusals = self.watch.refusals_since(killed_at)
        resets = [after - before for before, after in zip(resets_before, self.consumer_resets())]
        result = dict(role=role, server=name, held=held, resumed_s=resumed, consumer_resets=resets,
                      unavailable=sum(1 for w in self.writers for (s, _, what) in list(w.log)
                                      if what == "unavailable" and s >= killed_at),
                      unwritable_s=self.watch.longest_unwritable(killed_at),
                      refusals=sorted({re.sub(r"\d+", "N", r) for _, r in refusals}))
        server.start()
        self.wait_steady()
        return result

    def check_writers(self):
        problems = [p for w in self.writers for p in w.problems]
        assert not problems, problems
        return None

    def wait_steady(self) -> None:
        """Every node writable, every writer has had an ok lately, and the stream's three
        replicas current (a kill of a server right after a restart would find a replica that
        cannot yet take over)."""
        for d in self.nodes:
            wait_writable(d, timeout=40)

        def current():
            # Only the leader's view of its followers is meaningful.
            leader = self.leader()
            detail = leader and stream_detail(leader)
            if not detail or (detail.get("cluster") or {}).get("leader") != leader.name:
                return False
            replicas = detail["cluster"].get("replicas") or []
            return len(replicas) == 2 and all(r.get("current") and not r.get("offline") for r in replicas)
        wait_until("the stream's three replicas current", current, timeout=40, poll=0.2)

        def meta_current():
            # The JetStream meta group too (it creates consumers): a server restarted a moment
            # ago that has not caught up would leave one live peer after the next kill.
            for s in self.servers:
                if s.proc and s.proc.poll() is None:
                    name = (jsz(s).get("meta_cluster") or {}).get("leader")
                    leader = self.by_name.get(name or "")
                    if not leader or not leader.proc or leader.proc.poll() is not None:
                        return False
                    meta = jsz(leader).get("meta_cluster") or {}
                    replicas = meta.get("replicas") or []
                    return (meta.get("leader") == name and len(replicas) == 2
                            and all(r.get("current") and not r.get("offline") for r in replicas))
            return False
        wait_until("the JetStream meta group's three peers current", meta_current, timeout=40, poll=0.2)
        now = time.monotonic()
        wait_until("a write confirmed on every node", lambda: all(w.first_ok_sent_after(now) for w in self.writers)
                   or self.check_writers(), timeout=20, poll=0.05)

    def finish(self) -> dict:
        for w in self.writers:
            w.stop.set()
        for w in self.writers:
            w.join(timeout=20)
        self.watch.stop.set()
        self.watch.join(timeout=5)
        self.check_writers()
        seq = wait_applied(self.nodes, timeout=30)
        pins = []
        for d in self.nodes:
            c = PinClient(d.port, timeout=15)
            try:
                pins.append(c.subscribe_bbox(59.0, 9.0, 64.0, 11.0))
            finally:
                c.close()
        return dict(sequence=seq, pins=pins)

    def close(self) -> None:
        for w in self.writers:
            w.stop.set()
        if self.watch:
            self.watch.stop.set()
        self.nats.stop()


def test_every_node_writes_again_within_10_s_whichever_server_dies(vigild, tmp_path):
    began = time.monotonic()
    run = FailoverRun(tmp_path, vigild)
    try:
        results = [run.kill(role) for role in ROLES]
        end = run.finish()
    finally:
        run.close()
    for r in results:
        print(f"\nkilled {r['server']} ({', '.join(r['held'])}): writes again after "
              f"{', '.join(f'{x:.2f}' for x in r['resumed_s'])} s; {r['unavailable']} unavailable; "
              f"longest writable:false {r['unwritable_s']:.2f} s; consumer resets {r['consumer_resets']}; refusals {r['refusals']}")
    for r in results:
        assert max(r["resumed_s"]) <= BOUND_S, r
    # writable:false with a reason while the stream had no leader (seconds: the 100 ms sampling
    # sees it); a consumer lost on a server that was not its node's connection is declared lost
    # by the consumer rules (heartbeats, ack without progress, 409) and recreated: counted (its
    # writable:false lasts only until the new consumer is created, often under the sampling).
    leader_kill, consumer_kill = results[0], results[1]
    assert leader_kill["refusals"], f"no node said writable:false with a reason after killing the stream leader {leader_kill}"
    for k in (1, 2, 3):
        if f"consumer of n{k}" in consumer_kill["held"] and f"connection of n{k}" not in consumer_kill["held"]:
            assert consumer_kill["consumer_resets"][k - 1] >= 1, consumer_kill
    # nothing acknowledged lost, nothing applied twice, the same state everywhere
    acked = {title: pid for w in run.writers for title, pid in w.acked.items()}
    assert len(acked) > 30, len(acked)
    for pins in end["pins"]:
        titles = [p["title"] for p in pins]
        assert len(titles) == len(set(titles)), f"applied twice: {[t for t in set(titles) if titles.count(t) > 1][:5]}"
        ids = {p["title"]: p["id"] for p in pins}
        missing = [t for t, pid in acked.items() if ids.get(t) != pid]
        assert not missing, f"{len(missing)} acknowledged writes missing, e.g. {missing[:5]}"
    seq = end["sequence"]

    def digests():
        got = [json.loads(http_get(d.admin_port, "/state/digest").body) for d in run.nodes]
        return got if all(g["cluster_sequence"] == seq for g in got) else None
    got = wait_until("digests at the last sequence", digests, timeout=30, poll=0.3)
    assert len({g["digest"] for g in got}) == 1, got
    metrics = [http_get(d.admin_port, "/metrics").body.decode() for d in run.nodes]
    unwritable = [float(line.split()[-1]) for m in metrics for line in m.splitlines()
                  if line.startswith("vigil_cluster_unwritable_seconds_total")]
    assert unwritable and max(unwritable) > 0, unwritable
    elapsed = time.monotonic() - began
    print(f"test took {elapsed:.0f} s")
    assert elapsed < 180, f"took {elapsed:.0f} s (bounded at 3 minutes)"
