"""The operator's surface (issue 12): /metrics parsed by a real Prometheus text parser with
counters that move as traffic is driven, /stats, the public and admin /healthz, the
summary log line, systemd's readiness protocol (READY after the state is restored, STATUS,
WATCHDOG pings, STOPPING on SIGTERM) on a socket the test passes as NOTIFY_SOCKET, and
``systemd-analyze verify`` on the unit file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import pinclient as pc
from pinclient import PinClient, ProtocolViolation
from wsraw import http_get

REPO = Path(__file__).resolve().parents[2]
CONFIG = pc.pins_config(server={"shutdown_grace_ms": 2000})


class AnyClient(PinClient):
    """A PinClient that accepts pin and panic events alike."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg:
            raise ProtocolViolation(f"an event carries a ref: {msg!r}")


def scrape(d) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics, by (name, sorted labels), through prometheus_client's parser."""
    resp = http_get(d.admin_port, "/metrics")
    assert resp.status == 200, resp.raw_head
    assert "text/plain" in (resp.header("content-type") or ""), resp.raw_head
    samples = {}
    for family in text_string_to_metric_families(resp.body.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_parse_and_move_with_traffic(vigild, tmp_path):
    d = vigild(dict(CONFIG, state={"directory": str(tmp_path / "state")}))
    before = scrape(d)
    assert value(before, "vigil_websockets") == 0
    assert value(before, "vigil_state_mode", mode="writable") == 1

    with AnyClient(d.port) as mapper, AnyClient(d.port) as owner, AnyClient(d.port) as watcher:
        mapper.subscribe_bbox(52.3, 13.0, 52.7, 13.8)
        for i in range(3):
            owner.create(52.5 + i / 100, 13.4, title=f"pin {i}")
        started = owner.ok("panic.start", status="red", lat=52.52, lon=13.405, watchers=1)
        watcher.ok("panic.watch", stream=started["stream"], watch_token=started["watch_tokens"][0])
        for i in range(5):
            owner.ok("panic.update", stream=started["stream"], lat=52.52 + i / 1000, lon=13.405)
        owner.send_raw("{not json")
        assert owner.await_reply(None, check_ref=False)["code"] == "bad_json"
        during = scrape(d)
        assert value(during, "vigil_websockets") == 3
        assert value(during, "vigil_connections", state="open", transport="plain") == 3
        assert value(during, "vigil_pins") == 3
        assert value(during, "vigil_subscriptions") == 1
        assert value(during, "vigil_channels") >= 1
        assert value(during, "vigil_panic_streams", state="active") == 1
        assert value(during, "vigil_panic_watchers") == 1

    after = scrape(d)
    moved = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
    assert moved("vigil_requests_total", op="pin.create") == 3
    assert moved("vigil_requests_total", op="panic.update") == 5
    assert moved("vigil_requests_total", op="subscribe") == 1
    assert moved("vigil_request_errors_total", code="bad_json") == 1
    # 3 pin events to the one subscriber; 5 locations (+ the watcher count notice) to the watcher.
    assert moved("vigil_deliveries_total") >= 3 + 5
    assert moved("vigil_fanout_recipients_count") == moved("vigil_events_total") > 0
    assert moved("vigil_messages_received_total") >= 3 + 1 + 1 + 5 + 1 + 1
    assert moved("vigil_bytes_received_total") > 0 and moved("vigil_bytes_sent_total") > 0
    assert moved("vigil_connections_accepted_total") >= 3
    # Every acknowledged write was journaled (pins 3, the stream's start and 5 updates at least).
    assert moved("vigil_journal_records_total") >= 3 + 1 + 5
    assert moved("vigil_journal_bytes_total") > 0 and moved("vigil_journal_writes_total") >= 1
    # The three websockets clients closed with 1000; the server answered each.
    deadline = time.monotonic() + 5
    while value(after, "vigil_websockets") != 0 and time.monotonic() < deadline:
        after = scrape(d)
    assert value(after, "vigil_websockets") == 0
    assert value(after, "vigil_websocket_closes_total", direction="received", code="1000") >= 3
    assert value(after, "vigil_websocket_closes_total", direction="sent", code="1000") >= 3
    assert value(after, "vigil_pins") == 3  # pins outlive their creators' connections
    assert value(after, "vigil_panic_streams", state="active") == 1


def test_refusals_are_counted_by_limit(vigild):
    d = vigild(pc.pins_config(pins={"write_burst": 2, "writes_per_minute": 1}))
    with AnyClient(d.port) as c:
        for _ in range(2):
            c.create(52.5, 13.4)
        assert c.error("pin.create", pin={"lat": 52.5, "lon": 13.4, "title": "x"})["code"] == "rate_limited"
    samples = scrape(d)
    assert value(samples, "vigil_refusals_total", limit="session_writes") == 1
    assert value(samples, "vigil_request_errors_total", code="rate_limited") == 1


def test_public_health_says_only_ok_and_the_admin_listener_has_the_detail(vigild):
    d = vigild(CONFIG)
    with AnyClient(d.port):
        public = http_get(d.port, "/healthz")
        assert public.status == 200 and json.loads(public.body) == {"status": "ok"}
        admin = json.loads(http_get(d.admin_port, "/healthz").body)
        assert admin["status"] == "ok" and admin["websockets"] == 1 and admin["state"] == "memory_only", admin
        stats = json.loads(http_get(d.admin_port, "/stats").body)
        assert stats["websockets"] == 1 and stats["connections"]["open"] == 1, stats
    # The operator's endpoints are not on the public listener.
    assert http_get(d.port, "/metrics").status == 404
    assert http_get(d.port, "/stats").status == 404


def test_admin_listener_off_and_its_address_checked(vigild, vigild_binary, tmp_path):
    d = vigild(CONFIG, env={"VIGIL_ADMIN_LISTEN": "off"})
    assert d.admin_port is None
    assert "admin endpoints" not in d.stderr_text()
    cfg = tmp_path / "same.yaml"
    cfg.write_text("server:\n  listen: 127.0.0.1:18080\nadmin:\n  listen: 127.0.0.1:18080\n")
    p = subprocess.run([str(vigild_binary), "--check-config", str(cfg)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "admin.listen" in p.stderr, p.stderr


def test_summary_line_each_interval_with_counts_only(vigild):
    d = vigild(dict(CONFIG, log={"summary_interval_s": 1}))
    with AnyClient(d.port) as c:
        c.create(52.5, 13.4)
        m = d.wait_for_log(r"level=info msg=summary .*", 5, what="the summary line")
    line = m.group(0)
    keys = set(re.findall(r"(\w+)=", line)) - {"ts", "level", "msg"}
    assert keys == {"closes", "connections", "deliveries", "messages_in", "pins", "refusals", "state", "streams",
                    "websockets"}, line


# -- systemd ------------------------------------------------------------------------------

class NotifySocket:
    """A datagram socket standing in for systemd's notification socket."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + path[1:] if path.startswith("@") else path)
        self.path = path
        self.messages: list[str] = []

    def next(self, timeout: float = 10.0) -> str:
        self.sock.settimeout(timeout)
        msg = self.sock.recv(4096).decode()
        self.messages.append(msg)
        return msg

    def until(self, key: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {key} within {timeout} s; got {self.messages}"
            msg = self.next(left)
            if key in msg.split("\n"):
                return msg

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_sd_notify_ready_after_restore_status_watchdog_and_stopping(vigild, tmp_path, abstract):
    state = tmp_path / "state"
    cfg = dict(CONFIG, state={"directory": str(state)})
    first = vigild(cfg)
    with AnyClient(first.port) as c:
        for i in range(2):
            c.create(52.5, 13.4 + i / 100)
        c.ok("panic.start", status="amber", lat=52.52, lon=13.405)
    assert first.stop(signal.SIGTERM, timeout=10) == 0

    path = f"@vigil-notify-{os.getpid()}-{time.time_ns()}" if abstract else str(tmp_path / "notify.sock")
    notify = NotifySocket(path)
    try:
        d = vigild(cfg, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})
        ready = notify.until("READY=1")
        # READY comes once the state is restored: its status already counts what was on disk.
        status = next(line for line in ready.split("\n") if line.startswith("STATUS="))
        assert "2 pins" in status and "1 active streams" in status and "state writable" in status, status
        with AnyClient(d.port) as c:  # and the listener is up
            assert len(c.subscribe_bbox(52.3, 13.0, 52.7, 13.8)) == 2
        # The watchdog is pinged every WATCHDOG_USEC/2 from the loop's tick.
        t0 = time.monotonic()
        for _ in range(5):
            notify.until("WATCHDOG=1", timeout=2)
        assert time.monotonic() - t0 < 2.0, notify.messages
        d.signal(signal.SIGTERM)
        stopping = notify.until("STOPPING=1")
        assert any(line.startswith("STATUS=shutting down") for line in stopping.split("\n")), stopping
        assert d.wait(10) == 0
    finally:
        notify.close()


def test_a_watchdog_for_another_process_is_not_pinged(vigild, tmp_path):
    path = str(tmp_path / "notify.sock")
    notify = NotifySocket(path)
    try:
        d = vigild(CONFIG, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"})
        notify.until("READY=1")
        d.signal(signal.SIGTERM)
        notify.until("STOPPING=1")
        assert not any("WATCHDOG=1" in m for m in notify.messages), notify.messages
    finally:
        notify.close()


def test_the_unit_file_verifies_and_carries_the_hardening(vigild_binary, tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing (Tests/setup-deps installs the systemd package)")
        pytest.skip("systemd-analyze not installed")
    text = (REPO / "systemd" / "vigild.service").read_text()
    for line in ("Type=notify", "NotifyAccess=main", "WatchdogSec=", "TasksMax=", "ProtectProc=invisible",
                 "ProcSubset=pid", "#MemoryHigh=", "#MemoryMax=", "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "ExecReload=/bin/kill -HUP $MAINPID", "Documentation=man:vigild(1)", "#LoadCredential=tls.key:"):
        assert re.search(rf"^{re.escape(line)}", text, re.M), f"the unit lacks {line}"
    unit = tmp_path / "vigild.service"
    assert "/usr/bin/vigild --config /etc/vigil/vigild.yaml" in text  # where the Debian package puts it
    unit.write_text(text.replace("/usr/bin/vigild", str(vigild_binary)))
    # --man=no: the man pages Documentation= names are installed by the package (packaging/verify-unit
    # checks them against the installed files).
    p = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0 and not p.stderr.strip(), p.stdout + p.stderr
