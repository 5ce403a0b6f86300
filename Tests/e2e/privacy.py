"""What must never reach vigild's logs, and the scan that looks for it.

During an end-to-end run the clients record what the server told them in confidence
(``record``): capability tokens, session ids, stream ids, and the coordinates of pins and
panic locations. After the run, ``scan`` reads every daemon's log (the folder
``VIGIL_E2E_LOG_DIR`` that ``vigilproc`` fills) and reports each line holding one of them, an
IP address other than the daemon's own listening address, or a metadata key that names such
a value. ``test_log_privacy.py`` runs the scan.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from pathlib import Path

SECRET_KEYS = {"owner_token", "edit_token", "watch_token", "member_token", "session", "stream", "circle", "subscription"}
LIST_KEYS = {"watch_tokens"}
COORD_KEYS = {"lat", "lon"}
# Metadata keys a log line must never carry: they would name a person, a device or a place.
FORBIDDEN_KEYS = ("token", "session", "stream", "lat", "lon", "latitude", "longitude", "ip", "peer", "address",
                  "remote", "client", "forwarded", "location", "coordinates")

_secrets: set[str] = set()
_coords: set[str] = set()
_NUMBER_RE = re.compile(r'"(lat|lon)"\s*:\s*(-?\d+\.\d{4,})')


def record(raw: str) -> None:
    """Remember the sensitive values of one server message (its raw JSON text)."""
    try:
        msg = json.loads(raw)
    except ValueError:
        return
    _walk(msg)
    # Coordinates as the server wrote them (its own digits), with enough decimals to be a place.
    for _, number in _NUMBER_RE.findall(raw):
        _coords.add(number)


def remember(value: str) -> None:
    """Remember a value the client sent in confidence (a push endpoint's path, a relay handle, a
    key): the server never echoes these, so ``record`` cannot find them in its replies."""
    if len(value) >= 8:
        _secrets.add(value)


def _walk(value) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in SECRET_KEYS and isinstance(v, str) and len(v) >= 8:
                _secrets.add(v)
            elif k in LIST_KEYS and isinstance(v, list):
                _secrets.update(t for t in v if isinstance(t, str) and len(t) >= 8)
            else:
                _walk(v)
    elif isinstance(value, list):
        for v in value:
            _walk(v)


def dump(folder: str) -> None:
    """Add this process's records to ``folder/secrets.json`` (merged with earlier runs')."""
    path = Path(folder) / "secrets.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {"secrets": [], "coords": []}
    merged = {"secrets": sorted(set(old["secrets"]) | _secrets), "coords": sorted(set(old["coords"]) | _coords)}
    path.write_text(json.dumps(merged))


_IPV4_RE = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?![\w.])")
_IPV6_RE = re.compile(r"(?<![\w:])([0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})(?![\w:])")
_OWN_ADDRESS_RE = re.compile(r"listening (?:for TLS )?on |admin endpoints on |bind\(")
_KEY_RE = re.compile(r"(?:^|\s)([A-Za-z_][\w.]*)=")


def _ip_literals(line: str) -> list[str]:
    found = []
    for m in _IPV4_RE.finditer(line):
        try:
            ipaddress.IPv4Address(m.group(1))
            found.append(m.group(1))
        except ValueError:
            pass
    for m in _IPV6_RE.finditer(line):
        text = m.group(1)
        if "::" not in text and text.count(":") < 7:
            continue  # times such as 03:10:00 are not addresses
        try:
            ipaddress.IPv6Address(text)
            found.append(text)
        except ValueError:
            pass
    return found


def _windows_in(text: str, values: set[str], lengths: list[int]) -> list[str]:
    """The values of ``values`` that occur in ``text`` as substrings: every window of each length
    a value has, looked up in the set (O(len(text) x distinct lengths), not O(values): a run
    records hundreds of thousands of coordinates)."""
    found = []
    for n in lengths:
        for i in range(len(text) - n + 1):
            w = text[i:i + n]
            if w in values:
                found.append(w)
    return found


# A recorded value can only occur inside a run of the characters it is made of: base64url for
# tokens and ids, digits, '.' and '-' for coordinates.
_SECRET_RUN_RE = re.compile(r"[A-Za-z0-9_-]{8,}")
_COORD_RUN_RE = re.compile(r"[-0-9.]{5,}")


def scan_lines(lines: list[str], secrets: set[str], coords: set[str]) -> list[str]:
    """Every offending line, with why."""
    problems = []
    secret_lengths = sorted({len(s) for s in secrets})
    coord_lengths = sorted({len(c) for c in coords})
    for line in lines:
        why = []
        hits = {w for run in _SECRET_RUN_RE.findall(line) for w in _windows_in(run, secrets, secret_lengths)}
        why += [f"secret {s[:6]}…" for s in sorted(hits)]
        hits = {w for run in _COORD_RUN_RE.findall(line) for w in _windows_in(run, coords, coord_lengths)}
        why += [f"coordinate {c}" for c in sorted(hits)]
        if not _OWN_ADDRESS_RE.search(line):
            why += [f"IP address {ip}" for ip in _ip_literals(line)]
        for key in _KEY_RE.findall(line):
            leaf = key.rsplit(".", 1)[-1].lower()
            if any(leaf == k or leaf.endswith("_" + k) for k in FORBIDDEN_KEYS):
                why.append(f"key {key}")
        if why:
            problems.append(f"{', '.join(why)}: {line[:300]}")
    return problems


def scan(folder: str) -> tuple[int, int, int, list[str]]:
    """(log files, lines, values looked for, problems) for a folder of daemon logs and its secrets.json."""
    root = Path(folder)
    # secrets.json from pytest, secrets-js-*.json from the JavaScript client's tests.
    data = {"secrets": [], "coords": []}
    for f in sorted(root.glob("secrets*.json")):
        part = json.loads(f.read_text())
        data["secrets"] += part["secrets"]
        data["coords"] += part["coords"]
    files = sorted(root.glob("vigild-*.log"))
    problems, count = [], 0
    for f in files:
        lines = f.read_text(errors="replace").splitlines()
        count += len(lines)
        problems += [f"{f.name}: {p}" for p in scan_lines(lines, set(data["secrets"]), set(data["coords"]))]
    return len(files), count, len(data["secrets"]) + len(data["coords"]), problems


def folder() -> str | None:
    return os.environ.get("VIGIL_E2E_LOG_DIR")
