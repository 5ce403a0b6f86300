"""Tests/conformance/summarize.py on small hand-made reports (no daemon, no Autobahn runner)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SUMMARIZE = Path(__file__).resolve().parents[1] / "conformance" / "summarize.py"


def case(behavior, close="OK"):
    return {"behavior": behavior, "behaviorClose": close, "duration": 1, "remoteCloseCode": 1000,
            "reportfile": "x.json"}


def summarize(tmp_path, index, *args):
    (tmp_path / "index.json").write_text(json.dumps(index))
    r = subprocess.run([sys.executable, str(SUMMARIZE), *args, str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    lines = r.stdout.strip().splitlines()
    return r.returncode, (lines[-1] if lines else ""), r.stdout + r.stderr


GOOD = {"1.1.1": case("OK"), "3.2": case("NON-STRICT"), "7.1.6": case("INFORMATIONAL")}


def test_ok_non_strict_and_informational_pass(tmp_path):
    rc, last, out = summarize(tmp_path, {"vigild": GOOD}, "--expect", "3")
    assert (rc, last) == (0, "autobahn: 3 ok, 0 failed of 3"), out
    assert "7 Close handling" in out and "INFORMATIONAL 1" in out


def test_a_failed_case_fails_and_is_named(tmp_path):
    rc, last, out = summarize(tmp_path, {"vigild": {**GOOD, "6.4.1": case("FAILED", "UNCLEAN")}})
    assert (rc, last) == (1, "autobahn: 3 ok, 1 failed of 4"), out
    assert "6.4.1 (FAILED/UNCLEAN)" in out


def test_any_other_behaviour_fails(tmp_path):
    rc, last, out = summarize(tmp_path, {"vigild": {**GOOD, "2.1": case("NO_CLOSE")}})
    assert (rc, last) == (1, "autobahn: 3 ok, 1 failed of 4"), out


def test_a_missing_case_fails_when_the_count_is_known(tmp_path):
    rc, last, out = summarize(tmp_path, {"vigild": GOOD}, "--expect", "4")
    assert (rc, last) == (1, "autobahn: 3 ok, 1 failed of 4"), out
    assert "missing" in out


def test_unimplemented_fails_only_when_asked(tmp_path):
    index = {"vigild": {**GOOD, "12.1.1": case("UNIMPLEMENTED")}}
    rc, last, out = summarize(tmp_path, index)
    assert (rc, last) == (0, "autobahn: 3 ok, 0 failed of 4"), out
    rc, last, out = summarize(tmp_path, index, "--fail-unimplemented")
    assert (rc, last) == (1, "autobahn: 3 ok, 1 failed of 4"), out


@pytest.mark.parametrize("text", ["", "{not json", "[]"])
def test_an_unreadable_report_is_an_error(tmp_path, text):
    (tmp_path / "index.json").write_text(text)
    r = subprocess.run([sys.executable, str(SUMMARIZE), str(tmp_path / "index.json")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr


def test_an_empty_report_fails(tmp_path):
    rc, _, out = summarize(tmp_path, {})
    assert rc == 2, out
    rc, last, out = summarize(tmp_path, {}, "--expect", "301")
    assert (rc, last) == (1, "autobahn: 0 ok, 301 failed of 301"), out
