#!/usr/bin/env python3
"""From `panic.start` to the push service: how long until each of a circle's 1,000 Web Push
subscriptions gets its request (issue 24; docs/BENCHMARKS.md, "Notices to 1,000 subscriptions").

    swift build -c release --product vigild
    python3 benchmarks/notice_latency.py [--rounds 5] [--members 1000] [--subs-per-member 1]
                                         [--origins 1] [--vigild .build/release/vigild]

Setup (not timed): a VAPID key from `vigild push keygen`; benchmarks/notice_receiver.py, the
measuring push service (asyncio, loopback), pinned to CPU 1 with this driver; vigild
(benchmarks/vigild-bench.yaml plus `checkin.max_members`, `checkin.max_subscriptions_per_holder`
and a `push:` section with `allow_loopback_http`) pinned to CPU 0 with taskset; one circle of
MEMBERS members created, and SUBS-PER-MEMBER Web Push subscriptions registered for each member
(`checkin.register`), each with its own P-256 key pair and auth secret (Python `cryptography`) and
its own endpoint path on the receiver (`--origins N` spreads them over N ports: N origins, each
with its own pool of connections in vigild's HTTP client).

Each round: the circle's owner sends `panic.start` for the circle (a new stream); the time origin
is this driver's CLOCK_MONOTONIC just before the send, and the receiver stamps each request with
the same clock when its first bytes arrive (`head`) and when its body is complete (`body`). The
round ends when every subscription's request has arrived (or --timeout). Then, outside the
measured time: every request is verified as a push service and a browser would (the VAPID JWT
with Tests/e2e/pushservice.py's `verify_vapid`, the body decrypted with the subscription's private
key by its `decrypt`: each must be this round's `panic_started` for this stream, urgency high, and
each subscription must get exactly one); the daemon's notice counters are read from /metrics
(retries, failures by reason); the stream is ended (`panic.end`) and its 1,000 `panic_ended`
notices are let through before the next round (not measured).

Reported per round and over all rounds: p50, p90, p99 and max of head and body arrival (ms after
the send), the `ok`'s arrival, the time to the last request, requests/s (subscriptions / time to
the last), vigild's CPU time from the send to the last arrival (summed over its threads,
/proc/PID/task/*/schedstat) and until every delivery was settled, the receiver's CPU time (if it
is near the wall time, the receiver was the limit), the connections the receiver saw, the
daemon's retries and failures (by reason) in the round, and the machine's noise: CPU used by
other processes and the share stolen by the hypervisor (/proc/stat). A table on stdout, all of it
(with every request's times) as JSON in benchmarks/results/ (git-ignored).

`--perf FILE` records vigild with `perf record --call-graph dwarf` during the rounds (a profile of
the bursts, which it slows;
`perf report -i FILE`). Loopback only; every process it starts is stopped on exit, error or
interrupt; a run of 5 rounds takes well under two minutes.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "benchmarks"))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from compare_builds import cpu_times, steal_share  # noqa: E402
from pinclient import PinClient  # noqa: E402
from pushservice import b64url, b64url_decode, decrypt, verify_vapid  # noqa: E402
from vigilproc import METRIC_LINE_RE, LABEL_RE, Vigild  # noqa: E402

DAEMON_CPU, DRIVER_CPU = 0, 1
MAX_MEMBERS = 1000          # ConfigLoader: checkin.max_members 1...1_000
MAX_SUBS_PER_HOLDER = 100   # ConfigLoader: checkin.max_subscriptions_per_holder 1...100


class PinnedVigild(Vigild):
    """vigild started under `taskset -c CPU` (taskset execs it: the pid is the daemon's, and every
    thread it makes is on that CPU)."""

    def __init__(self, *a, cpu: int, **kw):
        super().__init__(*a, **kw)
        self.cpu = cpu

    def argv(self) -> list[str]:
        return ["taskset", "-c", str(self.cpu)] + super().argv()


def thread_cpu_ns(pid: int) -> int:
    """CPU time of all of a process's threads so far (ns), from /proc/PID/task/*/schedstat."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def busy_s(before: list[int], after: list[int]) -> float:
    delta = [b - a for a, b in zip(before, after)]
    return (sum(delta) - delta[3] - delta[4] - delta[7]) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def summary(values: list[float]) -> dict:
    return {"p50": pct(values, 50), "p90": pct(values, 90), "p99": pct(values, 99), "max": max(values), "n": len(values)}


def notice_metrics(daemon: Vigild) -> dict[str, float]:
    """Every vigil_notice_* sample of /metrics, keyed by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.admin_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = METRIC_LINE_RE.match(line)
        if m and m.group(1).startswith("vigil_notice"):
            labels = ",".join(f"{k}={v}" for k, v in LABEL_RE.findall(m.group(2) or ""))
            out[m.group(1) + (f"{{{labels}}}" if labels else "")] = float(m.group(3))
    return out


def metric_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] - before.get(k, 0.0) and not k.endswith(("pending", "in_flight", "connections", "queued"))}


class Receiver:
    """benchmarks/notice_receiver.py in a process of its own, pinned, controlled over loopback."""

    def __init__(self, origins: int, cpu: int):
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, str(REPO / "benchmarks" / "notice_receiver.py"),
                                      "--origins", str(origins)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        self.ports, self.control = ready["ports"], ready["control"]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def get(self, path: str, timeout: float = 60) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.control}{path}", timeout=timeout) as resp:
            return json.loads(resp.read())

    def wait(self, count: int, timeout: float) -> int:
        return self.get(f"/wait?count={count}&timeout={timeout}", timeout=timeout + 10)["count"]

    def take(self) -> dict:
        return self.get("/take")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()     # its EOF watcher stops it
                self.proc.wait(5)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(5)


class Client(PinClient):
    """The owner's connections: events of any kind (the circle's news, the stream's watcher
    counts) are kept aside, not checked; each round clears them."""

    def _check_event(self, msg: dict) -> None:
        pass


class Subscription:
    def __init__(self, index: int, member: int, endpoint: str):
        self.index, self.member, self.endpoint = index, member, endpoint
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)

    def json(self) -> dict:
        point = self.key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(point), "auth": b64url(self.auth)}}


def parse_head(head: bytes) -> dict[str, str]:
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return headers


def verify(records: list, subs_by_path: dict, vapid_key: bytes, stream: str, kind: str, sample: int | None) -> dict:
    """Every request (or `sample` of them, spread evenly) checked as the push service and the
    browser would; returns counts, and the first few problems."""
    problems = []
    paths = [r[0] for r in records]
    missing = set(subs_by_path) - set(paths)
    duplicates = len(paths) - len(set(paths))
    chosen = records if sample is None else records[::max(1, len(records) // sample)][:sample]
    checked = valid = 0
    now = time.time()
    for path, _h, _hd, _b, port, _c, head_b64, body_b64 in chosen:
        sub = subs_by_path.get(path)
        if sub is None:
            problems.append(f"unknown path {path}")
            continue
        headers = parse_head(base64.b64decode(head_b64))
        try:
            claims = verify_vapid(headers.get("authorization"), f"http://127.0.0.1:{port}", now, vapid_key)
            plain = json.loads(decrypt(base64.b64decode(body_b64), sub.key, sub.auth))
        except Exception as error:  # Refused and anything else: reported, not raised
            problems.append(f"{path}: {error}")
            continue
        checked += 1
        want_urgency = "high" if kind == "panic_started" else "normal"
        if plain.get("kind") != kind or plain.get("stream") != stream:
            problems.append(f"{path}: {plain.get('kind')} of {plain.get('stream')}, not {kind} of {stream}")
        elif headers.get("urgency") != want_urgency or headers.get("content-encoding") != "aes128gcm" or not claims.get("exp"):
            problems.append(f"{path}: headers {headers.get('urgency')}, {headers.get('content-encoding')}")
        else:
            valid += 1
    return {"checked": checked, "valid": valid,
            "missing": len(missing), "duplicates": duplicates, "problems": problems[:5]}


def setup(daemon: Vigild, receiver: Receiver, args) -> tuple[Client, dict, list[Subscription]]:
    """The circle and its subscriptions; returns the connection that starts the panics (the
    owner's phone: not the one that created the circle, which hears its news)."""
    owner = Client(daemon.port, timeout=60)
    created = owner.ok("checkin.create", members=[None] * args.members)
    tokens = [m["member_token"] for m in created["members"]]
    subs = []
    for member, token in enumerate(tokens):
        for _ in range(args.subs_per_member):
            i = len(subs)
            port = receiver.ports[i % len(receiver.ports)]
            subs.append(Subscription(i, member, f"http://127.0.0.1:{port}/push/{i}"))
    # Pipelined, in chunks (the replies come in order).
    for start in range(0, len(subs), 200):
        chunk = subs[start:start + 200]
        refs = [owner.send_request("checkin.register", circle=created["circle"], member_token=tokens[s.member], push=s.json())
                for s in chunk]
        for ref in refs:
            reply = owner.await_reply(ref)
            if reply["type"] != "ok":
                raise SystemExit(f"checkin.register refused: {reply}")
    owner.close()
    return Client(daemon.port, timeout=60), created, subs


def wait_settled(daemon: Vigild, timeout: float) -> float:
    """Polls the daemon until no delivery is pending; returns when (monotonic s)."""
    deadline = time.monotonic() + timeout
    while True:
        m = notice_metrics(daemon)
        if m.get("vigil_notice_deliveries_pending", 0) == 0:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise SystemExit(f"deliveries still pending after {timeout} s: {({k: v for k, v in m.items() if v})}")
        time.sleep(0.01)


def one_round(n: int, owner: Client, created: dict, subs: list[Subscription], daemon: Vigild, receiver: Receiver,
              vapid_key: bytes, args) -> dict:
    total = len(subs)
    subs_by_path = {f"/push/{s.index}": s for s in subs}
    leftover = receiver.take()["records"]
    owner.events.clear()
    owner.log.clear()
    m0 = notice_metrics(daemon)
    stat0, cpu0, rcpu0 = cpu_times(), thread_cpu_ns(daemon.pid), thread_cpu_ns(receiver.pid)
    t0 = time.monotonic_ns()
    ref = owner.send_request("panic.start", status="red", lat=52.52, lon=13.405, circle=created["circle"],
                             owner_token=created["owner_token"])
    reply = owner.await_reply(ref, timeout=args.timeout)
    t_ok = time.monotonic_ns()
    got = receiver.wait(total, args.timeout)
    t_seen = time.monotonic_ns()
    cpu1, rcpu1, stat1 = thread_cpu_ns(daemon.pid), thread_cpu_ns(receiver.pid), cpu_times()
    taken = receiver.take()
    records = taken["records"]
    t_settled = wait_settled(daemon, args.timeout)
    cpu2 = thread_cpu_ns(daemon.pid)
    m1 = notice_metrics(daemon)
    if reply["type"] != "ok":
        raise SystemExit(f"panic.start refused: {reply}")
    stream = reply["stream"]
    head = [(r[1] - t0) / 1e6 for r in records]
    head_done = [(r[2] - t0) / 1e6 for r in records]
    body = [(r[3] - t0) / 1e6 for r in records]
    last_ms = max(body) if body else float("nan")
    check = verify(records, subs_by_path, vapid_key, stream, "panic_started", None if args.verify == "all" else args.verify_sample)
    daemon_cpu_s = (cpu1 - cpu0) / 1e9
    receiver_cpu_s = (rcpu1 - rcpu0) / 1e9
    result = {
        "round": n, "stream": stream, "subscriptions": total, "received": len(records), "waited_count": got,
        "leftover_before": len(leftover),
        "ok_ms": (t_ok - t0) / 1e6, "first_ms": min(head) if head else None, "last_ms": last_ms,
        "head_ms": summary(head) if head else None, "head_done_ms": summary(head_done) if head else None,
        "body_ms": summary(body) if body else None,
        "requests_per_s": len(records) / (last_ms / 1000) if records else 0.0,
        "daemon_cpu_s": daemon_cpu_s, "daemon_cpu_settled_s": (cpu2 - cpu0) / 1e9,
        "daemon_cpu_us_per_request": daemon_cpu_s * 1e6 / max(1, len(records)),
        "settled_ms": (t_settled * 1e9 - t0) / 1e6,
        "receiver_cpu_s": receiver_cpu_s, "receiver_connections_total": taken["connections"],
        "receiver_connections_used": len({(r[4], r[5]) for r in records}), "receiver_errors": taken["errors"],
        "others_cpu_s": busy_s(stat0, stat1) - daemon_cpu_s - receiver_cpu_s,
        "steal_pct": steal_share(stat0, stat1) * 100,
        "metrics": metric_delta(m0, m1),
        "verify": check,
        # every request: path, head, head complete, body complete (ms after the send), port, connection
        "requests": [[r[0], round((r[1] - t0) / 1e6, 3), round((r[2] - t0) / 1e6, 3), round((r[3] - t0) / 1e6, 3), r[4], r[5]]
                     for r in records],
    }
    # The end: its notices (urgency normal) go out too; let them through before the next round.
    owner.ok("panic.end", stream=stream, reason="safe")
    ended = receiver.wait(total, args.timeout)
    wait_settled(daemon, args.timeout)
    end_records = receiver.take()["records"]
    result["end_notices"] = {"received": ended, "verify": verify(end_records, subs_by_path, vapid_key, stream, "panic_ended", 20)}
    return result


def row(r: dict) -> str:
    h, b, m = r["head_ms"], r["body_ms"], r["metrics"]
    retries = int(m.get("vigil_notice_retries_total", 0))
    fails = ",".join(f"{k.split('reason=')[1].rstrip('}')}:{int(v)}" for k, v in m.items() if k.startswith("vigil_notice_failures_total")) or "-"
    v = r["verify"]
    return (f"{r['round']:>5} {r['received']:>5} {r['ok_ms']:>7.1f} {h['p50']:>8.1f} {h['p90']:>8.1f} {h['p99']:>8.1f} {h['max']:>8.1f} "
            f"{b['p50']:>8.1f} {b['p99']:>8.1f} {r['requests_per_s']:>7.0f} {r['daemon_cpu_s']:>6.3f} {r['daemon_cpu_us_per_request']:>6.0f} "
            f"{r['receiver_cpu_s']:>6.3f} {r['receiver_connections_used']:>5} {retries:>7} {fails:>16} "
            f"{v['valid']:>5}/{v['checked']:<5} {r['others_cpu_s']:>6.2f} {r['steal_pct']:>5.1f}")


HEADER = (f"{'round':>5} {'recvd':>5} {'ok ms':>7} {'head p50':>8} {'p90':>8} {'p99':>8} {'max':>8} "
          f"{'body p50':>8} {'p99':>8} {'req/s':>7} {'vCPU s':>6} {'µs/req':>6} {'rCPU s':>6} {'conns':>5} {'retries':>7} {'failures':>16} "
          f"{'valid':>11} {'others':>6} {'steal':>5}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--members", type=int, default=1000, help=f"members of the circle (at most {MAX_MEMBERS})")
    ap.add_argument("--subs-per-member", type=int, default=1, help=f"Web Push subscriptions per member (at most {MAX_SUBS_PER_HOLDER})")
    ap.add_argument("--origins", type=int, default=1, help="receiver ports (origins) the subscriptions are spread over")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a round may take at most")
    ap.add_argument("--verify", choices=["all", "sample"], default="all")
    ap.add_argument("--verify-sample", type=int, default=50)
    ap.add_argument("--vigild", default=os.environ.get("VIGILD", str(REPO / ".build" / "release" / "vigild")))
    ap.add_argument("--out", default=None, help="JSON file (default benchmarks/results/notice-latency-TIME.json)")
    ap.add_argument("--perf", default=None, metavar="FILE", help="perf record --call-graph dwarf vigild during the rounds into FILE")
    args = ap.parse_args()
    if not 1 <= args.members <= MAX_MEMBERS or not 1 <= args.subs_per_member <= MAX_SUBS_PER_HOLDER:
        ap.error(f"--members 1..{MAX_MEMBERS}, --subs-per-member 1..{MAX_SUBS_PER_HOLDER} (the config's bounds)")
    os.sched_setaffinity(0, {DRIVER_CPU})   # before any thread is made: they all inherit it
    # SIGTERM as an exception, so the finally below stops what was started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="vigil-notice-"))
    key = workdir / "vapid.pem"
    made = subprocess.run([args.vigild, "push", "keygen", str(key)], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        raise SystemExit(f"vigild push keygen: {made.stderr}")
    vapid_key = b64url_decode(made.stdout.strip())
    config = workdir / "vigild-notice.yaml"
    config.write_text((REPO / "benchmarks" / "vigild-bench.yaml").read_text() + f"""
checkin:
  max_members: {args.members}
  max_subscriptions_per_holder: {args.subs_per_member}

push:
  vapid_key_file: "{key}"
  vapid_subject: "mailto:bench@example.org"
  allow_loopback_http: true
""")
    receiver = daemon = perf = None
    runs: list[dict] = []
    started = time.monotonic()
    try:
        receiver = Receiver(args.origins, DRIVER_CPU)
        daemon = PinnedVigild(Path(args.vigild), config, listen="127.0.0.1:0", cpu=DAEMON_CPU)
        daemon.start()
        t = time.monotonic()
        owner, created, subs = setup(daemon, receiver, args)
        print(f"{len(subs)} subscriptions ({args.members} members x {args.subs_per_member}) on {args.origins} origin(s); "
              f"vigild {args.vigild} on CPU {DAEMON_CPU} (pid {daemon.pid}), receiver and driver on CPU {DRIVER_CPU}; "
              f"setup {time.monotonic() - t:.1f} s (not measured)")
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "--call-graph", "dwarf,16384", "-F", "2000", "-o", args.perf, "-p", str(daemon.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        print("times in ms after panic.start was sent; head = the request's first bytes at the receiver, body = its body complete")
        print(HEADER)
        for n in range(1, args.rounds + 1):
            r = one_round(n, owner, created, subs, daemon, receiver, vapid_key, args)
            runs.append(r)
            print(row(r), flush=True)
        owner.close()
    finally:
        if perf is not None and perf.poll() is None:
            perf.send_signal(signal.SIGINT)
            try:
                perf.wait(30)
            except subprocess.TimeoutExpired:
                perf.kill()
        if daemon is not None:
            daemon.stop()
        if receiver is not None:
            receiver.stop()
    if not runs:
        return 1
    heads = [ms for r in runs for ms in (q[1] for q in r["requests"])]
    bodies = [ms for r in runs for ms in (q[3] for q in r["requests"])]
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    overall = {
        "head_ms": summary(heads), "body_ms": summary(bodies),
        "median_of_rounds": {"head_p50": statistics.median(r["head_ms"]["p50"] for r in runs),
                             "head_p99": statistics.median(r["head_ms"]["p99"] for r in runs),
                             "last_ms": med("last_ms"), "ok_ms": med("ok_ms"), "requests_per_s": med("requests_per_s"),
                             "daemon_cpu_s": med("daemon_cpu_s"), "daemon_cpu_us_per_request": med("daemon_cpu_us_per_request"),
                             "receiver_cpu_s": med("receiver_cpu_s")},
    }
    o, mr = overall, overall["median_of_rounds"]
    print(f"all rounds ({o['head_ms']['n']} requests): head p50 {o['head_ms']['p50']:.1f}, p90 {o['head_ms']['p90']:.1f}, "
          f"p99 {o['head_ms']['p99']:.1f}, max {o['head_ms']['max']:.1f} ms; body p50 {o['body_ms']['p50']:.1f}, p99 {o['body_ms']['p99']:.1f} ms")
    print(f"median of rounds: head p50 {mr['head_p50']:.1f} ms, p99 {mr['head_p99']:.1f} ms, last {mr['last_ms']:.1f} ms, "
          f"{mr['requests_per_s']:.0f} requests/s, vigild CPU {mr['daemon_cpu_s']:.3f} s ({mr['daemon_cpu_us_per_request']:.0f} µs per request), "
          f"receiver CPU {mr['receiver_cpu_s']:.3f} s; ok after {mr['ok_ms']:.1f} ms")
    ok = all(r["received"] == r["subscriptions"] and r["verify"]["valid"] == r["subscriptions"] and not r["verify"]["missing"]
             and not r["verify"]["duplicates"] and r["end_notices"]["received"] == r["subscriptions"] for r in runs)
    for r in runs:
        if r["verify"]["problems"] or r["end_notices"]["verify"]["problems"]:
            print(f"round {r['round']} problems: {r['verify']['problems'] + r['end_notices']['verify']['problems']}")
    print("every request valid, one per subscription" if ok else "NOT EVERY SUBSCRIPTION GOT ONE VALID REQUEST")
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"notice-latency-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "args": vars(args), "vigild": args.vigild,
                               "loadavg": Path("/proc/loadavg").read_text().split()[:3],
                               "wall_s": time.monotonic() - started, "overall": overall, "rounds": runs}, indent=1))
    print(f"JSON: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
