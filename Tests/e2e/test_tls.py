"""wss://: the TLS listener (OpenSSL, driven from vigild's epoll loop).

What it must do: TLS 1.2 minimum and 1.3 preferred with ALPN ``http/1.1`` and session
resumption under both (checked with ``openssl s_client``), plain HTTP on the TLS port and a TLS hello on the plain port refused
cleanly, a stalled handshake dropped at the handshake timeout, the certificate reloaded on
SIGHUP without dropping anyone (a bad file refused, the old pair kept), large and pipelined
messages through partial TLS writes, and node-ws on /echo and /v1 over wss. The pins and panic
modules also run whole over wss (``VIGIL_E2E_SCHEME=wss``, see transport.py and Tests/run-all).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

import transport
from conftest import settle_baseline
from wsraw import RawConn, Timeout

HERE = Path(__file__).resolve().parent
HANDSHAKE_MS = 500


def tls_config(cert: Path, key: Path, **tls) -> dict:
    return {
        "websocket": {"echo": True, "max_message_bytes": 4 * 1024 * 1024, "max_output_buffer_bytes": 16 * 1024 * 1024},
        "http": {"handshake_timeout_ms": HANDSHAKE_MS},
        "tls": dict({"listen": "127.0.0.1:0", "certificate": str(cert), "private_key": str(key)}, **tls),
    }


@pytest.fixture(scope="module")
def server(vigild_module):
    _, cert, key = transport.material()
    return vigild_module(tls_config(cert, key))


def s_client(port: int, *args: str, send: str = "") -> str:
    ca = transport.material()[0]
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
                        "-CAfile", str(ca), "-verify_return_error", *args],
                       input=send, capture_output=True, text=True, timeout=15)
    return p.stdout + p.stderr


def fingerprint(port: int) -> str:
    """SHA-256 of the certificate the server presents (no verification: the tests compare it)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def echo(ws, text: str) -> None:
    ws.send(text)
    assert ws.recv(timeout=5) == text


# -- protocol and ALPN ---------------------------------------------------------------------

def test_s_client_gets_tls13_alpn_http11_and_a_verified_chain(server):
    out = s_client(server.tls_port, "-alpn", "http/1.1")
    assert "TLSv1.3" in out, out
    assert "ALPN protocol: http/1.1" in out, out
    assert "Verify return code: 0 (ok)" in out, out


def test_tls12_is_accepted_with_an_aead_cipher_and_tls11_is_refused(server):
    out = s_client(server.tls_port, "-tls1_2")
    assert "Protocol  : TLSv1.2" in out or "TLSv1.2" in out, out
    assert "ECDHE" in out and ("GCM" in out or "CHACHA20" in out), out
    refused = s_client(server.tls_port, "-tls1_1")
    assert "Cipher is (NONE)" in refused or "alert" in refused or "no protocols available" in refused, refused


def test_a_client_that_offers_only_h2_proceeds_without_alpn(server):
    out = s_client(server.tls_port, "-alpn", "h2")
    assert "No ALPN negotiated" in out, out
    assert "Verify return code: 0 (ok)" in out, out


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_s_client_resumes_its_session(server, tmp_path, version):
    # Resumption costs the daemon nothing per idle connection: its session tickets are stateless
    # (the session travels encrypted in the ticket; the server-side cache keeps none for TLS 1.3),
    # so this stays on (docs/BENCHMARKS.md, idle wss). The request makes vigild answer and close,
    # so s_client has read the TLS 1.3 tickets (sent after the handshake) before it saves them.
    session = tmp_path / "session.pem"
    request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    first = s_client(server.tls_port, version, "-ign_eof", "-sess_out", str(session), send=request)
    protocol = "TLSv1.3" if version == "-tls1_3" else "TLSv1.2"
    assert f"New, {protocol}" in first, first
    assert session.exists() and session.stat().st_size > 0, f"no session to resume (no ticket?):\n{first}"
    second = s_client(server.tls_port, version, "-ign_eof", "-sess_in", str(session), send=request)
    assert f"Reused, {protocol}" in second, second
    assert "HTTP/1.1 " in second  # the resumed connection carried the request and its answer


def test_min_version_13_refuses_tls12(vigild):
    _, cert, key = transport.material()
    d = vigild(tls_config(cert, key, min_version="1.3"))
    assert "TLSv1.3" in s_client(d.tls_port)
    out = s_client(d.tls_port, "-tls1_2")
    assert "Cipher is (NONE)" in out or "alert" in out, out


# -- the wrong protocol on either port -----------------------------------------------------

def test_plain_http_on_the_tls_port_gets_a_plain_400(server):
    with RawConn.connect(server.tls_port) as c:
        c.send(b"GET /v1 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\r\n")
        resp = c.read_response()
        assert resp.status == 400
        assert b"speaks TLS" in resp.body
        assert c.wait_eof(5)


def test_a_tls_hello_on_the_plain_port_is_refused(server):
    ctx = transport.client_context()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            ctx.wrap_socket(raw, server_hostname="localhost")
    # The raw view: the ClientHello is not HTTP, so the answer is a 400 and a close.
    with RawConn.connect(server.port) as c:
        c.send(bytes.fromhex("160301003c0100003803030000000000000000000000000000000000000000000000000000000000000000000002130101000000"))
        assert c.read_response().status == 400
        assert c.wait_eof(5)


# -- the handshake is bounded -----------------------------------------------------------------

@pytest.mark.parametrize("sent", [b"", bytes.fromhex("1603010200")], ids=["silent", "half-hello"])
def test_a_stalled_tls_handshake_is_dropped_at_the_handshake_timeout(vigild, sent):
    _, cert, key = transport.material()
    d = vigild(tls_config(cert, key))
    baseline = settle_baseline(d)
    with RawConn.connect(d.tls_port) as c:
        started = time.monotonic()
        c.send(sent)
        with pytest.raises(Timeout):
            c.read_exact(1, HANDSHAKE_MS / 1000 / 2)  # nothing comes back before the deadline
        assert c.wait_eof(HANDSHAKE_MS / 1000 * 6), "the server kept the stalled handshake open"
        elapsed = time.monotonic() - started
        assert HANDSHAKE_MS / 1000 * 0.8 <= elapsed <= HANDSHAKE_MS / 1000 * 6, elapsed
        assert c.buf == b"", "a stalled TLS handshake gets no HTTP response (it could not be read)"
    d.wait_fds_at_most(baseline, 5)


# -- data through TLS ---------------------------------------------------------------------------

def test_large_and_pipelined_messages_survive_partial_tls_writes(server):
    url, opts = f"wss://localhost:{server.tls_port}/echo", {"ssl": transport.threaded_client_context()}
    with connect(url, max_size=8 * 1024 * 1024, compression=None, **opts) as ws:
        big = os.urandom(3 * 1024 * 1024)
        ws.send(big)
        assert ws.recv(timeout=20) == big
        texts = [f"message {i} " + "x" * (i % 300) for i in range(2000)]
        for t in texts:
            ws.send(t)
        for t in texts:
            assert ws.recv(timeout=10) == t


# -- certificate reload ---------------------------------------------------------------------

def test_sighup_reloads_the_certificate_without_dropping_connections(vigild, tmp_path):
    a_cert, a_key = transport.make_certificate(tmp_path, "a")
    b_cert, b_key = transport.make_certificate(tmp_path, "b")
    cert, key = tmp_path / "live.pem", tmp_path / "live.key"
    shutil.copy(a_cert, cert)
    shutil.copy(a_key, key)
    d = vigild(tls_config(cert, key))
    first = fingerprint(d.tls_port)
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    # websockets' sync client on TLS 1.3 loses about one upgrade request in 1,500 (its reader
    # thread and the writer share one SSL object): see transport.threaded_client_context.
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with connect(f"wss://localhost:{d.tls_port}/echo", ssl=ctx, compression=None) as old:
        echo(old, "before")
        shutil.copy(b_cert, cert)
        shutil.copy(b_key, key)
        d.proc.send_signal(signal.SIGHUP)
        d.wait_for_log("TLS certificate reloaded", 5, what="the reload line")
        echo(old, "after the reload, on the old session")
        second = fingerprint(d.tls_port)
        assert second != first
        # A file that cannot be used is refused; the pair in use stays.
        cert.write_text("not a certificate\n")
        d.proc.send_signal(signal.SIGHUP)
        d.wait_for_log("TLS reload refused", 5, what="the refusal line")
        assert fingerprint(d.tls_port) == second
        echo(old, "still here")
        with connect(f"wss://localhost:{d.tls_port}/echo", ssl=ctx, compression=None) as new:
            echo(new, "new handshake, old pair")


def test_check_config_refuses_a_key_that_does_not_match_the_certificate(vigild_binary, tmp_path):
    a_cert, _ = transport.make_certificate(tmp_path, "a")
    _, b_key = transport.make_certificate(tmp_path, "b")
    path = tmp_path / "bad.yaml"
    path.write_text(f'tls:\n  listen: "127.0.0.1:0"\n  certificate: "{a_cert}"\n  private_key: "{b_key}"\n')
    p = subprocess.run([str(vigild_binary), "--check-config", str(path)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert "does not match" in p.stderr, p.stderr


# -- node-ws over wss --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None or not Path("/usr/share/nodejs/ws/package.json").is_file():
        pytest.skip("node and node-ws are needed (apt-get install -y nodejs node-ws)")
    return node


@pytest.mark.parametrize("script,path", [("node_echo_client.js", "/echo"), ("node_v1_client.js", "/v1")])
def test_node_ws_over_wss(node, server, script, path):
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
    p = subprocess.run([node, str(HERE / script), f"wss://localhost:{server.tls_port}{path}", str(transport.material()[0])],
                       capture_output=True, text=True, timeout=30, env=env)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(last)["ok"] is True
