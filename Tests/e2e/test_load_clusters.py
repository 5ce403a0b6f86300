"""``vigil-load clusters`` (issue 15 part 1) against a vigild the test starts.

Cluster subscribers over parts of a country while publishers create, move, vote on and delete
pins: the run must be clean (every checked view equals a fresh subscribe's at the end, no two
clusters.changed closer than the interval, no errors), and must have checked something. The
checker's failing side is unit-tested (Tests/VigilLoadTests/ClusterViewTests.swift); here a run
told the wrong interval (longer than the daemon's) must fail its pacing check.
"""

from __future__ import annotations

import copy

from test_load import LIFTED, assert_clean, check, load_binary, run_load  # noqa: F401 (fixture)

INTERVAL_MS = 250
# Receive times, not send times: a loaded test machine delays single reads by tens of ms.
SLACK_MS = 50


def config() -> dict:
    cfg = copy.deepcopy(LIFTED)
    cfg["pins"]["cluster_interval_ms"] = INTERVAL_MS
    return cfg


ARGS = ("clusters", "--subscribers", "200", "--check-subscribers", "50", "--publishers", "5",
        "--rate", "200", "--pins-per-publisher", "40", "--duration", "5", "--pacing-slack-ms", str(SLACK_MS))


def test_cluster_views_converge_and_are_paced(vigild, load_binary, tmp_path):
    daemon = vigild(config())
    proc, result = run_load(load_binary, daemon, tmp_path, *ARGS, "--interval-ms", str(INTERVAL_MS))
    assert_clean(proc, result)
    convergence = check(result, "cluster convergence")
    assert convergence["checked"] == 50
    pacing = check(result, "cluster pacing")
    assert pacing["checked"] == 200
    # 5 s at one message per 250 ms at most: each subscriber heard many, none more often.
    assert pacing["counters"]["gaps"] >= 200 * 5
    figures = result["figures"]
    assert figures["min gap ms"] >= INTERVAL_MS - SLACK_MS
    assert figures["cluster msgs/s"] <= 200 * 1000 / INTERVAL_MS * 1.05
    assert figures["cluster cells/s"] > figures["cluster msgs/s"] > 0
    assert figures["writes/s"] > 100
    # Areas from 0.3 to all of the region per side: both country (3) and region (4) precisions.
    assert figures["subs at p3"] > 0 and figures["subs at p4"] > 0
    assert figures["subs at p3"] + figures["subs at p4"] == 200


def test_pacing_check_fails_when_messages_come_faster_than_told(vigild, load_binary, tmp_path):
    daemon = vigild(config())
    proc, result = run_load(load_binary, daemon, tmp_path, *ARGS, "--interval-ms", str(INTERVAL_MS * 2))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert check(result, "cluster pacing")["errors"] > 0
    assert check(result, "cluster convergence")["errors"] == 0
