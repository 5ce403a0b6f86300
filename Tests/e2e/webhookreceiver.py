"""A webhook receiver on loopback for the end-to-end tests, that verifies like a careful one.

Standard Webhooks: each delivery carries ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (space-separated ``v1,<base64>`` entries, each HMAC-SHA256 of
``id.timestamp.body`` under a ``whsec_`` secret).  ``WebhookReceiver`` accepts a delivery only when

* all three headers are there and the body has a ``Content-Length`` (at most 1 MiB);
* the timestamp is whole seconds within 5 minutes of its clock (a stale or future one is refused);
* some ``v1`` entry matches under one of its secrets (several while a secret is rotated),
  compared in constant time;
* the id was not already accepted (a replay; a retry after a failed attempt keeps its id and is
  welcome);

refusing anything else with 400 (401 for a signature that does not match) and recording why.  A
delivery that passes is answered as the test said (200 by default; 404, 410, 429 with
``Retry-After``, 500, a stall, a dropped connection: httpstandin.py's answers) and recorded in
``attempts``; the 2xx-answered ones also in ``deliveries``.

The HMAC is Python's ``hmac`` module: none of Vigil's code.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re
import time
from typing import Callable

from httpstandin import DROP, STALL, Answer, Answers, Refused, Request, StandIn, too_many  # noqa: F401 (re-exported)

TOLERANCE = 5 * 60
MAX_BODY = 1 << 20

OK = Answer(200)
NOT_FOUND = Answer(404)
GONE = Answer(410)
SERVER_ERROR = Answer(500)


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret."""
    if not secret.startswith("whsec_"):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len("whsec_"):], validate=True)
    except binascii.Error as error:
        raise ValueError("not base64 after whsec_") from error


def sign(secret: str, webhook_id: str, timestamp: int | str, body: bytes) -> str:
    """One ``v1,<base64>`` entry (the tests' own signer, to make deliveries the receiver must refuse)."""
    mac = hmac.new(secret_key(secret), f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify(headers, body: bytes, secrets: list[str], now: float, tolerance: int = TOLERANCE) -> tuple[str, int]:
    """(id, timestamp) of a delivery whose headers verify; ``Refused`` naming the failing check."""
    webhook_id, timestamp, signatures = (headers.get(name) for name in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not webhook_id or timestamp is None or signatures is None:
        raise Refused(400, "webhook-id, webhook-timestamp and webhook-signature are required")
    if not re.fullmatch(r"\d{1,19}", timestamp):
        raise Refused(400, f"webhook-timestamp {timestamp!r} is not whole seconds")
    if abs(now - int(timestamp)) > tolerance:
        raise Refused(400, f"webhook-timestamp {timestamp} is {abs(now - int(timestamp)):.0f} s from now (stale or future)")
    offered = [entry[3:] for entry in signatures.split(" ") if entry.startswith("v1,")]
    for secret in secrets:
        expected = sign(secret, webhook_id, timestamp, body)[3:]
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return webhook_id, int(timestamp)
    raise Refused(401, "no webhook-signature entry matches")


@dataclasses.dataclass
class Delivery:
    id: str
    timestamp: int
    body: bytes
    headers: dict
    status: int | None
    at: float

    def json(self):
        return json.loads(self.body)


@dataclasses.dataclass
class Rejection:
    status: int
    reason: str
    headers: dict


class WebhookReceiver(StandIn):
    """The receiver at ``url`` (any path is accepted: the test names the one it gives out)."""

    def __init__(self, secrets: list[str], *, tolerance: int = TOLERANCE, tls: bool = False,
                 clock: Callable[[], float] = time.time):
        for secret in secrets:
            secret_key(secret)
        self.secrets = list(secrets)
        self.tolerance = tolerance
        self.answers = Answers(OK)
        self.accepted_ids: set[str] = set()
        self.attempts: list[Delivery] = []
        self.deliveries: list[Delivery] = []
        self.rejections: list[Rejection] = []
        super().__init__(tls=tls, clock=clock, name="webhookreceiver")
        self.url = f"{self.origin}/hooks/vigil"

    def answer(self, *answers: Answer, always: Answer | None = None) -> None:
        with self.lock:
            self.answers.set(*answers, always=always)

    def serve(self, request: Request) -> None:
        try:
            body = request.body(MAX_BODY)
            webhook_id, timestamp = verify(request.headers, body, self.secrets, self.clock(), self.tolerance)
            with self.lock:
                if webhook_id in self.accepted_ids:
                    raise Refused(400, f"webhook-id {webhook_id} replayed")
                answer = self.answers.next()
                if answer.status < 300 and not answer.drop and not answer.stall:
                    # Claimed before answering, so a concurrent replay of the same id is refused.
                    self.accepted_ids.add(webhook_id)
        except Refused as refused:
            self.record("rejections", Rejection(refused.status, refused.reason, request.header_dict))
            request.reply(refused.status, refused.reason.encode())
            return

        def outcome(status: int | None) -> None:
            delivery = Delivery(webhook_id, timestamp, body, request.header_dict, status, self.clock())
            self.record("attempts", delivery)
            if status is not None and status < 300:
                with self.lock:
                    self.accepted_ids.add(webhook_id)
                self.record("deliveries", delivery)

        request.answer(answer, outcome)
