"""The check-in circle page (/circle), the service worker (/sw.js) and /watch for a circle's
members, in a real headless Chromium driven over CDP (cdp.py). Each person has a browser of
their own: the owner the default browser context, every member an isolated one (its own
localStorage, service worker and permissions), as two phones would.

* Owner and member on /circle: the owner makes a circle with labels and gets one invitation
  link per member; the member opens it, and the page keeps the member token in localStorage and
  takes it out of the URL; "are you safe?", the answer with its note, home safe, each seen by the
  other; a withdrawn invitation ends the member's page and its stored token. A damaged or
  withdrawn link and "notifications" on a server without Web Push say so.
* A panic for the circle: the owner raises it from /circle (location emulated), which hands over
  to /panic's sharing view; the member's /circle shows the alarm; "Follow" opens
  /watch#stream=S&circle=C, which watches with the stored member token and shows the stream to
  its end.
* The service worker: pushes delivered by DevTools (``ServiceWorker.deliverPushMessage``, as a
  push service's message arrives) become notifications with the title and body of their kind,
  tagged by stream (a newer notice replaces an older one) or circle, ``requireInteraction`` for
  danger only, ``data.url`` the page to open (a foreign URL in a payload is not followed), and
  no token anywhere. A tap (see ``click``) opens that page, or focuses the window already
  showing it; the page opened finds the member's token by the circle.
* The whole chain: vigild with a VAPID key sends the notice of a panic to the member's
  subscription at the test push service (pushservice.py), which checks VAPID and decrypts it as
  the browser would; the decrypted payload is delivered to the member's service worker, and its
  notification opens /watch on the stream.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path

import pytest

import cdp
import test_web_pages as web
from pinclient import PinClient, ProtocolViolation
from pushservice import PushService, b64url_decode

pytestmark = web.pytestmark
browser = web.browser
page = web.page
server = web.server
text = web.text
checked_close = web.checked_close
CONFIG = web.CONFIG
ID = r"[A-Za-z0-9_-]+"


class CircleOwner(PinClient):
    """A circle's owner on a test connection: hears its circle's news and its streams' owner events."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg or not (msg["type"].startswith("checkin.") or msg["type"].startswith("panic.")):
            raise ProtocolViolation(f"unexpected message: {msg!r}")


@pytest.fixture
def member(browser):
    """A second person's browser: a page in a browser context of its own."""
    p = browser.page(isolated=True)
    yield p
    checked_close(p)


def grant(browser, p: cdp.Page, origin: str, *permissions: str) -> None:
    params = {"permissions": list(permissions), "origin": origin}
    if p.context:
        params["browserContextId"] = p.context
    browser.session.send("Browser.grantPermissions", params)


def stored(p: cdp.Page) -> dict:
    return p.eval("JSON.parse(localStorage.getItem('vigil.circles') || '{}')")


def owner_makes_a_circle(p: cdp.Page, origin: str, labels: list[str]) -> tuple[str, list[str]]:
    """The owner makes a circle on /circle; returns its id and the invitation links shown."""
    p.goto(f"{origin}/circle")
    p.wait("document.body.dataset.ready === 'true'")
    p.eval(f"""(() => {{
      document.getElementById('create-members').value = {json.dumps(chr(10).join(labels))};
      document.getElementById('create').click();
    }})()""")
    p.wait(f"document.querySelectorAll('#members li input').length === {len(labels)}")
    links = p.eval("[...document.querySelectorAll('#members li input')].map((i) => i.value)")
    m = re.fullmatch(re.escape(origin) + f"/circle#circle=({ID})", p.eval("location.href"))
    assert m, p.eval("location.href")
    return m.group(1), links


def member_opens(p: cdp.Page, link: str) -> None:
    p.goto(link)
    p.wait("document.body.dataset.ready === 'true' && !document.getElementById('circle').hidden")


def test_owner_and_member_on_the_circle_page(server, page, member):
    origin = f"http://127.0.0.1:{server.port}"
    page.viewport(390, 760, mobile=True)
    circle, links = owner_makes_a_circle(page, origin, ["Mum", "Sam"])
    owner_token = stored(page)[circle]["token"]
    assert stored(page)[circle]["role"] == "owner"
    assert [li.rsplit("&member=", 1)[0] for li in links] == [f"{origin}/circle#circle={circle}"] * 2
    # Each link: the member token, then the member's secret (32 bytes, base64url) for its key boxes.
    parts = [re.fullmatch(r"([A-Za-z0-9_-]+)&ms=([A-Za-z0-9_-]{43})", li.rsplit("&member=", 1)[1]) for li in links]
    assert all(parts), links
    tokens = [p.group(1) for p in parts]
    secrets = [p.group(2) for p in parts]
    assert len(set(tokens)) == 2 and owner_token not in tokens
    assert len(set(secrets)) == 2
    # The owner's browser keeps every member's secret (its circle streams box the key for them).
    assert [m["ms"] for m in stored(page)[circle]["members"]] == secrets

    # The member opens Mum's link: the token is kept, and gone from the address bar.
    member.viewport(390, 760, mobile=True)
    member_opens(member, links[0])
    assert member.eval("location.href") == f"{origin}/circle#circle={circle}"
    member.wait(f"JSON.parse(localStorage.getItem('vigil.circles'))[{circle!r}].member === 1")
    assert stored(member) == {circle: {"role": "member", "token": tokens[0], "ms": secrets[0], "label": "Mum", "member": 1}}
    assert text(member, "role") == "you are Mum"
    assert member.eval("document.getElementById('owner-actions').hidden") is True
    assert page.eval("document.getElementById('member-actions').hidden") is True

    # "Are you safe?" reaches the owner; the answer and its note reach the member.
    member.eval("document.getElementById('ask').click()")
    page.wait("document.getElementById('requests').textContent.includes('Mum asked')")
    member.wait("document.getElementById('requests').textContent.includes('You asked')")
    page.eval("""(() => {
      document.getElementById('answer-note').value = 'on the bus';
      document.getElementById('safe').click();
    })()""")
    member.wait("document.getElementById('answer').textContent.includes('on the bus')")
    assert text(member, "answer").startswith("Safe, answered at")
    member.wait("document.querySelectorAll('#requests li').length === 0")

    # Home safe, set and cleared by the owner, seen by the member.
    page.eval("document.getElementById('home-hours').value = '2'; document.getElementById('home-set').click()")
    member.wait("!document.getElementById('home').hidden")
    assert text(member, "home").startswith("Home safe until")
    page.wait("!document.getElementById('home-clear').hidden")
    page.eval("document.getElementById('home-clear').click()")
    member.wait("document.getElementById('home').hidden")
    if web.SHOTS:
        page.screenshot(Path(web.SHOTS) / "circle-owner.png")
        member.screenshot(Path(web.SHOTS) / "circle-member.png")

    # A server without Web Push: "notifications" says so, and changes nothing.
    member.eval("document.getElementById('notify-on').click()")
    member.wait("!document.getElementById('problem').hidden")
    assert "does not send notifications" in text(member, "problem"), text(member, "problem")
    assert "push" not in stored(member)[circle]
    # A browser without Web Push: says so first (whatever the server).
    member.eval("delete window.PushManager; document.getElementById('problem').hidden = true; document.getElementById('notify-on').click()")
    member.wait("!document.getElementById('problem').hidden")
    assert "cannot receive notifications" in text(member, "problem"), text(member, "problem")

    # A reload finds the circle by the id alone, with the stored token; /circle lists it.
    member.goto(f"{origin}/circle#circle={circle}")
    member.wait("document.body.dataset.ready === 'true' && document.getElementById('role').textContent === 'you are Mum'")
    member.goto(f"{origin}/circle")
    member.wait("document.body.dataset.ready === 'true' && document.querySelectorAll('#circles li').length === 1")
    assert "as Mum" in text(member, "circles")
    assert member.eval("document.querySelector('#circles a').getAttribute('href')") == f"/circle#circle={circle}"
    member.eval("document.querySelector('#circles a').click()")
    member.wait_across_navigation("document.body.dataset.ready === 'true' && document.getElementById('role').textContent === 'you are Mum'")

    # One more invitation; then Mum's is withdrawn: her page says so and forgets the token.
    page.eval("document.getElementById('invite-label').value = 'Alex'; document.getElementById('invite').click()")
    page.wait("document.querySelectorAll('#members li').length === 3")
    assert "Alex" in page.eval("document.querySelector('#members li[data-member=\"3\"]').textContent")
    page.eval("document.querySelector('#members li[data-member=\"1\"] button.revoke').click()")
    member.wait("!document.getElementById('gone').hidden")
    assert "withdrawn" in text(member, "gone")
    assert stored(member) == {}
    page.wait("document.querySelectorAll('#members li').length === 2")
    assert [m["member"] for m in stored(page)[circle]["members"]] == [2, 3]

    # The withdrawn link opened again: it opens nothing, and says so.
    member.goto("about:blank")
    member.goto(links[0])
    member.wait("document.body.dataset.ready === 'true' && !document.getElementById('problem').hidden")
    assert "withdrawn" in text(member, "problem")
    assert stored(member) == {}


def test_a_damaged_invitation_and_an_unknown_circle_say_so(server, member):
    origin = f"http://127.0.0.1:{server.port}"
    member.goto(f"{origin}/circle#circle=abc&member=x")
    member.wait("document.body.dataset.ready === 'true' && !document.getElementById('problem').hidden")
    assert "damaged" in text(member, "problem")
    assert member.eval("location.hash") == ""
    member.goto("about:blank")
    member.goto(f"{origin}/circle#circle=AAAAAAAAAAAAAAAAAAAAAA")
    member.wait("document.body.dataset.ready === 'true' && !document.getElementById('problem').hidden")
    assert "holds no key" in text(member, "problem")
    # /watch for a circle this browser is not in.
    member.goto(f"{origin}/watch#stream=AAAAAAAAAAAAAAAAAAAAAA&circle=AAAAAAAAAAAAAAAAAAAAAA")
    member.wait("!document.getElementById('problem').hidden")
    assert "no invitation" in text(member, "problem")


def test_a_panic_for_the_circle_is_followed_by_its_member(server, browser, page, member):
    origin = f"http://127.0.0.1:{server.port}"
    circle, links = owner_makes_a_circle(page, origin, ["Mum"])
    member_opens(member, links[0])
    assert member.eval("document.getElementById('panics-box').hidden") is True

    # The owner raises the alarm on /circle; /panic takes over the sharing.
    grant(browser, page, origin, "geolocation")
    page.send("Emulation.setGeolocationOverride", {"latitude": 59.3293, "longitude": 18.0686, "accuracy": 12})
    page.eval("document.getElementById('panic-red').click()")
    page.wait_across_navigation("location.pathname === '/panic' && document.body.dataset.ready === 'true' && !document.getElementById('sharing').hidden", timeout=15)
    assert page.eval("document.getElementById('for-circle').hidden") is False
    stream = page.eval("window.vigilOwner.stream")
    assert page.eval("JSON.parse(localStorage.getItem('vigil.panic')).circle") == circle

    # The member's page shows it at once, and "Follow" opens /watch on it with the member token.
    member.wait(f"document.querySelector('#panics li[data-stream=\"{stream}\"]') && !document.getElementById('alarm').hidden")
    assert "in danger" in text(member, "alarm")
    href = member.eval(f"document.querySelector('#panics li[data-stream=\"{stream}\"] a.follow').href")
    assert href == f"{origin}/watch#stream={stream}&circle={circle}"
    member.eval(f"document.querySelector('#panics li[data-stream=\"{stream}\"] a.follow').click()")
    # The owner's /panic sends the position again (its feed): one point or more.
    member.wait_across_navigation("location.pathname === '/watch' && window.vigilWatch && window.vigilWatch.trail.length >= 1", timeout=15)
    assert text(member, "status").startswith("RED")
    assert text(member, "position") == "59.32930, 18.06860"
    page.wait("document.getElementById('seen').textContent === 'seen by 1 person'")

    page.send("Emulation.setGeolocationOverride", {"latitude": 59.3301, "longitude": 18.0702, "accuracy": 9})
    member.wait("document.getElementById('position').textContent === '59.33010, 18.07020'", timeout=15)
    page.eval("document.getElementById('safe').click()")
    member.wait("!document.getElementById('ended').hidden")
    assert text(member, "ended").startswith("Home safe")


# --- The service worker ---------------------------------------------------------------------------

class ServiceWorker:
    """The service worker of a page's origin, through DevTools: its registration (the
    ServiceWorker domain), a push delivered to it as a push service's message would be, and
    evaluation in its own global scope."""

    def __init__(self, browser: cdp.Browser, p: cdp.Page, origin: str):
        self.browser, self.page, self.origin = browser, p, origin
        self.cond = threading.Condition()
        self.scopes: dict[str, str] = {}
        self.sid: str | None = None
        self.pushed = 0
        browser.session.listen(p.sid, self._event)
        p.send("ServiceWorker.enable")

    def _event(self, method: str, params: dict) -> None:
        if method == "ServiceWorker.workerRegistrationUpdated":
            with self.cond:
                for r in params["registrations"]:
                    if r["isDeleted"]:
                        self.scopes.pop(r["registrationId"], None)
                    else:
                        self.scopes[r["registrationId"]] = r["scopeURL"]
                self.cond.notify_all()

    def registration(self, timeout: float = 10.0) -> str:
        scope = self.origin + "/"
        with self.cond:
            assert self.cond.wait_for(lambda: scope in self.scopes.values(), timeout), f"no registration for {scope}: {self.scopes}"
            return next(i for i, s in self.scopes.items() if s == scope)

    def push(self, payload: dict | str, timeout: float = 10.0) -> None:
        """Delivers ``payload`` as a push message and returns once the worker has shown its
        notification (``showNotification`` resolved: in Chromium, once it is displayed).

        Waiting for that, rather than re-reading ``getNotifications()`` until it appears, is
        needed: Chromium drops from its notification database every entry the display does not
        list yet when ``getNotifications()`` runs, so a read racing a display loses that
        notification for good. The wait is the worker's own: ``showNotification`` is observed
        (wrapped, in the worker's global scope, once) and the test's promise is woken by it."""
        if self.pushed == 0:
            self.eval("""(() => {
  self.__vigilShown = 0;
  self.__vigilWake = [];
  const show = ServiceWorkerRegistration.prototype.showNotification;
  ServiceWorkerRegistration.prototype.showNotification = function (...args) {
    return show.apply(this, args).then((value) => { self.__vigilShown++; self.__vigilWake.splice(0).forEach((f) => f()); return value; });
  };
})()""")
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.page.send("ServiceWorker.deliverPushMessage", {"origin": self.origin, "registrationId": self.registration(), "data": data})
        self.pushed += 1
        self.eval(f"""new Promise((resolve, reject) => {{
  const timer = setTimeout(() => reject(new Error('push {self.pushed} shown no notification within {timeout} s')), {int(timeout * 1000)});
  const check = () => (self.__vigilShown >= {self.pushed} ? (clearTimeout(timer), resolve()) : self.__vigilWake.push(check));
  check();
}})""", timeout + 5)

    def eval(self, expression: str, timeout: float = 20.0):
        """Evaluates in the worker's global scope (attached once: DevTools attached keeps the
        worker from being stopped while idle, so what a test set there stays)."""
        if self.sid is None:
            self.registration()
            workers = [t for t in self.browser.session.send("Target.getTargets")["targetInfos"]
                       if t["type"] == "service_worker" and t["url"] == self.origin + "/sw.js"
                       and (self.page.context is None or t.get("browserContextId") == self.page.context)]
            assert len(workers) == 1, workers
            self.sid = self.browser.session.send("Target.attachToTarget", {"targetId": workers[0]["targetId"], "flatten": True})["sessionId"]
        r = self.browser.session.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, self.sid, timeout)
        if "exceptionDetails" in r:
            raise cdp.CDPError(r["exceptionDetails"].get("exception", {}).get("description", r["exceptionDetails"].get("text")))
        return r["result"].get("value")

    def notifications(self) -> list[dict]:
        """The notifications the browser holds for the origin, as the page's registration reads them."""
        return self.page.eval("""navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => ns.map((n) => ({
  title: n.title, body: n.body, tag: n.tag, data: n.data, requireInteraction: n.requireInteraction, renotify: n.renotify, timestamp: n.timestamp })))""")

    def click(self, tag: str) -> dict:
        """Taps the notification tagged ``tag``: the worker's own ``notificationclick`` listener
        runs, on a NotificationEvent made of the notification the browser holds.

        DevTools cannot click a notification (headless Chromium has no notification UI), and
        Chromium lets a service worker open or focus a window only inside a click the browser
        itself dispatched. So the event here is dispatched from the worker's global scope, its
        ``waitUntil`` collects the handler's promise (an untrusted event's own throws), and the
        two calls the browser would refuse are observed instead of made: the URL handed to
        ``clients.openWindow`` and the window ``focus()`` was called on. The test then opens
        that URL itself, as the browser would have. Returns ``{opened, focused, left}``
        (``left``: notifications still shown with that tag)."""
        return self.eval(f"""(async () => {{
  const [n] = await self.registration.getNotifications({{ tag: {json.dumps(tag)} }});
  if (!n) throw new Error('no notification tagged ' + {json.dumps(tag)});
  const opened = [], focused = [];
  const focus = WindowClient.prototype.focus;
  self.clients.openWindow = async (url) => {{ opened.push(url); return null; }};
  WindowClient.prototype.focus = async function () {{ focused.push(this.url); return this; }};
  try {{
    const event = new NotificationEvent('notificationclick', {{ notification: n }});
    const waits = [];
    event.waitUntil = (p) => waits.push(p);
    self.dispatchEvent(event);
    await Promise.all(waits);
  }} finally {{
    delete self.clients.openWindow;
    WindowClient.prototype.focus = focus;
  }}
  const left = (await self.registration.getNotifications({{ tag: {json.dumps(tag)} }})).length;
  return {{ opened, focused, left }};
}})()""")


def notice(kind: str, circle: str, stream: str | None = None, status: str | None = None, **extra) -> dict:
    n = {"v": 1, "notice": "Nx" + kind[:8].replace("_", "") + "0123456789", "kind": kind, "circle": circle, "at": 1795379447436}
    if stream:
        n["stream"] = stream
        n["url"] = f"/watch#stream={stream}&circle={circle}"
    else:
        n["url"] = f"/circle#circle={circle}"
    if status:
        n["status"] = status
    n.update(extra)
    return n


def test_the_service_worker_shows_notices_and_opens_their_page(server, browser, member):
    origin = f"http://127.0.0.1:{server.port}"
    with CircleOwner(server.port) as owner:
        made = owner.ok("checkin.create", members=["Mum"])
        circle, owner_token, token = made["circle"], made["owner_token"], made["members"][0]["member_token"]
        member_opens(member, f"{origin}/circle#circle={circle}&member={token}")
        grant(browser, member, origin, "notifications")
        sw = ServiceWorker(browser, member, origin)
        assert member.eval("navigator.serviceWorker.register('/sw.js').then(() => navigator.serviceWorker.ready).then((r) => r.scope)") == origin + "/"
        stream, other = "S" * 21 + "a", "T" * 21 + "b"

        # A red alarm: danger, held on screen until acted on, tagged by its stream.
        sw.push(notice("panic_started", circle, stream, "red"))
        [n] = sw.notifications()
        assert (n["title"], n["tag"], n["requireInteraction"], n["renotify"]) == ("Danger alert from your circle", stream, True, True)
        assert "in danger" in n["body"]
        assert n["data"] == {"url": f"/watch#stream={stream}&circle={circle}", "notice": "Nxpanicst0123456789", "kind": "panic_started"}
        assert n["timestamp"] == 1795379447436
        # Its escalation replaces it (same tag); an amber alarm of another stream is no danger,
        # and its end replaces it in turn.
        sw.push(notice("panic_escalated", circle, stream, "red"))
        sw.push(notice("panic_started", circle, other, "amber"))
        by_tag = {n["tag"]: n for n in sw.notifications()}
        assert sorted(by_tag) == sorted([stream, other])
        assert (by_tag[stream]["title"], by_tag[stream]["requireInteraction"]) == ("Danger alert: missed check-in", True)
        assert (by_tag[other]["title"], by_tag[other]["requireInteraction"]) == ("Someone in your circle feels uneasy", False)
        sw.push(notice("panic_ended", circle, other, "amber"))
        by_tag = {n["tag"]: n for n in sw.notifications()}
        assert sorted(by_tag) == sorted([stream, other]) and by_tag[other]["title"] == "Sharing ended in your circle"
        # "Are you safe?": tagged by the circle, opening the circle; a foreign URL is not followed.
        sw.push(notice("checkin_requested", circle, url="https://elsewhere.example/phish"))
        shown = sw.notifications()
        asked = next(n for n in shown if n["tag"] == circle)
        assert (asked["title"], asked["requireInteraction"]) == ("Check-in: are you safe?", False)
        assert asked["data"]["url"] == f"/circle#circle={circle}"
        everything = json.dumps(shown)
        assert token not in everything and owner_token not in everything

        # A tap on it opens /circle#circle=C, which finds Mum's token in this browser's storage.
        tapped = sw.click(circle)
        assert tapped == {"opened": [f"{origin}/circle#circle={circle}"], "focused": [], "left": 0}, tapped
        opened = browser.page(context=member.context)
        try:
            opened.goto(tapped["opened"][0])
            opened.wait("document.body.dataset.ready === 'true' && document.getElementById('role').textContent === 'you are Mum'")
            # With that page open, the next tap brings it to the front instead of opening another.
            sw.push(notice("checkin_answered", circle))
            assert next(n for n in sw.notifications() if n["tag"] == circle)["title"] == "Check-in answered"
            assert sw.click(circle) == {"opened": [], "focused": [f"{origin}/circle#circle={circle}"], "left": 0}
        finally:
            checked_close(opened)
        # A payload that is not a notice still shows something (a push must), and opens /circle.
        sw.push("not json")
        [plain] = [n for n in sw.notifications() if n["title"] == "Vigil"]
        assert plain["data"]["url"] == "/circle"


# --- The whole chain: vigild -> push service -> service worker -> /watch --------------------------

def test_a_panic_reaches_a_member_through_web_push_and_opens_the_stream(vigild, vigild_binary, tmp_path, browser, page, member):
    key = tmp_path / "vapid.pem"
    subprocess.run([str(vigild_binary), "push", "keygen", str(key)], check=True, capture_output=True)
    config = dict(CONFIG, push={"vapid_key_file": str(key), "vapid_subject": "mailto:ops@example.org", "allow_loopback_http": True})
    server = vigild(config)
    origin = f"http://127.0.0.1:{server.port}"
    with PushService() as service:
        circle, links = owner_makes_a_circle(page, origin, ["Mum"])
        member_opens(member, links[0])
        site = member.eval("fetch('/site.json').then((r) => r.json())")
        public_key = site["push_public_key"]
        # The member's "subscription" is made by the test push service, for vigild's key, with
        # keys whose private half the test holds: headless Chromium reaches no real push
        # service. The page's own code path does the rest (permission, service worker, its
        # subscribe call with the key from /site.json, checkin.register with toJSON()).
        subscription = service.subscribe(application_server_key=public_key)
        web.privacy.remember(subscription.endpoint.rsplit("/", 1)[-1])
        grant(browser, member, origin, "notifications")
        sw = ServiceWorker(browser, member, origin)
        member.eval(f"""(() => {{
          const made = {json.dumps(subscription.json())};
          globalThis.subscribeCalls = [];
          const fake = {{ endpoint: made.endpoint, options: null, toJSON: () => made, unsubscribe: async () => true }};
          PushManager.prototype.getSubscription = async () => null;
          PushManager.prototype.subscribe = async (options) => {{
            globalThis.subscribeCalls.push({{ userVisibleOnly: options.userVisibleOnly, key: [...new Uint8Array(options.applicationServerKey)] }});
            return fake;
          }};
          document.getElementById('notify-on').click();
        }})()""")
        member.wait("!document.getElementById('notify-off').hidden || !document.getElementById('problem').hidden", timeout=15)
        assert member.eval("document.getElementById('problem').hidden"), text(member, "problem")
        [call] = member.eval("globalThis.subscribeCalls")
        assert call["userVisibleOnly"] is True
        assert bytes(call["key"]) == b64url_decode(public_key)
        assert stored(member)[circle]["push"]["endpoint"] == subscription.endpoint
        sw.registration()

        # The owner raises the alarm; vigild's notice reaches the push service, which decrypts it.
        grant(browser, page, origin, "geolocation")
        page.send("Emulation.setGeolocationOverride", {"latitude": 48.2082, "longitude": 16.3738, "accuracy": 10})
        page.eval("document.getElementById('panic-red').click()")
        page.wait_across_navigation("location.pathname === '/panic' && window.vigilOwner", timeout=15)
        stream = page.eval("window.vigilOwner.stream")
        assert service.wait(lambda s: s.notices_for(subscription), timeout=15), (service.rejections, service.attempts)
        delivered = service.notices_for(subscription)[0]
        payload = delivered.json()
        assert {k: payload[k] for k in ("v", "kind", "circle", "stream", "status", "url")} == {
            "v": 1, "kind": "panic_started", "circle": circle, "stream": stream, "status": "red",
            "url": f"/watch#stream={stream}&circle={circle}&notice={payload['notice']}"}
        secrets = [stored(member)[circle]["token"], stored(page)[circle]["token"], page.eval("window.vigilOwner.ownerToken")]
        assert not any(s in delivered.plaintext.decode() for s in secrets)

        # The browser's part: the decrypted message to the service worker, the notification, the tap.
        sw.push(delivered.plaintext.decode())
        [n] = [n for n in sw.notifications() if n["tag"] == stream]
        assert n["title"] == "Danger alert from your circle" and n["data"]["url"] == payload["url"]
        tapped = sw.click(stream)
        assert tapped["opened"] == [f"{origin}{payload['url']}"], tapped
        follower = browser.page(context=member.context)
        try:
            follower.goto(tapped["opened"][0])
            follower.wait("window.vigilWatch && window.vigilWatch.trail.length >= 1", timeout=15)
            assert text(follower, "status").startswith("RED")
            assert text(follower, "position") == "48.20820, 16.37380"
            # The tap was the member's "I have seen it": the page acknowledged the notice.
            follower.wait("!document.getElementById('acked').hidden", timeout=10)
            owner_state = page.eval(f"window.vigilClient.request('checkin.open', {{circle: '{circle}', owner_token: {json.dumps(stored(page)[circle]['token'])}}})")
            assert [(a["notice"], a["by"]) for a in owner_state["state"]["acks"]] == [(payload["notice"], "member")], owner_state
        finally:
            checked_close(follower)
        page.eval("document.getElementById('safe').click()")
        page.wait("!document.getElementById('start').hidden")
