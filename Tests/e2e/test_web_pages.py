"""The pages vigild serves (``web.enabled``), in a real headless Chromium driven over CDP (cdp.py).

* ``/watch``: follows a stream a test client started, shows each update, "signal lost" on
  ``panic.stale``, the end; after the test cuts the page's connection (a TCP relay between the
  browser and the daemon) and restores it, the page has every point, in order.
* ``/map``: a pin created by another client appears within a second, and goes when deleted or
  expired; the page re-subscribes as the map moves; a pin created, edited, voted and deleted from
  the page reaches a test subscriber.
* ``/panic``: with the browser's location emulated, a stream started from the page is watched
  by a test client through the link the page shows, follows the location, and ends as "safe".
* No page breaks its Content-Security-Policy or throws; the pages' WebSocket traffic is recorded
  for the log-privacy scan (no watch token or other secret may reach a log line).

With ``VIGIL_SCREENSHOT_DIR`` set, each test leaves a screenshot of its page there (the README's
pictures: ``VIGIL_SCREENSHOT_DIR=docs/img pytest Tests/e2e/test_web_pages.py``).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

import cdp
import privacy
from pinclient import GENEROUS_LIMITS, PinClient, ProtocolViolation
from vigilproc import REPO

CHROMIUM = cdp.chromium_binary()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install -y chromium libjs-leaflet)")
SHOTS = os.environ.get("VIGIL_SCREENSHOT_DIR")

CONFIG = {
    "limits": dict(GENEROUS_LIMITS),
    "server": {"shutdown_grace_ms": 2000},
    "pins": {"min_ttl_s": 1},
    "panic": {"stale_after_ms": 1500},
    "web": {"enabled": True, "root": str(REPO / "web"), "tile_url": ""},
}


class OwnerClient(PinClient):
    """The person in danger's phone: a PinClient whose events are the owner's panic ones
    (watcher counts, and a missed check-in of its safety timer)."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg or not (msg["type"] == "panic.watchers" or msg.get("reason") == "missed_check_in"):
            raise ProtocolViolation(f"unexpected message: {msg!r}")


class Relay:
    """A TCP relay from a loopback port to the daemon, which the test can cut (every relayed
    connection closed, new ones refused) and restore: a network drop as the browser sees it."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.up = True
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        self.accepted = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                if not self.up:
                    client.close()
                    continue
                self.accepted += 1
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            upstream.settimeout(None)
            with self.lock:
                self.open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            for s in (src, dst):
                if s in self.open:
                    self.open.discard(s)
                    s.close()

    def cut(self) -> None:
        with self.lock:
            self.up = False
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def restore(self) -> None:
        with self.lock:
            self.up = True

    def close(self) -> None:
        self.cut()
        self.server.close()


@pytest.fixture(scope="module")
def browser():
    b = cdp.Browser(CHROMIUM).start()
    yield b
    b.stop()


@pytest.fixture
def server(vigild):
    return vigild(CONFIG)


@pytest.fixture
def page(browser):
    p = browser.page()
    yield p
    checked_close(p)


def checked_close(p: cdp.Page) -> None:
    """Closes a page after its test: what its WebSockets received goes to the log-privacy scan,
    and it must not have broken its CSP, thrown, or missed a file."""
    for frame in p.received():
        privacy.record(frame)
    problems = [m for m in p.messages() if "Content Security Policy" in m or m.startswith("exception") or "Failed to load" in m]
    p.close()
    assert not problems, "the page broke its CSP, threw, or missed a file:\n" + "\n".join(problems)


def text(page, element_id: str) -> str:
    return page.eval(f"document.getElementById({element_id!r}).textContent")


def test_watch_page_follows_a_stream_through_a_network_drop_to_its_end(server, page):
    relay = Relay(server.port)
    owner = OwnerClient(server.port)
    try:
        start = owner.ok("panic.start", status="red", lat=52.52, lon=13.405, accuracy_m=8.0, note="walking home", watchers=1)
        stream, token = start["stream"], start["watch_tokens"][0]
        page.viewport(390, 760, mobile=True)
        page.goto(f"http://127.0.0.1:{relay.port}/watch#s={stream}&t={token}")
        page.wait("window.vigilWatch && document.getElementById('points').textContent === '1'")
        assert text(page, "status").startswith("RED")
        assert text(page, "note") == "walking home"
        assert text(page, "accuracy") == "± 8 m"
        assert re.fullmatch(r"\d+ s ago", text(page, "updated")), text(page, "updated")
        assert page.eval("document.getElementById('signal').hidden") is True

        seq = 1
        # Each update shows: the point count, the position, the accuracy.
        for i in range(1, 6):
            lat, lon = 52.52 + i * 0.0007, 13.405 + i * 0.0004
            seq = owner.ok("panic.update", stream=stream, lat=lat, lon=lon, accuracy_m=5.0 + i)["seq"]
            page.wait(f"document.getElementById('points').textContent === '{i + 1}'")
            assert text(page, "position") == f"{lat:.5f}, {lon:.5f}"
            assert text(page, "accuracy") == f"± {5 + i} m"
        seq = owner.ok("panic.status", stream=stream, status="amber")["seq"]
        page.wait("document.body.classList.contains('status-amber')")
        assert text(page, "status").startswith("AMBER")
        if SHOTS:
            page.screenshot(Path(SHOTS) / "watch.png")

        # The connection drops; the person keeps moving; the connection comes back.
        relay.cut()
        page.wait("document.getElementById('connection').textContent.includes('reconnecting')")
        for i in range(6, 12):
            seq = owner.ok("panic.update", stream=stream, lat=52.52 + i * 0.0007, lon=13.405 + i * 0.0004, accuracy_m=6.0)["seq"]
        accepted = relay.accepted
        relay.restore()
        page.wait(f"window.vigilWatch.lastSeq === {seq}", timeout=15)
        assert relay.accepted > accepted, "the page came back through a new connection"
        assert text(page, "connection") == "live"
        seqs = page.eval("window.vigilWatch.trail.map((p) => p.seq)")
        # Every location, once, in order: 1 (the start), 2..6, then 8..13 (7 was the status).
        assert seqs == [1, 2, 3, 4, 5, 6] + list(range(8, 14)), seqs
        assert text(page, "points") == "12"

        # No location for stale_after_ms: "signal lost".
        page.wait("!document.getElementById('signal').hidden", timeout=8)
        assert "Signal lost" in text(page, "signal")
        owner.ok("panic.update", stream=stream, lat=52.53, lon=13.41)
        page.wait("document.getElementById('signal').hidden")

        owner.ok("panic.end", stream=stream, reason="safe")
        page.wait("!document.getElementById('ended').hidden")
        assert text(page, "ended").startswith("Home safe")
    finally:
        owner.close()
        relay.close()


def test_watch_page_shows_the_check_in_time_and_a_missed_check_in(server, page):
    owner = OwnerClient(server.port)
    try:
        # Long enough for the page to load and show the deadline before it passes on a busy machine.
        due_at = int(time.time() * 1000) + 4000
        start = owner.ok("panic.start", status="amber", lat=52.52, lon=13.405, watchers=1, due_at=due_at)
        page.goto(f"http://127.0.0.1:{server.port}/watch#s={start['stream']}&t={start['watch_tokens'][0]}")
        page.wait("window.vigilWatch && window.vigilWatch.dueAt !== null")
        assert text(page, "due") != "–"
        assert page.eval("document.getElementById('missed').hidden") is True
        owner.ok("panic.update", stream=start["stream"], lat=52.53, lon=13.41)
        # The deadline passes with no check-in: the server turns the stream red and says why.
        page.wait("!document.getElementById('missed').hidden", timeout=10)
        assert "Missed check-in" in text(page, "missed")
        assert text(page, "status").startswith("RED")
        assert text(page, "due") == "–"
        assert text(page, "position") == "52.53000, 13.41000"
        owner.ok("panic.end", stream=start["stream"], reason="safe")
        page.wait("!document.getElementById('ended').hidden")
        assert page.eval("document.getElementById('missed').hidden") is True
    finally:
        owner.close()


def test_watch_page_with_a_bad_link_says_so(server, page):
    page.goto(f"http://127.0.0.1:{server.port}/watch#s=nothing&t=nothing")
    page.wait("!document.getElementById('problem').hidden")
    assert "does not open" in text(page, "problem")
    page.goto(f"http://127.0.0.1:{server.port}/watch")
    page.wait("!document.getElementById('problem').hidden")
    assert "incomplete" in text(page, "problem")


def test_watch_page_shows_a_revocation(server, page):
    with OwnerClient(server.port) as owner:
        start = owner.ok("panic.start", status="amber", lat=1.0, lon=2.0, watchers=2)
        page.goto(f"http://127.0.0.1:{server.port}/watch#s={start['stream']}&t={start['watch_tokens'][1]}")
        page.wait("window.vigilWatch && window.vigilWatch.lastSeq === 1")
        owner.ok("panic.revoke", stream=start["stream"], watch_token=start["watch_tokens"][1])
        page.wait("!document.getElementById('revoked').hidden")


def pin_item(pin_id: str) -> str:
    return f"document.querySelector('#pins li[data-id=\"{pin_id}\"]')"


def test_map_page_shows_pins_live_and_follows_the_view(server, page):
    page.viewport(1100, 720)
    page.goto(f"http://127.0.0.1:{server.port}/map#at=48.8566,2.3522,14")
    page.wait("document.body.dataset.ready === 'true'")
    with PinClient(server.port) as other:
        created_at = time.monotonic()
        reply = other.ok("pin.create", pin={"lat": 48.857, "lon": 2.353, "title": "Broken glass", "category": "hazard",
                                             "description": "On the cycle lane"})
        page.wait(pin_item(reply["pin"]["id"]), timeout=1.0)
        assert time.monotonic() - created_at < 1.0
        item = page.eval(f"{pin_item(reply['pin']['id'])}.textContent")
        assert "Broken glass" in item and "hazard" in item and "left" in item
        assert page.eval(f"{pin_item(reply['pin']['id'])}.querySelector('[data-action=delete]')") is None, "not ours"
        other.ok("pin.create", pin={"lat": 48.855, "lon": 2.350, "title": "Street party", "category": "social"})
        page.wait("document.querySelectorAll('#pins li').length === 2")
        if SHOTS:
            page.screenshot(Path(SHOTS) / "map.png")

        other.ok("pin.delete", id=reply["pin"]["id"], edit_token=reply["edit_token"])
        page.wait(f"!{pin_item(reply['pin']['id'])}", timeout=1.0)

        short = other.ok("pin.create", pin={"lat": 48.858, "lon": 2.354, "title": "Short-lived", "ttl_s": 1})
        page.wait(pin_item(short["pin"]["id"]), timeout=1.0)
        page.wait(f"!{pin_item(short['pin']['id'])}", timeout=4.0)

        # Moving the map re-subscribes: a pin far away appears once the view is there.
        far = other.ok("pin.create", pin={"lat": 40.4168, "lon": -3.7038, "title": "Madrid"})
        page.eval("void window.vigilLeaflet.setView([40.4168, -3.7038], 14)")
        page.wait(pin_item(far["pin"]["id"]), timeout=3.0)
        page.wait("document.querySelectorAll('#pins li').length === 1")


def test_a_pin_made_on_the_map_page_reaches_a_subscriber(server, page):
    page.goto(f"http://127.0.0.1:{server.port}/map#at=35.6762,139.6503,15")
    page.wait("document.body.dataset.ready === 'true'")
    with PinClient(server.port) as sub:
        sub.subscribe_bbox(35.6, 139.6, 35.8, 139.7)
        page.eval("""(() => {
          document.getElementById('pin-title').value = 'Lost dog';
          document.getElementById('pin-description').value = 'Small, brown';
          document.getElementById('pin-category').value = 'help';
          document.getElementById('pin-ttl').value = '3600';
          document.getElementById('pin-submit').click();
        })()""")
        added = sub.event()
        assert added["type"] == "pin.added"
        pin = added["pin"]
        assert (pin["title"], pin["description"], pin["category"]) == ("Lost dog", "Small, brown", "help")
        assert abs(pin["lat"] - 35.6762) < 0.01 and abs(pin["lon"] - 139.6503) < 0.01
        assert 3590_000 <= pin["expires_at"] - pin["created_at"] <= 3600_000
        page.wait(f"{pin_item(pin['id'])} && {pin_item(pin['id'])}.querySelector('[data-action=delete]')")
        assert page.eval(f"JSON.parse(localStorage.getItem('vigil.edit_tokens'))[{pin['id']!r}].length") == 43

        page.eval(f"{pin_item(pin['id'])}.querySelector('[data-action=up]').click()")
        voted = sub.event()
        assert voted["type"] == "pin.updated" and voted["pin"]["up"] == 1

        page.eval(f"{pin_item(pin['id'])}.querySelector('[data-action=edit]').click()")
        page.eval("""(() => {
          document.getElementById('pin-title').value = 'Lost dog found';
          document.getElementById('pin-submit').click();
        })()""")
        edited = sub.event()
        assert edited["type"] == "pin.updated" and edited["pin"]["title"] == "Lost dog found"
        assert edited["pin"]["expires_at"] == voted["pin"]["expires_at"], "an edit keeps the time left"

        page.wait(f"{pin_item(pin['id'])}.textContent.includes('Lost dog found')")
        page.eval(f"{pin_item(pin['id'])}.querySelector('[data-action=delete]').click()")
        removed = sub.event()
        assert removed["type"] == "pin.removed" and removed["reason"] == "deleted" and removed["pin"]["id"] == pin["id"]
        page.wait(f"!{pin_item(pin['id'])}")


class WatcherClient(PinClient):
    """An SOS contact: a PinClient whose events are a watcher's panic ones."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg or not msg["type"].startswith("panic."):
            raise ProtocolViolation(f"unexpected message: {msg!r}")


def test_panic_page_shares_the_location_until_safe(server, browser, page):
    origin = f"http://127.0.0.1:{server.port}"
    browser.session.send("Browser.grantPermissions", {"permissions": ["geolocation"], "origin": origin})
    page.send("Emulation.setGeolocationOverride", {"latitude": 59.3293, "longitude": 18.0686, "accuracy": 12})
    page.viewport(390, 760, mobile=True)
    page.goto(f"{origin}/panic")
    page.wait("document.body.dataset.ready === 'true'")
    page.eval("""(() => {
      document.getElementById('contacts').value = '1';
      document.getElementById('note').value = 'taxi home';
      document.getElementById('e2e').checked = false;  // the clear stream (e2e: test_e2e_pages.py)
      document.getElementById('start-red').click();
    })()""")
    page.wait("document.querySelectorAll('#links input').length === 1")
    link = page.eval("document.querySelector('#links input').value")
    m = re.fullmatch(re.escape(origin) + r"/watch#s=([A-Za-z0-9_-]+)&t=([A-Za-z0-9_-]+)", link)
    assert m, link
    with WatcherClient(server.port) as contact:
        state = contact.ok("panic.watch", stream=m.group(1), watch_token=m.group(2))["state"]
        assert (state["status"], state["note"]) == ("red", "taxi home")
        assert (state["last"]["lat"], state["last"]["lon"], state["last"]["accuracy_m"]) == (59.3293, 18.0686, 12)
        page.wait("document.getElementById('seen').textContent === 'seen by 1 person'")
        if SHOTS:
            page.screenshot(Path(SHOTS) / "panic.png")
        page.send("Emulation.setGeolocationOverride", {"latitude": 59.3301, "longitude": 18.0702, "accuracy": 9})
        # The page sends what watchPosition reports (the first fix again, maybe, then the new one);
        # "signal lost" may come between (stale_after_ms is short here).
        seen = []
        while not seen or (seen[-1].get("lat"), seen[-1].get("lon")) != (59.3301, 18.0702):
            seen.append(contact.event(timeout=10))
            assert seen[-1]["type"] in ("panic.location", "panic.stale"), seen
            assert len(seen) < 10, seen
        page.eval("document.getElementById('safe').click()")
        ended = next_non_location(contact, (59.3301, 18.0702))
        assert ended["type"] == "panic.ended" and ended["reason"] == "safe", ended
    page.wait("!document.getElementById('start').hidden")
    assert page.eval("localStorage.getItem('vigil.panic')") is None


def next_non_location(contact, at, timeout=5.0):
    """The next event that is neither a location fix nor "signal lost". The page sends what
    watchPosition reports, and Chromium may report the overridden fix again at any time (CI saw
    one arrive before a panic.timer), or not for longer than stale_after_ms (1.5 s here); a fix
    passed over must be the override's position."""
    for _ in range(10):
        ev = contact.event(timeout=timeout)
        if ev["type"] == "panic.location":
            assert (ev["lat"], ev["lon"]) == at, ev
        elif ev["type"] != "panic.stale":
            return ev
    raise AssertionError("ten location fixes or stale marks in a row and no other event")


def test_panic_page_walks_a_person_home_and_raises_a_missed_check_in(server, browser, page):
    origin = f"http://127.0.0.1:{server.port}"
    browser.session.send("Browser.grantPermissions", {"permissions": ["geolocation"], "origin": origin})
    page.send("Emulation.setGeolocationOverride", {"latitude": 48.8566, "longitude": 2.3522, "accuracy": 15})
    page.viewport(390, 760, mobile=True)
    page.goto(f"{origin}/panic")
    page.wait("document.body.dataset.ready === 'true'")
    started = time.time()
    page.eval("""(() => {
      document.getElementById('contacts').value = '1';
      document.getElementById('walk-minutes').value = '30';
      document.getElementById('e2e').checked = false;  // a clear stream: the test's watcher reads positions
      document.getElementById('start-walk').click();
    })()""")
    page.wait("document.querySelectorAll('#links input').length === 1 && !document.getElementById('walk').hidden")
    m = re.search(r"/watch#s=([A-Za-z0-9_-]+)&t=([A-Za-z0-9_-]+)$", page.eval("document.querySelector('#links input').value"))
    assert m
    stream = m.group(1)
    paris = (48.8566, 2.3522)
    with WatcherClient(server.port) as contact:
        state = contact.ok("panic.watch", stream=stream, watch_token=m.group(2))["state"]
        assert state["status"] == "amber"
        due = state["timer"]["due_at"]
        assert started * 1000 + 30 * 60000 - 5000 <= due <= time.time() * 1000 + 30 * 60000 + 5000
        assert page.eval("document.getElementById('due').textContent") != "–"
        # "+15 minutes" moves the deadline the server keeps by a quarter of an hour.
        page.eval("document.getElementById('extend').click()")
        moved = next_non_location(contact, paris)
        assert moved["type"] == "panic.timer" and abs(moved["due_at"] - (due + 15 * 60000)) <= 2000, moved
        # "No timer" cancels it, and the page stops showing a deadline.
        page.eval("document.getElementById('stop-timer').click()")
        cancelled = next_non_location(contact, paris)
        assert cancelled["type"] == "panic.timer" and cancelled["due_at"] is None, cancelled
        page.wait("document.getElementById('walk').hidden")
        # A deadline that passes: the server escalates, and the page says so to its owner.
        page.eval("vigilOwner.setTimer({ due_in_s: 1 })")
        assert next_non_location(contact, paris)["type"] == "panic.timer"
        escalated = next_non_location(contact, paris)
        assert (escalated["type"], escalated["status"], escalated["reason"]) == ("panic.status", "red", "missed_check_in"), escalated
        page.wait("!document.getElementById('missed').hidden && document.body.classList.contains('status-red')")
        assert page.eval("document.getElementById('walk').hidden")
        if SHOTS:
            page.screenshot(Path(SHOTS) / "panic-missed.png")
        page.eval("document.getElementById('safe').click()")
        ended = next_non_location(contact, paris)
        assert ended["type"] == "panic.ended" and ended["reason"] == "safe", ended
    page.wait("!document.getElementById('start').hidden")


def map_view(page) -> list[float]:
    return page.eval("(() => { const c = window.vigilLeaflet.getCenter(); return [c.lat, c.lng, window.vigilLeaflet.getZoom()]; })()")


def test_map_page_opens_where_the_config_says_unless_the_link_says_otherwise(vigild, page):
    d = vigild(dict(CONFIG, web=dict(CONFIG["web"], map_center=[-33.8688, 151.2093], map_zoom=9)))
    page.viewport(1100, 720)
    page.goto(f"http://127.0.0.1:{d.port}/map")
    page.wait("document.body.dataset.ready === 'true' && window.vigilLeaflet")
    assert map_view(page) == pytest.approx([-33.8688, 151.2093, 9], abs=1e-6)
    # The fragment wins: a centre and a zoom, or a centre alone at the configured zoom.
    for fragment, view in [("#at=48.8566,2.3522,14", [48.8566, 2.3522, 14]), ("#at=40.4168,-3.7038", [40.4168, -3.7038, 9])]:
        page.goto("about:blank")
        page.goto(f"http://127.0.0.1:{d.port}/map{fragment}")
        page.wait("document.body.dataset.ready === 'true' && window.vigilLeaflet")
        assert map_view(page) == pytest.approx(view, abs=1e-6), fragment


def test_pages_work_without_leaflet(vigild, page):
    d = vigild(dict(CONFIG, web=dict(CONFIG["web"], leaflet="")))
    with OwnerClient(d.port) as owner, PinClient(d.port) as other:
        start = owner.ok("panic.start", status="red", lat=10.5, lon=20.25, accuracy_m=30.0)
        page.goto(f"http://127.0.0.1:{d.port}/watch#s={start['stream']}&t={start['watch_tokens'][0]}")
        page.wait("window.vigilWatch && window.vigilWatch.lastSeq === 1")
        assert "No map" in text(page, "map")
        assert text(page, "position") == "10.50000, 20.25000"
        owner.ok("panic.update", stream=start["stream"], lat=10.6, lon=20.3)
        page.wait("document.getElementById('position').textContent === '10.60000, 20.30000'")

        page.goto(f"http://127.0.0.1:{d.port}/map#bbox=10,20,11,21")
        page.wait("document.body.dataset.ready === 'true'")
        reply = other.ok("pin.create", pin={"lat": 10.5, "lon": 20.5, "title": "Text only"})
        page.wait(pin_item(reply["pin"]["id"]))
