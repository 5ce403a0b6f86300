"""Cluster subscriptions (docs/PROTOCOL.md, "Cluster subscriptions") end to end: a real vigild,
Python ``websockets`` clients.

A subscriber with ``"view":"clusters"`` gets counts per geohash cell (count, counts per
category, mean position) instead of pins, then ``clusters.changed`` with only the cells that
changed, at most once per ``pins.cluster_interval_ms``. The expected counts are computed here
from the pins the test made (the client's own geohash), never read back from the server.

One daemon is shared by the module; every test works in its own 10x10 degree square.
"""

from __future__ import annotations

import signal
import time
from collections import defaultdict

import pytest

import pinclient as pc
from pinclient import PinClient, geohash

INTERVAL_MS = 300
CONFIG = pc.pins_config(
    pins={"min_ttl_s": 1, "writes_per_minute": 60000, "write_burst": 10000, "cluster_interval_ms": INTERVAL_MS},
    session={"messages_per_second": 10000, "message_burst": 10000},
)
_server_shared, _server = pc.pin_server_fixture("server", CONFIG)

_REGIONS = iter([(lat, lon) for lat in range(-50, 51, 10) for lon in range(-150, 151, 10)])


@pytest.fixture
def region():
    return next(_REGIONS)


def bbox(region, size=5.0):
    lat, lon = region
    return {"bbox": [lat, lon, lat + size, lon + size]}


def expected_cells(pins: list[dict], precision: int, categories=None) -> dict[str, dict]:
    """Cell → {count, by_category, lat, lon} from the pins' own coordinates (1e-7 degree sums,
    as the protocol defines the mean)."""
    cells: dict[str, dict] = defaultdict(lambda: {"count": 0, "by_category": defaultdict(int), "lat": 0, "lon": 0})
    for p in pins:
        if categories is not None and p["category"] not in categories:
            continue
        c = cells[geohash(p["lat"], p["lon"], precision)]
        c["count"] += 1
        c["by_category"][p["category"]] += 1
        c["lat"] += round(p["lat"] * 1e7)
        c["lon"] += round(p["lon"] * 1e7)
    return {k: {"count": v["count"], "by_category": dict(v["by_category"]),
                "lat": v["lat"] / v["count"] / 1e7, "lon": v["lon"] / v["count"] / 1e7} for k, v in cells.items()}


def as_view(cells: list[dict]) -> dict[str, dict]:
    return {c["cell"]: {k: c[k] for k in ("count", "by_category", "lat", "lon")} for c in cells}


def same_view(got: dict[str, dict], want: dict[str, dict]) -> bool:
    if got.keys() != want.keys():
        return False
    for k, w in want.items():
        g = got[k]
        if g["count"] != w["count"] or g["by_category"] != w["by_category"]:
            return False
        if abs(g["lat"] - w["lat"]) > 2e-7 or abs(g["lon"] - w["lon"]) > 2e-7:
            return False
    return True


def apply_changes(view: dict[str, dict], msg: dict, precision: int) -> None:
    assert msg["type"] == "clusters.changed" and msg["precision"] == precision, msg
    assert msg["cells"], "a clusters.changed carries at least one cell"
    for c in msg["cells"]:
        if c["count"] == 0:
            assert set(c) == {"cell", "count"}, c
            view.pop(c["cell"], None)
        else:
            view[c["cell"]] = {k: c[k] for k in ("count", "by_category", "lat", "lon")}


def follow_until(client: PinClient, view: dict, precision: int, want: dict, timeout: float = 5.0) -> list[float]:
    """Applies clusters.changed until the view equals ``want``; returns each message's arrival time."""
    arrivals = []
    deadline = time.monotonic() + timeout
    while not same_view(view, want):
        left = deadline - time.monotonic()
        assert left > 0, f"the view never matched\n got {view}\nwant {want}\n{client.history()}"
        msg = client.event(timeout=left)
        arrivals.append(time.monotonic())
        apply_changes(view, msg, precision)
    return arrivals


def test_the_reply_counts_each_cell_with_its_split_and_mean(server, region):
    lat, lon = region
    pins = []
    with PinClient(server.port) as w:
        for i in range(30):
            category = ["general", "hazard", "help"][i % 3]
            pin, _ = w.create(lat + 0.5 + (i % 6) * 0.61, lon + 0.5 + (i // 6) * 0.73, f"p{i}", category=category)
            pins.append(pin)
        w.create(lat + 7.0, lon + 7.0, "outside the area, in another cell")
    with PinClient(server.port) as c:
        reply = c.ok("subscribe", area=bbox(region), view="clusters")
        assert "pins" not in reply and "truncated" not in reply
        precision = reply["precision"]
        assert 1 <= precision <= 6
        assert same_view(as_view(reply["clusters"]), expected_cells(pins, precision)), reply
        # Only some categories: counts, split and mean are those of the categories asked for.
        reply = c.ok("subscribe", area=bbox(region), view="clusters", categories=["hazard"])
        assert same_view(as_view(reply["clusters"]), expected_cells(pins, precision, {"hazard"}))
        assert all(set(cell["by_category"]) == {"hazard"} for cell in reply["clusters"])


def test_changes_come_batched_at_most_once_per_interval_with_only_the_changed_cells(server, region):
    lat, lon = region
    with PinClient(server.port) as c, PinClient(server.port) as w:
        reply = c.ok("subscribe", area=bbox(region), view="clusters")
        subscribed = time.monotonic()
        precision = reply["precision"]
        assert reply["clusters"] == []
        view: dict[str, dict] = {}
        pins, tokens = [], []
        # A burst of writes, faster than the interval, spread over a few cells.
        for i in range(40):
            pin, token = w.create(lat + 1 + (i % 4) * 0.9, lon + 1 + (i % 5) * 0.01 + i * 1e-4, f"p{i}",
                                  category="hazard" if i % 2 else "general")
            pins.append(pin)
            tokens.append(token)
        arrivals = follow_until(c, view, precision, expected_cells(pins, precision))
        # Moves, a category change and deletes; the cell emptied by the deletes comes with count 0.
        moved = []
        for i in range(0, 40, 4):        # every pin of the first row of cells
            w.ok("pin.delete", id=pins[i]["id"], edit_token=tokens[i])
        for i in range(1, 40, 4):
            r = w.ok("pin.update", id=pins[i]["id"], edit_token=tokens[i], changes={"lat": lat + 4.5, "category": "help"})
            moved.append(i)
            pins[i] = r["pin"]
        alive = [p for i, p in enumerate(pins) if i % 4 != 0]
        emptied = geohash(pins[0]["lat"], pins[0]["lon"], precision)
        saw_zero = []
        deadline = time.monotonic() + 5
        want = expected_cells(alive, precision)
        while not same_view(view, want):
            assert time.monotonic() < deadline, f"the view never matched\n{c.history()}"
            msg = c.event(timeout=5)
            arrivals.append(time.monotonic())
            saw_zero += [cell for cell in msg["cells"] if cell["cell"] == emptied and cell["count"] == 0]
            # Only cells that changed: every cell listed is one a change touched.
            apply_changes(view, msg, precision)
        assert saw_zero, "the emptied cell was sent with count 0"
        # At most one message per interval: every message was sent after the subscribe's reply
        # and before it arrived here, so however late this client reads (a loaded machine), no
        # more than (last arrival - subscribe) / interval + 1 can have been sent.
        span = arrivals[-1] - subscribed
        assert len(arrivals) <= span / (INTERVAL_MS / 1000) + 1, f"{len(arrivals)} messages in {span:.3f} s"
        assert len(arrivals) < 60, "changes were batched, not sent one by one"
        c.quiet(wait=INTERVAL_MS / 1000 * 2)


def test_subscribing_again_switches_between_pins_and_clusters(server, region):
    lat, lon = region
    with PinClient(server.port) as c, PinClient(server.port) as w:
        first, _ = w.create(lat + 1, lon + 1, "first")
        reply = c.ok("subscribe", area=bbox(region), view="clusters")
        assert [cell["count"] for cell in reply["clusters"]] == [1] and "pins" not in reply
        # To pins: the reply lists pins, changes come as pin events, no counts.
        reply = c.ok("subscribe", area=bbox(region), view="pins")
        assert [p["id"] for p in reply["pins"]] == [first["id"]] and "clusters" not in reply
        second, _ = w.create(lat + 1.001, lon + 1.001, "second")
        ev = c.event()
        assert ev["type"] == "pin.added" and ev["pin"]["id"] == second["id"]
        c.quiet(wait=INTERVAL_MS / 1000 * 2)
        # Back to clusters (no view: pins; "clusters" again: counts), and no pin events any more.
        reply = c.ok("subscribe", area=bbox(region), view="clusters")
        precision = reply["precision"]
        view = as_view(reply["clusters"])
        assert [cell["count"] for cell in reply["clusters"]] == [2]
        third, _ = w.create(lat + 1.002, lon + 1.002, "third")
        follow_until(c, view, precision, expected_cells([first, second, third], precision))
        c.quiet(wait=INTERVAL_MS / 1000 * 2)
        c.ok("unsubscribe")
        w.create(lat + 1.003, lon + 1.003, "fourth")
        c.quiet(wait=INTERVAL_MS / 1000 * 2)


def test_a_subscriber_is_not_told_of_categories_it_does_not_count(server, region):
    lat, lon = region
    with PinClient(server.port) as c, PinClient(server.port) as w:
        precision = c.ok("subscribe", area=bbox(region), view="clusters", categories=["help"])["precision"]
        w.create(lat + 2, lon + 2, "not counted", category="general")
        c.quiet(wait=INTERVAL_MS / 1000 * 2)
        pin, _ = w.create(lat + 2, lon + 2, "counted", category="help")
        msg = c.event(timeout=3)
        assert msg == {"type": "clusters.changed", "precision": precision,
                       "cells": [{"cell": geohash(lat + 2, lon + 2, precision), "count": 1, "by_category": {"help": 1},
                                  "lat": pin["lat"], "lon": pin["lon"]}]}


def test_expiry_empties_a_cell(server, region):
    lat, lon = region
    with PinClient(server.port) as c, PinClient(server.port) as w:
        w.create(lat + 3, lon + 3, "short-lived", ttl_s=1)
        reply = c.ok("subscribe", area=bbox(region), view="clusters")
        assert [cell["count"] for cell in reply["clusters"]] == [1]
        msg = c.event(timeout=4)
        assert msg["cells"] == [{"cell": geohash(lat + 3, lon + 3, reply["precision"]), "count": 0}]


def test_errors(server, region):
    with PinClient(server.port) as c:
        for view in ["heat", 3, None]:
            err = c.error("subscribe", area=bbox(region), view=view)
            assert err["code"] == "invalid_view" and err["field"] == "view", err
        assert c.error("subscribe", area={"bbox": [10, 0, 5, 1]}, view="clusters")["code"] == "invalid_area"
        assert c.error("subscribe", area=bbox(region), view="clusters", categories=["nope"])["code"] == "invalid_categories"
        c.quiet(wait=0.05)


def test_counts_after_a_kill_9_restart_equal_those_before(vigild, tmp_path):
    """The counts are rebuilt from the restored pins (snapshot + journal), not persisted."""
    cfg = pc.pins_config(pins={"writes_per_minute": 60000, "write_burst": 10000},
                         session={"messages_per_second": 10000, "message_burst": 10000})
    cfg["state"] = {"directory": str(tmp_path / "state")}
    area = {"bbox": [40, 0, 50, 20]}
    d = vigild(cfg)
    with PinClient(d.port) as w:
        made = []
        for i in range(60):
            pin, token = w.create(41 + (i % 7) * 1.1, 1 + (i % 9) * 1.7 + i * 1e-3, f"p{i}",
                                  category=["general", "sighting", "hazard"][i % 3])
            made.append((pin, token))
        for i, (pin, token) in enumerate(made[:20]):
            if i % 2:
                w.ok("pin.delete", id=pin["id"], edit_token=token)
            else:
                w.ok("pin.update", id=pin["id"], edit_token=token, changes={"lon": 18.5, "category": "help"})
        with PinClient(d.port) as c:
            before = c.ok("subscribe", area=area, view="clusters")
    assert sum(cell["count"] for cell in before["clusters"]) == 50
    assert d.stop(signal.SIGKILL) == -signal.SIGKILL
    d.reported = True                    # killed on purpose: not a crash for the teardown to report
    d2 = vigild(cfg)
    with PinClient(d2.port) as c:
        after = c.ok("subscribe", area=area, view="clusters")
    assert after["precision"] == before["precision"]
    assert sorted(after["clusters"], key=lambda x: x["cell"]) == sorted(before["clusters"], key=lambda x: x["cell"])
