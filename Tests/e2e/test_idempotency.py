"""Writes that are safe to retry (docs/PROTOCOL.md): the optional ``idem`` key on every write.

A write sent again with the same key and the same request gets the first answer again with
``"repeat": true`` and changes nothing (no second pin, no second event); the same key with a
different request is ``idem_conflict``; a bad key is ``invalid_idem``. The kept answer survives a
cut connection, a graceful restart and kill -9 (journal), and a snapshot; its bytes on disk are
sealed (no token in the files). The per-address bound evicts the oldest key.

On a cluster (three nodes and a nats-server, as in test_cluster.py) the answer travels with the
record through the stream: a repeat sent to another node is answered the same way, and nothing is
published twice.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from pathlib import Path

import pinclient as pc
from test_cluster import cluster, nats, node_config, wait_applied, wait_writable  # noqa: F401 (fixtures)
import wsraw
from pinclient import PinClient

WORLD = (-90, -180, 90, 180)


def key() -> str:
    """A key as the clients make them: 128 random bits, 22 base64url characters."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def config(state: Path | None = None, **idem) -> dict:
    cfg = pc.pins_config()
    if state is not None:
        cfg["state"] = {"directory": str(state), "fsync": "always"}
    if idem:
        cfg["idempotency"] = idem
    return cfg


def world_pins(port: int) -> list[dict]:
    with PinClient(port) as c:
        return c.subscribe_bbox(*WORLD)


def without_ref(reply: dict) -> dict:
    return {k: v for k, v in reply.items() if k not in ("ref", "repeat")}


def test_same_key_twice_on_one_connection_applies_once(vigild):
    d = vigild(config())
    k = key()
    with PinClient(d.port) as c, PinClient(d.port) as watcher:
        watcher.subscribe_bbox(*WORLD)
        first = c.ok("pin.create", idem=k, pin={"lat": 1.0, "lon": 2.0, "title": "once"})
        assert "repeat" not in first
        again = c.ok("pin.create", idem=k, pin={"lat": 1.0, "lon": 2.0, "title": "once"})
        assert again["repeat"] is True
        assert without_ref(again) == without_ref(first), "the first answer, token included"
        assert again["ref"] != first["ref"], "the repeat's own ref is echoed"
        # Exactly one pin.added reached the subscriber: the barrier's reply comes after any event.
        added = watcher.event()
        assert added["type"] == "pin.added" and added["pin"]["id"] == first["pin"]["id"]
        watcher.barrier()
    assert [p["id"] for p in world_pins(d.port)] == [first["pin"]["id"]]
    assert d.metric("vigil_idempotency_repeats_total") == 1
    assert d.metric("vigil_idempotency_keys") == 1


def test_key_order_and_spacing_do_not_matter_but_fields_do(vigild):
    d = vigild(config())
    k = key()
    with PinClient(d.port) as c:
        first = c.ok("pin.create", idem=k, pin={"lat": 1.0, "lon": 2.0, "title": "a"})
        # The same request with its members in another order and other spacing: a repeat.
        c.send_raw('{ "pin" : {"title":"a", "lon":2.0, "lat":1.0}, "idem":"%s", "op":"pin.create", "ref":"x" }' % k)
        again = c.await_reply("x")
        assert again["type"] == "ok" and again["repeat"] is True and again["pin"]["id"] == first["pin"]["id"]
        # Another title under the same key: refused, nothing made.
        conflict = c.error("pin.create", idem=k, pin={"lat": 1.0, "lon": 2.0, "title": "b"})
        assert conflict["code"] == "idem_conflict" and conflict["field"] == "idem"
        # The same key on another operation is a different request too.
        assert c.error("pin.vote", idem=k, id=first["pin"]["id"], value=1)["code"] == "idem_conflict"
    assert len(world_pins(d.port)) == 1


def test_bad_keys_are_refused_and_reads_take_none(vigild):
    d = vigild(config())
    with PinClient(d.port) as c:
        pin = {"lat": 1.0, "lon": 2.0, "title": "t"}
        for bad in ["short", "x" * 65, "has space in it!!", "ünïcödé-ünïcödé-ü", 12345678901234567, None, ["a" * 22]]:
            e = c.error("pin.create", idem=bad, pin=pin)
            assert (e["code"], e["field"]) == ("invalid_idem", "idem"), (bad, e)
        assert c.ok("pin.create", idem="a" * 16, pin=pin)
        assert c.ok("pin.create", idem="Z-_9" * 16, pin=pin)
        # A read does not take a key: it is a field the operation does not define.
        e = c.error("subscribe", idem=key(), area={"bbox": list(WORLD)})
        assert (e["code"], e["field"]) == ("unknown_field", "idem")
        e = c.error("panic.watch", idem=key(), stream="x", watch_token="y")
        assert (e["code"], e["field"]) == ("unknown_field", "idem")
    assert len(world_pins(d.port)) == 2


def test_an_error_is_not_kept(vigild):
    d = vigild(config())
    k = key()
    with PinClient(d.port) as c:
        e = c.error("pin.create", idem=k, pin={"lat": 100.0, "lon": 2.0, "title": "t"})
        assert e["code"] == "invalid_lat"
        fixed = c.ok("pin.create", idem=k, pin={"lat": 10.0, "lon": 2.0, "title": "t"})
        assert "repeat" not in fixed


def test_repeat_across_a_cut_connection(vigild):
    """The client sends pin.create and its connection drops before it reads the answer: the
    resend on a new connection with the same key gets the same pin, applied once."""
    d = vigild(config())
    k = key()
    pin = {"lat": 5.0, "lon": 5.0, "title": "cut"}
    with PinClient(d.port) as watcher:
        watcher.subscribe_bbox(*WORLD)
        raw = wsraw.ws_connect(d.port, "/v1")
        raw.send_frame(wsraw.OP_TEXT, json.dumps({"op": "pin.create", "ref": 1, "idem": k, "pin": pin}).encode())
        # Applied (its event reached the watcher); the writer vanishes without reading its answer.
        added = watcher.event()
        assert added["type"] == "pin.added"
        raw.abort()
        with PinClient(d.port) as c2:
            reply = c2.request("pin.create", ref=2, idem=k, pin=pin)
            assert reply["type"] == "ok" and reply["repeat"] is True, reply
            assert reply["pin"]["id"] == added["pin"]["id"]
        watcher.barrier()  # no second pin.added before this reply
    pins = world_pins(d.port)
    assert [p["id"] for p in pins] == [added["pin"]["id"]]


def test_panic_start_repeated_gives_one_stream_and_the_same_tokens(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    k = key()
    fields = dict(idem=k, status="red", lat=52.5, lon=13.4, watchers=2)
    with PinClient(d.port) as c:
        c.EVENTS = pc.EVENT_TYPES | {"panic.watchers"}
        first = c.ok("panic.start", **fields)
        again = c.ok("panic.start", **fields)
        assert again["repeat"] is True
        assert (again["stream"], again["owner_token"], again["watch_tokens"]) == \
            (first["stream"], first["owner_token"], first["watch_tokens"])
        # The stream has one event (the start): no second start was applied.
        with PinClient(d.port) as w:
            watch = w.ok("panic.watch", stream=first["stream"], watch_token=first["watch_tokens"][0])
            assert watch["state"]["seq"] == 1
        # A panic.update with a key: applied once, seq 2 both times.
        upd = dict(idem=key(), stream=first["stream"], owner_token=first["owner_token"], lat=52.6, lon=13.5)
        assert c.ok("panic.update", **upd)["seq"] == 2
        c2 = c.ok("panic.update", **upd)
        assert c2["seq"] == 2 and c2["repeat"] is True
    assert d.stop(signal.SIGTERM) == 0
    # On disk: the answer is sealed; no token shows in any file, nor in inspect's output.
    for f in state.iterdir():
        data = f.read_bytes()
        for token in [first["owner_token"], *first["watch_tokens"]]:
            assert token.encode() not in data, f"a token in {f.name}"
    out = subprocess.run([str(vigild_binary), "state", "inspect", str(state)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert first["owner_token"] not in out.stdout
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert any(line.get("kept_answers") == 2 for line in lines), out.stdout


def test_repeat_after_kill_9_and_after_graceful_restart(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    k = key()
    pin = {"lat": 7.0, "lon": 7.0, "title": "durable"}
    with PinClient(d.port) as c:
        first = c.ok("pin.create", idem=k, pin=pin)
        upd_key = key()
        updated = c.ok("pin.update", idem=upd_key, id=first["pin"]["id"], edit_token=first["edit_token"],
                       changes={"title": "durable 2"})
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True  # killed on purpose: not a failure at teardown
    d2 = vigild(config(state))
    with PinClient(d2.port) as c:
        again = c.ok("pin.create", idem=k, pin=pin)
        assert again["repeat"] is True and without_ref(again) == without_ref(first)
        upd_again = c.ok("pin.update", idem=upd_key, id=first["pin"]["id"], edit_token=first["edit_token"],
                         changes={"title": "durable 2"})
        assert upd_again["repeat"] is True and upd_again["pin"] == updated["pin"]
        assert c.error("pin.create", idem=k, pin={**pin, "title": "other"})["code"] == "idem_conflict"
    assert len(world_pins(d2.port)) == 1
    # A graceful stop writes a snapshot (and drops the replayed journal): the keys are in it.
    assert d2.stop(signal.SIGTERM) == 0
    d3 = vigild(config(state))
    with PinClient(d3.port) as c:
        assert c.ok("pin.create", idem=k, pin=pin)["pin"]["id"] == first["pin"]["id"]
    assert len(world_pins(d3.port)) == 1


def test_the_per_address_bound_evicts_the_oldest(vigild):
    d = vigild(config(max_keys_per_address=3, max_keys=10))
    keys = [key() for _ in range(4)]
    with PinClient(d.port) as c:
        made = [c.ok("pin.create", idem=k, pin={"lat": 1.0, "lon": float(i), "title": f"p{i}"})
                for i, k in enumerate(keys)]
        assert d.metric("vigil_idempotency_evicted_total") == 1
        assert d.metric("vigil_idempotency_keys") == 3
        # The newest three still repeat; the oldest was evicted, so its resend is a new write.
        for k, m, i in zip(keys[1:], made[1:], range(1, 4)):
            r = c.ok("pin.create", idem=k, pin={"lat": 1.0, "lon": float(i), "title": f"p{i}"})
            assert r["repeat"] is True and r["pin"]["id"] == m["pin"]["id"]
        r = c.ok("pin.create", idem=keys[0], pin={"lat": 1.0, "lon": 0.0, "title": "p0"})
        assert "repeat" not in r and r["pin"]["id"] != made[0]["pin"]["id"]


def test_checkin_create_repeated_gives_one_circle(vigild):
    d = vigild(config())
    k = key()
    with PinClient(d.port) as c:
        first = c.ok("checkin.create", idem=k, members=["Mum"])
        again = c.ok("checkin.create", idem=k, members=["Mum"])
        assert again["repeat"] is True and without_ref(again) == without_ref(first)
    assert d.metric("vigil_checkin_circles") == 1


def test_a_repeat_on_another_node_of_a_cluster_gets_the_same_answer(cluster):
    nodes = cluster(3)
    k = key()
    pin = {"lat": 8.0, "lon": 8.0, "title": "clustered"}
    with PinClient(nodes[0].port) as c:
        first = c.ok("pin.create", idem=k, pin=pin)
        start_key = key()
        stream = c.ok("panic.start", idem=start_key, status="red", lat=1.0, lon=1.0, watchers=1)
    sequence = wait_applied(nodes)
    for d in nodes[1:]:
        with PinClient(d.port) as c:
            again = c.ok("pin.create", idem=k, pin=pin)
            assert again["repeat"] is True and without_ref(again) == without_ref(first)
            s2 = c.ok("panic.start", idem=start_key, status="red", lat=1.0, lon=1.0, watchers=1)
            assert (s2["repeat"], s2["stream"], s2["owner_token"], s2["watch_tokens"]) == \
                (True, stream["stream"], stream["owner_token"], stream["watch_tokens"])
            assert c.error("pin.create", idem=k, pin={**pin, "title": "other"})["code"] == "idem_conflict"
    assert wait_applied(nodes) == sequence, "no repeat was published to the stream"
    for d in nodes:
        assert [p["id"] for p in world_pins(d.port)] == [first["pin"]["id"]]


def test_a_key_lives_on_in_periodic_snapshots_once_its_journal_is_gone(vigild, tmp_path):
    """The kept answer is carried by the periodic snapshots (taken in slices, the kept answers on
    the writer thread): once the journal segment that recorded it is deleted, a restart after
    kill -9 still answers the repeat."""
    import hashlib
    state = tmp_path / "state"
    cfg = config(state)
    cfg["state"]["snapshot_interval_s"] = 1
    d = vigild(cfg)
    k = key()
    lookup = hashlib.sha256(b"vigil idem id" + k.encode()).digest()
    pin = {"lat": 9.0, "lon": 9.0, "title": "snapshotted"}
    with PinClient(d.port) as c:
        first = c.ok("pin.create", idem=k, pin=pin)
    # Two snapshots after the write: the second one's cleanup deletes the segment that held it.
    mark = d.line_count()
    d.wait_for_log("snapshot written", 10, start=mark)
    d.wait_for_log("snapshot written", 10, start=d.line_count())
    files = {f.name: f.read_bytes() for f in state.iterdir() if f.is_file()}
    assert not any(lookup in data for name, data in files.items() if name.endswith(".vgj")), "still in a journal segment"
    assert any(lookup in data for name, data in files.items() if name.endswith(".vgs")), "not in the snapshots"
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True  # killed on purpose
    cfg["state"]["snapshot_interval_s"] = 3600
    d2 = vigild(cfg)
    with PinClient(d2.port) as c:
        again = c.ok("pin.create", idem=k, pin=pin)
        assert again["repeat"] is True and without_ref(again) == without_ref(first)
    assert len(world_pins(d2.port)) == 1


def test_a_cluster_node_killed_and_restarted_still_answers_the_repeat(vigild, nats, tmp_path):
    """Node 2 applied the write (and its answer) from the stream, is killed with SIGKILL and
    restarted on its state directory: it catches up from the stream and answers the repeat."""
    cfgs = [node_config([nats.url], f"n{i}", tmp_path / f"state-n{i}") for i in (1, 2)]
    a, b = vigild(cfgs[0]), vigild(cfgs[1])
    wait_writable(a)
    wait_writable(b)
    k = key()
    pin = {"lat": 11.0, "lon": 11.0, "title": "survives a node"}
    with PinClient(a.port) as c:
        first = c.ok("pin.create", idem=k, pin=pin)
    wait_applied([a, b])
    b.signal(signal.SIGKILL)
    b.wait(10)
    b.reported = True  # killed on purpose
    b2 = vigild(cfgs[1])
    wait_writable(b2)
    sequence = wait_applied([a, b2])
    with PinClient(b2.port) as c:
        again = c.ok("pin.create", idem=k, pin=pin)
        assert again["repeat"] is True and without_ref(again) == without_ref(first)
    assert wait_applied([a, b2]) == sequence, "the repeat published nothing"
    assert [p["id"] for p in world_pins(b2.port)] == [first["pin"]["id"]]
