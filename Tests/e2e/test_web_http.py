"""The web pages over raw HTTP against a real vigild (no browser): what is served, with which
headers, and that nothing else is (hostile paths), and that production serves no pages."""

from __future__ import annotations

import json
import socket

import pytest

import transport
from vigilproc import REPO
from wsraw import RawConn, plain_request

CONFIG = {"web": {"enabled": True, "root": str(REPO / "web"), "tile_url": "https://{s}.tile.example.org/{z}/{x}/{y}.png"}}


def get(port: int, path: str, method: str = "GET", extra: str = ""):
    with RawConn.connect(port, timeout=5) as c:
        c.send(plain_request(path, method=method, extra=extra))
        resp = c.read_response(5)
        assert c.wait_eof(3.0), "the connection closes after the answer"
        return resp


@pytest.fixture(scope="module")
def server(vigild_module):
    return vigild_module(CONFIG)


@pytest.mark.parametrize("path, kind, origin", [
    ("/watch", "text/html; charset=utf-8", REPO / "web/watch.html"),
    ("/map", "text/html; charset=utf-8", REPO / "web/map.html"),
    ("/watch.js", "text/javascript; charset=utf-8", REPO / "web/watch.js"),
    ("/vigil/client.js", "text/javascript; charset=utf-8", REPO / "clients/js/src/client.js"),
    ("/style.css", "text/css; charset=utf-8", REPO / "web/style.css"),
])
def test_pages_and_assets_are_served_with_their_type_and_policies(server, path, kind, origin):
    r = get(server.port, path)
    assert r.status == 200
    assert r.body == origin.read_bytes()
    assert r.header("content-type") == kind
    csp = r.header("content-security-policy")
    assert csp.startswith("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https://*.tile.example.org;")
    assert r.header("x-content-type-options") == "nosniff"
    assert r.header("referrer-policy") == "no-referrer"
    assert r.header("cache-control") == "no-cache"
    etag = r.header("etag")
    again = get(server.port, path, extra=f"If-None-Match: {etag}\r\n")
    assert again.status == 304 and again.body == b"" and again.header("etag") == etag
    assert int(again.header("content-length")) == len(origin.read_bytes())


def test_site_json_names_the_tiles(server):
    r = get(server.port, "/site.json")
    assert r.status == 200 and r.header("content-type") == "application/json"
    assert b'"tile_url":"https://{s}.tile.example.org/{z}/{x}/{y}.png"' in r.body


def test_site_json_says_where_the_map_opens(server, vigild):
    site = json.loads(get(server.port, "/site.json").body)
    assert (site["map_center"], site["map_zoom"]) == ([52.52, 13.405], 13), "the built-in view"
    d = vigild(dict(CONFIG, web=dict(CONFIG["web"], map_center=[-33.8688, 151.2093], map_zoom=9)))
    site = json.loads(get(d.port, "/site.json").body)
    assert (site["map_center"], site["map_zoom"]) == ([-33.8688, 151.2093], 9)


@pytest.mark.parametrize("path", [
    "/../config/test.yaml", "/vigil/../../config/test.yaml", "/%2e%2e/config/test.yaml", "/vigil/%2e%2e/emitter.js",
    "/.%2e/Package.swift", "//etc/passwd", "/vigil/", "/vigil", "/vendor/leaflet/", "/web/watch.html",
    "/watch.html%00.js", "/watch/", "/../../../../../../etc/passwd", "/vigil/..%2f..%2fPackage.swift",
])
def test_nothing_else_is_reachable(server, path):
    r = get(server.port, path)
    assert r.status == 404, f"{path}: {r.status} {r.body[:200]!r}"


def test_other_methods_are_refused(server):
    r = get(server.port, "/watch", method="POST")
    assert r.status == 405 and r.header("allow") == "GET, HEAD"


def test_pages_are_off_by_default(vigild):
    d = vigild({})
    for path in ("/watch", "/map", "/vigil/client.js", "/site.json"):
        assert get(d.port, path).status == 404



def test_assets_come_whole_over_tls(vigild):
    """The largest asset through the TLS listener (its body is a shared chunk written in pieces)."""
    d = vigild(dict(CONFIG, tls=transport.tls_section()))
    expected = get(d.port, "/vendor/leaflet/leaflet.js").body
    with socket.create_connection(("127.0.0.1", d.tls_port), timeout=5) as raw:
        with transport.client_context().wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(plain_request("/vendor/leaflet/leaflet.js", host="localhost"))
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert f"Content-Length: {len(expected)}\r\n".encode() in head + b"\r\n"
    assert body == expected
