"""The byte scan of issue 26: finds an e2e stream's plaintext (its coordinates and its note) in
files and frames where it must not be: the state directory, the daemon's logs, frames sent to
anyone but the stream's watchers, the admin endpoints.

A coordinate is looked for in the forms a program would write it: the decimal text as the
client wrote it in the plaintext, and the float64 and float32 bytes (little- and big-endian), so
that a snapshot or journal that stored a number in binary is caught as well as JSON text. A note
is looked for as UTF-8 and UTF-16 text. The scan reads bytes, not text, so compression is the one
thing it cannot see through: the state directory writes none (checked in the tests that use it).
"""
from __future__ import annotations

import struct
from pathlib import Path


def needles(coordinates: list[float], notes: list[str], digits: list[str] | None = None) -> dict[bytes, str]:
    """The byte strings to look for, each with a name for the report. `digits`: the coordinates'
    decimal texts as the client wrote them (default: Python's repr of each)."""
    found: dict[bytes, str] = {}
    for value, text in zip(coordinates, digits or [repr(c) for c in coordinates]):
        found[text.encode()] = f"coordinate {text} as text"
        for fmt, name in (("<d", "float64 LE"), (">d", "float64 BE"), ("<f", "float32 LE"), (">f", "float32 BE")):
            found[struct.pack(fmt, value)] = f"coordinate {text} as {name}"
    for note in notes:
        found[note.encode("utf-8")] = f"note {note!r} as UTF-8"
        found[note.encode("utf-16-le")] = f"note {note!r} as UTF-16"
    return found


def scan_bytes(data: bytes, where: str, wanted: dict[bytes, str]) -> list[str]:
    """Each needle found in `data`, as 'where: what'."""
    return [f"{where}: {name}" for needle, name in wanted.items() if needle in data]


def scan_tree(root: Path, wanted: dict[bytes, str]) -> list[str]:
    """Every regular file below `root`, whole."""
    hits: list[str] = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        hits += scan_bytes(path.read_bytes(), str(path), wanted)
    return hits
