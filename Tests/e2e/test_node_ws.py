"""/echo through a second independent client: Debian's node-ws (``node_echo_client.js``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE_WS = Path("/usr/share/nodejs/ws")


@pytest.fixture(scope="module")
def node():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed (apt-get install -y nodejs node-ws)")
    if not (NODE_WS / "package.json").is_file():
        pytest.skip(f"node-ws not found at {NODE_WS} (apt-get install -y node-ws)")
    return node


@pytest.fixture(scope="module")
def server(vigild_module):
    return vigild_module({"websocket": {"echo": True}})


def run_client(node: str, url: str) -> tuple[int, dict | None, str]:
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
    p = subprocess.run([node, str(HERE / "node_echo_client.js"), url], capture_output=True, text=True,
                       timeout=20, env=env)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    try:
        result = json.loads(last)
    except json.JSONDecodeError:
        result = None
    return p.returncode, result, p.stdout + p.stderr


def test_node_ws_echo_round_trip_and_close(node, server):
    rc, result, output = run_client(node, f"ws://127.0.0.1:{server.port}/echo")
    assert rc == 0 and result and result.get("ok"), f"node client failed (exit {rc}):\n{output}"
    assert result["closeCode"] == 1000
    assert result["echoed"] == 6


def test_node_ws_concurrent_clients(node, server):
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
    url = f"ws://127.0.0.1:{server.port}/echo"
    procs = [subprocess.Popen([node, str(HERE / "node_echo_client.js"), url], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env) for _ in range(4)]
    outputs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        outputs.append((p.returncode, out))
    bad = [(rc, out) for rc, out in outputs if rc != 0]
    assert not bad, f"{len(bad)} of 4 node clients failed: {bad}"
