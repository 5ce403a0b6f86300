"""A nats-server -js of Debian's package, started by the tests themselves on a loopback port."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port the kernel just handed out, never one this process handed out before: the
    kernel may give a port it just took back to the next asker (a NATS cluster's route port came
    back as one of its client ports in the unit tests: "bind: address already in use")."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("no loopback port this process has not used before in 100 tries")


class NatsServer:
    """One nats-server -js; ``start()`` returns once its client port takes connections.
    Restartable on the same port and store directory (``kill()`` then ``start()``)."""

    def __init__(self, workdir: Path, *, port: int | None = None, extra: list[str] | None = None):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> "NatsServer":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([NATS, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                      "-sd", str(self.workdir / "js"), "-l", str(self.workdir / "nats.log"),
                                      *self.extra], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:  # no readiness signal but the port itself
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                assert self.proc.poll() is None, f"nats-server exited at start: {self.log_tail()}"
                assert time.monotonic() < deadline, f"nats-server did not listen within {timeout} s"
                time.sleep(0.02)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join((self.workdir / "nats.log").read_text().splitlines()[-n:])
        except OSError:
            return "(no log)"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


class NatsCluster:
    """``n`` nats-server -js routed into one NATS cluster ``name`` on loopback, servers named
    ``s1``…``sN`` (``servers[i].name``), each with a monitoring port (``monitor_port``, for
    ``/jsz``). ``start()`` returns once the cluster is formed: every server routed to every other
    and naming the same live JetStream meta leader (polled on the monitoring ports). ``kill(i)``
    kills one server (``kill -9``), ``restart(i)`` starts it again on its ports and store,
    ``stop()`` kills them all. A context manager: ``with NatsCluster(tmp_path) as nats: …``."""

    def __init__(self, workdir: Path, n: int = 3, name: str = "E2E"):
        routes = [free_port() for _ in range(n)]
        route_list = ",".join(f"nats://127.0.0.1:{p}" for p in routes)
        self.servers: list[NatsServer] = []
        for i in range(n):
            monitor = free_port()
            s = NatsServer(Path(workdir) / f"nats{i + 1}",
                           extra=["--cluster", f"nats://127.0.0.1:{routes[i]}", "--routes", route_list,
                                  "--cluster_name", name, "--server_name", f"s{i + 1}", "-m", str(monitor)])
            s.monitor_port = monitor
            s.name = f"s{i + 1}"
            self.servers.append(s)

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def start(self, timeout: float = 40.0) -> "NatsCluster":
        try:
            for s in self.servers:
                s.start()
            self.wait_formed(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, i: int) -> None:
        self.servers[i].kill()

    def restart(self, i: int, timeout: float = 10.0) -> None:
        self.servers[i].start(timeout)

    def stop(self) -> None:
        for s in self.servers:
            s.kill()

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def monitor(self, server: NatsServer, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}{path}", timeout=2) as r:
            return json.loads(r.read())

    def formed(self) -> str | None:
        """None once every server routes to the n - 1 others and all name the same live meta
        leader; otherwise what is still missing."""
        leaders = set()
        for s in self.servers:
            try:
                routes = self.monitor(s, "/routez").get("num_routes", 0)
                meta = self.monitor(s, "/jsz").get("meta_cluster") or {}
            except (OSError, ValueError) as e:
                return f"{s.name}: monitoring port: {e}"
            if routes < len(self.servers) - 1:
                return f"{s.name}: {routes} routes of {len(self.servers) - 1}"
            leaders.add(meta.get("leader") or "")
        if "" in leaders or len(leaders) != 1 or leaders.pop() not in {s.name for s in self.servers}:
            return f"JetStream meta leader not agreed: {sorted(leaders)}"
        return None

    def wait_formed(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while (missing := self.formed()) is not None:
            for s in self.servers:
                assert s.proc.poll() is None, f"{s.name} exited: {s.log_tail()}"
            assert time.monotonic() < deadline, f"NATS cluster not formed within {timeout} s: {missing}"
            time.sleep(0.05)  # the next poll of the monitoring ports
