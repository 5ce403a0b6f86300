"""Pin limits that need a daemon of their own (docs/PROTOCOL.md): the per-session write
rate limit, the message flood close (1008), max_subscribe_pins truncation and max_pins.

Each test starts its own vigild (function-scoped ``vigild`` launcher) with the config it
needs, so no limit carries over between tests.
"""

from __future__ import annotations

import time

import pinclient as pc
from pinclient import PinClient


def start(vigild, **overrides):
    return pc.start_daemon(vigild, pc.pins_config(**overrides))


def ids(pins):
    return [p["id"] for p in pins]


def tick(ms: int) -> None:
    """Wait until the (shared) clock has passed ``ms``: the next pin gets a later created_at."""
    while pc.now_ms() <= ms:
        time.sleep(0.0005)


# ---------------------------------------------------------------------------------------
# 11. write rate limit
# ---------------------------------------------------------------------------------------
def test_write_rate_limit_per_session(vigild):
    d = start(vigild, pins={"writes_per_minute": 60, "write_burst": 3})
    with PinClient(d.port) as c, PinClient(d.port) as other:
        assert (c.welcome["limits"]["writes_per_minute"], c.welcome["limits"]["write_burst"]) == (60, 3)
        area = {"bbox": [10, 10, 11, 11]}
        # Three writes of three kinds: the burst.
        p, tok = c.create(10.5, 10.5, "one")
        c.ok("pin.vote", id=p["id"], value=1)
        c.ok("pin.update", id=p["id"], edit_token=tok, changes={"title": "one, edited"})
        # The fourth is over the limit.
        t0 = time.monotonic()
        e = c.error("pin.create", pin={"lat": 10.6, "lon": 10.6, "title": "four"})
        assert e["code"] == "rate_limited", e
        ms = e.get("retry_after_ms")
        assert isinstance(ms, int) and not isinstance(ms, bool), e
        assert 0 < ms <= 1100, f"60 writes/minute refill one token a second: retry_after_ms={ms}"
        assert isinstance(e.get("message"), str) and e["message"]
        # Each kind of write is limited; nothing is applied.
        assert c.error("pin.delete", id=p["id"], edit_token=tok)["code"] == "rate_limited"
        assert c.error("pin.vote", id=p["id"], value=-1)["code"] == "rate_limited"
        assert c.error("pin.update", id=p["id"], edit_token=tok,
                       changes={"title": "x"})["code"] == "rate_limited"
        # Reads are not writes.
        for _ in range(5):
            r = c.ok("subscribe", area=area)
            assert [(q["id"], q["title"], q["up"]) for q in r["pins"]] == [(p["id"], "one, edited", 1)], r
        assert c.ok("unsubscribe")["type"] == "ok"
        # The limit is per session.
        q, _ = other.create(10.7, 10.7, "other session")
        # retry_after_ms is truthful: once it has passed, a write goes through.  (Waiting for
        # the bucket to refill is the behaviour under test, not a synchronisation.)
        wait = ms / 1000 + 0.05 - (time.monotonic() - t0)
        if wait > 0:
            time.sleep(wait)
        r = c.request("pin.create", pin={"lat": 10.8, "lon": 10.8, "title": "after the wait"})
        assert r["type"] == "ok", f"write after retry_after_ms={ms} ms: {r!r}"
        # ...and only one token had come back.
        e2 = c.error("pin.create", pin={"lat": 10.9, "lon": 10.9, "title": "too soon"})
        assert e2["code"] == "rate_limited" and e2["retry_after_ms"] > 0, e2


# ---------------------------------------------------------------------------------------
# 12. message flood
# ---------------------------------------------------------------------------------------
def test_message_burst_is_allowed(vigild):
    d = start(vigild, session={"messages_per_second": 5, "message_burst": 10})
    with PinClient(d.port) as c:
        assert (c.welcome["limits"]["messages_per_second"], c.welcome["limits"]["message_burst"]) == (5, 10)
        refs = [c.send_request("unsubscribe") for _ in range(10)]
        for ref in refs:
            assert c.await_reply(ref) == {"type": "ok", "ref": ref}


def test_message_flood_closes_with_1008(vigild):
    d = start(vigild, session={"messages_per_second": 5, "message_burst": 10})
    with PinClient(d.port) as bystander, PinClient(d.port) as flooder:
        bystander.subscribe_bbox(10, 10, 11, 11)
        sent = 0
        try:
            for _ in range(60):
                flooder.send_request("unsubscribe")
                sent += 1
        except Exception:
            pass  # the server may close while we are still sending
        code = flooder.closed_with(timeout=5.0)
        assert code == 1008, f"after {sent} messages at once (burst 10): close code {code}"
        # Only the flooding session is closed.
        assert bystander.request("unsubscribe")["type"] == "ok"
    with PinClient(d.port) as fresh:
        assert fresh.request("unsubscribe")["type"] == "ok"


# ---------------------------------------------------------------------------------------
# subscribe truncation and capacity
# ---------------------------------------------------------------------------------------
def test_subscribe_reply_truncated_to_max_subscribe_pins(vigild):
    d = start(vigild, pins={"max_subscribe_pins": 3})
    with PinClient(d.port) as c:
        assert c.welcome["limits"]["max_subscribe_pins"] == 3
        made = []
        for i in range(5):
            if made:
                tick(made[-1]["created_at"])  # distinct created_at: truncation, not tie order, is tested here
            made.append(c.create(10.1 + 0.01 * i, 10.5, f"p{i}")[0])
        r = c.ok("subscribe", area={"bbox": [10, 10, 11, 11]})
        assert r.get("truncated") is True, r
        assert ids(r["pins"]) == ids(reversed(made[-3:])), "the newest max_subscribe_pins, newest first"
        # Events still cover the whole area.
        n, _ = c.create(10.9, 10.9, "after")
        ev = c.event()
        assert ev == {"type": "pin.added", "pin": n}
        # Exactly max_subscribe_pins matches: not truncated.
        r = c.ok("subscribe", area={"bbox": [10.095, 10, 10.125, 11]})
        assert ids(r["pins"]) == ids(reversed(made[:3])) and r.get("truncated") in (None, False), r


def test_capacity_exceeded_at_max_pins(vigild):
    d = start(vigild, pins={"max_pins": 4, "max_subscribe_pins": 4})
    with PinClient(d.port) as c:
        made = []
        for i in range(4):
            if made:
                tick(made[-1][0]["created_at"])
            made.append(c.create(10.1 + 0.01 * i, 10.5, f"p{i}"))
        e = c.error("pin.create", pin={"lat": 10.5, "lon": 10.5, "title": "one too many"})
        assert e["code"] == "capacity_exceeded", e
        assert ids(c.ok("subscribe", area={"bbox": [10, 10, 11, 11]})["pins"]) == ids(reversed([p for p, _ in made]))
        # Room again after a delete.
        p0, tok0 = made[0]
        c.ok("pin.delete", id=p0["id"], edit_token=tok0)
        c.event()  # its pin.removed (we are subscribed)
        again, _ = c.create(10.5, 10.5, "fits again")
        assert c.event() == {"type": "pin.added", "pin": again}


# ---------------------------------------------------------------------------------------
# text caps in the welcome
# ---------------------------------------------------------------------------------------
def test_welcome_announces_the_configured_text_caps(vigild):
    """A daemon with non-default byte caps announces them, and what it announces is what it
    enforces: a text of exactly the cap is taken, one byte more is refused."""
    d = start(vigild, pins={"title_max_bytes": 40, "description_max_bytes": 100},
              panic={"note_max_bytes": 24}, checkin={"label_max_bytes": 12, "note_max_bytes": 20})
    with PinClient(d.port) as c, PinClient(d.port) as creator:
        limits = c.welcome["limits"]
        assert {k: limits.get(k) for k in (
            "title_max_chars", "title_max_bytes", "description_max_chars", "description_max_bytes",
            "panic_note_max_chars", "panic_note_max_bytes", "checkin_label_max_chars", "checkin_label_max_bytes",
            "checkin_note_max_chars", "checkin_note_max_bytes")} == {
            "title_max_chars": 80, "title_max_bytes": 40, "description_max_chars": 1000, "description_max_bytes": 100,
            "panic_note_max_chars": 280, "panic_note_max_bytes": 24, "checkin_label_max_chars": 40,
            "checkin_label_max_bytes": 12, "checkin_note_max_chars": 280, "checkin_note_max_bytes": 20}, limits

        def text(n):
            return "é" * (n // 2) + "x" * (n % 2)  # n bytes of UTF-8, n // 2 + n % 2 characters: under every character cap

        cap = limits["title_max_bytes"]
        c.ok("pin.create", pin={"lat": 10, "lon": 10, "title": text(cap), "description": text(limits["description_max_bytes"])})
        assert c.error("pin.create", pin={"lat": 10, "lon": 10, "title": text(cap + 1)})["field"] == "pin.title"
        e = c.error("pin.create", pin={"lat": 10, "lon": 10, "title": "t", "description": text(limits["description_max_bytes"] + 1)})
        assert (e["code"], e["field"]) == ("invalid_description", "pin.description"), e

        cap = limits["panic_note_max_bytes"]
        c.ok("panic.start", status="amber", lat=10, lon=10, note=text(cap))
        e = c.error("panic.start", status="amber", lat=10, lon=10, note=text(cap + 1))
        assert (e["code"], e["field"]) == ("invalid_note", "note"), e

        cap = limits["checkin_label_max_bytes"]
        # Created on a connection of its own, which hears the circle's news (this one must not: a
        # PinClient takes only pin events); answered from this one.
        circle = creator.ok("checkin.create", members=[text(cap)])
        assert circle["members"][0]["label"] == text(cap)
        e = c.error("checkin.create", members=[text(cap + 1)])
        assert (e["code"], e["field"]) == ("invalid_label", "members"), e

        cap = limits["checkin_note_max_bytes"]
        answer = c.ok("checkin.answer", circle=circle["circle"], owner_token=circle["owner_token"], note=text(cap))["answer"]
        assert answer["note"] == text(cap)
        e = c.error("checkin.answer", circle=circle["circle"], owner_token=circle["owner_token"], note=text(cap + 1))
        assert (e["code"], e["field"]) == ("invalid_note", "note"), e
