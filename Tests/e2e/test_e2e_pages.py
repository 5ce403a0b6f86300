"""The pages on end-to-end encrypted streams (issue 26), in a real headless Chromium (cdp.py)
against a real vigild.

* ``/watch`` with the key in its fragment: a Python owner (``e2e_vectors.seal``, as an app would)
  sends good sealed updates, and three that must not open: a tampered ciphertext, a ciphertext
  replayed with another seq, one moved from another stream (its key and kid). The page shows
  each good one's position and each bad one as "cannot decrypt this update", never as a
  position; the map's trail holds only the good ones.
* ``/watch`` without a key (and with a damaged one): no position, the notice said once.
* ``/panic`` → ``/watch``: the page starts an e2e stream by default, its link carries ``k=``,
  the watcher's page shows the position; the frames the server relays hold no coordinates; and
  neither page sends the key to a server (no WebSocket frame, no request URL carries it).
"""

from __future__ import annotations

import json
import os
import re

import pytest

import cdp
import e2e_vectors as ev
from test_e2e_streams import Client, Sealer
from test_web_pages import CHROMIUM, browser, checked_close, page, server, text  # noqa: F401 (fixtures)
import pinclient as pc

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install -y chromium libjs-leaflet)")

CANNOT = "cannot decrypt this update"


class Sent:
    """What a page sends: its WebSocket frames and the URLs it requests (a key must be in neither)."""

    def __init__(self, browser: cdp.Browser, p: cdp.Page):
        self.frames: list[str] = []
        self.urls: list[str] = []
        browser.session.listen(p.sid, self._event)

    def _event(self, method: str, params: dict) -> None:
        if method == "Network.webSocketFrameSent":
            self.frames.append(params["response"].get("payloadData", ""))
        elif method == "Network.requestWillBeSent":
            self.urls.append(params["request"]["url"])
        elif method == "Network.webSocketCreated":
            self.urls.append(params["url"])

    def holds(self, secret: str) -> bool:
        return any(secret in x for x in self.frames + self.urls)


def start(owner: Client, sealer: Sealer, point: dict, status: str = "red") -> tuple[str, str]:
    reply = owner.ok("panic.start", status=status, watchers=1,
                     e2e={"v": 1, "kid": sealer.kid, "sealed": sealer.seal(1, status, point)})
    return reply["stream"], reply["watch_tokens"][0]


def send(owner: Client, stream: str, sealed: str, kid: str, seq: int, status: str = "red") -> None:
    assert owner.ok("panic.update", stream=stream, sealed=sealed, kid=kid, seq=seq, status=status)["seq"] == seq


def undecryptable(p: cdp.Page) -> list[int]:
    return p.eval("[...document.querySelectorAll('#undecryptable li')].map((li) => Number(li.dataset.seq))")


def test_watch_page_opens_good_updates_and_shows_tampered_replayed_and_moved_ones_as_cannot_decrypt(server, browser, page):
    sealer, stranger = Sealer(), Sealer()
    with Client(server.port) as owner:
        stream, token = start(owner, sealer, {"lat": 52.52, "lon": 13.405, "accuracy_m": 8, "note": "walking home"})
        sent = Sent(browser, page)
        key = ev.b64u(sealer.key)
        page.goto(f"http://127.0.0.1:{server.port}/watch#s={stream}&t={token}&k={key}")
        page.wait("window.vigilWatch && document.getElementById('points').textContent === '1'")
        assert text(page, "position") == "52.52000, 13.40500"
        assert text(page, "note") == "walking home"
        assert page.eval("document.getElementById('e2e-badge').hidden") is False
        assert page.eval("document.getElementById('key-notice').hidden") is True

        good = sealer.seal(2, "red", {"lat": 52.5211, "lon": 13.4061, "accuracy_m": 6})
        send(owner, stream, good, sealer.kid, 2)
        page.wait("document.getElementById('points').textContent === '2'")
        assert text(page, "position") == "52.52110, 13.40610"

        # Tampered: one bit of the ciphertext flipped (the server relays opaque bytes as they are).
        raw = bytearray(ev.unb64u(sealer.seal(3, "red", {"lat": 1.5, "lon": 1.5})))
        raw[20] ^= 1
        send(owner, stream, ev.b64u(bytes(raw)), sealer.kid, 3)
        page.wait(f"document.querySelectorAll('#undecryptable li').length === 1")
        # Replayed: seq 2's ciphertext sent again as seq 4.
        send(owner, stream, good, sealer.kid, 4)
        page.wait(f"document.querySelectorAll('#undecryptable li').length === 2")
        # Moved from another stream: sealed under another key and kid, for this seq and status.
        send(owner, stream, stranger.seal(5, "red", {"lat": 2.5, "lon": 2.5}), stranger.kid, 5)
        page.wait(f"document.querySelectorAll('#undecryptable li').length === 3")
        assert undecryptable(page) == [3, 4, 5]
        assert all(CANNOT in li for li in page.eval("[...document.querySelectorAll('#undecryptable li')].map((li) => li.textContent)"))
        # None of them is a position: the last position and the trail are the good ones only.
        assert text(page, "position") == "52.52110, 13.40610"
        assert text(page, "points") == "2"
        assert page.eval("window.vigilWatch.trail.map((p) => p.seq)") == [1, 2]
        assert page.eval("window.vigilWatch.points.filter((p) => !p.ok).every((p) => p.position === undefined)") is True
        # The point under a kid the key never opened is named once (a key that changed).
        page.wait("!document.getElementById('key-notice').hidden")
        assert "key has changed" in text(page, "key-notice")

        send(owner, stream, sealer.seal(6, "red", {"lat": 52.5222, "lon": 13.4077}), sealer.kid, 6)
        page.wait("document.getElementById('points').textContent === '3'")
        assert text(page, "position") == "52.52220, 13.40770"
        assert undecryptable(page) == [3, 4, 5]
        assert not sent.holds(key), "the key went to a server"


@pytest.mark.parametrize("fragment_key, notice", [(None, "has no key"), ("AAAA", "damaged")])
def test_watch_page_without_a_good_key_shows_no_position_and_says_so_once(server, page, fragment_key, notice):
    sealer = Sealer()
    with Client(server.port) as owner:
        stream, token = start(owner, sealer, {"lat": 52.52, "lon": 13.405})
        send(owner, stream, sealer.seal(2, "red", {"lat": 52.53, "lon": 13.41}), sealer.kid, 2)
        link = f"http://127.0.0.1:{server.port}/watch#s={stream}&t={token}" + (f"&k={fragment_key}" if fragment_key else "")
        page.goto(link)
        page.wait("document.querySelectorAll('#undecryptable li').length === 2")
        assert notice in text(page, "key-notice") and page.eval("document.getElementById('key-notice').hidden") is False
        assert text(page, "position") == "–" and text(page, "points") == "0"
        changes = page.eval("""(() => { globalThis.notices = 0; vigilWatch.on('notice', () => globalThis.notices++); return 0; })()""")
        send(owner, stream, sealer.seal(3, "red", {"lat": 52.54, "lon": 13.42}), sealer.kid, 3)
        page.wait("document.querySelectorAll('#undecryptable li').length === 3")
        assert page.eval("globalThis.notices") == changes == 0, "the notice is said once"
        assert text(page, "position") == "–"


def test_panic_page_starts_an_e2e_stream_whose_link_carries_the_key_and_the_watch_page_opens_it(server, browser, page):
    origin = f"http://127.0.0.1:{server.port}"
    browser.session.send("Browser.grantPermissions", {"permissions": ["geolocation"], "origin": origin})
    page.send("Emulation.setGeolocationOverride", {"latitude": 59.3293, "longitude": 18.0686, "accuracy": 12})
    owner_sent = Sent(browser, page)
    page.goto(f"{origin}/panic")
    page.wait("document.body.dataset.ready === 'true'")
    assert page.eval("document.getElementById('e2e').checked") is True, "e2e is the default"
    page.eval("""(() => {
      document.getElementById('contacts').value = '1';
      document.getElementById('note').value = 'taxi home';
      document.getElementById('start-red').click();
    })()""")
    page.wait("document.querySelectorAll('#links input').length === 1")
    link = page.eval("document.querySelector('#links input').value")
    m = re.fullmatch(re.escape(origin) + r"/watch#s=([A-Za-z0-9_-]+)&t=([A-Za-z0-9_-]+)&k=([A-Za-z0-9_-]{43})", link)
    assert m, link
    key = m.group(3)
    # A third party watching with the token but no key sees sealed values only.
    with Client(server.port) as contact:
        state = contact.ok("panic.watch", stream=m.group(1), watch_token=m.group(2))["state"]
        assert state["e2e"] is True and "note" not in state
        assert "59.3293" not in json.dumps(state) and "taxi home" not in json.dumps(state)
        last = state["last"]
        opened = ev.open_sealed(ev.unb64u(key), last["kid"], last["seq"], last["status"], last["sealed"])
        assert (opened["lat"], opened["lon"]) == (59.3293, 18.0686)

    watcher = browser.page(isolated=True)
    try:
        watcher_sent = Sent(browser, watcher)
        watcher.goto(link)
        watcher.wait("window.vigilWatch && window.vigilWatch.trail.length >= 1", timeout=15)
        assert text(watcher, "position") == "59.32930, 18.06860"
        assert text(watcher, "note") == "taxi home"
        assert watcher.eval("document.getElementById('key-notice').hidden") is True
        page.send("Emulation.setGeolocationOverride", {"latitude": 59.3301, "longitude": 18.0702, "accuracy": 9})
        watcher.wait("document.getElementById('position').textContent === '59.33010, 18.07020'", timeout=15)
        assert undecryptable(watcher) == []
        # The frames the server relayed to the watcher hold no coordinate and no note.
        assert not any("59.33" in f or "taxi home" in f for f in watcher.received())
        assert not watcher_sent.holds(key) and not owner_sent.holds(key), "the key went to a server"
    finally:
        checked_close(watcher)
    page.eval("document.getElementById('safe').click()")
    page.wait("!document.getElementById('start').hidden")
