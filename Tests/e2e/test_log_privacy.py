"""The log privacy scan (issue 12): no IP address, token, session id, stream id or coordinate
in any daemon log of an end-to-end run at debug level.

``Tests/run-all`` runs the end-to-end suite with ``VIGIL_E2E_LOG_LEVEL=debug`` and
``VIGIL_E2E_LOG_DIR`` set, then this module with ``VIGIL_E2E_SCAN_DIR`` naming that folder.
The first tests check the scanner itself on lines that must and must not be flagged, so a scan
that finds nothing is a scanner that works.
"""

from __future__ import annotations

import os

import pytest

import privacy

TOKEN = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5"
STREAM = "s7Hk2PqLm9XzV3bN1cR5tA"


def test_scanner_flags_secrets_addresses_coordinates_and_keys():
    lines = [
        f'ts=x level=debug msg="watch refused" detail={TOKEN}',
        f"ts=x level=info msg=recovered stream={STREAM}",
        "ts=x level=debug msg=\"connection closed\" peer=203.0.113.9",
        'ts=x level=info msg="pin at 52.520008,13.404954"',
        "ts=x level=debug msg=x from=2001:db8::7",
        "ts=x level=info msg=x lat=1",
    ]
    problems = privacy.scan_lines(lines, {TOKEN, STREAM}, {"52.520008"})
    assert len(problems) == len(lines), "\n".join(problems)


def test_scanner_passes_what_the_daemon_may_log():
    lines = [
        'ts=2026-11-24T03:06:32.037Z level=info msg="listening on 127.0.0.1:33753" echo=false max_connections=100000',
        'ts=2026-11-24T03:06:32.037Z level=info msg="admin endpoints on [::1]:8081" endpoints="/metrics /stats /healthz"',
        "ts=2026-11-24T03:06:32.037Z level=info msg=summary closes=closed:3 connections=4 pins=2 streams=1",
        'ts=2026-11-24T03:06:32.037Z level=debug msg="connection closed" close_code=1000 reason=closed',
        'ts=2026-11-24T03:06:32.037Z level=info msg="snapshot written" bytes=5120 segment=3 version=1.2.3.4.5',
    ]
    assert privacy.scan_lines(lines, {TOKEN}, {"52.520008"}) == []


def test_no_sensitive_value_in_the_logs_of_a_debug_run():
    folder = os.environ.get("VIGIL_E2E_SCAN_DIR")
    if not folder:
        pytest.skip("set VIGIL_E2E_SCAN_DIR to a VIGIL_E2E_LOG_DIR of a finished run (Tests/run-all does)")
    files, lines, values, problems = privacy.scan(folder)
    assert files > 0 and lines > 0, f"no daemon logs in {folder}"
    assert values > 100, f"only {values} tokens, ids and coordinates recorded: is privacy.record still called?"
    assert not problems, f"{len(problems)} log lines with sensitive values (of {lines} in {files} files):\n" + \
        "\n".join(problems[:30])
