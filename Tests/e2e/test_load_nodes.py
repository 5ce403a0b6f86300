"""``vigil-load`` spread over several node URLs (issue 16), against vigild(s) the test starts.

A cluster is not needed to test the client's side: two ``--url``s naming the same daemon are two
"nodes" that share everything, so the runs must be clean, spread as documented (round robin;
panic watchers on other nodes than their owners) and checked with the several-node rules (the map
run ends with a barrier pin per checked subscriber). Two daemons that share nothing are two nodes
of a broken cluster: the map check must find what the other one never delivered. Real multi-node
runs come with the cluster itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_load import LIFTED, assert_clean, check, load_binary  # noqa: F401 (fixture)


def run_nodes(binary: Path, urls: list[str], tmp_path: Path, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "result.json"
    argv = [str(binary), *args, "--json", str(out), "--no-progress"]
    for url in urls:
        argv += ["--url", url]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    result = json.loads(out.read_text()) if out.exists() else {}
    return proc, result


def url(daemon) -> str:
    return f"ws://127.0.0.1:{daemon.port}/v1"


MAP_ARGS = ("map", "--subscribers", "100", "--publishers", "4", "--rate", "300", "--region", "52.3,13.0,52.7,13.8",
            "--viewport-km", "15", "--panning", "0.3", "--pan-interval", "0.5", "--check-subscribers", "20",
            "--latency-subscribers", "50", "--duration", "2")


def test_map_over_two_urls_is_spread_and_exact(vigild, load_binary, tmp_path):
    daemon = vigild(LIFTED)
    # --server-pid once per node: the figures are summed (here twice the one daemon's).
    proc, result = run_nodes(load_binary, [url(daemon)] * 2, tmp_path, *MAP_ARGS,
                             "--server-pid", str(daemon.pid), "--server-pid", str(daemon.pid))
    assert_clean(proc, result)
    after = result["server"]["after"]
    assert after["open_fds"] % 2 == 0 and after["open_fds"] >= 2 * 104 and after["threads"] % 2 == 0
    assert result["parameters"]["urls"] == f"{url(daemon)} {url(daemon)}"
    assert "several nodes" in result["parameters"]["checks"]
    nodes = result["nodes"]
    assert [n["url"] for n in nodes] == [url(daemon)] * 2
    # Publishers 0 and 2 on node 0, 1 and 3 on node 1; subscribers round robin within their
    # sample (20 checked, 40 more timed, 40 neither): 50 each.
    assert [n["connections"] for n in nodes] == [52, 52]
    assert sum(n["delivered"] for n in nodes) == result["messages"]["delivered"]
    assert all(n["delivered"] > 0 for n in nodes)
    exact = check(result, "viewport exactness")
    assert exact["checked"] == 20
    # The barrier makes the end of every checked subscriber's last epoch certain.
    assert exact["counters"]["certain"] > 0 and exact["counters"]["events"] > 0
    assert exact["counters"]["lost"] == 0 and exact["counters"]["wrong"] == 0
    # Every second subscriber is timed: each node still has timed ones.
    latency = result["latency_ns"]
    for pair in ("0→0", "0→1", "1→0", "1→1"):
        assert latency[f"map event {pair}"]["count"] > 0, pair
    assert sum(latency[f"map event {p}"]["count"] for p in ("0→0", "0→1", "1→0", "1→1")) <= latency["map event"]["count"]
    # Half the publishers' pins reach a subscriber on the other node.
    assert 30 < result["figures"]["timed events across nodes %"] < 70


def test_cluster_checks_with_one_url(vigild, load_binary, tmp_path):
    """One URL in front of several nodes (a load balancer): --cluster-checks alone turns the rules on."""
    daemon = vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(daemon)], tmp_path, *MAP_ARGS, "--cluster-checks")
    assert_clean(proc, result)
    assert "several nodes" in result["parameters"]["checks"] and "nodes" not in result["parameters"]
    assert len(result["nodes"]) == 1 and result["nodes"][0]["delivered"] == result["messages"]["delivered"]
    exact = check(result, "viewport exactness")
    assert exact["checked"] == 20 and exact["counters"]["certain"] > 0 and exact["counters"]["lost"] == 0


def test_map_over_two_daemons_that_share_nothing_fails(vigild, load_binary, tmp_path):
    """Two nodes that do not replicate: subscribers miss the other node's pins, and the check says so."""
    a, b = vigild(LIFTED), vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(a), url(b)], tmp_path, *MAP_ARGS)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    exact = check(result, "viewport exactness")
    assert exact["counters"]["lost"] > 0
    assert any("lost" in e for e in exact["first_errors"])


def test_panic_over_two_urls_puts_watchers_on_other_nodes(vigild, load_binary, tmp_path):
    daemon = vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(daemon)] * 2, tmp_path, "panic", "--streams", "40", "--watchers", "3",
                             "--rate", "5", "--reconnects", "0", "--duration", "2")
    assert_clean(proc, result)
    sent, delivered = result["messages"]["sent"], result["messages"]["delivered"]
    assert delivered == 3 * sent
    # Owners 20 + 20; watchers 0 and 2 of a stream on the other node, watcher 1 on its owner's: 60 + 60.
    assert [n["connections"] for n in result["nodes"]] == [80, 80]
    assert sum(n["delivered"] for n in result["nodes"]) == delivered
    assert abs(result["figures"]["deliveries across nodes %"] - 200 / 3) < 0.01
    seq = check(result, "watcher seq continuity")
    assert seq["checked"] == 120 and seq["counters"]["lost"] == 0 and seq["counters"]["duplicates"] == 0
    latency = result["latency_ns"]
    for pair in ("0→0", "0→1", "1→0", "1→1"):
        assert latency[f"panic location {pair}"]["count"] > 0, pair
    # One daemon knows every stream at once: nothing to retry.
    assert result["figures"]["watches retried (forbidden)"] == 0


def test_panic_watchers_reconnect_on_the_next_node_with_since(vigild, load_binary, tmp_path):
    daemon = vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(daemon)] * 2, tmp_path, "panic", "--streams", "40", "--watchers", "2",
                             "--rate", "10", "--reconnects", "10", "--watches-per-connection", "2", "--duration", "2")
    assert_clean(proc, result)
    # 40 owners + 40 watcher connections, plus the reconnections, spread over both.
    assert result["connections"]["opened"] > 80
    assert sum(n["connections"] for n in result["nodes"]) == result["connections"]["opened"]
    seq = check(result, "watcher seq continuity")
    assert seq["counters"]["lost"] == 0 and seq["counters"]["duplicates"] == 0


def test_mixed_over_two_urls(vigild, load_binary, tmp_path):
    daemon = vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(daemon)] * 2, tmp_path, "mixed", "--subscribers", "60", "--publishers", "4",
                             "--rate", "200", "--region", "52.3,13.0,52.7,13.8", "--streams", "20", "--watchers", "2",
                             "--panic-rate", "2", "--duration", "2")
    assert_clean(proc, result)
    assert all(n["delivered"] > 0 for n in result["nodes"])
    assert sum(n["delivered"] for n in result["nodes"]) == result["messages"]["delivered"]
    assert check(result, "viewport exactness")["counters"]["certain"] > 0
    assert check(result, "watcher seq continuity")["counters"]["lost"] == 0
    assert result["figures"]["deliveries across nodes %"] > 0 and result["figures"]["timed events across nodes %"] > 0


def test_scenarios_that_assume_one_node_refuse_several_urls(load_binary):
    for scenario in ("clusters", "abuse"):
        proc = subprocess.run([str(load_binary), scenario, "--url", "ws://127.0.0.1:1/v1", "--url", "ws://127.0.0.1:2/v1"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert proc.returncode == 64, proc.stdout + proc.stderr
        assert "takes one --url" in proc.stderr


def test_a_watch_a_node_keeps_refusing_is_retried_then_fails(vigild, load_binary, tmp_path):
    """Two daemons that share nothing: each stream's one watcher is on the node that never gets
    the stream. Its watch is refused (forbidden), sent again 30 times over about 5 s, then reported.
    The ramp-up never completes (the watches are never accepted) and the drain never does (no
    watcher sees an end): both time out, after the retries are over."""
    a, b = vigild(LIFTED), vigild(LIFTED)
    proc, result = run_nodes(load_binary, [url(a), url(b)], tmp_path, "panic", "--streams", "4", "--watchers", "1",
                             "--rate", "5", "--reconnects", "0", "--duration", "1", "--ramp-timeout", "8",
                             "--drain-timeout", "8", timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert result["figures"]["watches retried (forbidden)"] == 4 * 30
    problems = check(result, "replies and connections")
    assert any("still forbidden after 30 retries" in e for e in problems["first_errors"]), problems
