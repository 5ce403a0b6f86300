"""Push subscriptions on check-in circles (issue 24; docs/PROTOCOL.md, "Reaching members who are
not connected") end to end: a real vigild with a VAPID key made by ``vigild push keygen`` and a
webhook relay secret, Python ``websockets`` clients.

The owner and members register Web Push subscriptions and relay handles (``checkin.register``),
re-register (same id, replaced keys), hit the per-holder bound, unregister; revoking a member
drops its subscriptions; they survive ``kill -9``. What is stored is observed through ``vigild
state inspect`` (which shows counts only, never an endpoint, key or handle) and through the ids a
re-registration returns. Endpoints, keys and handles are recorded with ``privacy.remember`` so
that the log scan (test_log_privacy.py) fails if a daemon ever logs one.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import pinclient as pc
import privacy
from test_checkin import CheckinClient, tokens
from test_web_http import get
from vigilproc import REPO

MAX_PER_HOLDER = 3


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def new_push(host: str = "https://push.example") -> dict:
    """A browser's subscription as ``PushSubscription.toJSON()`` gives it (``expirationTime`` null):
    a fresh endpoint path and a fresh P-256 key and auth secret, all remembered as secrets."""
    path = secrets.token_urlsafe(24)
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    keys = {"p256dh": b64url(point), "auth": b64url(os.urandom(16))}
    for value in (path, *keys.values()):
        privacy.remember(value)
    return {"endpoint": f"{host}/wpush/v2/{path}", "expirationTime": None, "keys": keys}


def new_handle() -> str:
    token = secrets.token_urlsafe(18)
    privacy.remember(token)
    return f"apns:{token}"


@pytest.fixture(scope="module")
def push_files(vigild_binary, tmp_path_factory) -> dict:
    """A VAPID key from ``vigild push keygen`` (its public key as printed) and a relay secret file."""
    folder = tmp_path_factory.mktemp("push")
    key = folder / "vapid.pem"
    made = subprocess.run([str(vigild_binary), "push", "keygen", str(key)], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    secret = folder / "relay.secret"
    secret.write_text("whsec_" + base64.b64encode(os.urandom(32)).decode() + "\n")
    secret.chmod(0o600)
    return {"key": str(key), "public_key": made.stdout.strip(), "secret": str(secret)}


def config(files: dict | None, state: Path | None = None, *, loopback: bool = False) -> dict:
    cfg = pc.pins_config(session={"messages_per_second": 1000, "message_burst": 2000},
                         checkin={"max_subscriptions_per_holder": MAX_PER_HOLDER})
    cfg["limits"]["circle_create_burst"] = 100000
    if files is not None:
        cfg["push"] = {"vapid_key_file": files["key"], "vapid_subject": "mailto:ops@example.org",
                       "relay_url": "https://relay.example/hook", "relay_secret_file": files["secret"],
                       "allow_loopback_http": loopback}
    if state is not None:
        cfg["state"] = {"directory": str(state)}
    cfg["web"] = {"enabled": True, "root": str(REPO / "web")}
    return cfg


@pytest.fixture(scope="module")
def server(vigild_module, push_files, tmp_path_factory):
    state = tmp_path_factory.mktemp("subs-state")
    d = vigild_module(config(push_files, state))
    d.state = state
    return d


def inspect_counts(binary, state: Path, circle: str) -> dict | None:
    """The circle's subscription counts in the state it restores to (its last journal record, else
    its snapshot line), from ``vigild state inspect``; None when it is gone. Also checks that the
    output holds no endpoint, key or handle."""
    out = subprocess.run([str(binary), "state", "inspect", "--show-content", str(state)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "push.example" not in out.stdout and "apns:" not in out.stdout
    found = None
    for line in map(json.loads, out.stdout.splitlines()):
        if line.get("type") == "circle" and line.get("id") == circle:
            found = line["subscriptions"]
        elif line.get("record") == "circlePut" and line["circle"]["id"] == circle:
            found = line["circle"]["subscriptions"]
        elif line.get("record") == "circleRemove" and line.get("circle") == circle:
            found = None
    return found


def counts(owner=(0, 0), **members) -> dict:
    """The inspector's counts: owner (web_push, relay), and members m1=(web_push, relay)."""
    listed = [{"member": int(k[1:]), "web_push": v[0], "relay": v[1]} for k, v in sorted(members.items())]
    return {"owner": {"web_push": owner[0], "relay": owner[1]}, "members": listed}


def register(client: CheckinClient, circle: str, token: tuple[str, str], **target) -> str:
    reply = client.ok("checkin.register", circle=circle, **{token[0]: token[1]}, **target)
    assert isinstance(reply["subscription"], str) and len(reply["subscription"]) == 22, reply
    assert set(reply) == {"type", "ref", "subscription"}, reply
    return reply["subscription"]


def test_owner_and_members_register_web_push_and_relay(server, vigild_binary):
    with CheckinClient(server.port) as c:
        created = c.create(members=["Mum", "Sam"])
        circle, owner = created["circle"], ("owner_token", created["owner_token"])
        mum, sam = (("member_token", t) for t in tokens(created))
        ids = [register(c, circle, owner, push=new_push()), register(c, circle, owner, relay={"handle": new_handle()}),
               register(c, circle, mum, push=new_push()), register(c, circle, sam, relay={"handle": new_handle()})]
        assert len(set(ids)) == 4
    assert inspect_counts(vigild_binary, server.state, circle) == counts((1, 1), m1=(1, 0), m2=(0, 1))


def test_registering_the_same_endpoint_again_replaces_its_keys_under_the_same_id(server, vigild_binary):
    with CheckinClient(server.port) as c:
        created = c.create(members=["Mum"])
        circle, mum = created["circle"], ("member_token", tokens(created)[0])
        sub = new_push()
        first = register(c, circle, mum, push=sub)
        assert register(c, circle, mum, push=sub) == first                       # unchanged
        renewed = dict(sub, keys=new_push()["keys"])
        assert register(c, circle, mum, push=renewed) == first                   # new keys, same id
        handle = new_handle()
        relay = register(c, circle, mum, relay={"handle": handle})
        assert register(c, circle, mum, relay={"handle": handle}) == relay
        # The owner registering the same endpoint is a subscription of its own.
        assert register(c, circle, ("owner_token", created["owner_token"]), push=sub) not in (first, relay)
    assert inspect_counts(vigild_binary, server.state, circle) == counts((1, 0), m1=(1, 1))


def test_the_bound_is_per_holder_and_unregister_frees_a_place(server, vigild_binary):
    with CheckinClient(server.port) as c:
        created = c.create(members=["Mum", "Sam"])
        circle, owner = created["circle"], ("owner_token", created["owner_token"])
        mum, sam = (("member_token", t) for t in tokens(created))
        subs = [new_push() for _ in range(MAX_PER_HOLDER)]
        ids = [register(c, circle, mum, push=s) for s in subs]
        over = c.error("checkin.register", circle=circle, member_token=mum[1], relay={"handle": new_handle()})
        assert over["code"] == "too_many_subscriptions", over
        assert register(c, circle, mum, push=subs[0]) == ids[0]                  # replacing still works at the bound
        sams = register(c, circle, sam, push=new_push())                          # another holder is not counted
        # Unregister: another's id, or one already gone, is ok and changes nothing.
        c.ok("checkin.unregister", circle=circle, member_token=mum[1], subscription=sams)
        c.ok("checkin.unregister", circle=circle, owner_token=owner[1], subscription=ids[1])
        c.ok("checkin.unregister", circle=circle, member_token=mum[1], subscription="not-an-id")
        assert inspect_counts(vigild_binary, server.state, circle) == counts(m1=(3, 0), m2=(1, 0))
        c.ok("checkin.unregister", circle=circle, member_token=mum[1], subscription=ids[1])
        c.ok("checkin.unregister", circle=circle, member_token=mum[1], subscription=ids[1])
        assert register(c, circle, mum, relay={"handle": new_handle()}) not in ids
        assert c.code("checkin.unregister", circle=circle, member_token="nope", subscription=ids[0]) == "forbidden"
    assert inspect_counts(vigild_binary, server.state, circle) == counts(m1=(2, 1), m2=(1, 0))


def test_revoking_a_member_drops_its_subscriptions_and_closing_drops_all(server, vigild_binary):
    with CheckinClient(server.port) as c:
        created = c.create(members=["Mum", "Sam"])
        circle, owner = created["circle"], created["owner_token"]
        mum, sam = (("member_token", t) for t in tokens(created))
        register(c, circle, mum, push=new_push())
        register(c, circle, mum, relay={"handle": new_handle()})
        register(c, circle, sam, push=new_push())
        register(c, circle, ("owner_token", owner), push=new_push())
        c.ok("checkin.revoke", circle=circle, owner_token=owner, member=1)
        assert inspect_counts(vigild_binary, server.state, circle) == counts((1, 0), m2=(1, 0))
        assert c.code("checkin.register", circle=circle, member_token=mum[1], relay={"handle": new_handle()}) == "forbidden"
        c.ok("checkin.close", circle=circle, owner_token=owner)
    assert inspect_counts(vigild_binary, server.state, circle) is None


def test_refusals_name_the_field(server):
    with CheckinClient(server.port) as c:
        created = c.create(members=["Mum"])
        circle, token = created["circle"], tokens(created)[0]
        good = new_push()
        cases = [
            ({"push": dict(good, endpoint="http://127.0.0.1:9/wpush")}, "invalid_push", "push.endpoint"),
            ({"push": dict(good, endpoint="https://user@push.example/x")}, "invalid_push", "push.endpoint"),
            ({"push": dict(good, keys=dict(good["keys"], p256dh=b64url(b"\x04" + b"\x01" * 64)))}, "invalid_push", "push.keys.p256dh"),
            ({"push": dict(good, keys=dict(good["keys"], auth=b64url(b"\x01" * 15)))}, "invalid_push", "push.keys.auth"),
            ({"push": dict(good, expirationTime="soon")}, "invalid_push", "push.expirationTime"),
            ({"relay": {"handle": "has space"}}, "invalid_relay", "relay.handle"),
            ({"push": good, "relay": {"handle": new_handle()}}, "invalid_subscription", None),
            ({}, "invalid_subscription", None),
        ]
        for fields, code, field in cases:
            err = c.error("checkin.register", circle=circle, member_token=token, **fields)
            assert (err["code"], err.get("field")) == (code, field), (fields, err)
            assert "push.example" not in err["message"] and "127.0.0.1" not in err["message"], err
        err = c.error("checkin.register", circle=circle, member_token=token, owner_token=created["owner_token"], push=good)
        assert err["code"] == "invalid_token", err
        # A wrong token and an unknown circle: the same forbidden, once the target is usable.
        assert c.code("checkin.register", circle=circle, member_token="nope", push=good) == "forbidden"
        assert c.code("checkin.register", circle="AAAAAAAAAAAAAAAAAAAAAA", member_token=token, push=good) == "forbidden"


def test_without_push_configured_registration_is_unsupported(vigild):
    d = vigild(config(None))
    with CheckinClient(d.port) as c:
        created = c.create(members=["Mum"])
        circle, token = created["circle"], tokens(created)[0]
        err = c.error("checkin.register", circle=circle, member_token=token, push=new_push())
        assert (err["code"], err.get("field")) == ("unsupported", "push"), err
        err = c.error("checkin.register", circle=circle, member_token=token, relay={"handle": new_handle()})
        assert (err["code"], err.get("field")) == ("unsupported", "relay"), err
    assert "push_public_key" not in json.loads(get(d.port, "/site.json").body)


def test_site_json_carries_the_vapid_public_key(server, push_files):
    site = json.loads(get(server.port, "/site.json").body)
    assert site["push_public_key"] == push_files["public_key"] and len(site["push_public_key"]) == 87, site


def test_subscriptions_survive_kill_9_and_loopback_http_needs_the_setting(vigild, vigild_binary, push_files, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(push_files, state, loopback=True))
    local = new_push("http://127.0.0.1:9")
    with CheckinClient(d.port) as c:
        created = c.create(members=["Mum"])
        circle, owner, mum = created["circle"], ("owner_token", created["owner_token"]), ("member_token", tokens(created)[0])
        pushed = register(c, circle, mum, push=local)
        handle = new_handle()
        relayed = register(c, circle, owner, relay={"handle": handle})
        # Loopback only: http to another host is refused even with the setting.
        err = c.error("checkin.register", circle=circle, member_token=mum[1], push=new_push("http://push.example"))
        assert (err["code"], err.get("field")) == ("invalid_push", "push.endpoint"), err
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True
    assert inspect_counts(vigild_binary, state, circle) == counts((0, 1), m1=(1, 0))

    d2 = vigild(config(push_files, state, loopback=True))
    with CheckinClient(d2.port) as c:
        # The same destinations again answer with the ids they were given before the kill.
        assert register(c, circle, mum, push=local) == pushed
        assert register(c, circle, owner, relay={"handle": handle}) == relayed
        c.ok("checkin.unregister", circle=circle, owner_token=owner[1], subscription=relayed)
    assert d2.stop(signal.SIGTERM) == 0            # its final snapshot (version 7 and later) holds them
    assert inspect_counts(vigild_binary, state, circle) == counts(m1=(1, 0))

    d3 = vigild(config(push_files, state))          # without allow_loopback_http
    with CheckinClient(d3.port) as c:
        err = c.error("checkin.register", circle=circle, member_token=mum[1], push=new_push("http://127.0.0.1:9"))
        assert (err["code"], err.get("field")) == ("invalid_push", "push.endpoint"), err
        assert register(c, circle, owner, relay={"handle": handle}) != relayed
