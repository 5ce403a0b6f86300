#!/usr/bin/env python3
"""Fan-out and idle memory of vigild next to a reference server, in one run, with one client.

The client is ``benchmarks/fanout_client.c`` (built here with the system C compiler): one epoll
thread that reads into one shared buffer and scans frames in place, with SO_RCVLOWAT on its
subscribers' sockets (``--client-rcvlowat``, 16 KiB: fewer reads and fewer ACKs), so that it keeps
headroom while the server is at 100% of its core. On loopback much of a delivery's kernel work is
the receiver's (copy-out, ACKs, and the ACKs' processing on the server's socket, all on the
client's CPU), so the client's CPU per delivery is printed next to the server's in every run, and a
run whose client was at >= 95% of its core is marked CLIENT-BOUND: its rate is the client's. The server runs on ``--server-cpu``, the
client on ``--client-cpu`` (taskset), and the steal time of both CPUs over each measured window
is reported, because this machine is shared.

Fan-out: ``--subscribers`` connections subscribe to one viewport and ``--publishers`` keep
``W`` ``pin.create`` requests each in flight (closed loop), for each window size in
``--windows``: a server's best window is where its batching works best, and servers differ
there. Each run reports deliveries/s, the server's CPU per delivery, the publish-to-delivery
latency p50/p99, and checks that every subscriber got exactly every acknowledged publish, in
each publisher's order. Runs alternate between the servers (vigild, reference, vigild, ...)
and each figure is the median of ``--repeat`` runs.

Idle: ``--idle`` connections complete the upgrade and stay; the server's RSS growth per
connection is reported, counted from after one connection has come and gone (so what a server
sets up once, on its first handshake, is not divided among the connections).

The reference server is any program started by ``--reference`` (a command with ``{port}`` and
``{size}`` in it) that prints a line containing "listening on" when ready and speaks this
subset of Vigil's protocol: a text message containing ``"subscribe"`` subscribes the connection
to one topic and is answered with a text message containing ``"type":"ok"``; any other text
message is published to that topic as an event of ``{size}`` bytes that contains the received
message (its ``"title":"t...`` carries the send time), and answered with ``{"type":"ok"}``.
``benchmarks/reference/uws_peer.cpp`` is such a peer on uWebSockets' pub/sub (our few lines);
``benchmarks/reference/build_uws.sh`` fetches uWebSockets and uSockets (or takes local
checkouts) and builds it into the git-ignored ``benchmarks/reference/.build-uws/``.

``--kernel`` adds, over each measured window, a side-by-side table per delivery: the server's
syscalls by kind and the client's (perf stat on the syscall tracepoints), user and kernel CPU of
server and client, the server's writes, bytes per write and TCP segments (``ss -ti`` counters of
the server's sockets), reads per publish, epoll waits, and where the server's CPU went (perf record
of the cpu-clock). It needs perf and root.

``--callgrind`` runs each server under callgrind and reports the user-space instructions per
delivery in the measured window: on a shared machine the robust figure (rates are then tiny).
The window's dump is waited for until it is complete (callgrind writes it when the server's
thread next runs: seconds later on a loaded machine). A reference command may begin with
``env NAME=VALUE ...`` (an older vigild with its own admin port): the variables go into the
server's environment and the program is started directly, so that valgrind runs the server and
not ``env``; under callgrind it runs a copy of the program without debug sections, as for vigild.

    swift build -c release --product vigild
    python3 benchmarks/fanout_compare.py                                  # vigild alone
    benchmarks/reference/build_uws.sh
    python3 benchmarks/fanout_compare.py --reference 'benchmarks/reference/.build-uws/uws_peer {port} {size}' --name uWebSockets
    python3 benchmarks/fanout_compare.py --reference '...' --name uWebSockets --callgrind --windows 8 --repeat 1
    python3 benchmarks/fanout_compare.py --reference '...' --name uWebSockets --kernel --windows 8 --idle 0
    python3 benchmarks/fanout_compare.py --idle-only --idle 15000                 # idle RSS per connection only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from vigilproc import Vigild  # noqa: E402

CONFIG = REPO / "benchmarks" / "vigild-bench.yaml"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
# At or above this share of its core the client, not the server, may be what limits the rate.
CLIENT_BOUND = 0.95


def bound_note(client_cpu: float) -> str:
    return f" CLIENT-BOUND (client at {client_cpu:.0%} of its core: the rate is the client's)" \
        if client_cpu >= CLIENT_BOUND else ""


def build_client(folder: Path) -> Path:
    out = folder / "fanout_client"
    subprocess.run(["cc", "-O2", "-o", str(out), str(REPO / "benchmarks" / "fanout_client.c")], check=True)
    return out


def process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime + stime


def process_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_times(cpu: int) -> tuple[int, int]:
    """(total, steal) jiffies of one CPU."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v[:8]), v[7]
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def process_user_kernel(pid: int) -> tuple[float, float]:
    """(user, kernel) CPU seconds of a process (utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICK, int(fields[12]) / CLOCK_TICK


def tcp_totals(port: int) -> dict[str, int]:
    """Segments and bytes sent so far by the server's sockets on ``port`` and by the client's
    sockets to it (``ss -ti``: per-socket counters, so nothing else on the machine is counted)."""
    out = {}
    for side, match in (("server", f"sport = :{port}"), ("client", f"dport = :{port}")):
        text = subprocess.run(["ss", "-tinH", "state", "established", match], capture_output=True, text=True,
                              check=True).stdout
        out[f"{side}_sockets"] = len(re.findall(r"\bsegs_out:", text))
        for key in ("segs_out", "bytes_sent", "data_segs_out"):
            out[f"{side}_{key}"] = sum(int(m) for m in re.findall(rf"\b{key}:(\d+)", text))
    return out


class PerfWindow:
    """``perf stat`` or ``perf record`` on one process, counting only between ``enable()`` and
    ``disable()`` (perf's control fifo), so the figures cover exactly the measured window."""

    def __init__(self, pid: int, folder: Path, name: str, command: list[str]):
        self.ctl, self.ack, self.out = folder / f"{name}.ctl", folder / f"{name}.ack", folder / f"{name}.perf"
        for fifo in (self.ctl, self.ack):
            if fifo.exists():
                fifo.unlink()
            os.mkfifo(fifo)
        self.proc = subprocess.Popen(["perf"] + command + ["-D", "-1", "--control", f"fifo:{self.ctl},{self.ack}",
                                                           "-p", str(pid), "-o", str(self.out)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ctl = open(self.ctl, "w")
        self._ack = open(self.ack, "r")

    def _command(self, word: str) -> None:
        self._ctl.write(word + "\n")
        self._ctl.flush()
        self._ack.read(5)  # "ack\n" plus its NUL

    def enable(self) -> None:
        self._command("enable")

    def disable(self) -> None:
        self._command("disable")

    def finish(self) -> Path:
        self._ctl.close()
        self._ack.close()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        return self.out


class SyscallCounter(PerfWindow):
    """Every syscall tracepoint's count on one process over the window."""

    def __init__(self, pid: int, folder: Path, name: str):
        super().__init__(pid, folder, name, ["stat", "-x,", "-e", "syscalls:sys_enter_*"])

    def counts(self) -> dict[str, int]:
        self.finish()
        counts = {}
        for line in self.out.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[0].isdigit() and int(fields[0]) > 0:
                counts[fields[2].removeprefix("syscalls:sys_enter_")] = int(fields[0])
        return counts


class CpuProfile(PerfWindow):
    """Where a process's CPU time goes over the window: ``perf record`` of the cpu-clock at 1 kHz
    (software clock: this machine's guests have no hardware counters), kernel symbols included."""

    def __init__(self, pid: int, folder: Path, name: str):
        super().__init__(pid, folder, name, ["record", "-q", "-e", "cpu-clock", "-F", "1000"])

    def symbols(self, top: int = 12) -> dict:
        """{"kernel_share": share of samples in the kernel, "top": [(share, "[k] symbol"), ...]}."""
        out = self.finish()
        report = subprocess.run(["perf", "report", "-i", str(out), "--stdio", "--sort", "sym", "--percent-limit", "0.01"],
                                capture_output=True, text=True).stdout
        rows = []
        for line in report.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+\[([k.])\]\s+(.*\S)", line)
            if m:
                rows.append((float(m.group(1)) / 100, f"[{m.group(2)}] {m.group(3)}"))
        kernel = sum(share for share, sym in rows if sym.startswith("[k]"))
        return {"kernel_share": kernel, "top": [(share, short_symbol(sym)) for share, sym in rows[:top]]}


class SyscallArguments(PerfWindow):
    """Iovecs per ``writev`` (the tracepoint's ``vlen``) and events per ``epoll_wait`` (its return
    value) of one process over the window. The other send calls are recorded too, so that a server
    sending with ``send`` pays the same tracing cost per write as one using ``writev`` (a few
    percent of its CPU under ``--kernel``)."""

    def __init__(self, pid: int, folder: Path, name: str):
        events = ["writev", "sendto", "sendmsg"]
        super().__init__(pid, folder, name, ["record", "-q"] + [a for e in events for a in ("-e", f"syscalls:sys_enter_{e}")]
                         + ["-e", "syscalls:sys_exit_epoll_wait"])

    def means(self) -> tuple[float, float]:
        """(iovecs per writev, events per epoll_wait)."""
        out = self.finish()
        text = subprocess.run(["perf", "script", "-i", str(out), "-F", "event,trace"], capture_output=True,
                              text=True).stdout
        vlens = [int(v, 16) for v in re.findall(r"vlen: (0x[0-9a-f]+)", text)]
        events = [int(v, 16) for v in re.findall(r"sys_exit_epoll_wait:\s+(0x[0-9a-f]+)", text)]
        events = [v for v in events if v < 1 << 31]  # -EINTR
        mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
        return mean(vlens), mean(events)


def short_symbol(symbol: str) -> str:
    """A profile's symbol made readable: Swift names demangled (swift-demangle --simplified), the
    parameter lists of C++ and Swift names dropped, at most 60 characters."""
    if "$s" in symbol and shutil.which("swift-demangle"):
        symbol = subprocess.run(["swift-demangle", "--simplified", "--compact"], input=symbol, capture_output=True,
                                text=True).stdout.strip() or symbol
    symbol = re.sub(r"\(.*", "", symbol)
    return symbol[:60]


class CallgrindVigild(Vigild):
    """vigild under callgrind (collecting from the start; the window's counters are zeroed and dumped)."""

    def __init__(self, binary: Path, out: str):
        # Swift's hashing is seeded per process; a fixed seed keeps the count from moving with it.
        super().__init__(binary, CONFIG, listen="127.0.0.1:0", env={"SWIFT_DETERMINISTIC_HASHING": "1"})
        self.out = out

    def argv(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}"] + super().argv()


def callgrind_prefix(out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if out else []


# How long a dump may take to appear and be written out (valgrind writes it when its thread next
# runs, which on a loaded machine can be seconds after callgrind_control returns), and how often
# its size is looked at meanwhile.
DUMP_TIMEOUT = 30.0
DUMP_POLL = 0.25


def dump_totals(dump: Path) -> int | None:
    """The instructions a complete callgrind dump counts (its ``totals:``/``summary:`` line, which
    callgrind writes last), or None while the file lacks that line."""
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    return None


def dump_files(out: str) -> dict[Path, tuple[int, int]]:
    """The files callgrind writes for ``--callgrind-out-file=out`` (``out`` at exit, ``out.N`` per
    dump), each with its (mtime in ns, size)."""
    files = {}
    for f in Path(out).parent.glob(Path(out).name + "*"):
        try:
            st = f.stat()
        except FileNotFoundError:
            continue
        files[f] = (st.st_mtime_ns, st.st_size)
    return files


def wait_for_dumps(out: str, before: dict[Path, tuple[int, int]], timeout: float = DUMP_TIMEOUT,
                   poll: float = DUMP_POLL) -> list[Path]:
    """The dump files (``out.N``) written since ``before`` (``dump_files`` then), once valgrind has
    finished writing them: each is new or rewritten (a server started after an earlier run's
    numbers its dumps from 1 again, over that run's files), has the same size on two polls in a row
    and holds its totals line. Raises RuntimeError naming the files waited for after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    sizes: dict[Path, int] = {}
    while True:
        now = {f: state[1] for f, state in dump_files(out).items() if before.get(f) != state}
        if now and now == sizes and all(dump_totals(f) is not None for f in now):
            return sorted(now, key=lambda f: f.stat().st_mtime_ns)
        sizes = now
        if time.monotonic() > deadline:
            state = ", ".join(f"{f} ({n} bytes{'' if dump_totals(f) is not None else ', no totals line yet'})"
                              for f, n in now.items()) or "none was written"
            raise RuntimeError(f"callgrind_control -d: waited {timeout:.0f} s for a complete dump {out}.N "
                               f"(new or rewritten: {state})")
        time.sleep(poll)


def callgrind_window_instructions(pid: int, out: str, keep: Path | None = None) -> int:
    """Dumps the counters since the window's start (``callgrind_control -z`` there) and returns
    the instructions executed in the window, all threads; ``keep``: copies the dumps there (for
    ``callgrind_annotate``)."""
    before = dump_files(out)
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    dumps = wait_for_dumps(out, before)  # one per thread with --separate-threads; one file otherwise
    total = sum(dump_totals(dump) for dump in dumps)
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        for dump in dumps:
            shutil.copy(dump, keep / f"{dump.name}.{int(time.time())}")
    return total


def split_env(argv: list[str], what: str) -> tuple[dict[str, str], list[str]]:
    """A command's leading ``env NAME=VALUE ...`` as (variables, the command after them), so that
    the variables go through the process's environment and the program itself is what runs (under
    callgrind, valgrind would otherwise instrument ``env`` and lose the server at its exec). Only
    plain assignments: ``env`` with options (``-i``, ``-u``, ``-S``, ...) or without a command is
    refused."""
    if not argv or Path(argv[0]).name != "env":
        return {}, argv
    variables: dict[str, str] = {}
    rest = argv[1:]
    while rest and "=" in rest[0] and not rest[0].startswith("-"):
        name, value = rest.pop(0).split("=", 1)
        variables[name] = value
    if not rest or rest[0].startswith("-"):
        raise SystemExit(f"{what}: only 'env NAME=VALUE ... PROGRAM ARGS' is understood here (no env options, "
                         f"a program after the assignments): {shlex.join(argv)!r}. To compare an older vigild build, "
                         f"pass it as --vigild OLD (one run per build) instead of a reference command.")
    return variables, rest


class Server:
    """vigild, or the reference command, started pinned to a CPU (optionally under callgrind)."""

    def __init__(self, name: str, args, cpu: int, callgrind_out: str = ""):
        self.name, self.args, self.cpu = name, args, cpu
        self.callgrind_out = callgrind_out
        self.pid = self.port = None
        self._daemon = self._proc = None
        self._stripped: dict[str, str] = {}  # under callgrind: the reference's program -> its copy without DWARF

    def _without_debug_info(self, program: str) -> str:
        """Under callgrind, a copy of the reference's program without its debug sections (valgrind
        3.19 gives up on the DWARF Swift 6 emits, an older vigild's included; the symbol table, kept,
        is all callgrind needs), made once; the program itself when it cannot be copied so (not ELF)."""
        if program not in self._stripped:
            path = shutil.which(program) or program
            copy = Path(self.callgrind_out).parent / f"{self.name.replace('/', '_')}-program"
            done = subprocess.run(["objcopy", "--strip-debug", path, str(copy)], capture_output=True)
            self._stripped[program] = str(copy) if done.returncode == 0 else program
        return self._stripped[program]

    def start(self, size: int) -> "Server":
        if self.name in ("vigild", "vigild-old"):
            if self.callgrind_out:
                d = CallgrindVigild(self.args, self.callgrind_out)
                d.start(ready_timeout=60)
            else:
                d = Vigild(self.args, CONFIG, listen="127.0.0.1:0")
                d.start()
            subprocess.run(["taskset", "-a", "-c", "-p", str(self.cpu), str(d.pid)], check=True, capture_output=True)
            self._daemon, self.pid, self.port = d, d.pid, d.port
            return self
        probe = socket.socket()  # a free port for the reference
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        variables, argv = split_env(shlex.split(self.args.format(port=port, size=size)), f"--reference ({self.name})")
        if self.callgrind_out:
            argv = [self._without_debug_info(argv[0])] + argv[1:]
        self._proc = subprocess.Popen(["taskset", "-c", str(self.cpu)] + callgrind_prefix(self.callgrind_out) + argv, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env={**os.environ, **variables})
        deadline = time.monotonic() + (60 if self.callgrind_out else 15)
        said: list[str] = []
        for line in self._proc.stdout:
            if "listening on" in line:
                break
            said = (said + [line])[-20:]
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not say it listens")
        else:
            raise RuntimeError(f"{self.name} ended before it said it listens (exit {self._proc.wait(10)}); "
                               f"its last lines:\n{''.join(said)}")
        self.pid, self.port = self._proc.pid, port
        return self

    def stop(self) -> None:
        if self._daemon:
            self._daemon.stop()
        if self._proc:
            self._proc.terminate()
            self._proc.wait(10)
        self._daemon = self._proc = None


def fanout_run(server: Server, client: Path, args, window: int, size: int) -> dict:
    server.start(size)
    try:
        argv = ["taskset", "-c", str(args.client_cpu), str(client), "--port", str(server.port),
                "--subscribers", str(args.subscribers), "--publishers", str(args.publishers),
                "--window", str(window), "--warmup", str(args.warmup), "--duration", str(args.duration),
                "--description-bytes", str(args.description_bytes)] + (["--hold-window-end", "1"] if args.kernel else []) \
            + (["--rcvlowat", str(args.client_rcvlowat)] if args.client_rcvlowat else [])
        syscalls = SyscallCounter(server.pid, args.kernel_folder, "server") if args.kernel else None
        profile = CpuProfile(server.pid, args.kernel_folder, "profile") if args.kernel else None
        iovecs = SyscallArguments(server.pid, args.kernel_folder, "arguments") if args.kernel else None
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.PIPE if args.kernel else subprocess.DEVNULL)
        client_syscalls = SyscallCounter(proc.pid, args.kernel_folder, "client") if args.kernel else None
        cpu0 = steal0 = None
        result = None
        for line in proc.stdout:
            line = line.strip()
            if line == "window start":
                if server.callgrind_out:
                    subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True)
                if syscalls:
                    tcp0 = tcp_totals(server.port)
                    split0 = (process_user_kernel(server.pid), process_user_kernel(proc.pid))
                    syscalls.enable()
                    profile.enable()
                    iovecs.enable()
                    client_syscalls.enable()
                cpu0 = process_cpu(server.pid)
                steal0 = (cpu_times(args.server_cpu), cpu_times(args.client_cpu))
            elif line == "window end":
                cpu1 = process_cpu(server.pid)
                if syscalls:
                    syscalls.disable()
                    profile.disable()
                    iovecs.disable()
                    client_syscalls.disable()
                    split1 = (process_user_kernel(server.pid), process_user_kernel(proc.pid))
                    tcp1 = tcp_totals(server.port)
                    proc.stdin.write("go\n")
                    proc.stdin.close()
                if server.callgrind_out:
                    instructions = callgrind_window_instructions(server.pid, server.callgrind_out, args.callgrind_keep)
                steal1 = (cpu_times(args.server_cpu), cpu_times(args.client_cpu))
            elif line.startswith("{"):
                result = json.loads(line)
        proc.wait(60)
        if result is None:
            raise RuntimeError(f"client against {server.name} failed: {proc.stderr.read()[-2000:]}")
        secs = result["seconds"]
        result["server_cpu"] = (cpu1 - cpu0) / secs
        result["server_us_per_delivery"] = (cpu1 - cpu0) * 1e6 / max(1, result["deliveries"])
        result["steal_server_cpu"] = (steal1[0][1] - steal0[0][1]) / max(1, steal1[0][0] - steal0[0][0])
        result["steal_client_cpu"] = (steal1[1][1] - steal0[1][1]) / max(1, steal1[1][0] - steal0[1][0])
        result["exact"] = proc.returncode == 0
        if server.callgrind_out:
            result["instructions_per_delivery"] = instructions / max(1, result["deliveries"])
        if syscalls:
            result["kernel"] = kernel_figures(result, syscalls.counts(), split0, split1, tcp0, tcp1)
            result["kernel"]["profile"] = profile.symbols()
            result["kernel"]["iovecs_per_writev"], result["kernel"]["events_per_wait"] = iovecs.means()
            result["kernel"]["client_syscalls_per_delivery"] = {
                k: v / max(1, result["deliveries"]) for k, v in client_syscalls.counts().items()}
        return result
    finally:
        server.stop()


WRITE_CALLS = ("writev", "sendto", "sendmsg", "write", "pwritev", "sendmmsg")
READ_CALLS = ("read", "readv", "recvfrom", "recvmsg")
WAIT_CALLS = ("epoll_wait", "epoll_pwait", "epoll_pwait2")


def kernel_figures(result: dict, counts: dict[str, int], split0, split1, tcp0: dict, tcp1: dict) -> dict:
    """The window's kernel-side figures, per delivery unless named otherwise."""
    d = max(1, result["deliveries"])
    pubs = max(1, result.get("window_published", 0))
    tcp = {k: tcp1[k] - tcp0[k] for k in tcp0}
    writes = sum(counts.get(c, 0) for c in WRITE_CALLS)
    waits = sum(counts.get(c, 0) for c in WAIT_CALLS)
    reads = sum(counts.get(c, 0) for c in READ_CALLS)
    if tcp0["server_sockets"] != tcp1["server_sockets"] or tcp0["client_sockets"] != tcp1["client_sockets"]:
        print(f"warning: ss listed {tcp0} at the window's start and {tcp1} at its end; segment counts are off",
              file=sys.stderr)
    (su0, sk0), (cu0, ck0) = split0
    (su1, sk1), (cu1, ck1) = split1
    return {
        "syscalls_per_delivery": {k: v / d for k, v in sorted(counts.items(), key=lambda kv: -kv[1])},
        "syscalls_total": counts,
        "server_user_us": (su1 - su0) * 1e6 / d, "server_kernel_us": (sk1 - sk0) * 1e6 / d,
        "client_user_us": (cu1 - cu0) * 1e6 / d, "client_kernel_us": (ck1 - ck0) * 1e6 / d,
        "writes_per_delivery": writes / d,
        "deliveries_per_write": d / max(1, writes),
        "bytes_per_write": tcp["server_bytes_sent"] / max(1, writes),
        "server_bytes_per_delivery": tcp["server_bytes_sent"] / d,
        "server_segments_per_delivery": tcp["server_segs_out"] / d,
        "server_bytes_per_segment": tcp["server_bytes_sent"] / max(1, tcp["server_data_segs_out"]),
        "client_segments_per_delivery": tcp["client_segs_out"] / d,
        "reads_per_publish": reads / pubs,
        "waits_per_s": waits / result["seconds"],
        "deliveries_per_wait": d / max(1, waits),
        "epoll_ctl_per_s": counts.get("epoll_ctl", 0) / result["seconds"],
    }


def print_kernel_table(runs: dict, servers: list, windows: list) -> None:
    """Medians of the kernel-side figures, one column per server (``--kernel``)."""
    med = statistics.median
    for window in windows:
        cols = [(s.name, [r["kernel"] for r in runs[(s.name, window)]]) for s in servers]
        print(f"\nkernel side, W={window} (medians of {len(cols[0][1])} runs; per delivery unless named)")
        print(f"{'':>34}" + "".join(f"{name:>14}" for name, _ in cols))
        rows = ["server_user_us", "server_kernel_us", "client_user_us", "client_kernel_us", "writes_per_delivery",
                "deliveries_per_write", "bytes_per_write", "iovecs_per_writev", "server_bytes_per_delivery",
                "server_segments_per_delivery", "server_bytes_per_segment", "client_segments_per_delivery",
                "reads_per_publish", "waits_per_s", "events_per_wait", "deliveries_per_wait", "epoll_ctl_per_s"]
        for row in rows:
            print(f"{row:>34}" + "".join(f"{med([k[row] for k in ks]):>14.4g}" for _, ks in cols))
        for side in ("syscalls_per_delivery", "client_syscalls_per_delivery"):
            calls = sorted({c for _, ks in cols for k in ks for c in k[side]})
            for call in calls:
                label = ("server " if side == "syscalls_per_delivery" else "client ") + call
                print(f"{label:>34}" + "".join(f"{med([k[side].get(call, 0) for k in ks]):>14.4g}" for _, ks in cols))
        print(f"{'server CPU samples in the kernel':>34}"
              + "".join(f"{med([k['profile']['kernel_share'] for k in ks]):>14.0%}" for _, ks in cols))
        for name, ks in cols:
            print(f"  {name}: where the server's CPU went (perf record cpu-clock, the last run): "
                  + "; ".join(f"{share:.1%} {sym}" for share, sym in ks[-1]["profile"]["top"]))


def idle_connections(server: Server, client: Path, args, count: int) -> subprocess.Popen:
    """``count`` connections upgraded (welcome read); they stay until the returned client's stdin closes."""
    proc = subprocess.Popen(["taskset", "-c", str(args.client_cpu), str(client), "--port", str(server.port),
                             "--idle", str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError(f"idle client against {server.name}: {line!r}")
    return proc


def idle_run(server: Server, client: Path, args, size: int) -> float:
    server.start(size)
    try:
        # One connection first, closed before the "before" figure: what a server sets up on its
        # first handshake, once (vigild: libcrypto's code pages and provider for the SHA-1, about
        # 2.2 MB of RSS), is not a cost of each connection.
        warm = idle_connections(server, client, args, 1)
        warm.stdin.close()
        warm.wait(30)
        time.sleep(0.5)  # the server handles the close (nothing marks that moment)
        before = process_rss_kib(server.pid)
        proc = idle_connections(server, client, args, args.idle)
        time.sleep(1.0)  # the server settles (no event marks "every welcome flushed")
        after = process_rss_kib(server.pid)
        proc.stdin.close()
        proc.wait(30)
        return (after - before) * 1024 / args.idle
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vigild", type=Path, default=REPO / ".build" / "release" / "vigild")
    ap.add_argument("--reference", help="command starting the reference server, with {port} and {size}")
    ap.add_argument("--old-vigild", type=Path, help="an older vigild build, run as a third server (\"vigild-old\") "
                    "in the same alternation: a before/after of a change in one run")
    ap.add_argument("--name", default="reference", help="the reference server's name in the table")
    ap.add_argument("--windows", default="1,2,3,8", help="publishes in flight per publisher, comma-separated")
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--publishers", type=int, default=10)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--idle", type=int, default=15000, help="idle connections (0: skip)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--description-bytes", type=int, default=9,
                    help="the pins' description length; 9 makes vigild's pin.added event 274 bytes")
    ap.add_argument("--callgrind", action="store_true",
                    help="run the servers under callgrind and report instructions per delivery in the window "
                         "(the robust figure on a shared machine; rates are then ~50x lower; skips the idle runs)")
    ap.add_argument("--callgrind-keep", type=Path,
                    help="with --callgrind: copy each window's dumps into this folder (for callgrind_annotate)")
    ap.add_argument("--kernel", action="store_true",
                    help="also count, over each measured window, the server's syscalls by kind (perf stat on the "
                         "syscall tracepoints), user and kernel CPU of server and client, the server's TCP segments and "
                         "bytes (ss -ti), and print them per delivery, side by side (needs perf and root)")
    ap.add_argument("--idle-only", action="store_true", help="only the idle runs (no fan-out)")
    ap.add_argument("--client-rcvlowat", type=int, default=16384,
                    help="SO_RCVLOWAT on the subscribers' sockets, bytes (default 16384): each wake reads more and "
                         "the kernel sends fewer ACKs, which roughly halves the client's CPU per delivery; "
                         "latencies then include the wait for that many bytes: 0 for latency figures")
    ap.add_argument("--client", type=Path, help="a prebuilt fanout_client (default: build benchmarks/fanout_client.c)")
    ap.add_argument("--out", type=Path, help="write every run as JSON here")
    args = ap.parse_args()
    if args.callgrind:
        args.idle = 0
    if args.reference:
        split_env(shlex.split(args.reference), "--reference")  # refused before any run, not after vigild's
    windows = [] if args.idle_only else [int(w) for w in args.windows.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        args.kernel_folder = Path(tmp)
        client = args.client or build_client(Path(tmp))
        if args.callgrind:
            # valgrind 3.19 cannot read the DWARF Swift 6 emits; the symbol table (kept) is all callgrind needs.
            stripped = Path(tmp) / "vigild"
            subprocess.run(["objcopy", "--strip-debug", str(args.vigild), str(stripped)], check=True)
            args.vigild = stripped
        cg = lambda name: str(Path(tmp) / f"callgrind.{name}") if args.callgrind else ""  # noqa: E731
        servers = [Server("vigild", args.vigild, args.server_cpu, cg("vigild"))]
        if args.old_vigild:
            servers.append(Server("vigild-old", args.old_vigild, args.server_cpu, cg("vigild-old")))
        if args.reference:
            servers.append(Server(args.name, args.reference, args.server_cpu, cg("reference")))
        runs: dict[tuple[str, int], list[dict]] = {}
        size = 0
        for r in range(args.repeat):
            for window in windows:
                for server in servers:
                    result = fanout_run(server, client, args, window, size or 300)
                    if server.name == "vigild" and not size:
                        size = round(result["event_bytes"])
                    runs.setdefault((server.name, window), []).append(result)
                    print(f"run {r + 1} {server.name:>12} W={window}: {result['deliveries_per_s'] / 1e6:.2f} M/s, "
                          f"server {result['server_cpu']:.0%} ({result['server_us_per_delivery']:.3f} us/delivery), "
                          f"client {result['client_cpu']:.0%} ({result['client_cpu'] * 1e6 / max(1, result['deliveries_per_s']):.3f} "
                          f"us/delivery), p50 {result['p50_us'] / 1000:.1f} ms, "
                          f"p99 {result['p99_us'] / 1000:.1f} ms, steal {result['steal_server_cpu']:.0%}/"
                          f"{result['steal_client_cpu']:.0%}, exact {result['exact']}"
                          + (f", {result['instructions_per_delivery']:.0f} instructions/delivery" if args.callgrind else "")
                          + bound_note(result["client_cpu"]), flush=True)
        idle: dict[str, list[float]] = {}
        if args.idle:
            for r in range(args.repeat):
                for server in servers:
                    idle.setdefault(server.name, []).append(idle_run(server, client, args, size or 300))
                    print(f"idle run {r + 1} {server.name:>12}: {idle[server.name][-1]:.0f} B per connection", flush=True)

    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"\nmedians of {args.repeat} runs; {args.subscribers} subscribers, {args.publishers} publishers, "
          f"{size}-byte events; server on CPU {args.server_cpu}, client on CPU {args.client_cpu}"
          + (f"; p50/p99 include the client's wait for {args.client_rcvlowat} bytes per read (SO_RCVLOWAT; "
             f"--client-rcvlowat 0 for latencies)" if args.client_rcvlowat else ""))
    print(f"{'server':>12} {'W':>3} {'deliveries/s':>13} {'server CPU':>10} {'us/delivery':>11} {'client CPU':>10} "
          f"{'client us/d':>11} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'steal':>9} exact  client-bound")
    best: dict[str, tuple[float, int]] = {}
    for (name, window), rs in runs.items():
        rate = med([x["deliveries_per_s"] for x in rs])
        if rate > best.get(name, (0, 0))[0]:
            best[name] = (rate, window)
        print(f"{name:>12} {window:>3} {rate / 1e6:>11.2f} M {med([x['server_cpu'] for x in rs]):>10.0%} "
              f"{med([x['server_us_per_delivery'] for x in rs]):>11.3f} {med([x['client_cpu'] for x in rs]):>10.0%} "
              f"{med([x['client_cpu'] * 1e6 / max(1, x['deliveries_per_s']) for x in rs]):>11.3f} "
              f"{med([x['p50_us'] for x in rs]) / 1000:>7.1f} {med([x['p99_us'] for x in rs]) / 1000:>7.1f} "
              f"{med([x['steal_server_cpu'] for x in rs]):>4.0%}/{med([x['steal_client_cpu'] for x in rs]):<4.0%} "
              f"{str(all(x['exact'] for x in rs)):>5}  "
              f"{sum(x['client_cpu'] >= CLIENT_BOUND for x in rs)} of {len(rs)} runs"
              + (f" {med([x['instructions_per_delivery'] for x in rs]):>8.0f} instr/delivery" if args.callgrind else ""))
    if args.kernel and runs:
        print_kernel_table(runs, servers, windows)
    if args.reference and runs:
        v, ref = best["vigild"], best[args.name]
        print(f"\nbest window: vigild {v[0] / 1e6:.2f} M/s (W={v[1]}), {args.name} {ref[0] / 1e6:.2f} M/s (W={ref[1]}): "
              f"ratio vigild/{args.name} = {v[0] / ref[0]:.2f}")
        for window in windows:
            a, b = med([x["deliveries_per_s"] for x in runs[("vigild", window)]]), \
                med([x["deliveries_per_s"] for x in runs[(args.name, window)]])
            print(f"  W={window}: ratio {a / b:.2f}")
        bound = [f"{name} W={w}" for (name, w), rs in runs.items()
                 if med([x["client_cpu"] for x in rs]) >= CLIENT_BOUND]
        if bound:
            print(f"CLIENT-BOUND: the client's median CPU was >= {CLIENT_BOUND:.0%} of its core for {', '.join(bound)}; "
                  f"those rates (and any ratio built on them) are the client's limit, not the server's: "
                  f"compare server CPU per delivery instead")
    if args.old_vigild and runs:
        print("\nafter/before (vigild / vigild-old), deliveries/s and server us/delivery:")
        for window in windows:
            new, old = runs[("vigild", window)], runs[("vigild-old", window)]
            print(f"  W={window}: rate {med([x['deliveries_per_s'] for x in new]) / med([x['deliveries_per_s'] for x in old]):.2f}, "
                  f"us/delivery {med([x['server_us_per_delivery'] for x in new]) / med([x['server_us_per_delivery'] for x in old]):.2f}")
    for name, values in idle.items():
        print(f"idle: {name} {med(values):.0f} B per connection at {args.idle} connections")
    if args.out:
        args.out.write_text(json.dumps({"runs": {f"{k[0]} W={k[1]}": v for k, v in runs.items()}, "idle": idle,
                                        "size": size}, indent=1))
    exact = all(x["exact"] for rs in runs.values() for x in rs)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
