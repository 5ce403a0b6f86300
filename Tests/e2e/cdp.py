"""A small driver for a headless Chromium over the DevTools protocol (CDP), for the page tests.

``Browser.start()`` runs Debian's ``chromium`` headless with a throwaway profile and connects to
the DevTools WebSocket it prints; ``browser.page()`` opens a tab. A ``Page`` navigates, evaluates
JavaScript (awaiting promises), waits for a condition in the page (re-checked on every DOM change
and every ``change`` of the page's models, never by sleeping), takes screenshots, and keeps what
the page's WebSockets received and what the console said (CSP violations show up there).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from websockets.sync.client import connect

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_binary() -> str | None:
    explicit = os.environ.get("VIGIL_CHROMIUM")
    if explicit:
        return explicit
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


class CDPError(Exception):
    pass


class Session:
    """The browser connection: commands by id, events to per-session listeners."""

    def __init__(self, url: str):
        self.ws = connect(url, max_size=None, open_timeout=10)
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._replies: dict[int, dict] = {}
        self._listeners: dict[str | None, list] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for raw in self.ws:
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    for fn in list(self._listeners.get(msg.get("sessionId"), [])):
                        fn(msg["method"], msg.get("params", {}))
        except Exception:
            pass
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def listen(self, session_id: str | None, fn) -> None:
        self._listeners.setdefault(session_id, []).append(fn)

    def send(self, method: str, params: dict | None = None, session_id: str | None = None, timeout: float = 20.0) -> dict:
        i = next(self._ids)
        msg = {"id": i, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        self.ws.send(json.dumps(msg))
        with self._cond:
            if not self._cond.wait_for(lambda: i in self._replies or self._closed, timeout):
                raise CDPError(f"{method}: no answer within {timeout} s")
            if i not in self._replies:
                raise CDPError(f"{method}: the browser went away")
            reply = self._replies.pop(i)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def close(self) -> None:
        self.ws.close()


class Page:
    def __init__(self, session: Session, target_id: str, session_id: str, context: str | None = None):
        self.s, self.target_id, self.sid = session, target_id, session_id
        # The browser context of a page made by ``Browser.page(isolated=True)``: its own storage,
        # cookies, service workers and permissions, as another person's device would have.
        self.context = context
        self.console: list[str] = []
        self.frames_received: list[str] = []
        self._lock = threading.Lock()
        session.listen(session_id, self._event)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _event(self, method: str, params: dict) -> None:
        with self._lock:
            if method == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails", {})
                self.console.append("exception: " + str(d.get("exception", {}).get("description", d.get("text"))))
            elif method == "Log.entryAdded":
                self.console.append(params["entry"].get("text", ""))
            elif method == "Network.webSocketFrameReceived":
                self.frames_received.append(params["response"].get("payloadData", ""))

    def messages(self) -> list[str]:
        with self._lock:
            return list(self.console)

    def received(self) -> list[str]:
        with self._lock:
            return list(self.frames_received)

    def send(self, method: str, params: dict | None = None, timeout: float = 20.0) -> dict:
        return self.s.send(method, params, self.sid, timeout)

    def viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})

    def goto(self, url: str, timeout: float = 20.0) -> None:
        """Navigates and returns once the document has loaded (module scripts included)."""
        self.send("Page.navigate", {"url": url}, timeout)
        self.wait("document.readyState === 'complete'", timeout)

    def eval(self, expression: str, timeout: float = 20.0):
        r = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CDPError(f"{expression[:120]}: {d.get('exception', {}).get('description', d.get('text'))}")
        return r["result"].get("value")

    def wait(self, condition: str, timeout: float = 10.0):
        """Resolves once the JavaScript ``condition`` is truthy; re-checked on each DOM mutation and
        each ``change`` of the page's models (window.vigilWatch / window.vigilMap), never polled."""
        ms = int(timeout * 1000)
        script = f"""new Promise((resolve, reject) => {{
  const cond = () => {{ try {{ return ({condition}); }} catch (e) {{ return false; }} }};
  let done = false, offs = [];
  const finish = (ok, v) => {{ if (done) return; done = true; obs.disconnect(); offs.forEach((f) => f()); clearTimeout(timer);
    ok ? resolve(v) : reject(new Error('not true within {ms} ms: ' + {json.dumps(condition)})); }};
  const check = () => {{ if (cond()) finish(true, true); }};
  const obs = new MutationObserver(check);
  obs.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }});
  for (const m of [globalThis.vigilWatch, globalThis.vigilMap]) if (m && m.on) offs.push(m.on('change', check));
  document.addEventListener('readystatechange', check);
  offs.push(() => document.removeEventListener('readystatechange', check));
  const timer = setTimeout(() => finish(false), {ms});
  check();
}})"""
        return self.eval(script, timeout + 5)

    def wait_across_navigation(self, condition: str, timeout: float = 10.0):
        """``wait``, for a page that navigates meanwhile (a click that loads another page): a
        wait cut short by the navigation is started again in the new document, until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.wait(condition, max(0.1, deadline - time.monotonic()))
            except CDPError as error:
                gone = "navigated or closed" in str(error) or "context was destroyed" in str(error)
                if not gone or time.monotonic() >= deadline:
                    raise

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.s.send("Target.closeTarget", {"targetId": self.target_id})
            if self.context:
                self.s.send("Target.disposeBrowserContext", {"browserContextId": self.context})
        except CDPError:
            pass


class Browser:
    def __init__(self, binary: str):
        self.binary = binary
        self.profile = tempfile.mkdtemp(prefix="vigil-chromium-")
        self.proc: subprocess.Popen | None = None
        self.session: Session | None = None

    def start(self, timeout: float = 30.0) -> "Browser":
        args = [self.binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio", "--metrics-recording-only",
                "--password-store=basic", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found: list[str] = []
        ready = threading.Event()

        def drain() -> None:
            for line in self.proc.stderr:
                if not found and "DevTools listening on " in line:
                    found.append(line.split("DevTools listening on ", 1)[1].strip())
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(timeout) or not found:
            self.stop()
            raise CDPError(f"chromium did not offer DevTools within {timeout} s")
        self.session = Session(found[0])
        return self

    def page(self, *, isolated: bool = False, context: str | None = None) -> Page:
        """A new tab: in the default browser context, in ``context``, or (``isolated``) in a new
        context of its own, disposed of with the page (a second person's browser)."""
        own = self.session.send("Target.createBrowserContext")["browserContextId"] if isolated else None
        params = {"url": "about:blank"}
        if own or context:
            params["browserContextId"] = own or context
        target = self.session.send("Target.createTarget", params)["targetId"]
        sid = self.session.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self.session, target, sid, own)

    def stop(self) -> None:
        if self.session is not None:
            try:
                self.session.send("Browser.close", timeout=5)
            except Exception:
                pass
            self.session.close()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.profile, ignore_errors=True)
