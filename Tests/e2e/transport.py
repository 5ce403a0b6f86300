"""ws:// or wss:// for the end-to-end suite.

``VIGIL_E2E_SCHEME=wss`` runs a module's daemons with a TLS listener beside the plain one, and
``PinClient`` (the pins and panic tests' client) then connects over wss:// with the test CA:
the same tests, the same assertions, over TLS. ``Tests/run-all`` runs the pins and panic
modules both ways.

The certificates are made here, once per test process, with the ``openssl`` command: a CA, and
a server certificate it signs for ``localhost`` and ``127.0.0.1``.
"""

from __future__ import annotations

import functools
import os
import ssl
import subprocess
import tempfile
from pathlib import Path

SCHEME = os.environ.get("VIGIL_E2E_SCHEME", "ws")
if SCHEME not in ("ws", "wss"):
    raise SystemExit(f"VIGIL_E2E_SCHEME must be ws or wss, not {SCHEME!r}")

# The TLS port of each running daemon, by its plain port (filled in by the launcher).
TLS_PORTS: dict[int, int] = {}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificate(directory: Path, name: str = "server", *, days: int = 2) -> tuple[Path, Path]:
    """A key and a certificate for localhost/127.0.0.1 signed by the CA in ``directory`` (made
    on first use). Returns (certificate chain, private key)."""
    ca_key, ca_cert = directory / "ca.key", directory / "ca.pem"
    if not ca_cert.exists():
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(ca_key), "-out", str(ca_cert), "-days", str(days), "-subj", "/CN=vigil test CA",
                 cwd=directory)
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
             "-out", str(csr), "-subj", "/CN=localhost", cwd=directory)
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", str(days), "-extfile", str(ext), cwd=directory)
    return cert, key


@functools.cache
def material() -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) for this test process."""
    directory = Path(tempfile.mkdtemp(prefix="vigil-tls-"))
    cert, key = make_certificate(directory)
    return directory / "ca.pem", cert, key


def tls_section() -> dict:
    _, cert, key = material()
    return {"listen": "127.0.0.1:0", "certificate": str(cert), "private_key": str(key)}


def client_context() -> ssl.SSLContext:
    """A client context that trusts the test CA (and checks the host name)."""
    ctx = ssl.create_default_context(cafile=str(material()[0]))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def threaded_client_context() -> ssl.SSLContext:
    """The context for Python `websockets`' sync clients: TLS 1.2 at most.

    That client reads in a background thread while the caller's thread writes, on one Python
    SSLSocket, i.e. one OpenSSL `SSL` object, which OpenSSL does not allow to be used from two
    threads at once. Under TLS 1.3 the reader thread processes the server's NewSessionTickets
    (sent right after the handshake) just as the other thread writes the upgrade request, and
    about one write in 1,500 is lost inside the client: a capture on loopback showed the client's
    Finished, the server's two tickets, and then nothing from the client until its timeout (the
    request never left it; vigild logs the connection as closed by the peer before any request).
    A single-threaded client (the same request, written before reading) never lost one in 6,000
    connections. TLS 1.2 sends no post-handshake messages (renegotiation is off), so the two
    threads never touch the same state. TLS 1.3 is covered by single-threaded clients instead:
    `openssl s_client`, node-ws and the raw SSL sockets in test_tls.py.
    """
    ctx = client_context()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def ws_url(port: int, path: str = "/v1") -> tuple[str, dict]:
    """The URL (and `connect` options) for a client of the daemon whose plain port is ``port``."""
    if SCHEME == "wss":
        return f"wss://localhost:{TLS_PORTS[port]}{path}", {"ssl": threaded_client_context()}
    return f"ws://127.0.0.1:{port}{path}", {}
