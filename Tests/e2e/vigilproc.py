"""Start, observe and stop a real ``vigild`` process.

Used by ``conftest.py`` (the pytest fixtures) and by ``benchmarks/idle_connections.py``.
The daemon's stderr is drained by a thread into a line list guarded by a condition
variable, so the pipe never fills and tests can *wait for a log line* with a deadline
instead of sleeping.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal as signals
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LISTEN_RE = re.compile(r"listening on (\S+):(\d+)")
TLS_LISTEN_RE = re.compile(r"listening for TLS on (\S+):(\d+)")
ADMIN_LISTEN_RE = re.compile(r"admin endpoints on (\S+):(\d+)")
METRIC_LINE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# A whole test run's daemons can log at one level (VIGIL_E2E_LOG_LEVEL, e.g. debug) and leave
# their logs in one folder (VIGIL_E2E_LOG_DIR) for the privacy scan (test_log_privacy.py).
LOG_LEVEL = os.environ.get("VIGIL_E2E_LOG_LEVEL")
LOG_DIR = os.environ.get("VIGIL_E2E_LOG_DIR")
# What a Swift runtime trap or a native crash leaves in the log.
CRASH_MARKERS = ("Fatal error", "Program crashed", "Segmentation fault", "Illegal instruction",
                 "Current stack trace", "Assertion failed", "Precondition failed",
                 "Simultaneous accesses", "Fatal access conflict")


def default_binary() -> Path:
    return Path(os.environ.get("VIGILD", REPO / ".build" / "release" / "vigild"))


def yaml_text(cfg: dict, indent: int = 0) -> str:
    """A minimal YAML writer for the tests' configs: nested dicts, scalars, flow lists of scalars
    and of flow mappings (``push.escalation``)."""
    out = []
    pad = "  " * indent
    for key, value in cfg.items():
        if isinstance(value, dict):
            out.append(f"{pad}{key}:")
            out.append(yaml_text(value, indent + 1))
        elif isinstance(value, (list, tuple)):
            out.append(f"{pad}{key}: [{', '.join(_scalar(v) for v in value)}]")
        else:
            out.append(f"{pad}{key}: {_scalar(value)}")
    return "\n".join(line for line in out if line)


def _scalar(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml_text(cfg) + "\n")
    return path


def _raise_nofile() -> None:
    # The daemon inherits this: 10k idle connections need more than the usual 1024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def raise_own_nofile() -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to the hard limit; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Vigild:
    """One running daemon.  ``start()`` returns once it logged its listening line."""

    def __init__(self, binary: Path, config: Path | None, *, listen: str | None = "127.0.0.1:0",
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None, tls: bool = False):
        self.tls = tls  # the config has a TLS listener: wait for its line too
        self.tls_port: int | None = None
        self.admin_port: int | None = None  # the admin listener (127.0.0.1:0 unless the env says otherwise)
        self.binary = Path(binary)
        self.config = config
        self.listen = listen
        self.env = env
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen | None = None
        self.host: str | None = None
        self.port: int | None = None
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stderr_closed = False
        self.returncode: int | None = None
        self.reported = False  # a test already failed on this daemon's death

    # -- lifecycle --------------------------------------------------------------------
    def argv(self) -> list[str]:
        argv = [str(self.binary)]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        if self.listen is not None:
            argv += ["--listen", self.listen]
        if LOG_LEVEL and "--log-level" not in self.extra_args:
            argv += ["--log-level", LOG_LEVEL]
        return argv + self.extra_args

    def start(self, ready_timeout: float = 15.0) -> "Vigild":
        env = dict(os.environ)
        env.pop("VIGIL_LISTEN", None)
        # Never the fixed default port: daemons run side by side (an older build ignores this).
        env["VIGIL_ADMIN_LISTEN"] = "127.0.0.1:0"
        env.pop("NOTIFY_SOCKET", None)
        env.update(self.env or {})
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, preexec_fn=_raise_nofile)
        for stream, tag in ((self.proc.stderr, ""), (self.proc.stdout, "[stdout] ")):
            t = threading.Thread(target=self._drain, args=(stream, tag, stream is self.proc.stderr),
                                 daemon=True)
            t.start()
            self._threads.append(t)
        m = self.wait_for_log(LISTEN_RE, ready_timeout, what="the 'listening on HOST:PORT' line")
        self.host, self.port = m.group(1), int(m.group(2))
        with self._cond:  # logged before the public listener's line, when there is one
            admin = next((ADMIN_LISTEN_RE.search(line) for line in self._lines if ADMIN_LISTEN_RE.search(line)), None)
        self.admin_port = int(admin.group(2)) if admin else None
        if self.tls:
            m = self.wait_for_log(TLS_LISTEN_RE, ready_timeout, what="the 'listening for TLS on HOST:PORT' line")
            self.tls_port = int(m.group(2))
        return self

    def _drain(self, stream, tag: str, is_stderr: bool) -> None:
        for raw in iter(stream.readline, b""):
            with self._cond:
                self._lines.append(tag + raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            if is_stderr:
                self._stderr_closed = True
            self._cond.notify_all()
        if is_stderr and LOG_DIR and self.proc is not None:
            os.makedirs(LOG_DIR, exist_ok=True)
            with open(os.path.join(LOG_DIR, f"vigild-{self.proc.pid}-{time.time_ns()}.log"), "w") as f:
                f.write(self.stderr_text() + "\n")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int = signals.SIGTERM) -> None:
        if self.running():
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        """Wait for exit; returns the exit code, or None if still running at the deadline."""
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for t in self._threads:
            t.join(2.0)
        return self.returncode

    def stop(self, sig: int = signals.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal and wait; on timeout SIGKILL (so nothing is left behind) and return None."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            return self.wait(1.0)
        self.signal(sig)
        rc = self.wait(timeout)
        if rc is None:
            self.proc.kill()
            self.proc.wait(5.0)
        return rc

    # -- observation ------------------------------------------------------------------
    def stderr_text(self) -> str:
        with self._cond:
            return "\n".join(self._lines)

    def log_tail(self, n: int = 40) -> str:
        with self._cond:
            return "\n".join(self._lines[-n:])

    def crash_lines(self) -> list[str]:
        with self._cond:
            return [line for line in self._lines if any(m in line for m in CRASH_MARKERS)]

    def crash_report(self, lines: int = 25) -> str:
        """The log from the first crash marker on (the reason and the top of the trace),
        or the tail if there is none."""
        with self._cond:
            for i, line in enumerate(self._lines):
                if any(m in line for m in CRASH_MARKERS):
                    return "\n".join(self._lines[max(0, i - 3): i + lines])
            return "\n".join(self._lines[-lines:])

    def wait_for_log(self, pattern: re.Pattern | str, timeout: float, *, start: int = 0,
                     what: str | None = None) -> re.Match:
        """Block until a log line (index >= start) matches; AssertionError at the deadline
        or if the process exits first."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self._lines):
                    m = rx.search(self._lines[i])
                    if m:
                        return m
                    i += 1
                exited = self._stderr_closed
                left = deadline - time.monotonic()
                if exited or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        status = "exited with " + str(self.proc.poll()) if exited else f"no match within {timeout}s"
        raise AssertionError(f"vigild: waiting for {what or rx.pattern!r}: {status}\n"
                             f"argv: {self.argv()}\n--- stderr ---\n{self.log_tail()}")

    def line_count(self) -> int:
        with self._cond:
            return len(self._lines)

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def _status(self, field: str) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def rss_kib(self) -> int:
        return self._status("VmRSS")

    def peak_rss_kib(self) -> int:
        return self._status("VmHWM")

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the admin listener's /metrics samples of ``name`` whose labels include
        ``labels`` (0 when there are none): e.g. ``metric("vigil_refusals_total", limit="panic_capacity")``."""
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            m = METRIC_LINE_RE.match(line)
            if not m or m.group(1) != name:
                continue
            have = dict(LABEL_RE.findall(m.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(3))
        return total

    def rss_anon_kib(self) -> int:
        return self._status("RssAnon")

    def wait_fds_at_most(self, target: int, timeout: float = 10.0) -> int:
        """Poll /proc/PID/fd until it holds at most ``target`` entries or the deadline
        passes (closing is asynchronous and leaves no event to wait on); returns the
        last count seen."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.fd_count()
            if n <= target or time.monotonic() >= deadline:
                return n
            time.sleep(0.02)

    def wait_fds_at_least(self, target: int, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            n = self.fd_count()
            if n >= target or time.monotonic() >= deadline:
                return n
            time.sleep(0.02)
