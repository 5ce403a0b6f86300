"""A Web Push service on loopback for the end-to-end tests, that checks like the real ones.

A push service (RFC 8030) receives a push message for a subscription, checks the application
server's VAPID token (RFC 8292), and hands the encrypted body to the user agent, which decrypts
it (RFC 8291, RFC 8188).  ``PushService`` plays both: it makes subscriptions (a P-256 key pair and
an auth secret each, the endpoint URL, ``p256dh`` and ``auth`` a browser would hand out), and for
every request it

* reads the body: a ``Content-Length`` is required (411 without), at most 4096 bytes (413 beyond);
* finds the subscription by the path (404 if none; 410 once unsubscribed);
* checks ``Authorization: vapid t=<JWT>, k=<key>``: absent 401; otherwise 403 unless ``k`` is a
  P-256 point, the JWT's header is ES256, its signature (raw r||s) verifies with ``k``, ``aud`` is
  this service's origin, ``exp`` is in the future and at most 24 h away, ``sub`` is a mailto: or
  https: URI, and, for a subscription made with an ``application_server_key``, ``k`` is that key;
* checks ``Content-Encoding: aes128gcm``, ``TTL`` (whole seconds), ``Urgency`` (one of RFC 8030's
  four) and ``Topic`` (1 to 32 base64url characters) when present;
* decrypts the body with the subscription's private key and auth secret, as the user agent would,
  refusing (400) a body that does not decrypt to one record ending in the delimiter 0x02;

then answers as told for that subscription (201 with a ``Location`` by default; 404, 410, 429
with ``Retry-After``, 500, a stall that holds the request until ``release_stalled``, or a
dropped connection) and records the request: every valid one in ``attempts``, the 201-answered
ones in ``notices`` (decrypted plaintext, parsed JSON, headers, JWT claims), every refused one in
``rejections`` with its reason.  A real push service cannot decrypt; refusing an undecryptable
body here is the user agent's check made visible to the test.  The server, the answers and the
waiting on records are httpstandin.py's, shared with webhookreceiver.py.

Its own crypto is Python's ``cryptography`` (OpenSSL underneath, but none of Vigil's code), so a
test that passes here is an independent implementation agreeing with VigilPush.  The tests of this
module itself (test_push_crypto.py) show each check refusing what it must.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import json
import os
import re
import time
from typing import Callable

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from httpstandin import DROP, Answer, Answers, Refused, Request, StandIn, too_many  # noqa: F401 (re-exported)

MAX_BODY = 4096
MAX_TOKEN_LIFETIME = 24 * 3600
URGENCIES = ("very-low", "low", "normal", "high")
TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def b64url_decode(text: str) -> bytes:
    """Unpadded (or padded) base64url; ``ValueError`` for anything else."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    text = text.rstrip("=")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise ValueError("not base64url") from error


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# --- The user agent's side of RFC 8291 -----------------------------------------------------------

def decrypt(body: bytes, private_key: ec.EllipticCurvePrivateKey, auth_secret: bytes) -> bytes:
    """The notice of an ``aes128gcm`` push message body (RFC 8291 §3, RFC 8188 §2), or ``Refused``
    (400) naming what is wrong: the header, the key id, more than one record, the tag, the padding."""
    if len(body) < 21:
        raise Refused(400, "body shorter than the aes128gcm header")
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    if rs < 18:
        raise Refused(400, f"record size {rs} below 18")
    if idlen != 65 or len(body) < 21 + idlen:
        raise Refused(400, f"key id of {idlen} bytes is not an uncompressed P-256 key")
    keyid, record = body[21:21 + idlen], body[21 + idlen:]
    if len(record) > rs or len(record) < 17:
        raise Refused(400, f"{len(record)} bytes are not one record of rs {rs}")
    try:
        sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), keyid)
    except ValueError:
        raise Refused(400, "key id is not a point on P-256") from None
    ua_public = private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                      serialization.PublicFormat.UncompressedPoint)
    ecdh_secret = private_key.exchange(ec.ECDH(), sender)
    ikm = HKDF(hashes.SHA256(), 32, auth_secret, b"WebPush: info\x00" + ua_public + keyid).derive(ecdh_secret)
    cek = HKDF(hashes.SHA256(), 16, salt, b"Content-Encoding: aes128gcm\x00").derive(ikm)
    nonce = HKDF(hashes.SHA256(), 12, salt, b"Content-Encoding: nonce\x00").derive(ikm)
    try:
        padded = AESGCM(cek).decrypt(nonce, record, None)
    except InvalidTag:
        raise Refused(400, "body does not decrypt with the subscription's keys") from None
    stripped = padded.rstrip(b"\x00")
    if not stripped.endswith(b"\x02"):
        raise Refused(400, "record without the last-record delimiter 0x02")
    return stripped[:-1]


# --- The push service's side of RFC 8292 ---------------------------------------------------------

def verify_vapid(authorization: str | None, origin: str, now: float, required_key: bytes | None = None) -> dict:
    """The claims of a valid ``vapid`` Authorization value for a request to ``origin`` at ``now``;
    ``Refused`` otherwise (401 when absent, 403 when invalid, RFC 8292 §4.2)."""
    if not authorization:
        raise Refused(401, "no Authorization header")
    scheme, _, rest = authorization.partition(" ")
    if scheme.lower() != "vapid":
        raise Refused(401, f"Authorization scheme {scheme!r} is not vapid")
    params = {}
    for part in rest.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or name in params:
            raise Refused(403, f"malformed vapid parameter {part.strip()!r}")
        params[name] = value
    if set(params) != {"t", "k"}:
        raise Refused(403, f"vapid parameters {sorted(params)} are not t and k")
    try:
        key_bytes = b64url_decode(params["k"])
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), key_bytes)
    except ValueError:
        raise Refused(403, "k is not a P-256 public key") from None
    if len(key_bytes) != 65:
        raise Refused(403, "k is not an uncompressed P-256 public key")
    if required_key is not None and key_bytes != required_key:
        raise Refused(403, "k is not the key the subscription was made with")
    parts = params["t"].split(".")
    if len(parts) != 3:
        raise Refused(403, "t is not a JWT of three parts")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except ValueError:
        raise Refused(403, "JWT part is not base64url JSON") from None
    if not isinstance(header, dict) or header.get("alg") != "ES256" or header.get("typ", "JWT") != "JWT":
        raise Refused(403, f"JWT header {header} is not ES256")
    if len(signature) != 64:
        raise Refused(403, f"JWT signature of {len(signature)} bytes, not 64 (raw r||s)")
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        key.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise Refused(403, "JWT signature does not verify with k") from None
    if not isinstance(claims, dict):
        raise Refused(403, "JWT claims are not an object")
    if claims.get("aud") != origin:
        raise Refused(403, f"aud {claims.get('aud')!r} is not this push service's origin {origin}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise Refused(403, "exp is not a number of seconds")
    if exp <= now:
        raise Refused(403, "token expired")
    if exp > now + MAX_TOKEN_LIFETIME:
        raise Refused(403, "exp more than 24 hours ahead")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not (sub.lower().startswith("mailto:") or sub.lower().startswith("https://")):
        raise Refused(403, "sub is not a mailto: or https: contact")
    return claims


# --- Subscriptions and records -------------------------------------------------------------------

CREATED = Answer(201)
NOT_FOUND = Answer(404)
GONE = Answer(410)
SERVER_ERROR = Answer(500)
# Held until release_stalled, then answered 201.
STALL = Answer(201, stall=True)


@dataclasses.dataclass
class Subscription:
    id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes
    application_server_key: bytes | None
    answers: Answers = dataclasses.field(default_factory=lambda: Answers(CREATED))
    gone: bool = False

    @property
    def p256dh(self) -> str:
        return b64url(self.private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                                 serialization.PublicFormat.UncompressedPoint))

    @property
    def auth(self) -> str:
        return b64url(self.auth_secret)

    def json(self) -> dict:
        """What ``PushSubscription.toJSON()`` gives a page to send to the application server."""
        return {"endpoint": self.endpoint, "expirationTime": None, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


@dataclasses.dataclass
class Notice:
    """A valid request: the subscription, the decrypted notice, the headers and claims, and the
    answer given (``status`` None for a dropped connection or a stall the client gave up on)."""
    subscription: str
    plaintext: bytes
    headers: dict
    claims: dict
    ttl: int
    urgency: str | None
    topic: str | None
    status: int | None = None
    at: float = 0.0

    def json(self):
        return json.loads(self.plaintext)


@dataclasses.dataclass
class Rejection:
    subscription: str | None
    status: int
    reason: str
    headers: dict


class PushService(StandIn):
    """The push service on 127.0.0.1 (or ``localhost`` over TLS with the test CA)."""

    def __init__(self, *, tls: bool = False, clock: Callable[[], float] = time.time):
        self._subscriptions: dict[str, Subscription] = {}
        self._ids = itertools.count(1)
        self._messages = itertools.count(1)
        self.attempts: list[Notice] = []
        self.notices: list[Notice] = []
        self.rejections: list[Rejection] = []
        super().__init__(tls=tls, clock=clock, name="pushservice")

    def subscribe(self, application_server_key: str | bytes | None = None) -> Subscription:
        """A new subscription; with ``application_server_key`` (base64url or bytes) it is
        restricted to requests signed by that key, as browsers' subscriptions are."""
        if isinstance(application_server_key, str):
            application_server_key = b64url_decode(application_server_key)
        with self.lock:
            sid = f"s{next(self._ids)}"
            subscription = Subscription(sid, f"{self.origin}/push/{sid}", ec.generate_private_key(ec.SECP256R1()),
                                        os.urandom(16), application_server_key)
            self._subscriptions[sid] = subscription
            return subscription

    def answer(self, subscription: Subscription, *answers: Answer, always: Answer | None = None) -> None:
        """Answers for the next requests to ``subscription`` (after their checks passed), one
        each, then ``always`` (201 unless set) for the rest."""
        with self.lock:
            subscription.answers.set(*answers, always=always)

    def unsubscribe(self, subscription: Subscription) -> None:
        """The user agent dropped it: every later request gets 410 Gone."""
        with self.lock:
            subscription.gone = True

    def notices_for(self, subscription: Subscription) -> list[Notice]:
        with self.lock:
            return [n for n in self.notices if n.subscription == subscription.id]

    def serve(self, request: Request) -> None:
        match = re.fullmatch(r"/push/(s\d+)", request.path)
        with self.lock:
            subscription = self._subscriptions.get(match.group(1)) if match else None
        try:
            # The body is read first, so that any answer leaves the connection ready for the next
            # request (a length that cannot be read closes it).
            body = request.body(MAX_BODY)
            fields = self._check(subscription, request, body)
        except Refused as refused:
            self.record("rejections", Rejection(subscription.id if subscription else None, refused.status, refused.reason,
                                                request.header_dict))
            request.reply(refused.status, refused.reason.encode())
            return
        with self.lock:
            answer = subscription.answers.next()
            location = f"/message/{next(self._messages)}"

        def outcome(status: int | None) -> None:
            notice = Notice(subscription.id, headers=request.header_dict, status=status, at=self.clock(), **fields)
            self.record("attempts", notice)
            if status == 201:
                self.record("notices", notice)

        request.answer(answer, outcome, success_headers={"Location": location})

    def _check(self, subscription: Subscription | None, request: Request, body: bytes) -> dict:
        """The notice's fields of a valid request, or ``Refused``; the order a push service
        would check in: the resource, the sender, the message."""
        if subscription is None:
            raise Refused(404, "no such subscription")
        if subscription.gone:
            raise Refused(410, "subscription gone")
        headers = request.headers
        claims = verify_vapid(headers.get("Authorization"), self.origin, self.clock(), subscription.application_server_key)
        if headers.get("Content-Encoding") != "aes128gcm":
            raise Refused(400, f"Content-Encoding {headers.get('Content-Encoding')!r} is not aes128gcm")
        ttl = headers.get("TTL")
        if ttl is None or not re.fullmatch(r"\d{1,10}", ttl):
            raise Refused(400, f"TTL {ttl!r} is not whole seconds")
        urgency = headers.get("Urgency")
        if urgency is not None and urgency not in URGENCIES:
            raise Refused(400, f"Urgency {urgency!r} is not one of {URGENCIES}")
        topic = headers.get("Topic")
        if topic is not None and not TOPIC.fullmatch(topic):
            raise Refused(400, f"Topic {topic!r} is not 1 to 32 base64url characters")
        plaintext = decrypt(body, subscription.private_key, subscription.auth_secret)
        return dict(plaintext=plaintext, claims=claims, ttl=int(ttl), urgency=urgency, topic=topic)
