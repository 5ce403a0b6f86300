"""Live map pins (docs/PROTOCOL.md) end to end: a real vigild, Python ``websockets`` clients.

One daemon is shared by this module.  Every test works in its own part of the map
(fixture ``region``), so pins left by one test never show up in another's areas; the
only whole-world subscriptions assert "contains", not "equals".

"No event arrives" is checked by a bounded wait plus a barrier request on the same
connection (``PinClient.quiet``), relying on the contract: a connection's messages are
processed in order and a reply is sent before the events its request causes.

Limits that need their own daemon (rate limit, message flood, capacity, truncation) are
in ``test_pins_limits.py``.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
import time
import uuid

import pytest

import pinclient as pc
from pinclient import PIN_KEYS, PinClient, deg_lat, geohash, haversine_m, now_ms

CATEGORIES = ["general", "sighting", "hazard", "help", "social", "lost_pet"]
THRESHOLD = 3
CONFIG = pc.pins_config(
    websocket={"max_message_bytes": 131072},
    pins={"min_ttl_s": 1, "max_ttl_s": 86400, "default_ttl_s": 14400, "categories": CATEGORIES,
          "vote_flag_threshold": THRESHOLD,
          # Generous: this module is not about limits (and some tests write a lot on one session).
          "writes_per_minute": 6000, "write_burst": 1000, "max_subscribe_pins": 5000},
    session={"messages_per_second": 1000, "message_burst": 2000},
)
EXPECTED_LIMITS = {
    "max_message_bytes": 131072, "title_max_chars": 80, "description_max_chars": 1000,
    "categories": CATEGORIES, "ttl_s": {"default": 14400, "min": 1, "max": 86400},
    "vote_flag_threshold": THRESHOLD, "writes_per_minute": 6000, "write_burst": 1000,
    "messages_per_second": 1000, "message_burst": 2000, "max_subscribe_pins": 5000,
    "title_max_bytes": 640, "description_max_bytes": 8000, "panic_note_max_chars": 280, "panic_note_max_bytes": 2240,
    "checkin_label_max_chars": 40, "checkin_label_max_bytes": 320, "checkin_note_max_chars": 280, "checkin_note_max_bytes": 2240,
}
WORLD = [-90, -180, 90, 180]

_server_shared, _server = pc.pin_server_fixture("server", CONFIG)

# Disjoint 10x10 degree squares (each test uses [lat, lon] .. [lat+5, lon+5]); latitudes
# 60..70 and longitudes beyond +-155 are left to the antimeridian test.
_REGIONS = iter([(lat, lon) for lat in range(-50, 51, 10) for lon in range(-150, 151, 10)])


_SOURCES = itertools.count(0)


@pytest.fixture
def region():
    return next(_REGIONS)


@pytest.fixture
def clients(server):
    """Factory for connected clients; all are closed after the test."""
    opened: list[PinClient] = []

    def make(n: int = 1, *, distinct_addresses: bool = False):
        """``distinct_addresses``: each client from its own loopback address (votes count per address)."""
        new = [PinClient(server.port, source=f"127.0.{next(_SOURCES) // 250 + 2}.{next(_SOURCES) % 250 + 1}"
                         if distinct_addresses else None) for _ in range(n)]
        opened.extend(new)
        return new[0] if n == 1 else new

    yield make
    for c in opened:
        c.close()


def ids(pins):
    return [p["id"] for p in pins]


def by_id(pins) -> dict:
    return {p["id"]: p for p in pins}


def tick(ms: int) -> None:
    """Wait until the clock (shared with the server: same host) has passed ``ms``, so the
    next pin gets a later created_at.  At most a millisecond or two."""
    while now_ms() <= ms:
        time.sleep(0.0005)


def expect_events(client: PinClient, expected: list[tuple], *, quiet: bool = True) -> list[dict]:
    """Read len(expected) events and compare each to (type, pin[, reason]); ``pin`` is a
    pin dict (compared whole) or an id string (compared by id).  Then assert quiet."""
    got = [client.event() for _ in expected]
    for i, (ev, want) in enumerate(zip(got, expected)):
        typ, pin = want[0], want[1]
        summary = [(e["type"], e.get("pin", {}).get("id"), e.get("reason")) for e in got]
        assert ev["type"] == typ, f"event #{i}: expected {want!r}, got {ev!r}\nall: {summary}"
        if isinstance(pin, dict):
            assert ev["pin"] == pin, f"event #{i} ({typ}): pin differs\nexpected {pin!r}\ngot      {ev['pin']!r}"
        else:
            assert ev["pin"]["id"] == pin, f"event #{i}: expected pin {pin}, got {ev!r}\nall: {summary}"
        if typ == "pin.removed":
            assert ev.get("reason") == want[2], f"event #{i}: expected reason {want[2]!r}, got {ev!r}"
            assert set(ev) == {"type", "pin", "reason"}, ev
        else:
            assert set(ev) == {"type", "pin"}, f"event #{i}: unexpected keys {ev!r}"
    if quiet:
        client.quiet()
    return got


# ---------------------------------------------------------------------------------------
# 1. welcome
# ---------------------------------------------------------------------------------------
def test_welcome_fields_and_limits_reflect_config(server, clients):
    c = clients()
    w = c.welcome
    assert set(w) == {"type", "session", "protocol", "limits"}, w
    assert w["type"] == "welcome" and w["protocol"] == 1
    assert c.ws.subprotocol == "vigil.v1", "the server must select the offered subprotocol vigil.v1"
    s = w["session"]
    assert isinstance(s, str) and re.fullmatch(r"[A-Za-z0-9_-]{22}", s), f"not 128 bits of base64url: {s!r}"
    assert len(base64.urlsafe_b64decode(s + "==")) == 16
    limits = w["limits"]
    for key, want in EXPECTED_LIMITS.items():
        assert key in limits, f"limits lacks {key!r}: {limits!r}"
        assert limits[key] == want, f"limits.{key}: expected {want!r} (from the config), got {limits[key]!r}"


def test_welcome_session_is_random_per_connection(server, clients):
    sessions = [c.session for c in clients(12)]
    assert len(set(sessions)) == len(sessions), f"sessions repeat: {sessions}"
    # A reconnect is a new session.
    first = clients()
    s1 = first.session
    first.close()
    assert clients().session != s1


# ---------------------------------------------------------------------------------------
# 2. areas and event routing
# ---------------------------------------------------------------------------------------
def test_two_bbox_subscribers_get_exactly_their_events_in_order(server, clients, region):
    la, lo = region
    a, b, pub = clients(3)
    assert a.subscribe_bbox(la, lo, la + 2, lo + 2) == []
    assert b.subscribe_bbox(la + 1, lo + 1, la + 3, lo + 3) == []

    a1, _ = pub.create(la + 0.5, lo + 0.5, "A only")
    ab1, ab1_tok = pub.create(la + 1.5, lo + 1.5, "both")
    b1, _ = pub.create(la + 2.5, lo + 2.5, "B only")
    pub.create(la + 0.5, lo + 2.5, "neither")  # inside A's latitudes and B's longitudes only
    ab1u = pub.ok("pin.update", id=ab1["id"], edit_token=ab1_tok, changes={"title": "both, edited"})["pin"]
    ab2, _ = pub.create(la + 1.25, lo + 1.75, "both 2")
    a2, a2_tok = pub.create(la + 0.25, lo + 1.0, "A only 2")
    d = pub.ok("pin.delete", id=a2["id"], edit_token=a2_tok)
    assert set(d) == {"type", "ref", "id"} and d["id"] == a2["id"], d
    b1v = pub.ok("pin.vote", id=b1["id"], value=1)["pin"]
    assert b1v["up"] == 1

    expect_events(a, [("pin.added", a1), ("pin.added", ab1), ("pin.updated", ab1u), ("pin.added", ab2),
                      ("pin.added", a2), ("pin.removed", a2, "deleted")])
    expect_events(b, [("pin.added", ab1), ("pin.added", b1), ("pin.updated", ab1u), ("pin.added", ab2),
                      ("pin.updated", b1v)])
    pub.quiet()  # the publisher is not subscribed: no events for it


def test_subscribe_reply_holds_exactly_the_pins_inside(server, clients, region):
    la, lo = region
    pub, sub = clients(2)
    inside = [pub.create(la + 0.1 * i + 0.05, lo + 0.5, f"in {i}")[0] for i in range(5)]
    pub.create(la + 1.5, lo + 0.5, "north of it")
    pub.create(la + 0.5, lo + 1.5, "east of it")
    pub.create(la - 0.5, lo + 0.5, "south of it")
    pub.create(la + 0.5, lo - 0.5, "west of it")
    pins = sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    assert by_id(pins) == by_id(inside), "reply must hold exactly the pins inside"
    assert len(pins) == len(inside), "no pin twice"


def test_subscribe_reply_is_newest_first(server, clients, region):
    la, lo = region
    pub, sub = clients(2)
    made = []
    for i in range(4):
        if made:
            tick(made[-1]["created_at"])  # distinct created_at values
        made.append(pub.create(la + 0.1 * i + 0.05, lo + 0.5, f"in {i}")[0])
    assert ids(sub.subscribe_bbox(la, lo, la + 1, lo + 1)) == ids(reversed(made))


def test_subscribe_reply_orders_same_millisecond_pins_newest_first(server, clients, region):
    """Pins created within one millisecond share created_at; "newest first" still means
    the order in which the server created them (it applies changes in order)."""
    la, lo = region
    pub, sub = clients(2)
    refs = [pub.send_request("pin.create", pin={"lat": la + 0.5, "lon": lo + 0.01 * i + 0.05, "title": f"burst {i}"})
            for i in range(12)]
    made = [pub.await_reply(r)["pin"] for r in refs]
    got = sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    assert [p["title"] for p in got] == [p["title"] for p in reversed(made)], \
        f"created_at of the burst: {[p['created_at'] for p in made]}"


def test_publisher_that_is_subscribed_gets_reply_before_its_event(server, clients, region):
    la, lo = region
    c = clients()
    c.subscribe_bbox(la, lo, la + 1, lo + 1)
    ref = c.send_request("pin.create", pin={"lat": la + 0.5, "lon": lo + 0.5, "title": "mine"})
    first = c.recv_json()
    assert first["type"] == "ok" and first["ref"] == ref, f"the reply must come before the event it causes: {first!r}"
    expect_events(c, [("pin.added", first["pin"])])


def _circle_points(la: float, lo: float, radius: float = 1000.0, margin: float = 15.0):
    """A centre and, north and east of it, pairs of points at radius-margin and
    radius+margin metres that share one geohash cell of precision 7 (the finest the
    server uses), so only an exact distance test tells them apart."""
    # North pair: centred on the middle of a precision-7 cell's latitude band.
    lat_lo, lat_hi, _, _ = pc.geohash_box(la + 1.0, lo + 1.0, 7)
    mid_lat = (lat_lo + lat_hi) / 2
    clat = mid_lat - deg_lat(radius)
    # East pair: centred on the middle of a precision-7 cell's longitude band, at clat.
    k = 1.0 / math.cos(math.radians(clat))
    _, _, lon_lo, lon_hi = pc.geohash_box(clat, lo + 1.0, 7)
    mid_lon = (lon_lo + lon_hi) / 2
    clon = mid_lon - deg_lat(radius) * k
    north_in = (mid_lat - deg_lat(margin), clon)
    north_out = (mid_lat + deg_lat(margin), clon)
    east_in = (clat, mid_lon - deg_lat(margin) * k)
    east_out = (clat, mid_lon + deg_lat(margin) * k)
    # Preconditions of the test itself.
    for p_in, p_out in ((north_in, north_out), (east_in, east_out)):
        assert geohash(*p_in, 7) == geohash(*p_out, 7), "test setup: points must share a cell"
        d_in, d_out = haversine_m(clat, clon, *p_in), haversine_m(clat, clon, *p_out)
        assert radius - 1.5 * margin < d_in < radius - 0.5 * margin, d_in
        assert radius + 0.5 * margin < d_out < radius + 1.5 * margin, d_out
    return (clat, clon), [north_in, east_in], [north_out, east_out]


def test_circle_area_is_exact_not_cell_based(server, clients, region):
    la, lo = region
    (clat, clon), inside, outside = _circle_points(la, lo)
    live, pub = clients(2)
    assert live.subscribe_circle(clat, clon, 1000) == []
    created = []
    for (lat, lon), label in zip(inside + outside, ["N in", "E in", "N out", "E out"]):
        created.append(pub.create(lat, lon, label)[0])
    pins_in = [created[0], created[1]]
    expect_events(live, [("pin.added", pins_in[0]), ("pin.added", pins_in[1])])
    # A later subscriber's reply: the same two, newest first.
    late = clients()
    assert by_id(late.subscribe_circle(clat, clon, 1000)) == by_id(pins_in)


def test_antimeridian_bbox_and_whole_world(server, clients):
    anti, world, pub = clients(3)
    anti.subscribe_bbox(60, 170, 70, -170)
    world.subscribe_bbox(*WORLD)
    spots = [(65, 179.5, True), (66, -179.5, True), (64, 180, True), (63, -180, True),
             (65, 170.5, True), (65, -170.5, True),
             (65, 0, False), (65, 169.5, False), (65, -169.5, False), (71, 179.5, False), (59, -179.5, False)]
    made = [(pub.create(lat, lon, f"{lat},{lon}")[0], inside) for lat, lon, inside in spots]
    expect_events(anti, [("pin.added", p) for p, inside in made if inside])
    expect_events(world, [("pin.added", p) for p, _ in made])
    # Fresh subscriptions: the reply of the antimeridian box holds exactly its pins.
    later = clients()
    got = later.subscribe_bbox(60, 170, 70, -170)
    assert set(ids(got)) == {p["id"] for p, inside in made if inside}
    whole = later.subscribe_bbox(*WORLD)
    assert {p["id"] for p, _ in made} <= set(ids(whole)), "the whole world holds every pin"


def test_whole_world_includes_poles_and_every_corner(server, clients):
    world, pub = clients(2)
    world.subscribe_bbox(*WORLD)
    made = [pub.create(lat, lon, "corner")[0] for lat, lon in
            [(90, 0), (-90, 0), (89.9, 180), (-89.9, -180), (-2, -2), (-2.0001, 179.9999)]]
    expect_events(world, [("pin.added", p) for p in made])


# ---------------------------------------------------------------------------------------
# 5/6. moves and categories
# ---------------------------------------------------------------------------------------
def test_move_out_in_and_within(server, clients, region):
    la, lo = region
    s_x, s_y, s_z, pub = clients(4)
    s_x.subscribe_bbox(la, lo, la + 1, lo + 1)
    s_y.subscribe_bbox(la + 2, lo + 2, la + 3, lo + 3)
    s_z.subscribe_bbox(la, lo, la + 3, lo + 3)  # holds both
    p0, tok = pub.create(la + 0.5, lo + 0.5, "mover")
    expect_events(s_x, [("pin.added", p0)])
    expect_events(s_z, [("pin.added", p0)])
    s_y.quiet()

    p1 = pub.ok("pin.update", id=p0["id"], edit_token=tok, changes={"lat": la + 2.5, "lon": lo + 2.5})["pin"]
    assert (p1["lat"], p1["lon"]) == (la + 2.5, lo + 2.5)
    expect_events(s_x, [("pin.removed", p1, "moved")])  # P is the new state
    expect_events(s_y, [("pin.added", p1)])
    expect_events(s_z, [("pin.updated", p1)])

    # Out of every area (only lat changes): removed for Y and Z, nothing for X.
    p2 = pub.ok("pin.update", id=p0["id"], edit_token=tok, changes={"lat": la + 4})["pin"]
    assert (p2["lat"], p2["lon"]) == (la + 4, lo + 2.5)
    expect_events(s_y, [("pin.removed", p2, "moved")])
    expect_events(s_z, [("pin.removed", p2, "moved")])
    s_x.quiet()

    # Edited while outside: nobody hears of it.
    pub.ok("pin.update", id=p0["id"], edit_token=tok, changes={"title": "far away"})
    for s in (s_x, s_y, s_z):
        s.quiet()

    # Back into X (and Z).
    p3 = pub.ok("pin.update", id=p0["id"], edit_token=tok, changes={"lat": la + 0.5, "lon": lo + 0.5})["pin"]
    expect_events(s_x, [("pin.added", p3)])
    expect_events(s_z, [("pin.added", p3)])
    s_y.quiet()


def test_category_filter_and_recategorisation(server, clients, region):
    la, lo = region
    area = (la, lo, la + 1, lo + 1)
    pub = clients()
    g0, _ = pub.create(la + 0.2, lo + 0.2, "general 0")
    h0, _ = pub.create(la + 0.3, lo + 0.3, "hazard 0", category="hazard")
    s_h, s_all = clients(2)
    assert s_h.subscribe_bbox(*area, categories=["hazard", "help"]) == [h0]
    assert by_id(s_all.subscribe_bbox(*area)) == by_id([h0, g0])

    g1, tok = pub.create(la + 0.5, lo + 0.5, "general 1")
    assert g1["category"] == "general"
    p1, _ = pub.create(la + 0.6, lo + 0.6, "help 1", category="help")
    to_hazard = pub.ok("pin.update", id=g1["id"], edit_token=tok, changes={"category": "hazard"})["pin"]
    to_social = pub.ok("pin.update", id=g1["id"], edit_token=tok, changes={"category": "social"})["pin"]
    retitled = pub.ok("pin.update", id=g1["id"], edit_token=tok, changes={"title": "social now"})["pin"]

    expect_events(s_h, [("pin.added", p1), ("pin.added", to_hazard), ("pin.removed", to_social, "moved")])
    expect_events(s_all, [("pin.added", g1), ("pin.added", p1), ("pin.updated", to_hazard),
                          ("pin.updated", to_social), ("pin.updated", retitled)])
    # A category filter on a circle too.
    s_c = clients()
    assert s_c.subscribe_circle(la + 0.5, lo + 0.5, 100000, categories=["social"]) == [retitled]


# ---------------------------------------------------------------------------------------
# 7. expiry
# ---------------------------------------------------------------------------------------
def test_expiry_sends_pin_expired_on_time(server, clients, region):
    la, lo = region
    sub, pub = clients(2)
    area = (la, lo, la + 1, lo + 1)
    sub.subscribe_bbox(*area)
    short, short_tok = pub.create(la + 0.5, lo + 0.5, "one second", ttl_s=1)
    two, _ = pub.create(la + 0.6, lo + 0.6, "two seconds", ttl_s=2)
    keep, _ = pub.create(la + 0.7, lo + 0.7, "an hour", ttl_s=3600)
    assert short["expires_at"] - short["created_at"] == 1000
    assert two["expires_at"] - two["created_at"] == 2000
    assert keep["expires_at"] - keep["created_at"] == 3600 * 1000
    expect_events(sub, [("pin.added", short), ("pin.added", two), ("pin.added", keep)], quiet=False)

    for pin in (short, two):
        ev = sub.event(timeout=4.0)
        arrived = now_ms()
        assert ev == {"type": "pin.expired", "pin": pin}, ev
        assert arrived >= pin["expires_at"] - 100, \
            f"expired {pin['expires_at'] - arrived} ms before expires_at"
        assert arrived <= pin["expires_at"] + 1500, \
            f"expired {arrived - pin['expires_at']} ms after expires_at (allowed 1500)"
    sub.quiet()

    # Gone for everyone: a new subscription does not see them, votes/edits do not find them.
    assert sub.subscribe_bbox(*area) == [keep]
    assert pub.error("pin.vote", id=short["id"], value=1)["code"] == "not_found"
    assert pub.error("pin.update", id=short["id"], edit_token=short_tok, changes={"title": "x"})["code"] == "forbidden"
    assert pub.error("pin.delete", id=short["id"], edit_token=short_tok)["code"] == "forbidden"


def test_update_ttl_counts_from_the_update_and_expires(server, clients, region):
    la, lo = region
    sub, pub = clients(2)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    p, tok = pub.create(la + 0.5, lo + 0.5, "long", ttl_s=3600)
    u = pub.ok("pin.update", id=p["id"], edit_token=tok, changes={"ttl_s": 1})["pin"]
    assert u["expires_at"] == u["updated_at"] + 1000, u
    assert u["created_at"] == p["created_at"]
    expect_events(sub, [("pin.added", p), ("pin.updated", u)], quiet=False)
    ev = sub.event(timeout=4.0)
    arrived = now_ms()
    assert ev == {"type": "pin.expired", "pin": u}
    assert u["expires_at"] - 100 <= arrived <= u["expires_at"] + 1500


# ---------------------------------------------------------------------------------------
# 8. edit token, update, delete
# ---------------------------------------------------------------------------------------
def test_create_defaults_trimming_and_times(server, clients, region):
    la, lo = region
    c = clients()
    before = now_ms()
    reply = c.ok("pin.create", pin={"lat": la + 0.5, "lon": lo + 0.5, "title": " \t Fox in the park \n "})
    after = now_ms()
    assert set(reply) == {"type", "ref", "pin", "edit_token"}, reply
    p, tok = reply["pin"], reply["edit_token"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", tok), f"edit_token is not 256 bits of base64url: {tok!r}"
    assert p["title"] == "Fox in the park"
    assert p["description"] == "" and p["category"] == "general"
    assert (p["up"], p["down"]) == (0, 0)
    assert p["created_at"] == p["updated_at"]
    assert before - 1000 <= p["created_at"] <= after + 1000, "times are Unix milliseconds"
    assert p["expires_at"] - p["created_at"] == 14400 * 1000, "ttl_s defaults to ttl_s.default"
    u = uuid.UUID(p["id"])
    assert u.version == 4 and str(u) == p["id"], f"id must be a lower-case UUID v4: {p['id']!r}"
    # Description is trimmed too; every token differs.
    p2, tok2 = c.create(la + 0.5, lo + 0.5, "t", description="  near the gate \n", category="sighting")
    assert p2["description"] == "near the gate" and p2["category"] == "sighting"
    assert tok2 != tok and p2["id"] != p["id"]


def test_update_applies_changes(server, clients, region):
    la, lo = region
    c = clients()
    p, tok = c.create(la + 0.5, lo + 0.5, "old", description="d", category="help", ttl_s=600)
    while now_ms() <= p["updated_at"]:  # let the (shared) clock pass the creation millisecond
        time.sleep(0.001)
    u = c.ok("pin.update", id=p["id"], edit_token=tok,
             changes={"title": "  new  ", "description": " nd ", "lat": la + 0.25, "lon": lo + 0.75,
                      "category": "social"})["pin"]
    assert (u["title"], u["description"], u["lat"], u["lon"], u["category"]) == \
        ("new", "nd", la + 0.25, lo + 0.75, "social")
    assert u["id"] == p["id"] and u["created_at"] == p["created_at"]
    assert u["updated_at"] > p["updated_at"]
    assert u["expires_at"] == p["expires_at"], "without ttl_s in changes the expiry stays"
    assert (u["up"], u["down"]) == (0, 0)
    # The edit token stays valid after an update.
    assert c.ok("pin.update", id=p["id"], edit_token=tok, changes={"title": "again"})["pin"]["title"] == "again"


def test_edit_token_wrong_and_unknown_id_are_forbidden(server, clients, region):
    la, lo = region
    sub, owner, other = clients(3)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    p, tok = owner.create(la + 0.5, lo + 0.5, "mine")
    q, q_tok = other.create(la + 0.6, lo + 0.6, "theirs")
    expect_events(sub, [("pin.added", p), ("pin.added", q)])

    wrong_tokens = [q_tok, tok[:-1] + ("A" if tok[-1] != "A" else "B"), "", "x" * 43]
    unknown = str(uuid.uuid4())
    for who in (owner, other):
        for bad in wrong_tokens:
            e = who.error("pin.update", id=p["id"], edit_token=bad, changes={"title": "hijacked"})
            assert (e["code"], e.get("ref") is not None) == ("forbidden", True), e
            e = who.error("pin.delete", id=p["id"], edit_token=bad)
            assert e["code"] == "forbidden", e
        # Unknown id (with a real token, and with the pin's own token): the same code.
        for t in (tok, q_tok):
            assert who.error("pin.update", id=unknown, edit_token=t, changes={"title": "x"})["code"] == "forbidden"
            assert who.error("pin.delete", id=unknown, edit_token=t)["code"] == "forbidden"
        assert who.error("pin.delete", id="not-a-uuid", edit_token=tok)["code"] == "forbidden"
    sub.quiet()  # nothing changed

    # The right token works from any session (the token is the only proof of ownership).
    u = other.ok("pin.update", id=p["id"], edit_token=tok, changes={"title": "still mine"})["pin"]
    assert u["title"] == "still mine"
    d = owner.ok("pin.delete", id=p["id"], edit_token=tok)
    assert set(d) == {"type", "ref", "id"} and d["id"] == p["id"], d
    expect_events(sub, [("pin.updated", u), ("pin.removed", u, "deleted")])
    # Deleted: now an unknown id.
    assert owner.error("pin.delete", id=p["id"], edit_token=tok)["code"] == "forbidden"
    assert owner.error("pin.update", id=p["id"], edit_token=tok, changes={"title": "x"})["code"] == "forbidden"
    assert owner.error("pin.vote", id=p["id"], value=1)["code"] == "not_found"
    assert sub.subscribe_bbox(la, lo, la + 1, lo + 1) == [q]


# ---------------------------------------------------------------------------------------
# 9. votes
# ---------------------------------------------------------------------------------------
def test_votes_one_per_address_and_flagging(server, clients, region):
    la, lo = region
    sub, owner = clients(2)
    voters = clients(6, distinct_addresses=True)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    p, tok = owner.create(la + 0.5, lo + 0.5, "controversial")
    expect_events(sub, [("pin.added", p)])

    def vote(v, value, up, down, event=True):
        r = v.ok("pin.vote", id=p["id"], value=value)
        assert set(r) == {"type", "ref", "pin"}, r
        assert (r["pin"]["up"], r["pin"]["down"]) == (up, down), f"vote {value}: {r}"
        if event:
            expect_events(sub, [("pin.updated", r["pin"])])
        return r["pin"]

    vote(voters[0], 1, 1, 0)
    # Same vote again changes nothing: same counts.  Whether an event is sent for a no-op
    # vote is not specified; if one is, it must carry the unchanged counts.
    vote(voters[0], 1, 1, 0, event=False)
    sub.request(pc.BARRIER_OP)  # round trip; events before its reply are queued
    while sub.events:
        ev = sub.events.popleft()
        assert ev["type"] == "pin.updated" and (ev["pin"]["up"], ev["pin"]["down"]) == (1, 0), ev
    vote(voters[0], -1, 0, 1)          # replaces the first vote
    vote(voters[1], 1, 1, 1)
    vote(voters[2], -1, 1, 2)
    vote(voters[3], -1, 1, 3)          # down == threshold but down - up == 2: still there
    assert ids(sub.subscribe_bbox(la, lo, la + 1, lo + 1)) == [p["id"]]
    r = voters[4].ok("pin.vote", id=p["id"], value=-1)   # down - up == 3 == threshold
    last = r["pin"]
    assert (last["up"], last["down"]) == (1, 4), r
    expect_events(sub, [("pin.removed", last, "flagged")])
    # Gone for everyone.
    assert voters[5].error("pin.vote", id=p["id"], value=1)["code"] == "not_found"
    assert voters[0].error("pin.vote", id=p["id"], value=1)["code"] == "not_found"
    assert owner.error("pin.update", id=p["id"], edit_token=tok, changes={"title": "x"})["code"] == "forbidden"
    assert sub.subscribe_bbox(la, lo, la + 1, lo + 1) == []


def test_vote_is_per_address_not_per_pin_nor_per_connection(server, clients, region):
    la, lo = region
    v = clients(distinct_addresses=True)
    p1, _ = v.create(la + 0.5, lo + 0.5, "one")
    p2, _ = v.create(la + 0.6, lo + 0.6, "two")
    assert v.ok("pin.vote", id=p1["id"], value=-1)["pin"]["down"] == 1
    r = v.ok("pin.vote", id=p2["id"], value=-1)["pin"]
    assert (r["up"], r["down"]) == (0, 1), "a vote on another pin is a separate vote"
    again = v.ok("pin.vote", id=p1["id"], value=-1)["pin"]
    assert (again["up"], again["down"]) == (0, 1)
    # Reconnecting does not make a new voter: the address already voted (issue 11: a handful of
    # reconnects must not flag a pin away).
    same_address = PinClient(server.port, source=v.ws.socket.getsockname()[0])
    try:
        assert same_address.ok("pin.vote", id=p1["id"], value=-1)["pin"]["down"] == 1
    finally:
        same_address.close()
    # Another address is another voter.
    w = clients(distinct_addresses=True)
    assert w.ok("pin.vote", id=p1["id"], value=-1)["pin"]["down"] == 2
    assert w.error("pin.vote", id=str(uuid.uuid4()), value=1)["code"] == "not_found"


# ---------------------------------------------------------------------------------------
# 10. validation
# ---------------------------------------------------------------------------------------
def _pin(**kw):
    base = {"lat": 57.5, "lon": 20.5, "title": "valid"}
    for k, v in kw.items():
        if v is _DROP:
            base.pop(k)
        else:
            base[k] = v
    return base


_DROP = object()
AREA = {"bbox": [57, 20, 58, 21]}
EMOJI = "\U0001F44D\U0001F3FD"  # thumbs up + skin tone modifier: one grapheme cluster
FLAG = "\U0001F1E9\U0001F1EA"    # regional indicators D E: one grapheme cluster
FAMILY = "\U0001F468\u200d\U0001F469\u200d\U0001F467"  # ZWJ sequence: one grapheme cluster
E_ACUTE = "e\u0301"              # e + combining acute: one grapheme cluster

# (id, message builder (ctx -> dict), code, field); "area*" = any field path starting with "area".
CASES = [
    # pin.create: coordinates
    ("lat-91", lambda c: {"op": "pin.create", "pin": _pin(lat=91)}, "invalid_lat", "pin.lat"),
    ("lat-minus-90.001", lambda c: {"op": "pin.create", "pin": _pin(lat=-90.001)}, "invalid_lat", "pin.lat"),
    ("lat-string", lambda c: {"op": "pin.create", "pin": _pin(lat="10")}, "invalid_lat", "pin.lat"),
    ("lat-bool", lambda c: {"op": "pin.create", "pin": _pin(lat=True)}, "invalid_lat", "pin.lat"),
    ("lat-null", lambda c: {"op": "pin.create", "pin": _pin(lat=None)}, "invalid_lat", "pin.lat"),
    ("lon-180.5", lambda c: {"op": "pin.create", "pin": _pin(lon=180.5)}, "invalid_lon", "pin.lon"),
    ("lon-minus-181", lambda c: {"op": "pin.create", "pin": _pin(lon=-181)}, "invalid_lon", "pin.lon"),
    ("lon-array", lambda c: {"op": "pin.create", "pin": _pin(lon=[20])}, "invalid_lon", "pin.lon"),
    # title / description / category / ttl
    ("title-empty", lambda c: {"op": "pin.create", "pin": _pin(title="")}, "invalid_title", "pin.title"),
    ("title-blank", lambda c: {"op": "pin.create", "pin": _pin(title=" \t\n  ")}, "invalid_title", "pin.title"),
    ("title-81", lambda c: {"op": "pin.create", "pin": _pin(title="x" * 81)}, "invalid_title", "pin.title"),
    ("title-81-emoji", lambda c: {"op": "pin.create", "pin": _pin(title=EMOJI * 81)}, "invalid_title", "pin.title"),
    # 80 grapheme clusters, each a letter under 20 combining marks: 3,280 bytes (issue 11: the
    # UTF-8 size is capped too, at 640 bytes).
    ("title-80-combining-stacks", lambda c: {"op": "pin.create", "pin": _pin(title=("e" + "\u0301" * 20) * 80)},
     "invalid_title", "pin.title"),
    ("description-byte-cap", lambda c: {"op": "pin.create", "pin": _pin(description=("e" + "\u0301" * 20) * 200)},
     "invalid_description", "pin.description"),
    ("title-number", lambda c: {"op": "pin.create", "pin": _pin(title=5)}, "invalid_title", "pin.title"),
    ("title-null", lambda c: {"op": "pin.create", "pin": _pin(title=None)}, "invalid_title", "pin.title"),
    ("description-1001", lambda c: {"op": "pin.create", "pin": _pin(description="d" * 1001)},
     "invalid_description", "pin.description"),
    ("description-number", lambda c: {"op": "pin.create", "pin": _pin(description=1)},
     "invalid_description", "pin.description"),
    ("category-unknown", lambda c: {"op": "pin.create", "pin": _pin(category="weather")},
     "invalid_category", "pin.category"),
    ("category-case", lambda c: {"op": "pin.create", "pin": _pin(category="Hazard")},
     "invalid_category", "pin.category"),
    ("category-number", lambda c: {"op": "pin.create", "pin": _pin(category=1)}, "invalid_category", "pin.category"),
    ("ttl-below-min", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=0)}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-negative", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=-5)}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-above-max", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=86401)}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-fraction", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=100.5)}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-string", lambda c: {"op": "pin.create", "pin": _pin(ttl_s="100")}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-bool", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=True)}, "invalid_ttl", "pin.ttl_s"),
    ("ttl-huge", lambda c: {"op": "pin.create", "pin": _pin(ttl_s=10 ** 30)}, "invalid_ttl", "pin.ttl_s"),
    # pin.create: structure
    ("missing-lat", lambda c: {"op": "pin.create", "pin": _pin(lat=_DROP)}, "missing_field", "pin.lat"),
    ("missing-lon", lambda c: {"op": "pin.create", "pin": _pin(lon=_DROP)}, "missing_field", "pin.lon"),
    ("missing-title", lambda c: {"op": "pin.create", "pin": _pin(title=_DROP)}, "missing_field", "pin.title"),
    ("missing-pin", lambda c: {"op": "pin.create"}, "missing_field", "pin"),
    ("unknown-pin-field", lambda c: {"op": "pin.create", "pin": _pin(color="red")}, "unknown_field", "pin.color"),
    ("pin-sets-id", lambda c: {"op": "pin.create", "pin": _pin(id=str(uuid.uuid4()))}, "unknown_field", "pin.id"),
    ("pin-sets-up", lambda c: {"op": "pin.create", "pin": _pin(up=100)}, "unknown_field", "pin.up"),
    # pin.update
    ("update-changes-empty", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"], "changes": {}},
     "invalid_changes", "changes"),
    ("update-changes-number", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"], "changes": 5},
     "invalid_changes", "changes"),
    ("update-changes-unknown", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"],
                                          "changes": {"color": "red"}}, "unknown_field", "changes.color"),
    ("update-changes-up", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"],
                                     "changes": {"up": 9}}, "unknown_field", "changes.up"),
    ("update-lat", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"], "changes": {"lat": 100}},
     "invalid_lat", "changes.lat"),
    ("update-lon", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"], "changes": {"lon": "x"}},
     "invalid_lon", "changes.lon"),
    ("update-title", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"],
                                "changes": {"title": "   "}}, "invalid_title", "changes.title"),
    ("update-description", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"],
                                      "changes": {"description": "d" * 1001}}, "invalid_description",
     "changes.description"),
    ("update-category", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"],
                                   "changes": {"category": "weather"}}, "invalid_category", "changes.category"),
    ("update-ttl", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"], "changes": {"ttl_s": 0}},
     "invalid_ttl", "changes.ttl_s"),
    ("update-missing-changes", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": c["tok"]},
     "missing_field", "changes"),
    ("update-missing-id", lambda c: {"op": "pin.update", "edit_token": c["tok"], "changes": {"title": "x"}},
     "missing_field", "id"),
    ("update-missing-token", lambda c: {"op": "pin.update", "id": c["id"], "changes": {"title": "x"}},
     "missing_field", "edit_token"),
    ("update-id-number", lambda c: {"op": "pin.update", "id": 5, "edit_token": c["tok"], "changes": {"title": "x"}},
     "invalid_id", "id"),
    ("update-token-number", lambda c: {"op": "pin.update", "id": c["id"], "edit_token": 5,
                                       "changes": {"title": "x"}}, "invalid_token", "edit_token"),
    # pin.delete
    ("delete-missing-id", lambda c: {"op": "pin.delete", "edit_token": c["tok"]}, "missing_field", "id"),
    ("delete-missing-token", lambda c: {"op": "pin.delete", "id": c["id"]}, "missing_field", "edit_token"),
    ("delete-id-object", lambda c: {"op": "pin.delete", "id": {"id": c["id"]}, "edit_token": c["tok"]},
     "invalid_id", "id"),
    ("delete-token-array", lambda c: {"op": "pin.delete", "id": c["id"], "edit_token": [c["tok"]]},
     "invalid_token", "edit_token"),
    # pin.vote
    ("vote-0", lambda c: {"op": "pin.vote", "id": c["id"], "value": 0}, "invalid_value", "value"),
    ("vote-2", lambda c: {"op": "pin.vote", "id": c["id"], "value": 2}, "invalid_value", "value"),
    ("vote-minus-2", lambda c: {"op": "pin.vote", "id": c["id"], "value": -2}, "invalid_value", "value"),
    ("vote-string", lambda c: {"op": "pin.vote", "id": c["id"], "value": "1"}, "invalid_value", "value"),
    ("vote-bool", lambda c: {"op": "pin.vote", "id": c["id"], "value": True}, "invalid_value", "value"),
    ("vote-fraction", lambda c: {"op": "pin.vote", "id": c["id"], "value": 0.5}, "invalid_value", "value"),
    ("vote-missing-value", lambda c: {"op": "pin.vote", "id": c["id"]}, "missing_field", "value"),
    ("vote-missing-id", lambda c: {"op": "pin.vote", "value": 1}, "missing_field", "id"),
    ("vote-id-number", lambda c: {"op": "pin.vote", "id": 1, "value": 1}, "invalid_id", "id"),
    # subscribe
    ("area-missing", lambda c: {"op": "subscribe"}, "missing_field", "area"),
    ("area-empty", lambda c: {"op": "subscribe", "area": {}}, "invalid_area", "area*"),
    ("area-number", lambda c: {"op": "subscribe", "area": 5}, "invalid_area", "area*"),
    ("bbox-south-gt-north", lambda c: {"op": "subscribe", "area": {"bbox": [11, 20, 10, 21]}}, "invalid_area", "area*"),
    ("bbox-3-numbers", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 11]}}, "invalid_area", "area*"),
    ("bbox-5-numbers", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 11, 21, 5]}}, "invalid_area", "area*"),
    ("bbox-string", lambda c: {"op": "subscribe", "area": {"bbox": [10, "20", 11, 21]}}, "invalid_area", "area*"),
    ("bbox-not-array", lambda c: {"op": "subscribe", "area": {"bbox": "10,20,11,21"}}, "invalid_area", "area*"),
    ("bbox-lat-91", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 91, 21]}}, "invalid_area", "area*"),
    ("bbox-lon-181", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 11, 181]}}, "invalid_area", "area*"),
    ("radius-0", lambda c: {"op": "subscribe", "area": {"center": {"lat": 10, "lon": 20}, "radius_m": 0}},
     "invalid_area", "area*"),
    ("radius-negative", lambda c: {"op": "subscribe", "area": {"center": {"lat": 10, "lon": 20}, "radius_m": -5}},
     "invalid_area", "area*"),
    ("radius-too-big", lambda c: {"op": "subscribe",
                                  "area": {"center": {"lat": 10, "lon": 20}, "radius_m": 20000000.5}},
     "invalid_area", "area*"),
    ("radius-string", lambda c: {"op": "subscribe", "area": {"center": {"lat": 10, "lon": 20}, "radius_m": "5"}},
     "invalid_area", "area*"),
    ("center-lat-91", lambda c: {"op": "subscribe", "area": {"center": {"lat": 91, "lon": 20}, "radius_m": 5}},
     "invalid_area", "area*"),
    ("bbox-and-center", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 11, 21],
                                                               "center": {"lat": 10, "lon": 20}, "radius_m": 5}},
     "invalid_area", "area*"),
    ("area-unknown-field", lambda c: {"op": "subscribe", "area": {"bbox": [10, 20, 11, 21], "zoom": 3}},
     "unknown_field", "area.zoom"),
    ("categories-empty", lambda c: {"op": "subscribe", "area": AREA, "categories": []},
     "invalid_categories", "categories"),
    ("categories-unknown", lambda c: {"op": "subscribe", "area": AREA, "categories": ["hazard", "weather"]},
     "invalid_categories", "categories"),
    ("categories-string", lambda c: {"op": "subscribe", "area": AREA, "categories": "hazard"},
     "invalid_categories", "categories"),
    ("categories-number", lambda c: {"op": "subscribe", "area": AREA, "categories": [1]},
     "invalid_categories", "categories"),
]


@pytest.fixture
def validation_ctx(server, clients):
    owner = clients()
    p, tok = owner.create(57.5, 20.5, "validation target")
    return {"id": p["id"], "tok": tok, "pin": p}


def _assert_open(c: PinClient):
    """After an error the connection stays open: a following valid request succeeds."""
    r = c.request("subscribe", area=AREA)
    assert r["type"] == "ok", f"valid request after an error: {r!r}"


@pytest.mark.parametrize("build,code,field", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation_error(server, clients, validation_ctx, build, code, field):
    c = clients()
    msg = build(validation_ctx)
    if isinstance(msg, str):
        c.send_raw(msg)
        ref = 7
    else:
        msg = dict(msg, ref=7)
        c.send_json(msg)
        ref = 7
    reply = c.await_reply(ref, check_ref=False)
    assert reply["type"] == "error", f"{msg!r} -> expected error {code}, got {reply!r}"
    assert reply["code"] == code, f"{msg!r} -> expected {code} ({field}), got {reply!r}"
    if field.endswith("*"):
        assert isinstance(reply.get("field"), str) and reply["field"].startswith(field[:-1]), \
            f"{msg!r} -> field should name {field!r}: {reply!r}"
    else:
        assert reply.get("field") == field, f"{msg!r} -> field should be {field!r}: {reply!r}"
    assert isinstance(reply.get("message"), str) and reply["message"], reply
    assert reply.get("ref") == ref and type(reply.get("ref")) is int, f"ref not echoed: {reply!r}"
    _assert_open(c)
    # Nothing was created or changed by the failed request.
    after = c.subscribe_bbox(*AREA["bbox"])
    target = [p for p in after if p["id"] == validation_ctx["id"]]
    assert target == [validation_ctx["pin"]], f"the target pin changed or vanished: {target!r}"


VALID_TITLES = [
    ("80-ascii", "x" * 80, "x" * 80),
    ("80-emoji-modifier", EMOJI * 80, EMOJI * 80),
    ("80-flags", FLAG * 80, FLAG * 80),
    ("25-zwj-family", FAMILY * 25, FAMILY * 25),  # 450 bytes: within the 640-byte cap
    ("80-combining", E_ACUTE * 80, E_ACUTE * 80),
    ("80-after-trim", "  \t" + "y" * 80 + " \n", "y" * 80),
    ("one-char", "a", "a"),
]


@pytest.mark.parametrize("title,stored", [t[1:] for t in VALID_TITLES], ids=[t[0] for t in VALID_TITLES])
def test_title_length_counts_grapheme_clusters(server, clients, title, stored):
    c = clients()
    reply = c.request("pin.create", pin={"lat": 57.5, "lon": 20.5, "title": title})
    assert reply["type"] == "ok", f"title of {len(title)} scalars -> {reply!r}"
    assert reply["pin"]["title"] == stored


@pytest.mark.parametrize("pin", [
    {"lat": 90, "lon": 180, "title": "edge"},
    {"lat": -90, "lon": -180, "title": "edge"},
    {"lat": 57.5, "lon": 20.5, "title": "t", "ttl_s": 1},
    {"lat": 57.5, "lon": 20.5, "title": "t", "ttl_s": 86400},
    {"lat": 57.5, "lon": 20.5, "title": "t", "description": "d" * 1000},
    {"lat": 57.5, "lon": 20.5, "title": "t", "description": EMOJI * 1000},
    {"lat": 57.5, "lon": 20.5, "title": "t", "description": ""},
    {"lat": 57.5, "lon": 20.5, "title": "t", "category": "lost_pet"},
], ids=["lat90-lon180", "lat-90-lon-180", "ttl-min", "ttl-max", "description-1000", "description-1000-emoji",
        "description-empty", "configured-extra-category"])
def test_boundary_values_are_accepted(server, clients, pin):
    c = clients()
    reply = c.request("pin.create", pin=pin)
    assert reply["type"] == "ok", f"{pin!r} -> {reply!r}"
    for k, v in pin.items():
        if k == "ttl_s":
            assert reply["pin"]["expires_at"] - reply["pin"]["created_at"] == v * 1000
        else:
            assert reply["pin"][k] == v


@pytest.mark.parametrize("area", [
    {"center": {"lat": 0, "lon": 0}, "radius_m": 20000000},
    {"center": {"lat": 90, "lon": 0}, "radius_m": 1},
    {"bbox": [60, 170, 70, -170]},
    {"bbox": [-90, -180, 90, 180]},
], ids=["radius-max", "circle-at-pole", "antimeridian", "world"])
def test_valid_areas_are_accepted(server, clients, area):
    c = clients()
    reply = c.request("subscribe", area=area)
    assert reply["type"] == "ok" and isinstance(reply.get("pins"), list), f"{area!r} -> {reply!r}"


# -- envelope errors --------------------------------------------------------------------
ENVELOPE = [
    ("bad-json-truncated", '{"op":"subscribe",', "bad_json"),
    ("bad-json-text", "hello", "bad_json"),
    ("bad-json-trailing", '{"op":"unsubscribe"} x', "bad_json"),
    ("bad-json-nan", '{"op":"pin.create","pin":{"lat":NaN,"lon":1,"title":"x"}}', "bad_json"),
    # Numbers beyond a double's range are refused by the parser (docs/PROTOCOL.md): bad_json, no ref.
    ("bad-json-1e999", '{"op":"pin.create","ref":7,"pin":{"lat":1e999,"lon":20.5,"title":"x"}}', "bad_json"),
    ("bad-json-minus-1e999", '{"op":"pin.create","ref":7,"pin":{"lat":57.5,"lon":-1e999,"title":"x"}}', "bad_json"),
    ("top-level-array", '[{"op":"unsubscribe"}]', "bad_message"),
    ("top-level-string", '"unsubscribe"', "bad_message"),
    ("top-level-number", "42", "bad_message"),
    ("op-missing", '{"area":{"bbox":[10,20,11,21]}}', "bad_message"),
    ("op-number", '{"op":5}', "bad_message"),
    ("op-null", '{"op":null}', "bad_message"),
    ("binary", b'{"op":"unsubscribe"}', "bad_message"),
    ("unknown-op", '{"op":"pin.fly"}', "unknown_op"),
    ("unknown-op-case", '{"op":"Subscribe"}', "unknown_op"),
]


@pytest.mark.parametrize("raw,code", [e[1:] for e in ENVELOPE], ids=[e[0] for e in ENVELOPE])
def test_envelope_error_without_ref(server, clients, raw, code):
    c = clients()
    c.send_raw(raw)
    reply = c.await_reply(None)  # asserts the reply has no ref
    assert reply["type"] == "error" and reply["code"] == code, f"{raw!r} -> {reply!r}"
    assert isinstance(reply.get("message"), str) and reply["message"]
    _assert_open(c)


@pytest.mark.parametrize("raw,ref,code", [
    ('{"ref":1}', 1, "bad_message"),
    ('{"ref":"r","op":7}', "r", "bad_message"),
    ('{"op":"pin.fly","ref":"abc"}', "abc", "unknown_op"),
    ('{"op":"pin.fly","ref":99}', 99, "unknown_op"),
], ids=["op-missing", "op-number", "unknown-op-string-ref", "unknown-op-number-ref"])
def test_errors_echo_a_readable_ref(server, clients, raw, ref, code):
    c = clients()
    c.send_raw(raw)
    reply = c.await_reply(ref)
    assert reply["type"] == "error" and reply["code"] == code, f"{raw!r} -> {reply!r}"
    _assert_open(c)


@pytest.mark.parametrize("ref", [{"a": 1}, [1], True, None], ids=["object", "array", "bool", "null"])
def test_invalid_ref(server, clients, ref):
    c = clients()
    c.send_json({"op": "unsubscribe", "ref": ref})
    reply = c.await_reply(None)
    assert reply["type"] == "error" and reply["code"] == "invalid_ref", f"ref {ref!r} -> {reply!r}"
    _assert_open(c)


@pytest.mark.parametrize("ref", ["abc", "", "ünï ✓", 42, 0, -7, 3.5, 12345678901], ids=[
    "string", "empty-string", "unicode-string", "int", "zero", "negative", "fraction", "big-int"])
def test_ref_is_echoed_with_its_type(server, clients, ref):
    c = clients()
    c.send_json({"op": "unsubscribe", "ref": ref})
    reply = c.await_reply(ref)  # checks value and JSON type (string vs number)
    assert reply == {"type": "ok", "ref": ref}, reply
    c.send_json({"op": "no.such.op", "ref": ref})
    err = c.await_reply(ref)
    assert err["type"] == "error" and err["code"] == "unknown_op" and err["ref"] == ref


def test_many_errors_then_valid_requests_on_one_connection(server, clients, validation_ctx):
    """The connection survives a long run of mixed errors and stays in sync."""
    c = clients()
    for i, (name, build, code, field) in enumerate(CASES):
        msg = build(validation_ctx)
        if isinstance(msg, str):
            continue  # raw-text cases are covered one by one above
        c.send_json(dict(msg, ref=f"r{i}"))
        reply = c.await_reply(f"r{i}")  # the reply to this very request, nothing skipped or doubled
        assert reply["type"] == "error", f"{name}: {reply!r}"  # (the codes are checked case by case above)
    _assert_open(c)


# ---------------------------------------------------------------------------------------
# 13/14. re-subscribe, unsubscribe
# ---------------------------------------------------------------------------------------
def test_resubscribe_replaces_the_area(server, clients, region):
    la, lo = region
    sub, pub = clients(2)
    old = (la, lo, la + 1, lo + 1)
    new = (la + 2, lo + 2, la + 3, lo + 3)
    a1, a1_tok = pub.create(la + 0.5, lo + 0.5, "old area")
    b1, _ = pub.create(la + 2.5, lo + 2.5, "new area")
    pub.create(la + 1.5, lo + 1.5, "between")
    assert sub.subscribe_bbox(*old) == [a1]
    assert sub.subscribe_bbox(*new) == [b1], "the reply holds the new area's pins and only those"
    # Old area: creates, edits, votes, deletes -- none reach the subscriber.
    a2, a2_tok = pub.create(la + 0.6, lo + 0.6, "old area 2")
    pub.ok("pin.update", id=a1["id"], edit_token=a1_tok, changes={"title": "edited"})
    pub.ok("pin.vote", id=a1["id"], value=1)
    pub.ok("pin.delete", id=a2["id"], edit_token=a2_tok)
    b2, _ = pub.create(la + 2.6, lo + 2.6, "new area 2")
    # The first event after all that must be b2's (events arrive in order).
    expect_events(sub, [("pin.added", b2)])
    # A pin moved from the old area into the new one is added.
    moved = pub.ok("pin.update", id=a1["id"], edit_token=a1_tok, changes={"lat": la + 2.4, "lon": lo + 2.4})["pin"]
    expect_events(sub, [("pin.added", moved)])


def test_resubscribe_overlapping_area_keeps_events_for_shared_part(server, clients, region):
    la, lo = region
    sub, pub = clients(2)
    sub.subscribe_bbox(la, lo, la + 2, lo + 2)
    shared, tok = pub.create(la + 1.5, lo + 1.5, "shared")
    only_old, _ = pub.create(la + 0.5, lo + 0.5, "old only")
    expect_events(sub, [("pin.added", shared), ("pin.added", only_old)])
    assert sub.subscribe_bbox(la + 1, lo + 1, la + 3, lo + 3) == [shared]
    pub.ok("pin.vote", id=only_old["id"], value=1)
    u = pub.ok("pin.update", id=shared["id"], edit_token=tok, changes={"title": "shared, edited"})["pin"]
    expect_events(sub, [("pin.updated", u)])


def test_resubscribe_reply_comes_before_new_events(server, clients, region):
    """After the re-subscribe reply, the first events are the new area's (the barrier)."""
    la, lo = region
    sub, pub = clients(2)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    pub.create(la + 0.5, lo + 0.5, "before")
    # The event for "before" may or may not be read yet; the re-subscribe reply is the cut.
    sub.subscribe_bbox(la + 2, lo + 2, la + 3, lo + 3)
    sub.events.clear()  # events from before the reply belong to the old subscription
    pub.create(la + 0.7, lo + 0.7, "old, after")
    n, _ = pub.create(la + 2.5, lo + 2.5, "new, after")
    expect_events(sub, [("pin.added", n)])


def test_unsubscribe_stops_events(server, clients, region):
    la, lo = region
    sub, pub = clients(2)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    p, tok = pub.create(la + 0.5, lo + 0.5, "before")
    expect_events(sub, [("pin.added", p)])
    assert sub.request("unsubscribe", ref="u1") == {"type": "ok", "ref": "u1"}
    after, _ = pub.create(la + 0.6, lo + 0.6, "after")
    pub.ok("pin.update", id=p["id"], edit_token=tok, changes={"title": "after"})
    pub.ok("pin.vote", id=p["id"], value=-1)
    pub.ok("pin.delete", id=p["id"], edit_token=tok)
    sub.quiet()
    # Unsubscribe with no subscription is ok too; subscribing again works.
    assert sub.request("unsubscribe", ref=2) == {"type": "ok", "ref": 2}
    assert sub.subscribe_bbox(la, lo, la + 1, lo + 1) == [after]


def test_unsubscribe_without_subscription_is_ok(server, clients):
    c = clients()
    assert c.request("unsubscribe", ref=1) == {"type": "ok", "ref": 1}
    assert c.request("unsubscribe", ref="again") == {"type": "ok", "ref": "again"}


def test_connection_close_drops_subscription(server, clients, region):
    """A closed subscriber is forgotten; other subscribers are unaffected."""
    la, lo = region
    gone, stay, pub = clients(3)
    gone.subscribe_bbox(la, lo, la + 1, lo + 1)
    stay.subscribe_bbox(la, lo, la + 1, lo + 1)
    gone.close()
    p, _ = pub.create(la + 0.5, lo + 0.5, "after a close")
    expect_events(stay, [("pin.added", p)])


# ---------------------------------------------------------------------------------------
# 15. pins carry nothing about their creator
# ---------------------------------------------------------------------------------------
def test_pin_object_has_exactly_the_documented_keys(server, clients, region):
    la, lo = region
    sub, owner, voter = clients(3)
    sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    created = owner.ok("pin.create", pin={"lat": la + 0.5, "lon": lo + 0.5, "title": "anon",
                                          "description": "who made me?", "category": "social", "ttl_s": 60})
    p, tok = created["pin"], created["edit_token"]
    updated = owner.ok("pin.update", id=p["id"], edit_token=tok, changes={"title": "still anon"})["pin"]
    voted = voter.ok("pin.vote", id=p["id"], value=1)["pin"]
    listed = sub.subscribe_bbox(la, lo, la + 1, lo + 1)
    events = [sub.event() for _ in range(3)]
    owner.ok("pin.delete", id=p["id"], edit_token=tok)
    events.append(sub.event())
    pins = [p, updated, voted, *listed, *(e["pin"] for e in events)]
    for q in pins:
        assert set(q) == PIN_KEYS, f"pin keys {sorted(q)} != {sorted(PIN_KEYS)}"
        assert isinstance(q["lat"], (int, float)) and isinstance(q["lon"], (int, float))
        assert all(isinstance(q[k], int) for k in ("created_at", "updated_at", "expires_at", "up", "down"))
    # Nothing identifying in any message another session saw (its own welcome aside).
    for who, secrets in ((sub, (owner.session, voter.session, tok)), (voter, (owner.session, tok))):
        seen = "\n".join(p for d, p in who.log[1:] if d == "recv" and isinstance(p, str))
        assert '"welcome"' not in seen
        for secret in (*secrets, "127.0.0.1"):
            assert secret not in seen, f"{secret!r} reached another session"
    # The token is never part of the pin, even for the owner.
    assert all(tok not in json.dumps(q) for q in pins)
