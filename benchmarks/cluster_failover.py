"""Failover of a vigild cluster when one NATS server of three dies (issue 27, docs/CLUSTER.md
"Failover"): per kill, the roles the killed server held, per node the time from the kill to the
first `ok` of a write sent after it, the `unavailable` answers meanwhile and the longest
`writable: false` span; then the median and worst per role.

    swift build -c release --product vigild
    python3 benchmarks/cluster_failover.py --kills 10 --role stream-leader
    python3 benchmarks/cluster_failover.py --kills 10 --role cycle   # leader, consumer, connection in turn

Everything on loopback: three `nats-server -js` routed into one cluster, three vigild nodes
(`replicas: 3`, node i first on server i), one sequential writer per node
(tests/e2e/test_cluster_failover.py's harness). After each kill the server is restarted on the
same port and store and the run waits until every node is writable and the stream's three
replicas are current. Load average and steal (/proc/stat) are printed for the whole run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "benchmarks"))

from compare_builds import cpu_times, steal_share  # noqa: E402
from test_cluster_failover import ROLES, FailoverRun  # noqa: E402
from vigilproc import Vigild, write_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--role", choices=["stream-leader", "consumer", "connection", "cycle"], default="stream-leader")
    ap.add_argument("--binary", default=str(REPO / ".build" / "release" / "vigild"))
    args = ap.parse_args()
    binary = Path(args.binary)
    if not binary.exists():
        raise SystemExit(f"{binary} missing: swift build -c release --product vigild")
    started: list[Vigild] = []

    with tempfile.TemporaryDirectory(prefix="vigil-failover-") as tmp:
        tmpdir = Path(tmp)

        def start_node(cfg: dict) -> Vigild:
            d = Vigild(binary, write_config(tmpdir / f"node-{len(started)}.yaml", cfg))
            d.start()
            started.append(d)
            return d

        cpu_before = cpu_times()
        load_before = Path("/proc/loadavg").read_text().split()[:3]
        began = time.monotonic()
        run = FailoverRun(tmpdir, start_node)
        results = []
        try:
            for k in range(args.kills):
                role = ROLES[k % len(ROLES)] if args.role == "cycle" else args.role
                r = run.kill(role)
                results.append(r)
                print(f"kill {k + 1:2d} {role:13s} {r['server']} held [{', '.join(r['held'])}]: "
                      f"first ok {' '.join(f'{x:5.2f}' for x in r['resumed_s'])} s (worst {max(r['resumed_s']):.2f}); "
                      f"{r['unavailable']} unavailable; writable:false up to {r['unwritable_s']:.2f} s", flush=True)
            end = run.finish()
        finally:
            run.close()
            for d in started:
                d.stop()
        acked = sum(len(w.acked) for w in run.writers)
        lost = sum(1 for w in run.writers for t, pid in w.acked.items()
                   if any({p["title"]: p["id"] for p in pins}.get(t) != pid for pins in end["pins"]))
        twice = sum(len(pins) - len({p["title"] for p in pins}) for pins in end["pins"])
        steal = steal_share(cpu_before, cpu_times())
        load_after = Path("/proc/loadavg").read_text().split()[:3]

    print()
    print(f"{args.kills} kills, role {args.role}, {time.monotonic() - began:.0f} s; load {' '.join(load_before)} -> "
          f"{' '.join(load_after)}; steal {steal * 100:.1f} %; {acked} writes acknowledged, {lost} missing, {twice} applied twice")
    print(f"{'role':14s} {'kills':>5s} {'median worst-node s':>20s} {'worst s':>8s} {'median unwritable s':>20s}")
    for role in sorted({r["role"] for r in results}):
        rs = [r for r in results if r["role"] == role]
        worst_node = [max(r["resumed_s"]) for r in rs]
        print(f"{role:14s} {len(rs):5d} {statistics.median(worst_node):20.2f} {max(worst_node):8.2f} "
              f"{statistics.median(r['unwritable_s'] for r in rs):20.2f}")
    all_worst = [max(r["resumed_s"]) for r in results]
    print(f"{'all':14s} {len(results):5d} {statistics.median(all_worst):20.2f} {max(all_worst):8.2f}")


if __name__ == "__main__":
    main()
