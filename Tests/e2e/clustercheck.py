"""`vigild cluster check`'s output, read the one way: one line of JSON on stdout, success or
failure, nothing on stderr, exit 0 with ``"ok":true`` and 1 with ``"ok":false`` and ``error``."""

from __future__ import annotations

import json


def report_of(p, ok: bool | None = None) -> dict:
    """The report of a finished ``cluster check`` (a ``subprocess.CompletedProcess``)."""
    assert p.stderr == "", p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout
    report = json.loads(lines[0])
    assert p.returncode == (0 if report["ok"] else 1), (p.returncode, report)
    assert ("error" in report) is (not report["ok"]), report
    if ok is not None:
        assert report["ok"] is ok, report
    return report


def failure(p, kind: str) -> dict:
    """The report of a failed check, after checking its kind."""
    report = report_of(p, ok=False)
    assert report["error"]["kind"] == kind, report
    return report
