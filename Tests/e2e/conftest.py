"""Fixtures for the end-to-end suite: a real ``vigild`` on loopback with a temp config.

* ``vigild_binary``  -- env ``VIGILD`` or ``<repo>/.build/release/vigild``.
* ``vigild``         -- function-scoped factory: ``vigild(config_dict, **kw) -> Vigild``.
* ``vigild_module``  -- the same factory, module-scoped (one daemon shared by a module).

Every daemon is started with ``--listen 127.0.0.1:0`` and is ready once it logged
``listening on HOST:PORT``.  On teardown each still-running daemon gets SIGTERM and must
exit 0 within its shutdown grace plus a margin, and its log must hold no crash marker;
a daemon a test already stopped must have exited 0 too.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from vigilproc import Vigild, default_binary, write_config  # noqa: E402
import privacy  # noqa: E402
import transport  # noqa: E402
import wsraw  # noqa: E402


def pytest_sessionfinish(session, exitstatus):
    """Leave what the clients were told in confidence next to the daemons' logs, for the scan."""
    if privacy.folder():
        privacy.dump(privacy.folder())

# Short timeouts shared by modules that exercise them; each module picks what it needs.
FAST_TIMEOUTS = {
    "http": {"handshake_timeout_ms": 500},
    "websocket": {"ping_interval_ms": 300, "pong_timeout_ms": 300, "close_timeout_ms": 500, "echo": True},
}


@pytest.fixture(scope="session")
def vigild_binary() -> Path:
    path = default_binary()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"vigild binary not found at {path}: build it with "
                    f"`swift build -c release --product vigild` in the repo root, or set VIGILD=/path/to/vigild",
                    pytrace=False)
    return path


class Launcher:
    """Starts daemons, remembers them, and checks each one's exit on teardown."""

    _ids = itertools.count()

    def __init__(self, binary: Path, tmpdir: Path):
        self.binary = binary
        self.tmpdir = tmpdir
        self.started: list[tuple[Vigild, dict]] = []

    def __call__(self, config: dict | None = None, *, listen: str | None = "127.0.0.1:0",
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None,
                 config_path: Path | None = None) -> Vigild:
        cfg = config or {}
        tls = transport.SCHEME == "wss" and config_path is None and "tls" not in cfg
        if tls:  # every daemon of a wss run also listens for TLS (transport.py)
            cfg = dict(cfg, tls=transport.tls_section())
        tls = tls or "listen" in cfg.get("tls", {})
        if config_path is None:
            config_path = write_config(self.tmpdir / f"vigil-{next(self._ids)}.yaml", cfg)
        d = Vigild(self.binary, config_path, listen=listen, env=env, extra_args=extra_args, tls=tls)
        self.started.append((d, cfg))
        d.start()
        if d.tls_port is not None:
            transport.TLS_PORTS[d.port] = d.tls_port
        return d

    def teardown(self) -> None:
        problems = []
        for d, cfg in self.started:
            if d.proc is None or d.reported:
                continue
            grace_s = cfg.get("server", {}).get("shutdown_grace_ms", 5000) / 1000
            was_running = d.running()
            rc = d.stop(signal.SIGTERM, timeout=grace_s + 5.0)
            label = f"vigild pid {d.pid} (port {d.port})"
            if rc is None:
                problems.append(f"{label}: still running {grace_s + 5.0:.1f}s after SIGTERM; killed")
            elif rc != 0:
                how = "after SIGTERM at teardown" if was_running else "before teardown"
                problems.append(f"{label}: exit code {rc} {how}")
            crashes = d.crash_lines()
            if crashes:
                problems.append(f"{label}: crash in log: {crashes[:3]}")
            if problems and problems[-1].startswith(label):
                problems[-1] += "\n--- stderr ---\n" + d.crash_report(30)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def vigild(vigild_binary, tmp_path):
    launcher = Launcher(vigild_binary, tmp_path)
    yield launcher
    launcher.teardown()


@pytest.fixture(scope="module")
def vigild_module(vigild_binary, tmp_path_factory):
    launcher = Launcher(vigild_binary, tmp_path_factory.mktemp("vigil"))
    yield launcher
    launcher.teardown()


def settle_baseline(d: Vigild, path: str = "/v1", timeout: float = 2.0) -> int:
    """The daemon's fd count with no clients, after one warm-up request and one warm-up
    WebSocket (so fds a daemon opens lazily on first use are not counted as leaks)."""
    before = d.fd_count()
    wsraw.http_get(d.port, "/healthz")
    c = wsraw.ws_connect(d.port, path)
    c.send_frame(wsraw.OP_CLOSE, wsraw.close_payload(1000))
    c.read_until_close(3.0)
    c.close()
    return d.wait_fds_at_most(before, timeout)


def check_alive(d: Vigild) -> None:
    """Fail (once) if the daemon died: exit code and the crash part of its log."""
    if d.running() or d.reported:
        return
    d.reported = True
    pytest.fail(f"vigild pid {d.pid} died during this test (exit code {d.proc.poll()})\n"
                f"--- stderr ---\n{d.crash_report()}", pytrace=False)


class SharedDaemon:
    """One daemon shared by a module's tests, restarted if a test killed it, so that one
    crash fails one test instead of every test after it."""

    def __init__(self, launcher: Launcher, config: dict, warm_path: str | None = "/echo"):
        self.launcher, self.config, self.warm_path = launcher, config, warm_path
        self.current: Vigild | None = None

    def get(self) -> Vigild:
        if self.current is None or not self.current.running():
            d = self.launcher(self.config)
            d.baseline_fds = settle_baseline(d, self.warm_path) if self.warm_path else d.fd_count()
            self.current = d
        return self.current


def shared_server_fixture(name: str, config: dict, warm_path: str | None = "/echo"):
    """Build a function-scoped fixture ``name`` backed by a module-scoped SharedDaemon
    (fixture ``_<name>_shared``).  Assign both results to module globals."""
    shared_name = f"_{name}_shared"

    @pytest.fixture(scope="module", name=shared_name)
    def _shared(vigild_module):
        return SharedDaemon(vigild_module, config, warm_path)

    @pytest.fixture(name=name)
    def _server(request):
        d = request.getfixturevalue(shared_name).get()
        yield d
        check_alive(d)

    return _shared, _server
