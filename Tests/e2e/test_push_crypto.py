"""VigilPush against independent implementations, and the stand-ins' own checks.

Swift → Python: ``vigil-push-probe`` (Tests/VigilPushProbe, VigilPush from the command line) makes
a push request for a subscription ``pushservice.py`` created, and the service verifies its VAPID
token and decrypts its body with Python's ``cryptography``; it signs webhooks that
``webhookreceiver.py`` verifies with Python's ``hmac``.  Python → Swift: the RFC 8291 example and
bodies encrypted here are decrypted by the probe.

The stand-ins must be able to fail: a forged or tampered JWT, a wrong ``aud``, an expired or too
distant ``exp``, a body for another key, bad headers, a stale, tampered or replayed webhook are
each refused with their reason, and nothing of them is recorded as delivered.  No daemon runs here;
``vigild push keygen`` and ``public-key`` are run as commands.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

import pushservice
import transport
import webhookreceiver
from pushservice import PushService, b64url, b64url_decode
from vigilproc import REPO
from webhookreceiver import WebhookReceiver

# RFC 8291 Appendix A.
RFC = {
    "plaintext": b"When I grow up, I want to be a watermelon",
    "ua_private": "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94",
    "ua_public": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
    "as_private": "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw",
    "auth": "BTBZMqHH6r4Tts7J_aSIgg",
    "salt": "DGv6ra1nlYgDCS1FRnbzlw",
    "body": "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A"
            "_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
}
SUBJECT = "mailto:ops@vigil.example"


def private_key(scalar_b64url: str) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(b64url_decode(scalar_b64url), "big"), ec.SECP256R1())


def point(key) -> bytes:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


# --- The tests' own sender, independent of VigilPush: bodies and tokens the stand-in must judge ---

def encrypt(plaintext: bytes, p256dh: str, auth: str, *, as_key=None, salt: bytes | None = None,
            delimiter: bytes = b"\x02") -> bytes:
    """RFC 8291 in Python: what an application server sends (``delimiter`` b"" for a broken one)."""
    as_key = as_key or ec.generate_private_key(ec.SECP256R1())
    salt = salt if salt is not None else os.urandom(16)
    ua_public = b64url_decode(p256dh)
    shared = as_key.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ua_public))
    ikm = HKDF(hashes.SHA256(), 32, b64url_decode(auth), b"WebPush: info\x00" + ua_public + point(as_key)).derive(shared)
    cek = HKDF(hashes.SHA256(), 16, salt, b"Content-Encoding: aes128gcm\x00").derive(ikm)
    nonce = HKDF(hashes.SHA256(), 12, salt, b"Content-Encoding: nonce\x00").derive(ikm)
    header = salt + (4096).to_bytes(4, "big") + bytes([65]) + point(as_key)
    return header + AESGCM(cek).encrypt(nonce, plaintext + delimiter, None)


def jwt(key, claims: dict, header: dict | None = None) -> str:
    """An ES256 JWT (raw r||s) signed by ``key``."""
    signing_input = (b64url(json.dumps(header or {"typ": "JWT", "alg": "ES256"}).encode()) + "."
                     + b64url(json.dumps(claims).encode()))
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def vapid(key, claims: dict, k: bytes | None = None, header: dict | None = None) -> str:
    return f"vapid t={jwt(key, claims, header)}, k={b64url(k or point(key))}"


def post(url: str, headers: dict | list, body: bytes, *, timeout: float = 5.0, connection=None):
    """(status, headers, body) of one POST; ``connection`` to reuse a keep-alive connection."""
    scheme, _, rest = url.partition("://")
    hostport, _, path = rest.partition("/")
    if connection is None:
        host, _, port = hostport.rpartition(":")
        connection = (http.client.HTTPSConnection(host, int(port), timeout=timeout, context=transport.client_context())
                      if scheme == "https" else http.client.HTTPConnection(host, int(port), timeout=timeout))
    items = headers.items() if isinstance(headers, dict) else headers
    connection.putrequest("POST", "/" + path, skip_accept_encoding=True)
    for name, value in items:
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


# --- The probe -----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def probe() -> Path:
    for path in (os.environ.get("VIGIL_PUSH_PROBE"), REPO / ".build" / "release" / "vigil-push-probe",
                 REPO / ".build" / "debug" / "vigil-push-probe"):
        if path and Path(path).is_file():
            return Path(path)
    pytest.fail("vigil-push-probe not found: swift build -c release --product vigil-push-probe, or set VIGIL_PUSH_PROBE",
                pytrace=False)


@pytest.fixture
def key_file(tmp_path) -> tuple[Path, ec.EllipticCurvePrivateKey]:
    """An application server key made here (PKCS#8 PEM), as `openssl genpkey` would write it."""
    key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "vapid.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path, key


def run_probe(probe: Path, *args: str, stdin: bytes = b"", ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([str(probe), *args], input=stdin, capture_output=True, timeout=30)
    if ok:
        assert p.returncode == 0, f"vigil-push-probe {args[0]} exited {p.returncode}: {p.stderr.decode()}"
    return p


def swift_request(probe, key_path: Path, subscription, notice: bytes, *, endpoint: str | None = None, ttl: int = 60,
                  extra: tuple[str, ...] = ()) -> tuple[str, list, bytes]:
    """(url, headers, body) of the push request VigilPush makes for ``subscription``."""
    p = run_probe(probe, "request", "--key", str(key_path), "--subject", SUBJECT, "--endpoint", endpoint or subscription.endpoint,
                  "--p256dh", subscription.p256dh, "--auth", subscription.auth, "--ttl", str(ttl), "--allow-loopback-http",
                  *extra, stdin=notice)
    out = json.loads(p.stdout)
    return out["url"], [tuple(h) for h in out["headers"]], base64.b64decode(out["body"])


@pytest.fixture
def service():
    with PushService() as s:
        yield s


# --- Encryption: both directions -----------------------------------------------------------------

def test_the_stand_in_decrypts_the_rfc_example():
    assert pushservice.decrypt(b64url_decode(RFC["body"]), private_key(RFC["ua_private"]), b64url_decode(RFC["auth"])) == RFC["plaintext"]


def test_the_tests_sender_reproduces_the_rfc_example():
    body = encrypt(RFC["plaintext"], RFC["ua_public"], RFC["auth"], as_key=private_key(RFC["as_private"]),
                   salt=b64url_decode(RFC["salt"]))
    assert b64url(body) == RFC["body"]


def test_the_probe_decrypts_the_rfc_example_and_python_bodies(probe):
    p = run_probe(probe, "decrypt", "--scalar", RFC["ua_private"], "--auth", RFC["auth"],
                  stdin=base64.b64encode(b64url_decode(RFC["body"])))
    assert p.stdout == RFC["plaintext"]
    ua = ec.generate_private_key(ec.SECP256R1())
    auth = b64url(os.urandom(16))
    scalar = b64url(ua.private_numbers().private_value.to_bytes(32, "big"))
    for size in (0, 1, 200, 3993):
        notice = os.urandom(size)
        body = encrypt(notice, b64url(point(ua)), auth)
        assert run_probe(probe, "decrypt", "--scalar", scalar, "--auth", auth, stdin=base64.b64encode(body)).stdout == notice
    # Another auth secret: the probe refuses (exit 1), it does not print garbage.
    body = encrypt(b"x", b64url(point(ua)), auth)
    p = run_probe(probe, "decrypt", "--scalar", scalar, "--auth", b64url(os.urandom(16)), stdin=base64.b64encode(body), ok=False)
    assert p.returncode == 1 and b"does not decrypt" in p.stderr


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_swift_request_is_accepted_and_decrypted(probe, key_file, tls):
    key_path, key = key_file
    with PushService(tls=tls) as service:
        subscription = service.subscribe(application_server_key=point(key))
        notice = json.dumps({"kind": "checkin.requested", "circle": "c1", "text": "are you safe? ✓"}).encode()
        url, headers, body = swift_request(probe, key_path, subscription, notice, ttl=3600,
                                           extra=("--urgency", "high", "--topic", "checkin-c1"))
        assert url == subscription.endpoint
        status, response_headers, _ = post(url, headers, body)
        assert status == 201, service.rejections
        assert response_headers["Location"].startswith("/message/")
        [received] = service.notices_for(subscription)
        assert received.plaintext == notice
        assert received.json()["text"] == "are you safe? ✓"
        assert (received.ttl, received.urgency, received.topic) == (3600, "high", "checkin-c1")
        assert received.claims["aud"] == service.origin
        assert received.claims["sub"] == SUBJECT
        assert time.time() < received.claims["exp"] <= time.time() + 12 * 3600 + 5
        assert not service.rejections


def test_the_largest_notice_fits_and_one_more_byte_is_refused_by_the_probe(probe, key_file, service):
    subscription = service.subscribe()
    url, headers, body = swift_request(probe, key_file[0], subscription, b"A" * 3993)
    assert len(body) == 4096
    assert post(url, headers, body)[0] == 201
    p = run_probe(probe, "request", "--key", str(key_file[0]), "--subject", SUBJECT, "--endpoint", subscription.endpoint,
                  "--p256dh", subscription.p256dh, "--auth", subscription.auth, "--ttl", "60", "--allow-loopback-http",
                  stdin=b"A" * 3994, ok=False)
    assert p.returncode == 1 and b"3993" in p.stderr


def test_sec1_key_files_work_too(probe, tmp_path, service):
    key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "sec1.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    subscription = service.subscribe(application_server_key=point(key))
    url, headers, body = swift_request(probe, path, subscription, b"{}")
    assert post(url, headers, body)[0] == 201


# --- The push service refuses what a real one refuses --------------------------------------------

def refused(service, status: int, reason: str):
    """The last rejection has ``status`` and a reason containing ``reason``; nothing delivered."""
    assert service.rejections, "nothing was refused"
    last = service.rejections[-1]
    assert (last.status, reason in last.reason) == (status, True), last
    assert not service.notices, service.notices


def valid_claims(service, **changes) -> dict:
    claims = {"aud": service.origin, "exp": int(time.time()) + 3600, "sub": SUBJECT}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def python_request(service, subscription, key, claims: dict | None = None, **header_changes):
    headers = {"Authorization": vapid(key, claims or valid_claims(service)), "Content-Encoding": "aes128gcm", "TTL": "60"}
    headers.update(header_changes)
    return {k: v for k, v in headers.items() if v is not None}


def test_a_python_request_is_accepted(service):
    subscription, key = service.subscribe(), ec.generate_private_key(ec.SECP256R1())
    status, _, _ = post(subscription.endpoint, python_request(service, subscription, key),
                        encrypt(b'{"a":1}', subscription.p256dh, subscription.auth))
    assert status == 201 and service.notices[0].json() == {"a": 1}


def test_a_forged_jwt_is_refused(service):
    subscription = service.subscribe()
    key, forger = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    body = encrypt(b"{}", subscription.p256dh, subscription.auth)
    # Signed by another key, presented with the real key's k.
    forged = {"Authorization": vapid(forger, valid_claims(service), k=point(key)), "Content-Encoding": "aes128gcm", "TTL": "60"}
    assert post(subscription.endpoint, forged, body)[0] == 403
    refused(service, 403, "does not verify")
    # A genuine token whose claims were changed after signing.
    token = jwt(key, valid_claims(service)).split(".")
    token[1] = b64url(json.dumps(valid_claims(service, exp=int(time.time()) + 7200)).encode())
    tampered = {"Authorization": f"vapid t={'.'.join(token)}, k={b64url(point(key))}", "Content-Encoding": "aes128gcm", "TTL": "60"}
    assert post(subscription.endpoint, tampered, body)[0] == 403
    refused(service, 403, "does not verify")
    # A DER signature where the raw one belongs.
    signing_input = ".".join(token[:2])
    der = key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    headers = {"Authorization": f"vapid t={signing_input}.{b64url(der)}, k={b64url(point(key))}", "Content-Encoding": "aes128gcm",
               "TTL": "60"}
    assert post(subscription.endpoint, headers, body)[0] == 403
    refused(service, 403, "not 64")


def test_a_wrong_aud_is_refused(probe, key_file, service):
    subscription = service.subscribe()
    key = key_file[1]
    body = encrypt(b"{}", subscription.p256dh, subscription.auth)
    for aud in ("https://push.example.net", service.origin + "/", service.origin.replace("127.0.0.1", "localhost")):
        assert post(subscription.endpoint, python_request(service, subscription, key, valid_claims(service, aud=aud)), body)[0] == 403
        refused(service, 403, "aud")
    # VigilPush names its endpoint's origin: given another port's endpoint, the token is for that one.
    port = int(service.origin.rpartition(":")[2])
    _, headers, body = swift_request(probe, key_file[0], subscription, b"{}",
                                     endpoint=f"http://127.0.0.1:{port + 1}/push/{subscription.id}")
    assert post(subscription.endpoint, headers, body)[0] == 403
    refused(service, 403, f"aud 'http://127.0.0.1:{port + 1}'")


def test_an_expired_or_too_distant_exp_is_refused(probe, key_file, service):
    subscription = service.subscribe()
    key = key_file[1]
    body = encrypt(b"{}", subscription.p256dh, subscription.auth)
    now = int(time.time())
    for exp, reason in ((now - 10, "expired"), (now + 24 * 3600 + 120, "24 hours"), ("soon", "not a number")):
        assert post(subscription.endpoint, python_request(service, subscription, key, valid_claims(service, exp=exp)), body)[0] == 403
        refused(service, 403, reason)
    # A VigilPush token made 13 hours ago (12 h lifetime) has expired.
    _, headers, body = swift_request(probe, key_file[0], subscription, b"{}", extra=("--now", str(now - 13 * 3600)))
    assert post(subscription.endpoint, headers, body)[0] == 403
    refused(service, 403, "expired")


def test_other_bad_tokens_are_refused(service):
    subscription = service.subscribe(application_server_key=point(ec.generate_private_key(ec.SECP256R1())))
    open_subscription = service.subscribe()
    key = ec.generate_private_key(ec.SECP256R1())
    body = encrypt(b"{}", subscription.p256dh, subscription.auth)
    cases = [
        ({"Authorization": None}, 401, "no Authorization"),
        ({"Authorization": "WebPush abc"}, 401, "not vapid"),
        ({"Authorization": f"vapid t={jwt(key, valid_claims(service))}"}, 403, "not t and k"),
        ({"Authorization": f"vapid t=abc, k={b64url(b'x' * 65)}"}, 403, "not a P-256 public key"),
        ({"Authorization": vapid(key, valid_claims(service, sub=None))}, 403, "sub"),
        ({"Authorization": vapid(key, valid_claims(service, sub="ops@vigil.example"))}, 403, "sub"),
        ({"Authorization": vapid(key, valid_claims(service), header={"typ": "JWT", "alg": "HS256"})}, 403, "not ES256"),
    ]
    for changes, status, reason in cases:
        assert post(open_subscription.endpoint, python_request(service, open_subscription, key, **changes),
                    encrypt(b"{}", open_subscription.p256dh, open_subscription.auth))[0] == status
        refused(service, status, reason)
    # A restricted subscription takes only its own application server key.
    assert post(subscription.endpoint, python_request(service, subscription, key), body)[0] == 403
    refused(service, 403, "not the key the subscription was made with")


def test_a_body_for_another_key_or_secret_is_refused(service):
    subscription, other = service.subscribe(), service.subscribe()
    key = ec.generate_private_key(ec.SECP256R1())
    for body in (encrypt(b"{}", other.p256dh, other.auth),                       # another subscription's keys
                 encrypt(b"{}", subscription.p256dh, other.auth),                # the right key, another auth
                 encrypt(b"{}", subscription.p256dh, subscription.auth)[:-1]):   # cut short
        assert post(subscription.endpoint, python_request(service, subscription, key), body)[0] == 400
        refused(service, 400, "does not decrypt")
    # No delimiter: the record decrypts, but it is not a last record.
    body = encrypt(b"{}", subscription.p256dh, subscription.auth, delimiter=b"")
    assert post(subscription.endpoint, python_request(service, subscription, key), body)[0] == 400
    refused(service, 400, "delimiter")
    # A key id that is not a 65-byte key.
    good = encrypt(b"{}", subscription.p256dh, subscription.auth)
    assert post(subscription.endpoint, python_request(service, subscription, key), good[:20] + bytes([64]) + good[21:])[0] == 400
    refused(service, 400, "key id")


def test_bad_message_headers_are_refused(service):
    subscription = service.subscribe()
    key = ec.generate_private_key(ec.SECP256R1())
    body = encrypt(b"{}", subscription.p256dh, subscription.auth)
    for changes, reason in (({"Content-Encoding": "aesgcm"}, "Content-Encoding"), ({"Content-Encoding": None}, "Content-Encoding"),
                            ({"TTL": None}, "TTL"), ({"TTL": "-1"}, "TTL"), ({"TTL": "1.5"}, "TTL"),
                            ({"Urgency": "urgent"}, "Urgency"), ({"Topic": "a" * 33}, "Topic"), ({"Topic": "a.b"}, "Topic")):
        assert post(subscription.endpoint, python_request(service, subscription, key, **changes), body)[0] == 400
        refused(service, 400, reason)
    assert post(subscription.endpoint, python_request(service, subscription, key), b"\0" * 4097)[0] == 413
    refused(service, 413, "more than 4096")
    assert post(subscription.endpoint + "9", python_request(service, subscription, key), body)[0] == 404
    refused(service, 404, "no such subscription")
    service.unsubscribe(subscription)
    assert post(subscription.endpoint, python_request(service, subscription, key), body)[0] == 410
    refused(service, 410, "gone")


def test_a_connection_stays_usable_after_a_refusal(probe, key_file, service):
    subscription = service.subscribe()
    url, headers, body = swift_request(probe, key_file[0], subscription, b'{"n":1}')
    host, _, port = service.origin.rpartition("/")[2].rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    assert post(url, [h for h in headers if h[0] != "Authorization"], body, connection=connection)[0] == 401
    assert post(url, headers, body, connection=connection)[0] == 201
    assert [n.json() for n in service.notices] == [{"n": 1}]


# --- The answers a test asks for -----------------------------------------------------------------

def test_answers_as_told(probe, key_file, service):
    subscription = service.subscribe()
    service.answer(subscription, pushservice.NOT_FOUND, pushservice.GONE, pushservice.too_many(7), pushservice.SERVER_ERROR)
    url, headers, body = swift_request(probe, key_file[0], subscription, b'{"n":1}')
    answers = [post(url, headers, body) for _ in range(5)]
    assert [a[0] for a in answers] == [404, 410, 429, 500, 201]
    assert answers[2][1]["Retry-After"] == "7"
    assert [a.status for a in service.attempts] == [404, 410, 429, 500, 201]
    assert len(service.notices) == 1 and not service.rejections
    service.answer(subscription, always=pushservice.GONE)
    assert post(url, headers, body)[0] == 410 and post(url, headers, body)[0] == 410


def test_a_stall_holds_until_released_or_abandoned(probe, key_file, service):
    subscription = service.subscribe()
    url, headers, body = swift_request(probe, key_file[0], subscription, b"{}")
    service.answer(subscription, pushservice.STALL)
    with pytest.raises(TimeoutError):
        post(url, headers, body, timeout=0.5)
    # The client gave up and closed: the held request is recorded as unanswered.
    assert service.wait(lambda s: len(s.attempts) == 1 and s.stalled == 0)
    assert service.attempts[0].status is None and not service.notices
    service.answer(subscription, pushservice.STALL)
    result = {}
    thread = threading.Thread(target=lambda: result.update(answer=post(url, headers, body, timeout=10)))
    thread.start()
    assert service.wait(lambda s: s.stalled == 1)
    service.release_stalled()
    thread.join(10)
    assert result["answer"][0] == 201 and len(service.notices) == 1


def test_a_drop_closes_without_an_answer(probe, key_file, service):
    subscription = service.subscribe()
    url, headers, body = swift_request(probe, key_file[0], subscription, b"{}")
    service.answer(subscription, pushservice.DROP)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        post(url, headers, body)
    assert [a.status for a in service.attempts] == [None] and not service.notices
    assert post(url, headers, body)[0] == 201


# --- Webhooks ------------------------------------------------------------------------------------

SPEC = {"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "timestamp": "1614265330",
        "body": b'{"test": 2432232314}', "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def swift_webhook(probe, secrets: list[str], webhook_id: str, timestamp: int, body: bytes) -> list:
    args = ["webhook", "--id", webhook_id, "--timestamp", str(timestamp)]
    for secret in secrets:
        args += ["--secret", secret]
    return [tuple(h) for h in json.loads(run_probe(probe, *args, stdin=body).stdout)["headers"]]


def test_the_receiver_verifies_the_spec_vector():
    headers = {"webhook-id": SPEC["id"], "webhook-timestamp": SPEC["timestamp"], "webhook-signature": SPEC["signature"]}
    assert webhookreceiver.verify(headers, SPEC["body"], [SPEC["secret"]], now=1614265330) == (SPEC["id"], 1614265330)
    assert webhookreceiver.sign(SPEC["secret"], SPEC["id"], SPEC["timestamp"], SPEC["body"]) == SPEC["signature"]
    with pytest.raises(webhookreceiver.Refused):
        webhookreceiver.verify(headers, SPEC["body"] + b" ", [SPEC["secret"]], now=1614265330)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_swift_signed_webhook_is_accepted(probe, tls):
    secret = new_secret()
    with WebhookReceiver([secret], tls=tls) as receiver:
        body = json.dumps({"type": "panic.started", "stream": "s1"}).encode()
        headers = swift_webhook(probe, [secret], "msg_1", int(time.time()), body)
        assert [h[0] for h in headers] == ["webhook-id", "webhook-timestamp", "webhook-signature"]
        assert post(receiver.url, headers, body)[0] == 200, receiver.rejections
        [delivery] = receiver.deliveries
        assert delivery.id == "msg_1" and delivery.json()["type"] == "panic.started"


def test_a_rotated_secret_verifies_with_either(probe):
    old, new = new_secret(), new_secret()
    body = b'{"n":1}'
    headers = swift_webhook(probe, [new, old], "msg_rot", int(time.time()), body)
    assert len(dict(headers)["webhook-signature"].split(" ")) == 2
    for known in ([old], [new]):
        with WebhookReceiver(known) as receiver:
            assert post(receiver.url, headers, body)[0] == 200


def test_the_receiver_refuses_tampering_staleness_and_replays(probe):
    secret = new_secret()
    with WebhookReceiver([secret]) as receiver:
        now = int(time.time())
        body = b'{"kind":"checkin.answered"}'
        headers = dict(swift_webhook(probe, [secret], "msg_2", now, body))

        def refused_with(status, reason, sent_headers, sent_body=body):
            assert post(receiver.url, sent_headers, sent_body)[0] == status
            last = receiver.rejections[-1]
            assert last.status == status and reason in last.reason, last

        refused_with(401, "no webhook-signature", headers, body.replace(b"answered", b"requested"))
        refused_with(401, "no webhook-signature", {**headers, "webhook-timestamp": str(now + 1)})
        refused_with(401, "no webhook-signature", {**headers, "webhook-id": "msg_3"})
        refused_with(401, "no webhook-signature", dict(swift_webhook(probe, [new_secret()], "msg_2", now, body)))
        refused_with(400, "required", {k: v for k, v in headers.items() if k != "webhook-signature"})
        refused_with(400, "whole seconds", {**headers, "webhook-timestamp": "soon"})
        for skew in (-301, 301):
            refused_with(400, "from now", dict(swift_webhook(probe, [secret], "msg_old", now + skew, body)))
        assert not receiver.deliveries
        assert post(receiver.url, headers, body)[0] == 200
        refused_with(400, "replayed", headers)
        assert len(receiver.deliveries) == 1


def test_a_retry_after_a_failure_keeps_its_id_and_is_welcome(probe):
    secret = new_secret()
    with WebhookReceiver([secret]) as receiver:
        receiver.answer(webhookreceiver.SERVER_ERROR, webhookreceiver.too_many(3), webhookreceiver.DROP)
        body = b"{}"
        statuses = []
        for attempt in range(3):
            headers = swift_webhook(probe, [secret], "msg_retry", int(time.time()), body)
            try:
                statuses.append(post(receiver.url, headers, body)[0])
            except (http.client.RemoteDisconnected, ConnectionResetError):
                statuses.append(None)
        assert statuses == [500, 429, None]
        headers = swift_webhook(probe, [secret], "msg_retry", int(time.time()), body)
        assert post(receiver.url, headers, body)[0] == 200
        assert [a.status for a in receiver.attempts] == [500, 429, None, 200]
        assert len(receiver.deliveries) == 1 and not receiver.rejections


# --- vigild push keygen / public-key -------------------------------------------------------------

def test_vigild_push_keygen_makes_a_key_a_push_service_accepts(vigild_binary, probe, tmp_path, service):
    path = tmp_path / "keys" / "vapid.pem"
    path.parent.mkdir()
    p = subprocess.run([str(vigild_binary), "push", "keygen", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    public = p.stdout.strip()
    assert len(public) == 87 and public.startswith("B")  # base64url of 0x04 || X || Y
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(x.name for x in path.parent.iterdir()) == ["vapid.pem"], "a temporary file was left"
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key.curve, ec.SECP256R1) and b64url(point(key)) == public
    # The printed key is the one a browser subscribes with: requests signed with the file pass.
    subscription = service.subscribe(application_server_key=public)
    url, headers, body = swift_request(probe, path, subscription, b'{"hello":1}')
    assert post(url, headers, body)[0] == 201, service.rejections
    # public-key prints it again; a second keygen refuses and leaves the file alone.
    again = subprocess.run([str(vigild_binary), "push", "public-key", str(path)], capture_output=True, text=True, timeout=30)
    assert (again.returncode, again.stdout.strip()) == (0, public)
    before = path.read_bytes()
    second = subprocess.run([str(vigild_binary), "push", "keygen", str(path)], capture_output=True, text=True, timeout=30)
    assert second.returncode == 1 and "exists already" in second.stderr
    assert path.read_bytes() == before


def test_vigild_push_public_key_refuses_what_is_not_a_private_p256_key(vigild_binary, key_file, tmp_path):
    ed25519_key = tmp_path / "ed25519.pem"
    ed25519_key.write_bytes(ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    ed25519_key.chmod(0o600)
    open_key = key_file[0]
    open_key.chmod(0o644)
    for path, reason in ((ed25519_key, "not a P-256"), (tmp_path / "missing.pem", "No such file"),
                         (open_key, "readable or writable by every user (mode 644)")):
        p = subprocess.run([str(vigild_binary), "push", "public-key", str(path)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and reason in p.stderr, p.stderr
