"""10,000 concurrent idle WebSocket connections on /v1: all upgraded, /healthz still
served, memory per connection measured, every fd released after they close.

Knobs (env): VIGIL_IDLE_CONNECTIONS (default 10000), VIGIL_IDLE_KIB_MAX (default 2.0,
the allowed RSS growth per idle connection in KiB).  The same measurement, as a
rerunnable command with a table, is ``benchmarks/idle_connections.py``.
"""

from __future__ import annotations

import os

import pytest

import wsbulk
from conftest import settle_baseline
from vigilproc import raise_own_nofile
from wsraw import http_get

N = int(os.environ.get("VIGIL_IDLE_CONNECTIONS", "10000"))
KIB_MAX = float(os.environ.get("VIGIL_IDLE_KIB_MAX", "2.0"))
# Long timers so no ping traffic or handshake timeout touches the measurement.
CONFIG = {"websocket": {"ping_interval_ms": 300000, "pong_timeout_ms": 300000}}


@pytest.mark.slow
def test_10k_idle_connections(vigild):
    limit = raise_own_nofile()
    if limit < N + 256:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} < {N + 256} needed for {N} client sockets")
    d = vigild(CONFIG)
    baseline = settle_baseline(d, "/v1")
    rss_before = d.rss_kib()

    res = wsbulk.open_upgraded(d.port, N, path="/v1", window=512, timeout=60)
    try:
        assert not res.failures, f"{len(res.opened)}/{N} upgraded; {res.failure_summary()}"
        assert len(res.opened) == N
        fds_open = d.wait_fds_at_least(baseline + N, 5)
        assert fds_open >= baseline + N, f"vigild holds {fds_open} fds with {N} clients open (baseline {baseline})"
        resp = http_get(d.port, "/healthz", timeout=5)
        assert resp.status == 200, f"/healthz with {N} idle clients: {resp.status}"
        rss_open = d.rss_kib()
        anon_open = d.rss_anon_kib()
    finally:
        wsbulk.close_all(res.opened)

    per_conn = (rss_open - rss_before) / N
    print(f"\nidle: {N} connections upgraded in {res.elapsed:.2f}s; RSS {rss_before} -> {rss_open} KiB "
          f"(RssAnon {anon_open} KiB); {per_conn:.3f} KiB/connection; fds {baseline} -> {fds_open}")

    fds_after = d.wait_fds_at_most(baseline, 20)
    assert fds_after <= baseline, f"after closing {N} clients vigild still holds {fds_after} fds (baseline {baseline})"
    assert res.elapsed < 30, f"upgrading {N} connections took {res.elapsed:.1f}s (target < 30 s)"
    assert per_conn <= KIB_MAX, (f"RSS per idle connection {per_conn:.3f} KiB > bound {KIB_MAX} KiB "
                                 f"(RSS {rss_before} -> {rss_open} KiB for {N}; set VIGIL_IDLE_KIB_MAX to change)")
