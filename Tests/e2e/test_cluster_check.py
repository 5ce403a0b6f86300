"""The cluster: section (issue 16) from the command line, against a real nats-server -js.

What is built: the section is checked, `vigild cluster check FILE` connects with it (first
reachable URL of the list, credentials) and reports or creates the JetStream stream; a daemon
given the section runs as a node of the cluster (test_cluster.py tests the cluster itself).
Without the section nothing changes (every other e2e test). Tests/setup-deps installs nats-server.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time

import pytest

from clustercheck import failure, report_of
from natsproc import NatsCluster, free_port
from vigilproc import write_config

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"




@pytest.fixture
def nats(tmp_path):
    """A nats-server -js on a loopback port, user vigil / password s3cret; yields its port."""
    port = free_port()
    proc = subprocess.Popen([NATS, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp_path / "js"),
                             "--user", "vigil", "--pass", "s3cret", "-l", str(tmp_path / "nats.log")])
    wait_listening(proc, port)
    yield port
    proc.kill()
    proc.wait()


def cluster_config(tmp_path, port, **extra):
    cfg = {"cluster": {"urls": [f"nats://127.0.0.1:{free_port()}", f"nats://127.0.0.1:{port}"],
                       "name": "E2E", "node_id": "n1", "user": "vigil", "password": "s3cret", **extra}}
    return write_config(tmp_path / "cluster.yaml", cfg)


def run(binary, *args, timeout=20):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


def wait_listening(proc, port: int, timeout: float = 10.0) -> None:
    """Returns once a nats-server's client port takes connections (its only readiness signal)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "nats-server did not listen"
            time.sleep(0.02)


def writable_health(d, timeout: float = 15.0) -> dict:
    """The node's admin /healthz once it says `writable` (polled: no event says it), bounded."""
    from wsraw import http_get
    deadline = time.monotonic() + timeout
    while True:
        health = json.loads(http_get(d.admin_port, "/healthz").body)
        if health["cluster"]["writable"]:
            return health
        assert time.monotonic() < deadline, health
        time.sleep(0.02)


def test_check_creates_and_reports_the_stream(vigild_binary, tmp_path, nats):
    path = cluster_config(tmp_path, nats, max_age_s=3600)
    missing = failure(run(vigild_binary, "cluster", "check", str(path)), "stream_missing")
    assert "stream not found" in missing["error"]["message"] and missing["cluster"] == "E2E", missing
    created = run(vigild_binary, "cluster", "check", str(path), "--create-stream")
    report = report_of(created, ok=True)
    assert report["jetstream"] and report["cluster"] == "E2E" and report["tls"] is False
    assert report["stream"] == {"name": "E2E", "messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "replicas": 1}
    # Every setting vigild relies on, config beside stream, and no difference.
    assert report["settings"] == {
        "subjects": {"config": ["E2E.>"], "stream": ["E2E.>"]}, "retention": {"config": "limits", "stream": "limits"},
        "storage": {"config": "file", "stream": "file"}, "replicas": {"config": 1, "stream": 1},
        "max_age": {"config": 3600, "stream": 3600}, "max_bytes": {"config": 1 << 30, "stream": 1 << 30},
        "discard": {"config": "old", "stream": "old"}, "duplicate_window": {"config": 120, "stream": 120}}, report
    assert report["differences"] == []
    again = run(vigild_binary, "cluster", "check", str(path))
    assert report_of(again, ok=True)["stream"]["name"] == "E2E"
    assert "s3cret" not in created.stdout + created.stderr + again.stdout + again.stderr


def test_wrong_password_is_reported_without_the_password(vigild_binary, tmp_path, nats):
    path = cluster_config(tmp_path, nats, password="wrong-one")
    p = run(vigild_binary, "cluster", "check", str(path), "--timeout-ms", "1500")
    report = failure(p, "auth")
    assert "Authorization Violation" in report["error"]["message"], report
    assert "wrong-one" not in p.stdout


def test_no_server_answers_within_the_timeout(vigild_binary, tmp_path):
    path = write_config(tmp_path / "c.yaml", {"cluster": {"urls": [f"nats://127.0.0.1:{free_port()}"], "node_id": "n1"}})
    started = time.monotonic()
    p = run(vigild_binary, "cluster", "check", str(path), "--timeout-ms", "1000")
    assert "no answer within 1000 ms" in failure(p, "no_answer")["error"]["message"], p.stdout
    assert time.monotonic() - started < 8


def test_a_config_that_cannot_be_used_is_reported_as_json(vigild_binary, tmp_path):
    none = write_config(tmp_path / "none.yaml", {"server": {"listen": "127.0.0.1:0"}})
    assert "no cluster: section" in failure(run(vigild_binary, "cluster", "check", str(none)), "config")["error"]["message"]
    bad = write_config(tmp_path / "bad.yaml", {"cluster": {"urls": ["ws://127.0.0.1:4222"], "node_id": "n1"}})
    report = failure(run(vigild_binary, "cluster", "check", str(bad)), "config")
    assert "cluster.urls" in report["error"]["message"] and report["cluster"] == "" and report["differences"] == [], report
    # `public-key` keeps its text on stderr.
    p = run(vigild_binary, "cluster", "public-key", str(none))
    assert p.returncode == 1 and "no cluster: section" in p.stderr and p.stdout == "", p


def test_a_server_without_jetstream_is_named(vigild_binary, tmp_path):
    port = free_port()  # natsproc.NatsServer always passes -js: a server of our own here
    proc = subprocess.Popen([NATS, "-a", "127.0.0.1", "-p", str(port), "-l", str(tmp_path / "nojs.log")])
    try:
        wait_listening(proc, port)
        path = write_config(tmp_path / "c.yaml", {"cluster": {"urls": [f"nats://127.0.0.1:{port}"], "node_id": "n1"}})
        report = failure(run(vigild_binary, "cluster", "check", str(path), "--timeout-ms", "5000"), "no_jetstream")
        assert report["jetstream"] is False and "JetStream" in report["error"]["message"], report
    finally:
        proc.kill()
        proc.wait()


def test_a_stream_setting_changed_since_creation_is_a_difference(vigild_binary, tmp_path, nats):
    """max_age changed in the config after the stream exists: exit 1 naming it; --update-stream
    changes it."""
    assert run(vigild_binary, "cluster", "check", str(cluster_config(tmp_path, nats, max_age_s=3600)), "--create-stream").returncode == 0
    longer = cluster_config(tmp_path, nats, max_age_s=7200)
    report = failure(run(vigild_binary, "cluster", "check", str(longer)), "stream_differs")
    assert report["differences"] == [{"key": "max_age", "config": 7200, "stream": 3600, "updatable": True}], report
    assert "max_age: config 7200, stream 3600" in report["error"]["message"] and "--update-stream" in report["error"]["message"]
    assert report["settings"]["max_age"] == {"config": 7200, "stream": 3600}
    updated = report_of(run(vigild_binary, "cluster", "check", str(longer), "--update-stream"), ok=True)
    assert updated["settings"]["max_age"] == {"config": 7200, "stream": 7200} and updated["differences"] == [], updated
    three = cluster_config(tmp_path, nats, max_age_s=7200, replicas=3)


def test_a_refusal_of_jetstream_is_kind_api(vigild_binary, tmp_path):
    """A server whose JetStream may store 1 MiB: creating a stream of max_bytes 1 GiB is refused by
    JetStream, and `check --create-stream` says so as kind api."""
    port = free_port()
    conf = tmp_path / "small.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp_path / "js"}", max_file_store: 1048576 }}\n')
    proc = subprocess.Popen([NATS, "-a", "127.0.0.1", "-p", str(port), "-c", str(conf), "-l", str(tmp_path / "small.log")])
    try:
        wait_listening(proc, port)
        path = write_config(tmp_path / "c.yaml", {"cluster": {"urls": [f"nats://127.0.0.1:{port}"], "node_id": "n1"}})
        report = failure(run(vigild_binary, "cluster", "check", str(path), "--create-stream", "--timeout-ms", "5000"), "api")
        assert "JetStream: " in report["error"]["message"] and "err_code" in report["error"]["message"], report
        assert "stream" not in report and report["jetstream"] is True, report
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_with_the_section_runs_as_a_node_and_says_so(vigild, tmp_path, nats):
    """It starts, creates the stream and reports itself writable on the admin /healthz, with its
    cluster and node names, as a replicated node with local snapshots (its state directory), and
    its log says what it restores, never "the journal alone"; the password is never logged."""
    from wsraw import http_get
    d = vigild(json.loads(json.dumps({"cluster": {"urls": [f"nats://127.0.0.1:{nats}"], "name": "E2E", "node_id": "n1",
                                                  "user": "vigil", "password": "s3cret"},
                                      "state": {"directory": str(tmp_path / "state")}})))
    health = writable_health(d)
    assert health["cluster"]["node"] == "n1" and health["cluster"]["name"] == "E2E", health
    assert health["state"] == "replicated" and health["snapshots"] == "local", health
    assert "stream_differs" not in health["cluster"], health
    assert json.loads(http_get(d.admin_port, "/stats").body)["state"] == "replicated"
    assert 'vigil_state_mode{mode="replicated"} 1' in http_get(d.admin_port, "/metrics").body.decode()
    log = d.stderr_text()
    assert "journal alone" not in log and "no snapshot: the state comes from the stream" in log, log
    assert re.search(r"msg=ready .*state=replicated", log), log
    assert "s3cret" not in log


@pytest.mark.parametrize("cluster, key", [
    ({"urls": ["ws://127.0.0.1:4222"], "node_id": "n1"}, "cluster.urls"),
    ({"urls": ["nats://127.0.0.1:4222"], "node_id": "n1", "creds_file": "/x.creds"}, "cluster.creds_file"),
    ({"urls": ["nats://127.0.0.1:4222"]}, "cluster.node_id"),
])
def test_check_config_names_the_cluster_key(vigild_binary, tmp_path, cluster, key):
    p = run(vigild_binary, "--check-config", str(write_config(tmp_path / "bad.yaml", {"cluster": cluster})))
    assert p.returncode == 1 and key in p.stderr, p.stderr


def test_replicas_set_after_the_stream_exists_is_named_and_updated_on_a_three_server_cluster(vigild, vigild_binary, tmp_path):
    """Issue 27: the stream made with 1 replica, the config then set to 3: `check` fails naming
    replicas 1 vs 3, a running node shows it in /healthz and its log (still writable: nothing is
    wrong but the copies); `--update-stream` makes it 3, and `check` is ok again."""
    from wsraw import http_get
    with NatsCluster(tmp_path, name="CHK") as nats_cluster:
        urls = nats_cluster.urls

        def config(name, replicas):
            return write_config(tmp_path / name, {"cluster": {"urls": urls, "name": "R", "node_id": "n1", "replicas": replicas}})

        one, three = config("one.yaml", 1), config("three.yaml", 3)
        # The stream's own leader is elected after the metadata leader: ask until it is created.
        deadline = time.monotonic() + 30
        while True:
            p = run(vigild_binary, "cluster", "check", str(one), "--create-stream", "--timeout-ms", "5000")
            if p.returncode == 0:
                break
            assert time.monotonic() < deadline, p.stdout
        assert report_of(p, ok=True)["stream"]["replicas"] == 1

        node = vigild({"cluster": {"urls": urls, "name": "R", "node_id": "n1", "replicas": 3}})
        health = writable_health(node)
        assert health["cluster"]["stream_differs"] == [{"key": "replicas", "config": 3, "stream": 1, "updatable": True}], health
        assert health["state"] == "replicated" and health["snapshots"] == "none", health  # no state directory
        node.wait_for_log("the stream's replicas is 1, the config's 3", 5)
        assert re.search(r'stream ready.*replicas=1', node.stderr_text()), node.stderr_text()

        differs = failure(run(vigild_binary, "cluster", "check", str(three)), "stream_differs")
        assert differs["differences"] == [{"key": "replicas", "config": 3, "stream": 1, "updatable": True}], differs
        assert differs["settings"]["replicas"] == {"config": 3, "stream": 1} and differs["stream"]["replicas"] == 1
        assert "replicas: config 3, stream 1" in differs["error"]["message"]

        updated = report_of(run(vigild_binary, "cluster", "check", str(three), "--update-stream", "--timeout-ms", "15000"), ok=True)
        assert updated["stream"]["replicas"] == 3 and updated["differences"] == [], updated
        again = report_of(run(vigild_binary, "cluster", "check", str(three)), ok=True)
        assert again["settings"]["replicas"] == {"config": 3, "stream": 3}, again
        # The config of 1 now differs the other way.
        assert failure(run(vigild_binary, "cluster", "check", str(one)), "stream_differs")["differences"][0]["stream"] == 3


def test_a_standalone_nodes_state_directory_is_refused_by_a_cluster_node(vigild, vigild_binary, tmp_path, nats):
    """It holds state the stream does not have: in its journal (killed), then in its final
    snapshot (stopped): a cluster node refuses to start on it, saying so."""
    import signal
    from pinclient import PinClient
    state = tmp_path / "state"
    cfg = write_config(tmp_path / "node.yaml", {"state": {"directory": str(state)},
                                                 "cluster": {"urls": [f"nats://127.0.0.1:{nats}"], "name": "E2E", "node_id": "n1",
                                                             "user": "vigil", "password": "s3cret"}})

    def node_refusal() -> str:
        p = subprocess.run([str(vigild_binary), "--config", str(cfg), "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert p.returncode == 1 and str(state) in p.stderr, p.stderr
        return p.stderr

    alone = vigild({"state": {"directory": str(state)}})
    with PinClient(alone.port) as c:
        c.create(48.0, 2.0, "kept by the journal")
    alone.reported = True  # killed on purpose: teardown expects no clean exit
    alone.stop(signal.SIGKILL)  # no final snapshot: the pin is in the journal only
    assert "its journal holds 1 record(s) of a standalone node" in node_refusal()
    again = vigild({"state": {"directory": str(state)}})
    assert again.stop(signal.SIGTERM) == 0  # the final snapshot holds the pin; the journal after it nothing
    assert "holds a standalone node's state (1 pins" in node_refusal()


def test_a_stream_setting_that_breaks_the_node_keeps_it_from_writing(vigild, vigild_binary, tmp_path, nats):
    """The stream exists in memory storage (made here with nats-py, not vigild): a node stays not
    writable with the difference as its refusal; `check` names it as not updatable, and
    `--update-stream` refuses it, leaving the stream as it is."""
    import asyncio

    import nats as nats_py

    async def create_in_memory():
        nc = await nats_py.connect(f"nats://127.0.0.1:{nats}", user="vigil", password="s3cret")
        try:
            body = {"name": "E2E", "subjects": ["E2E.>"], "retention": "limits", "storage": "memory", "num_replicas": 1,
                    "max_age": 7 * 86400 * 10**9, "max_bytes": 1 << 30, "discard": "old", "duplicate_window": 120 * 10**9}
            reply = json.loads((await nc.request("$JS.API.STREAM.CREATE.E2E", json.dumps(body).encode(), timeout=5)).data)
            assert "error" not in reply, reply
        finally:
            await nc.close()

    asyncio.run(create_in_memory())
    node = vigild({"cluster": {"urls": [f"nats://127.0.0.1:{nats}"], "name": "E2E", "node_id": "n1",
                               "user": "vigil", "password": "s3cret"}})
    node.wait_for_log("the stream is not usable.*storage: config file, stream memory", 15)
    from wsraw import http_get
    health = json.loads(http_get(node.admin_port, "/healthz").body)
    assert health["cluster"]["writable"] is False and "storage: config file, stream memory" in health["cluster"]["refusal"], health
    path = cluster_config(tmp_path, nats)
    differs = failure(run(vigild_binary, "cluster", "check", str(path)), "stream_differs")
    assert differs["differences"] == [{"key": "storage", "config": "file", "stream": "memory", "updatable": False}], differs
    refused = failure(run(vigild_binary, "cluster", "check", str(path), "--update-stream"), "stream_differs")
    assert refused["error"]["message"].startswith("--update-stream refused: storage: config file, stream memory"), refused
    assert report_of(run(vigild_binary, "cluster", "check", str(path)))["settings"]["storage"]["stream"] == "memory"
