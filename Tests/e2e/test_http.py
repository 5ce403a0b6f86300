"""HTTP endpoints and the RFC 6455 §4.2.1 opening handshake, byte by byte over raw sockets.

Every non-101 answer must carry ``Connection: close`` and be followed by the server
closing the connection; ``expect_error`` checks both for every case.
"""

from __future__ import annotations

import json

import pytest

from conftest import shared_server_fixture

from wsraw import Closed, RawConn, accept_for, make_key, plain_request, upgrade_request

CONFIG = {"http": {"handshake_timeout_ms": 2000}, "websocket": {"echo": True}}


_server_shared, _server = shared_server_fixture("server", CONFIG)


def exchange(port: int, data: bytes, timeout: float = 5.0) -> tuple[RawConn, "Response"]:  # noqa: F821
    conn = RawConn.connect(port, timeout=timeout)
    conn.send(data)
    return conn, conn.read_response(timeout)


def expect_error(port: int, data: bytes, status: int) -> "Response":  # noqa: F821
    """Send ``data``, expect ``status`` with Connection: close, then the server's EOF."""
    conn, resp = exchange(port, data)
    with conn:
        assert resp.status == status, (
            f"expected {status}, got {resp.status} {resp.reason}\nrequest: {data[:300]!r}\n"
            f"response head: {resp.raw_head!r}")
        conn_hdr = (resp.header("connection") or "").lower()
        assert "close" in conn_hdr, f"{status} response lacks 'Connection: close': {resp.raw_head!r}"
        assert conn.wait_eof(3.0), f"server kept the connection open after {status} + Connection: close"
    return resp


def expect_upgrade(port: int, data: bytes, key: str) -> "Response":  # noqa: F821
    conn, resp = exchange(port, data)
    with conn:
        assert resp.status == 101, f"expected 101, got {resp.status}: {resp.raw_head!r}\nrequest: {data!r}"
        assert resp.header("sec-websocket-accept") == accept_for(key), resp.raw_head
        assert "websocket" in (resp.header("upgrade") or "").lower(), resp.raw_head
        assert "upgrade" in (resp.header("connection") or "").lower(), resp.raw_head
        # The upgraded connection stays open: nothing arrives and no EOF within a short window.
        assert not conn.wait_eof(0.3), "server closed the connection right after 101"
    return resp


# -- plain HTTP ---------------------------------------------------------------------------

def test_healthz_ok_json(server):
    conn, resp = exchange(server.port, plain_request("/healthz"))
    with conn:
        assert resp.status == 200, resp.raw_head
        assert (resp.header("content-type") or "").split(";")[0].strip() == "application/json", resp.raw_head
        body = json.loads(resp.body)
        # ok or not, nothing more: how many people are connected is the operator's business.
        assert body == {"status": "ok"}, f"healthz body: {resp.body!r}"
        assert "close" in (resp.header("connection") or "").lower(), resp.raw_head
        assert conn.wait_eof(3.0), "server kept the connection open after /healthz"


def test_healthz_head_names_the_get_length_and_sends_no_body(server):
    _, get = exchange(server.port, plain_request("/healthz"))
    conn = RawConn.connect(server.port, timeout=5)
    with conn:
        conn.send(plain_request("/healthz", method="HEAD"))
        head = conn.read_until(b"\r\n\r\n", 5.0).decode("latin-1")
        assert head.startswith("HTTP/1.1 200"), head
        lengths = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("content-length:")]
        # RFC 9110 §8.6: a HEAD response's Content-Length, if sent, is what the GET would carry.
        assert lengths == [str(len(get.body))], head
        assert conn.wait_eof(3.0), "server kept the connection open after HEAD /healthz"
        assert bytes(conn.buf) == b"", f"HEAD response carried a body: {bytes(conn.buf)!r}"


def test_unknown_path_404(server):
    expect_error(server.port, plain_request("/no/such/thing"), 404)


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"GET /healthz\r\nHost: x\r\n\r\n",                      # no HTTP version
    b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n",             # header without a colon
    b"GET  HTTP/1.1\r\nHost: x\r\n\r\n",                     # empty target
    b"GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n",       # four tokens in the request line
    b"GET /healthz FTP/1.1\r\nHost: x\r\n\r\n",              # not HTTP
    b"\x00\x01\x02\x03\r\n\r\n",
], ids=["garbage", "no-version", "no-colon", "empty-target", "extra-token", "not-http", "binary"])
def test_malformed_request_400(server, raw):
    expect_error(server.port, raw, 400)


def test_request_head_over_limit_431(server):
    # Default max_request_head_bytes is 8192; this head is ~8.5 KiB.
    req = plain_request("/healthz", extra="X-Pad: " + "a" * 8300 + "\r\n")
    assert len(req) > 8192
    try:
        expect_error(server.port, req, 431)
    except (Closed, ConnectionResetError, BrokenPipeError) as e:
        pytest.fail(f"no 431 response ({type(e).__name__}: {e}); the server should answer 431 and close "
                    f"gracefully (answer, shut down its write side, drain a little) rather than reset", pytrace=False)


def test_request_head_under_limit_ok(server):
    req = plain_request("/healthz", extra="X-Pad: " + "a" * 7900 + "\r\n")
    assert 7900 < len(req) < 8192
    conn, resp = exchange(server.port, req)
    with conn:
        assert resp.status == 200, f"a {len(req)}-byte head is under the 8192 limit: {resp.raw_head!r}"


# -- the WebSocket handshake --------------------------------------------------------------

@pytest.mark.parametrize("path", ["/echo", "/v1"])
def test_upgrade_101_with_correct_accept(server, path):
    key = make_key()
    expect_upgrade(server.port, upgrade_request(path, key=key), key)


def test_rfc_example_key(server):
    # RFC 6455 §1.3: this key must be answered with s3pPLMBiTxaQ9kYGzzhZRbK+xOo=.
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    resp = expect_upgrade(server.port, upgrade_request("/echo", key=key), key)
    assert resp.header("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_wrong_method_405(server, method):
    expect_error(server.port, upgrade_request("/v1", method=method), 405)


def test_http10_400(server):
    expect_error(server.port, upgrade_request("/v1", version="HTTP/1.0"), 400)


def test_missing_host_400(server):
    expect_error(server.port, upgrade_request("/v1", headers={"Host": None}), 400)


def test_no_upgrade_header_426(server):
    expect_error(server.port, upgrade_request("/v1", headers={"Upgrade": None}), 426)


def test_upgrade_not_websocket_400(server):
    expect_error(server.port, upgrade_request("/v1", headers={"Upgrade": "h2c"}), 400)


@pytest.mark.parametrize("value", ["keep-alive", "close", "Upgradeish"])
def test_connection_without_upgrade_token_400(server, value):
    expect_error(server.port, upgrade_request("/v1", headers={"Connection": value}), 400)


@pytest.mark.parametrize("headers", [
    {"Connection": "keep-alive, Upgrade"},
    {"Connection": "UPGRADE"},
    {"Connection": "upgrade,keep-alive"},
    {"Upgrade": "WebSocket"},
], ids=["keep-alive-comma-upgrade", "upper-case", "no-space-list", "upgrade-value-mixed-case"])
def test_connection_and_upgrade_tokens_case_insensitive(server, headers):
    key = make_key()
    expect_upgrade(server.port, upgrade_request("/echo", key=key, headers=headers), key)


@pytest.mark.parametrize("version", ["8", "12", "14", None], ids=["8", "12", "14", "missing"])
def test_bad_version_426_with_version_header(server, version):
    resp = expect_error(server.port, upgrade_request("/v1", headers={"Sec-WebSocket-Version": version}), 426)
    assert (resp.header("sec-websocket-version") or "").strip() == "13", (
        f"426 must advertise 'Sec-WebSocket-Version: 13': {resp.raw_head!r}")


@pytest.mark.parametrize("key", [
    None,
    "",
    "AAAAAAAAAAAAAAAAAAAA",        # base64 of 15 bytes
    "AAAAAAAAAAAAAAAAAAAAAAAAAA==", # base64 of 19 bytes
    "not base64 at all!!!!!!!",     # 24 chars, not base64
], ids=["missing", "empty", "15-bytes", "19-bytes", "not-base64"])
def test_bad_key_400(server, key):
    expect_error(server.port, upgrade_request("/v1", headers={"Sec-WebSocket-Key": key}), 400)


def test_upgrade_unknown_path_404(server):
    expect_error(server.port, upgrade_request("/nope"), 404)


def test_echo_disabled_404(vigild):
    d = vigild({"websocket": {"echo": False}})
    expect_error(d.port, upgrade_request("/echo"), 404)
    # /v1 is unaffected by the echo switch.
    key = make_key()
    expect_upgrade(d.port, upgrade_request("/v1", key=key), key)


@pytest.mark.parametrize("offer, selected", [
    ("vigil.v1", "vigil.v1"),
    ("foo, vigil.v1", "vigil.v1"),
    ("foo", None),
    (None, None),
])
def test_v1_subprotocol_selection(server, offer, selected):
    key = make_key()
    resp = expect_upgrade(server.port, upgrade_request("/v1", key=key, protocols=offer), key)
    assert resp.header("sec-websocket-protocol") == selected, (
        f"offered {offer!r}: expected Sec-WebSocket-Protocol {selected!r}, head: {resp.raw_head!r}")


def test_healthz_after_full_request_then_half_close(server):
    # A client may send its whole request and shut its write side (nc -N, curl
    # --http1.1 with a closed stdin); the buffered request must still be answered.
    import socket
    conn = RawConn.connect(server.port)
    with conn:
        conn.send(plain_request("/healthz"))
        conn.sock.shutdown(socket.SHUT_WR)
        resp = conn.read_response(5.0)
        assert resp.status == 200, resp.raw_head
