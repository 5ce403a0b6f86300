"""Command line and configuration: --check-config, listen address precedence, bad configs."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from vigilproc import REPO, Vigild, write_config

VALID = {
    "server": {"listen": "127.0.0.1:8080", "backlog": 512, "max_connections": 1000, "shutdown_grace_ms": 2000},
    "http": {"handshake_timeout_ms": 5000, "max_request_head_bytes": 4096},
    "websocket": {"max_message_bytes": 1 << 20, "ping_interval_ms": 10000, "pong_timeout_ms": 5000,
                  "close_timeout_ms": 1000, "max_output_buffer_bytes": 1 << 22, "echo": True},
    "log": {"level": "debug"},
}


def check(binary, path, timeout=10):
    return subprocess.run([str(binary), "--check-config", str(path)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("cfg", [VALID, {}], ids=["every-key", "empty"])
def test_check_config_valid(vigild_binary, tmp_path, cfg):
    p = check(vigild_binary, write_config(tmp_path / "ok.yaml", cfg))
    assert p.returncode == 0, f"--check-config rejected a valid config (exit {p.returncode}):\n{p.stderr}"


@pytest.mark.parametrize("cfg, key", [
    ({"bogus": 1}, "bogus"),
    ({"server": {"listen_addr": "127.0.0.1:1"}}, "listen_addr"),
    ({"websocket": {"echo": True, "ekko": True}}, "ekko"),
])
def test_check_config_unknown_key(vigild_binary, tmp_path, cfg, key):
    p = check(vigild_binary, write_config(tmp_path / "bad.yaml", cfg))
    assert p.returncode == 1, f"unknown key {key!r}: exit {p.returncode}, want 1\n{p.stderr}"
    assert key in p.stderr, f"error does not name the unknown key {key!r}:\n{p.stderr}"


def test_check_config_reports_every_invalid_value(vigild_binary, tmp_path):
    cfg = {
        "server": {"listen": "not-an-address", "backlog": -5},
        "http": {"handshake_timeout_ms": "soon"},
        "websocket": {"echo": "maybe"},
        "log": {"level": "loud"},
    }
    p = check(vigild_binary, write_config(tmp_path / "bad.yaml", cfg))
    assert p.returncode == 1, f"exit {p.returncode}, want 1\n{p.stderr}"
    missing = [k for k in ("listen", "backlog", "handshake_timeout_ms", "echo", "level") if k not in p.stderr]
    assert not missing, f"--check-config did not report {missing}:\n{p.stderr}"


def test_check_config_missing_file(vigild_binary, tmp_path):
    p = check(vigild_binary, tmp_path / "nope.yaml")
    assert p.returncode == 1, f"exit {p.returncode}\n{p.stderr}"
    assert p.stderr.strip(), "no error message for a missing config file"


def test_check_config_not_yaml(vigild_binary, tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("server: [unclosed\n  listen: :\n")
    p = check(vigild_binary, f)
    assert p.returncode == 1, f"exit {p.returncode}\n{p.stderr}"


def test_daemon_refuses_invalid_config(vigild_binary, tmp_path):
    path = write_config(tmp_path / "bad.yaml", {"websocket": {"max_message_bytes": "huge"}})
    p = subprocess.run([str(vigild_binary), "--config", str(path), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode != 0, "vigild started with an invalid config"
    assert p.returncode > 0, f"vigild died by signal {-p.returncode} on a bad config"
    assert "max_message_bytes" in p.stderr, p.stderr
    assert "Fatal error" not in p.stderr, p.stderr


def test_listen_from_config(vigild):
    d = vigild({"server": {"listen": "127.0.0.3:0"}}, listen=None)
    assert d.host == "127.0.0.3", f"config listen ignored: {d.host}:{d.port}"


def test_listen_from_env(vigild):
    d = vigild({}, listen=None, env={"VIGIL_LISTEN": "127.0.0.4:0"})
    assert d.host == "127.0.0.4", f"VIGIL_LISTEN ignored: {d.host}:{d.port}"


def test_listen_flag_beats_env(vigild):
    d = vigild({}, listen="127.0.0.5:0", env={"VIGIL_LISTEN": "127.0.0.6:0"})
    assert d.host == "127.0.0.5", f"--listen should win over VIGIL_LISTEN: {d.host}:{d.port}"


def test_listen_port_in_use_fails_cleanly(vigild, vigild_binary, tmp_path):
    first = vigild({})
    second = Vigild(vigild_binary, write_config(tmp_path / "b.yaml", {}), listen=f"127.0.0.1:{first.port}")
    with pytest.raises(AssertionError, match="exited with"):
        second.start(ready_timeout=10)
    rc = second.wait(5)
    assert rc is not None and rc > 0, f"bind conflict: exit {rc}, want a non-zero exit code (not a crash)"
    assert "Fatal error" not in second.stderr_text(), second.stderr_text()


# The time limits whose minimums and cross rules LIMITS.md states: each key, and the partner values
# that let the key's documented minimum pass the rule between the two.
TIME_LIMITS = [
    ("panic.abandon_after_ms", {"panic": {"max_timer_s": 60}}),
    ("panic.max_timer_s", {}),
    ("checkin.idle_lifetime_s", {"checkin": {"max_home_s": 1}}),
    ("checkin.max_home_s", {}),
]


def documented_minimum(key: str) -> int:
    """The `at least N` of the key's row in docs/LIMITS.md, in the key's own unit."""
    rows = [line for line in (REPO / "docs/LIMITS.md").read_text().splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"LIMITS.md has {len(rows)} rows for {key}"
    default = rows[0].split("|")[2]
    m = re.search(r"at least ([\d,]+) (ms|s)\b", default)
    assert m, f"LIMITS.md's row for {key} gives no minimum: {default!r}"
    assert m.group(2) == key.rsplit("_", 1)[1], f"{key}: the minimum is in {m.group(2)}"
    return int(m.group(1).replace(",", ""))


def with_value(key: str, value: int, partner: dict) -> dict:
    section, name = key.split(".")
    cfg = {s: dict(v) for s, v in partner.items()}
    cfg.setdefault(section, {})[name] = value
    return cfg


@pytest.mark.parametrize("key, partner", TIME_LIMITS, ids=[k for k, _ in TIME_LIMITS])
def test_documented_minimum_is_the_one_enforced(vigild_binary, tmp_path, key, partner):
    """LIMITS.md's minimum is the least value --check-config accepts, and one less is refused
    with the key named."""
    low = documented_minimum(key)
    p = check(vigild_binary, write_config(tmp_path / "low.yaml", with_value(key, low, partner)))
    assert p.returncode == 0, f"{key}: {low} (LIMITS.md's minimum) refused:\n{p.stderr}"
    p = check(vigild_binary, write_config(tmp_path / "below.yaml", with_value(key, low - 1, partner)))
    assert p.returncode == 1, f"{key}: {low - 1}, below LIMITS.md's minimum, accepted"
    assert key in p.stderr, f"the refusal does not name {key}:\n{p.stderr}"


@pytest.mark.parametrize("cfg, named", [
    # Lowering the stream's abandonment below the longest timer (12 h) alone is refused...
    ({"panic": {"abandon_after_ms": 3_600_000}}, "panic.max_timer_s"),
    ({"panic": {"abandon_after_ms": 3_600_000, "max_timer_s": 3_600}}, "panic.max_timer_s"),
    # ... and so is the circles' idle lifetime below the longest home safe (24 h).
    ({"checkin": {"idle_lifetime_s": 86_400}}, "checkin.max_home_s"),
    ({"checkin": {"idle_lifetime_s": 3_600, "max_home_s": 3_600}}, "checkin.max_home_s"),
], ids=["abandon-alone", "timer-equal", "idle-alone", "home-equal"])
def test_lowering_one_time_limit_needs_the_other_lowered(vigild_binary, tmp_path, cfg, named):
    p = check(vigild_binary, write_config(tmp_path / "cross.yaml", cfg))
    assert p.returncode == 1, f"{cfg} accepted"
    assert named in p.stderr, f"the refusal does not name {named}:\n{p.stderr}"
    section = next(iter(cfg))
    lowered = dict(cfg[section])
    lowered["max_timer_s" if section == "panic" else "max_home_s"] = 3_599
    p = check(vigild_binary, write_config(tmp_path / "both.yaml", {section: lowered}))
    assert p.returncode == 0, f"{lowered}: both lowered, still refused:\n{p.stderr}"


# Where config/vigild.yaml (the production file) differs from the built-in defaults on purpose; its
# header names each one.
PRODUCTION_DIFFERENCES = {("state", "directory"): ("/var/lib/vigil", "")}


def print_config(binary, *args, env=None) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("VIGIL_CONFIG", "VIGIL_LISTEN", "VIGIL_ADMIN_LISTEN")}
    p = subprocess.run([str(binary), "--print-config", *args], capture_output=True, text=True, timeout=10,
                       env={**clean, **(env or {})})
    assert p.returncode == 0, f"--print-config exited {p.returncode}:\n{p.stderr}"
    return yaml.safe_load(p.stdout)


def test_the_production_file_states_the_built_in_defaults_but_where_its_header_says(vigild_binary):
    """config/vigild.yaml says vigild with no --config runs on its values: each one equals what
    `vigild --print-config` prints with no file, except the differences its header names, and the
    file lists every key there is."""
    path = REPO / "config/vigild.yaml"
    text = path.read_text()
    shipped = yaml.safe_load(text)
    built_in = print_config(vigild_binary)
    differ = {}
    for section in sorted(set(shipped) | set(built_in)):
        for key in sorted(set(shipped.get(section) or {}) | set(built_in.get(section) or {})):
            mine = (shipped.get(section) or {}).get(key, "(absent)")
            theirs = (built_in.get(section) or {}).get(key, "(absent)")
            if mine != theirs:
                differ[(section, key)] = (mine, theirs)
    assert differ == PRODUCTION_DIFFERENCES, f"vigild.yaml against the built-in defaults (file, built in): {differ}"
    header = text.split("\n\n", 1)[0]
    for section, key in PRODUCTION_DIFFERENCES:
        assert f"{section}.{key}" in header, f"the header of vigild.yaml does not name {section}.{key} as a difference"


def test_the_production_file_shows_the_cluster_defaults(vigild_binary, tmp_path):
    """The commented `cluster:` section's values ("Defaults shown") are the built-in ones."""
    shown = {}
    for line in (REPO / "config/vigild.yaml").read_text().splitlines():
        m = re.match(r"^#   ([a-z_]+): (.+)$", line)
        if m:
            shown[m.group(1)] = yaml.safe_load(m.group(2))
    assert {"urls", "node_id", "replicas", "max_age_s"} <= set(shown), shown
    # urls and node_id have no default: the file's examples go in, the rest must come out as shown.
    cfg = write_config(tmp_path / "node.yaml", {"cluster": {"urls": shown["urls"], "node_id": shown["node_id"]}})
    printed = print_config(vigild_binary, "--config", str(cfg))["cluster"]
    assert {k: printed.get(k, "(absent)") for k in shown} == shown


def test_print_config_applies_the_environment_and_the_flags(vigild_binary, tmp_path):
    cfg = write_config(tmp_path / "c.yaml", {"server": {"listen": "127.0.0.1:7000"}, "log": {"level": "debug"}})
    printed = print_config(vigild_binary, "--config", str(cfg), "--log-level", "error", env={"VIGIL_ADMIN_LISTEN": "off"})
    assert printed["server"]["listen"] == "127.0.0.1:7000"
    assert printed["admin"]["listen"] is False  # `off`, which YAML 1.1 reads as false
    assert printed["log"]["level"] == "error"
    printed = print_config(vigild_binary, env={"VIGIL_CONFIG": str(cfg), "VIGIL_LISTEN": "127.0.0.9:7001"})
    assert printed["server"]["listen"] == "127.0.0.9:7001" and printed["log"]["level"] == "debug"
