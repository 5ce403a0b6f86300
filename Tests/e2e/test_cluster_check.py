"""The cluster: section (issue 16) from the command line, against a real nats-server -js.

What is built: the section is checked, `vigild cluster check FILE` connects with it (first
reachable URL of the list, credentials) and reports or creates the JetStream stream; a daemon
given the section runs as a node of the cluster (test_cluster.py tests the cluster itself).
Without the section nothing changes (every other e2e test). Tests/setup-deps installs nats-server.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest

from natsproc import free_port
from vigilproc import write_config

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"




@pytest.fixture
def nats(tmp_path):
    """A nats-server -js on a loopback port, user vigil / password s3cret; yields its port."""
    port = free_port()
    proc = subprocess.Popen([NATS, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp_path / "js"),
                             "--user", "vigil", "--pass", "s3cret", "-l", str(tmp_path / "nats.log")])
    deadline = time.monotonic() + 10
    while True:  # no readiness signal but the port itself
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, "nats-server exited at start"
            assert time.monotonic() < deadline, "nats-server did not listen within 10 s"
            time.sleep(0.02)
    yield port
    proc.kill()
    proc.wait()


def cluster_config(tmp_path, port, **extra):
    cfg = {"cluster": {"urls": [f"nats://127.0.0.1:{free_port()}", f"nats://127.0.0.1:{port}"],
                       "name": "E2E", "node_id": "n1", "user": "vigil", "password": "s3cret", **extra}}
    return write_config(tmp_path / "cluster.yaml", cfg)


def run(binary, *args, timeout=20):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


def test_check_creates_and_reports_the_stream(vigild_binary, tmp_path, nats):
    path = cluster_config(tmp_path, nats, max_age_s=3600)
    missing = run(vigild_binary, "cluster", "check", str(path))
    assert missing.returncode == 1 and "stream not found" in missing.stderr, missing.stderr
    created = run(vigild_binary, "cluster", "check", str(path), "--create-stream")
    assert created.returncode == 0, created.stderr
    report = json.loads(created.stdout)
    assert report["ok"] and report["jetstream"] and report["cluster"] == "E2E" and report["tls"] is False
    assert report["stream"] == {"name": "E2E", "messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "replicas": 1}
    again = run(vigild_binary, "cluster", "check", str(path))
    assert again.returncode == 0 and json.loads(again.stdout)["stream"]["name"] == "E2E"
    assert "s3cret" not in created.stdout + created.stderr + again.stdout + again.stderr


def test_wrong_password_is_reported_without_the_password(vigild_binary, tmp_path, nats):
    path = cluster_config(tmp_path, nats, password="wrong-one")
    p = run(vigild_binary, "cluster", "check", str(path), "--timeout-ms", "1500")
    assert p.returncode == 1
    assert "Authorization Violation" in p.stderr, p.stderr
    assert "wrong-one" not in p.stderr


def test_no_server_answers_within_the_timeout(vigild_binary, tmp_path):
    path = write_config(tmp_path / "c.yaml", {"cluster": {"urls": [f"nats://127.0.0.1:{free_port()}"], "node_id": "n1"}})
    started = time.monotonic()
    p = run(vigild_binary, "cluster", "check", str(path), "--timeout-ms", "1000")
    assert p.returncode == 1 and "no answer within 1000 ms" in p.stderr, p.stderr
    assert time.monotonic() - started < 8


def test_a_daemon_with_the_section_runs_as_a_node_and_says_so(vigild, tmp_path, nats):
    """It starts, creates the stream and reports itself writable on the admin /healthz, with its
    cluster and node names; the password is never logged."""
    from wsraw import http_get
    d = vigild(json.loads(json.dumps({"cluster": {"urls": [f"nats://127.0.0.1:{nats}"], "name": "E2E", "node_id": "n1",
                                                  "user": "vigil", "password": "s3cret"}})))
    deadline = time.monotonic() + 15
    while True:
        health = json.loads(http_get(d.admin_port, "/healthz").body)
        if health["cluster"]["writable"]:
            break
        assert time.monotonic() < deadline, health
        time.sleep(0.02)
    assert health["cluster"]["node"] == "n1" and health["cluster"]["name"] == "E2E", health
    assert "s3cret" not in d.stderr_text()


@pytest.mark.parametrize("cluster, key", [
    ({"urls": ["ws://127.0.0.1:4222"], "node_id": "n1"}, "cluster.urls"),
    ({"urls": ["nats://127.0.0.1:4222"], "node_id": "n1", "creds_file": "/x.creds"}, "cluster.creds_file"),
    ({"urls": ["nats://127.0.0.1:4222"]}, "cluster.node_id"),
])
def test_check_config_names_the_cluster_key(vigild_binary, tmp_path, cluster, key):
    p = run(vigild_binary, "--check-config", str(write_config(tmp_path / "bad.yaml", {"cluster": cluster})))
    assert p.returncode == 1 and key in p.stderr, p.stderr
