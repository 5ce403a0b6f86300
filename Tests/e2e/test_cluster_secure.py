"""How vigild reaches NATS securely (issue 16), from the command line, against real nats-servers.

`vigild cluster check FILE` connects as a node would and asks JetStream for the stream:
- over TLS (the client upgrades after the server's plaintext INFO), to `tls://localhost:PORT`,
  a host name resolved off the loop and checked against the server's certificate, with the CA
  this test makes with the `openssl` command; a server with `verify: true` gets the node's
  certificate; a CA that did not sign the server's certificate is refused with the reason;
- as an nkey user (`cluster.nkey_seed_file`), and as a JWT user (`cluster.creds_file`) on a
  server in operator mode: the operator, account and user keys and JWTs are made here, with
  Python's `cryptography` (Ed25519) and the standard library's base32 and CRC-16, so the nkey
  encoding is checked against an implementation that is not Vigil's.
Secrets never appear in what vigild prints. Tests/setup-deps installs nats-server, openssl and
the `cryptography` package.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import clustercheck
from natsproc import free_port
from vigilproc import write_config

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"




def run(binary, *args, timeout=20):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Tests/make-test-pki: a CA, a server certificate for localhost and 127.0.0.1, a client certificate, another CA."""
    d = tmp_path_factory.mktemp("pki")
    subprocess.run(["sh", str(Path(__file__).resolve().parent.parent / "make-test-pki"), str(d)], check=True)
    return d


@pytest.fixture
def nats(tmp_path):
    """Starts `nats-server -js` with a config text on a loopback port; returns the port."""
    procs = []

    def start(conf: str) -> int:
        port = free_port()
        path = tmp_path / f"nats-{port}.conf"
        path.write_text(conf)
        proc = subprocess.Popen([NATS, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp_path / f"js-{port}"),
                                 "-c", str(path), "-l", str(tmp_path / f"nats-{port}.log")])
        procs.append(proc)
        deadline = time.monotonic() + 10
        while True:  # no readiness signal but the port itself
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port
            except OSError:
                assert proc.poll() is None, f"nats-server exited at start: {(tmp_path / f'nats-{port}.log').read_text()[-500:]}"
                assert time.monotonic() < deadline, "nats-server did not listen within 10 s"
                time.sleep(0.02)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def tls_block(pki, verify=False) -> str:
    extra = f', ca_file: "{pki / "ca.pem"}", verify: true' if verify else ""
    return f'tls {{ cert_file: "{pki / "server.pem"}", key_file: "{pki / "server.key"}"{extra} }}\n'


def cluster(tmp_path, **keys):
    return write_config(tmp_path / "cluster.yaml", {"cluster": {"name": "SEC", "node_id": "n1", **keys}})


def failure(p, kind: str) -> str:
    """The failed check's message, after checking its shape and kind."""
    return clustercheck.failure(p, kind)["error"]["message"]


def check_ok(vigild_binary, path, tls: bool):
    p = run(vigild_binary, "cluster", "check", str(path), "--create-stream")
    report = clustercheck.report_of(p, ok=True)
    assert report["stream"]["name"] == "SEC" and report["tls"] is tls, report
    return p


def test_check_over_tls_with_a_host_name(vigild_binary, tmp_path, pki, nats):
    port = nats(tls_block(pki))
    path = cluster(tmp_path, urls=[f"tls://localhost:{port}"], tls={"ca_file": str(pki / "ca.pem")})
    assert run(vigild_binary, "--check-config", str(path)).returncode == 0
    check_ok(vigild_binary, path, tls=True)
    # A nats:// URL to the same server without TLS: the server requires it, vigild says so.
    plain = write_config(tmp_path / "plain.yaml", {"cluster": {"urls": [f"nats://127.0.0.1:{port}"], "node_id": "n1"}})
    p = run(vigild_binary, "cluster", "check", str(plain), "--timeout-ms", "1000")
    assert "the server requires TLS" in failure(p, "tls"), p.stdout


def test_a_verifying_server_gets_the_nodes_certificate(vigild_binary, tmp_path, pki, nats):
    port = nats(tls_block(pki, verify=True))
    without = cluster(tmp_path, urls=[f"nats://127.0.0.1:{port}"], tls={"ca_file": str(pki / "ca.pem")})
    p = run(vigild_binary, "cluster", "check", str(without), "--timeout-ms", "1000")
    # TLS 1.3: the server refuses the missing certificate after the client's handshake, in an alert.
    message = failure(p, "tls")
    assert "alert" in message and "set cluster.tls.cert_file and cluster.tls.key_file" in message, message
    with_cert = cluster(tmp_path, urls=[f"nats://127.0.0.1:{port}"],
                        tls={"ca_file": str(pki / "ca.pem"), "cert_file": str(pki / "client.pem"), "key_file": str(pki / "client.key")})
    check_ok(vigild_binary, with_cert, tls=True)


def test_a_certificate_from_another_ca_is_refused_with_the_reason(vigild_binary, tmp_path, pki, nats):
    port = nats(tls_block(pki))
    wrong = cluster(tmp_path, urls=[f"tls://localhost:{port}"], tls={"ca_file": str(pki / "other-ca.pem")})
    p = run(vigild_binary, "cluster", "check", str(wrong), "--timeout-ms", "1000")
    message = failure(p, "tls")
    assert "certificate verify failed" in message and "unable to get local issuer certificate" in message, message
    # Without a CA file the system's CAs are asked, and the hint names the key to set.
    system = cluster(tmp_path, urls=[f"tls://localhost:{port}"])
    p = run(vigild_binary, "cluster", "check", str(system), "--timeout-ms", "1000")
    assert "cluster.tls.ca_file names the CA" in failure(p, "tls"), p.stdout


# nkeys made independently of Vigil: prefix byte(s), 32 key bytes, CRC-16/XMODEM little-endian, base32.
ROLE = {"O": 14 << 3, "A": 0, "U": 20 << 3}


def _b32(b: bytes) -> str:
    return base64.b32encode(b).decode().rstrip("=")


def _with_crc(b: bytes) -> bytes:
    crc = binascii.crc_hqx(b, 0)
    return b + bytes([crc & 0xFF, crc >> 8])


def _b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


class NKey:
    def __init__(self, role: str):
        raw = os.urandom(32)
        self.key = Ed25519PrivateKey.from_private_bytes(raw)
        public = self.key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public = _b32(_with_crc(bytes([ROLE[role]]) + public))
        r = ROLE[role]
        self.seed = _b32(_with_crc(bytes([(18 << 3) | (r >> 5), (r & 31) << 3]) + raw))

    def jwt(self, claims: dict) -> str:
        """A NATS v2 JWT issued (signed) by this key."""
        claims = dict(claims, iat=int(time.time()), iss=self.public)
        claims["jti"] = _b32(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest())
        head = _b64u(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
        body = _b64u(json.dumps(claims).encode())
        return f"{head}.{body}." + _b64u(self.key.sign(f"{head}.{body}".encode()))


def secret(path, text: str, mode: int = 0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_an_nkey_user(vigild_binary, tmp_path, nats):
    user = NKey("U")
    port = nats(f"authorization {{ users: [ {{ nkey: {user.public} }} ] }}\n")
    seed_file = secret(tmp_path / "vigil.nk", user.seed + "\n")
    path = cluster(tmp_path, urls=[f"nats://localhost:{port}"], nkey_seed_file=str(seed_file))
    # The public key vigild derives from the seed is the one Python derived.
    key = run(vigild_binary, "cluster", "public-key", str(path))
    assert key.returncode == 0 and key.stdout.strip() == user.public, key.stderr
    p = check_ok(vigild_binary, path, tls=False)
    assert user.seed not in p.stdout + p.stderr + key.stdout + key.stderr
    # Another user's seed: refused by the server, with its reason.
    other = secret(tmp_path / "other.nk", NKey("U").seed)
    p = run(vigild_binary, "cluster", "check", str(cluster(tmp_path, urls=[f"nats://127.0.0.1:{port}"], nkey_seed_file=str(other))),
            "--timeout-ms", "1000")
    assert "Authorization Violation" in failure(p, "auth"), p.stdout
    # A seed every user of the machine may read is refused before any connection.
    secret(tmp_path / "vigil.nk", user.seed, 0o644)
    p = run(vigild_binary, "--check-config", str(cluster(tmp_path, urls=[f"nats://127.0.0.1:{port}"], nkey_seed_file=str(seed_file))))
    assert p.returncode == 1 and "cluster.nkey_seed_file" in p.stderr and "chmod 600" in p.stderr, p.stderr
    assert user.seed not in p.stderr
    # `cluster check` says the same as JSON (kind config).
    p = run(vigild_binary, "cluster", "check", str(cluster(tmp_path, urls=[f"nats://127.0.0.1:{port}"], nkey_seed_file=str(seed_file))))
    assert "chmod 600" in failure(p, "config") and user.seed not in p.stdout


def test_a_creds_file_in_operator_mode_over_tls(vigild_binary, tmp_path, pki, nats):
    operator, account, system, user = NKey("O"), NKey("A"), NKey("A"), NKey("U")
    unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1, "leaf": -1}
    operator_jwt = operator.jwt({"sub": operator.public, "name": "op", "nats": {"type": "operator", "version": 2}})
    account_jwt = operator.jwt({"sub": account.public, "name": "vigil", "nats": {
        "limits": {**unlimited, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1},
        "default_permissions": {"pub": {}, "sub": {}}, "type": "account", "version": 2}})
    system_jwt = operator.jwt({"sub": system.public, "name": "SYS", "nats": {"limits": unlimited, "type": "account", "version": 2}})
    user_jwt = account.jwt({"sub": user.public, "name": "node", "nats": {
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}})
    port = nats(f'operator: "{operator_jwt}"\nsystem_account: {system.public}\nresolver: MEMORY\n'
                f'resolver_preload: {{ {account.public}: "{account_jwt}", {system.public}: "{system_jwt}" }}\n' + tls_block(pki))
    creds = secret(tmp_path / "node.creds", f"""-----BEGIN NATS USER JWT-----
{user_jwt}
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.

-----BEGIN USER NKEY SEED-----
{user.seed}
------END USER NKEY SEED------
""")
    path = cluster(tmp_path, urls=[f"tls://localhost:{port}"], creds_file=str(creds), tls={"ca_file": str(pki / "ca.pem")})
    p = check_ok(vigild_binary, path, tls=True)
    assert user.seed not in p.stdout + p.stderr and user_jwt not in p.stdout + p.stderr
    assert run(vigild_binary, "cluster", "public-key", str(path)).stdout.strip() == user.public
    # The same JWT with a seed that is not its user's: the nonce's signature does not verify.
    forged = secret(tmp_path / "forged.creds", creds.read_text().replace(user.seed, NKey("U").seed))
    p = run(vigild_binary, "cluster", "check", str(cluster(tmp_path, urls=[f"tls://localhost:{port}"], creds_file=str(forged),
                                                           tls={"ca_file": str(pki / "ca.pem")})), "--timeout-ms", "1000")
    assert "Authorization Violation" in failure(p, "auth"), p.stdout


@pytest.mark.parametrize("keys, key, text", [
    ({"nkey_seed_file": "/a.nk", "creds_file": "/a.creds"}, "cluster.creds_file", "choose one"),
    ({"creds_file": "/nonexistent/a.creds"}, "cluster.creds_file", "No such file or directory"),
    ({"tls": {"ca_file": "/nonexistent/ca.pem"}}, "cluster.tls.ca_file", "cannot load the CA file"),
    ({"tls": {"cert_file": "/a.pem"}}, "cluster.tls.key_file", "go together"),
])
def test_check_config_names_the_key(vigild_binary, tmp_path, keys, key, text):
    path = cluster(tmp_path, urls=["nats://127.0.0.1:4222"], **keys)
    p = run(vigild_binary, "--check-config", str(path))
    assert p.returncode == 1 and key in p.stderr and text in p.stderr, p.stderr


def test_two_nodes_over_tls_as_an_nkey_user_see_each_others_writes(vigild, tmp_path, pki, nats):
    """The daemon itself, not only `cluster check`: two nodes reach the stream over TLS to a host
    name, as an nkey user, and a pin created on one reaches a subscriber on the other."""
    import pinclient as pc
    from pinclient import PinClient
    from test_cluster import LIMITS, wait_writable

    user = NKey("U")
    port = nats(tls_block(pki) + f"authorization {{ users: [ {{ nkey: {user.public} }} ] }}\n")
    seed_file = secret(tmp_path / "node.nk", user.seed + "\n")
    nodes = []
    for node_id in ("n1", "n2"):
        cfg = pc.pins_config(**LIMITS)
        cfg["cluster"] = {"urls": [f"tls://localhost:{port}"], "name": "SEC", "node_id": node_id,
                          "request_timeout_ms": 2000, "nkey_seed_file": str(seed_file),
                          "tls": {"ca_file": str(pki / "ca.pem")}}
        nodes.append(vigild(cfg))
    for d in nodes:
        assert wait_writable(d)["cluster"]["connected"]
    a, b = PinClient(nodes[0].port), PinClient(nodes[1].port)
    try:
        assert a.subscribe_bbox(52.0, 13.0, 53.0, 14.0) == []
        made = b.ok("pin.create", pin=dict(lat=52.5, lon=13.4, title="over tls", category="hazard"))
        event = a.event()
        assert event["type"] == "pin.added" and event["pin"]["id"] == made["pin"]["id"], event
    finally:
        a.close()
        b.close()
    for d in nodes:
        assert user.seed not in d.stderr_text()
