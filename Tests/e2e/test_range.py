"""Pins with a reach (Radar) end to end: ``range_m`` on pins, ``viewer`` on subscriptions.

Over real sockets against a real vigild: a pin with a range reaches only subscribers whose
viewer position is within ``range_m`` of it (and whose area holds it); without a viewer such
pins are delivered neither in the reply nor in events; moves and range changes are added /
removed for those who enter or leave the reach; a subscriber that moves re-subscribes and gets
its new set; validation errors; a restart keeps ``range_m``; the viewer's position appears in
neither the journal, the snapshot nor the debug log.
"""

from __future__ import annotations

import math
import signal
import struct

import pinclient as pc
from pinclient import PinClient, deg_lat
from test_load import LIFTED, assert_clean, check, load_binary, run_load  # noqa: F401  (load_binary: a fixture)

CITY = (52.0, 13.0, 53.0, 14.0)
HOME = (52.5, 13.5)


def north(metres: float) -> tuple[float, float]:
    """A point ``metres`` north of HOME along its meridian."""
    return HOME[0] + deg_lat(metres), HOME[1]


def viewer(point: tuple[float, float]) -> dict:
    return {"lat": point[0], "lon": point[1]}


def subscribe(c: PinClient, at: tuple[float, float] | None, area=CITY) -> list[dict]:
    fields = {"area": {"bbox": list(area)}}
    if at is not None:
        fields["viewer"] = viewer(at)
    return c.ok("subscribe", **fields)["pins"]


def config(**pins) -> dict:
    return pc.pins_config(pins={"writes_per_minute": 100000, "write_burst": 100000, **pins},
                          session={"messages_per_second": 100000, "message_burst": 100000})


def test_delivery_follows_the_reach(vigild):
    d = vigild(config())
    with PinClient(d.port) as near, PinClient(d.port) as far, PinClient(d.port) as blind, PinClient(d.port) as pub:
        assert pub.welcome["limits"]["max_range_m"] == 50000
        assert subscribe(near, north(900)) == []
        assert subscribe(far, north(1100)) == []
        assert subscribe(blind, None) == []
        pin, token = pub.create(*HOME, "radar", range_m=1000)
        assert pin["range_m"] == 1000
        assert near.event() == {"type": "pin.added", "pin": pin}
        plain, _ = pub.create(*HOME, "plain")
        assert "range_m" not in plain
        # The ranged pin's added never came to `far` or `blind`: their first event is the plain pin.
        for c in (near, far, blind):
            assert c.event() == {"type": "pin.added", "pin": plain}
        far.quiet()
        blind.quiet()

        # Replies follow the rule too.
        with PinClient(d.port) as c:
            assert {p["id"] for p in subscribe(c, north(999))} == {pin["id"], plain["id"]}
            assert [p["id"] for p in subscribe(c, north(1001))] == [plain["id"]]
            assert [p["id"] for p in subscribe(c, None)] == [plain["id"]]
            assert subscribe(c, HOME, area=(0.0, 0.0, 1.0, 1.0)) == [], "in reach but outside the area"

        # A vote and a delete reach the same subscriber only.
        voted = pub.ok("pin.vote", id=pin["id"], value=1)["pin"]
        assert near.event() == {"type": "pin.updated", "pin": voted}
        pub.ok("pin.delete", id=pin["id"], edit_token=token)
        assert near.event()["type"] == "pin.removed"
        for c in (near, far, blind):
            c.quiet()


def test_moves_and_range_changes_add_and_remove(vigild):
    d = vigild(config())
    with PinClient(d.port) as a, PinClient(d.port) as b, PinClient(d.port) as blind, PinClient(d.port) as pub:
        subscribe(a, north(0))
        subscribe(b, north(2000))
        subscribe(blind, None)
        pin, token = pub.create(*HOME, "walker", range_m=500)
        assert a.event()["type"] == "pin.added"

        to = north(1800)
        moved = pub.ok("pin.update", id=pin["id"], edit_token=token, changes={"lat": to[0], "lon": to[1]})["pin"]
        assert a.event() == {"type": "pin.removed", "pin": moved, "reason": "moved"}
        assert b.event() == {"type": "pin.added", "pin": moved}

        wider = pub.ok("pin.update", id=pin["id"], edit_token=token, changes={"range_m": 2000})["pin"]
        assert wider["range_m"] == 2000
        assert a.event() == {"type": "pin.added", "pin": wider}
        assert b.event() == {"type": "pin.updated", "pin": wider}

        unranged = pub.ok("pin.update", id=pin["id"], edit_token=token, changes={"range_m": None})["pin"]
        assert "range_m" not in unranged
        assert blind.event() == {"type": "pin.added", "pin": unranged}
        assert a.event()["type"] == b.event()["type"] == "pin.updated"

        small = pub.ok("pin.update", id=pin["id"], edit_token=token, changes={"range_m": 300})["pin"]
        assert a.event() == {"type": "pin.removed", "pin": small, "reason": "moved"}
        assert blind.event() == {"type": "pin.removed", "pin": small, "reason": "moved"}
        assert b.event() == {"type": "pin.updated", "pin": small}
        for c in (a, b, blind):
            c.quiet()


def test_a_subscriber_that_moves_resubscribes_and_gets_its_new_set(vigild):
    d = vigild(config())
    with PinClient(d.port) as me, PinClient(d.port) as pub:
        here, _ = pub.create(*HOME, "here", range_m=1000)
        there_at = north(11000)
        there, there_token = pub.create(*there_at, "there", range_m=1000)
        assert [p["id"] for p in subscribe(me, HOME)] == [here["id"]]
        assert [p["id"] for p in subscribe(me, there_at)] == [there["id"]]
        # From now on, events follow the new position only.
        pub.ok("pin.vote", id=here["id"], value=1)
        voted = pub.ok("pin.vote", id=there["id"], value=1)["pin"]
        assert me.event() == {"type": "pin.updated", "pin": voted}
        me.quiet()
        # Without a viewer, no ranged pin at all; an unsubscribe forgets the position.
        assert subscribe(me, None) == []
        me.ok("unsubscribe")
        pub.ok("pin.update", id=there["id"], edit_token=there_token, changes={"title": "still there"})
        me.quiet()


def test_validation_errors(vigild):
    d = vigild(config(max_range_m=5000))
    with PinClient(d.port) as c:
        assert c.welcome["limits"]["max_range_m"] == 5000
        cases = [
            ("pin.create", {"pin": {"lat": 1, "lon": 1, "title": "x", "range_m": 0}}, "invalid_range", "pin.range_m"),
            ("pin.create", {"pin": {"lat": 1, "lon": 1, "title": "x", "range_m": 5001}}, "invalid_range", "pin.range_m"),
            ("pin.create", {"pin": {"lat": 1, "lon": 1, "title": "x", "range_m": 12.5}}, "invalid_range", "pin.range_m"),
            ("pin.create", {"pin": {"lat": 1, "lon": 1, "title": "x", "range_m": "100"}}, "invalid_range", "pin.range_m"),
            ("subscribe", {"area": {"bbox": list(CITY)}, "viewer": [52.5, 13.5]}, "invalid_viewer", "viewer"),
            ("subscribe", {"area": {"bbox": list(CITY)}, "viewer": {"lat": 95, "lon": 13}}, "invalid_viewer", "viewer.lat"),
            ("subscribe", {"area": {"bbox": list(CITY)}, "viewer": {"lat": 52, "lon": 181}}, "invalid_viewer", "viewer.lon"),
            ("subscribe", {"area": {"bbox": list(CITY)}, "viewer": {"lat": 52}}, "missing_field", "viewer.lon"),
            ("subscribe", {"area": {"bbox": list(CITY)}, "viewer": {"lat": 52, "lon": 13, "alt": 3}}, "unknown_field", "viewer.alt"),
        ]
        for op, fields, code, field in cases:
            e = c.error(op, **fields)
            assert (e["code"], e.get("field")) == (code, field), (op, fields, e)
        pin, token = c.create(1, 1, "x", range_m=5000)
        e = c.error("pin.update", id=pin["id"], edit_token=token, changes={"range_m": 6000})
        assert (e["code"], e["field"]) == ("invalid_range", "changes.range_m")
        # The largest range is accepted, and the refusals above changed nothing.
        assert subscribe(c, (1.0, 1.0), area=(0, 0, 2, 2)) == [pin]


def test_restart_keeps_range_and_the_viewer_is_never_written_or_logged(vigild, tmp_path):
    state = tmp_path / "state"
    cfg = config()
    cfg["state"] = {"directory": str(state)}
    # A viewer position no pin, area or other message uses: its digits and its f64 bytes are searched for.
    secret = (52.50123457, 13.49876543)
    d = vigild(cfg, extra_args=["--log-level", "debug"])
    with PinClient(d.port) as pub, PinClient(d.port) as me:
        kept, token = pub.create(*HOME, "kept", range_m=1500)
        journaled, _ = pub.create(52.52, 13.49, "journaled", range_m=2500)
        changed, ctoken = pub.create(52.53, 13.5, "changed", range_m=700)
        pub.ok("pin.update", id=changed["id"], edit_token=ctoken, changes={"range_m": None})
        assert {p["id"] for p in subscribe(me, secret)} == {kept["id"], journaled["id"], changed["id"]}
    assert d.stop(signal.SIGTERM) == 0      # a final snapshot: version 3, with ranges
    d2 = vigild(cfg, extra_args=["--log-level", "debug"])
    with PinClient(d2.port) as me:
        got = {p["id"]: p for p in subscribe(me, secret)}
        assert got[kept["id"]]["range_m"] == 1500 and got[journaled["id"]]["range_m"] == 2500
        assert "range_m" not in got[changed["id"]]
        # The reach still applies after the restart: 1.6 km north of HOME only `kept`'s 1,500 m fails.
        far = {p["id"] for p in subscribe(me, north(1600))}
        assert kept["id"] not in far and changed["id"] in far
    with PinClient(d2.port) as pub:
        pub.create(*HOME, "after restart", range_m=900)   # a kind 10 journal record after the snapshot
    d2.proc.send_signal(signal.SIGKILL)
    d2.wait(10)
    d2.reported = True
    d3 = vigild(cfg, extra_args=["--log-level", "debug"])
    with PinClient(d3.port) as me:
        got = {p["title"]: p for p in subscribe(me, HOME)}
        assert got["after restart"]["range_m"] == 900 and got["kept"]["range_m"] == 1500

    files = [f for f in state.iterdir() if f.is_file()]
    assert any(f.name.startswith("journal-") for f in files) and any(f.name.startswith("snapshot-") for f in files)
    needles = [struct.pack("<d", v) for v in secret] + [repr(v).encode() for v in secret] + [b"50123457", b"49876543"]
    for f in files:
        data = f.read_bytes()
        for n in needles:
            assert n not in data, f"the viewer position appears in {f.name}"
    assert any("connection closed" in line for line in d._lines), "the debug log was on"
    for daemon in (d, d2, d3):
        for line in daemon._lines:
            assert "50123457" not in line and "49876543" not in line, f"the viewer position is logged: {line}"


def test_vigil_load_range_checks_the_reach_rule(vigild, load_binary, tmp_path):
    """`vigil-load map --range`: ranged pins, viewers, range changes; its oracle applies the reach rule."""
    daemon = vigild(LIFTED)
    proc, result = run_load(load_binary, daemon, tmp_path, "map", "--subscribers", "200", "--publishers", "4",
                            "--rate", "400", "--region", "52.3,13.0,52.7,13.8", "--viewport-km", "8",
                            "--panning", "0.5", "--pan-interval", "0.5", "--check-subscribers", "20",
                            "--range", "0.5", "--duration", "2")
    assert_clean(proc, result)
    exact = check(result, "viewport exactness")
    assert exact["checked"] == 20
    assert exact["counters"]["certain"] > 0 and exact["counters"]["events"] > 0
    assert "pins with a range=0.5" in proc.stdout
