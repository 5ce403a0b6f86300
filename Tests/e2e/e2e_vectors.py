"""End-to-end encrypted panic streams, format version 1 (docs/PROTOCOL.md, "End-to-end encrypted
streams"; docs/design/e2e-streams.md), written from the text alone with Python `cryptography`
(AESGCM, HKDF): an implementation independent of the server and of the clients, which makes the
test vectors in PROTOCOL.md and seals what the e2e tests send, as a client would.

Run it to print the vectors as PROTOCOL.md holds them:  python3 Tests/e2e/e2e_vectors.py
"""
import base64
import json
import os

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PAD = 64
SEALED_LABEL = b"vigil-e2e-v1"
BOX_LABEL = b"vigil-e2e-box-v1"
WRAP_INFO = b"vigil e2e member wrap v1"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64u(text: str) -> bytes:
    if "=" in text:
        raise ValueError("padded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def pad(plaintext: bytes) -> bytes:
    """Spaces up to the smallest multiple of 64 bytes at or above the length (64 at least)."""
    target = max(PAD, -(-len(plaintext) // PAD) * PAD)
    return plaintext + b" " * (target - len(plaintext))


def location_plaintext(fields: dict) -> bytes:
    """The UTF-8 JSON object of a fix, compact, in the order given (any order opens)."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def aad(kid: str, seq: int, status: str) -> bytes:
    """'vigil-e2e-v1' 0x00 kid(22 ASCII) 0x00 seq(8 bytes big-endian) status('r' or 'a')."""
    kid_bytes = kid.encode("ascii")
    assert len(kid_bytes) == 22
    return SEALED_LABEL + b"\x00" + kid_bytes + b"\x00" + seq.to_bytes(8, "big") + {"red": b"r", "amber": b"a"}[status]


def seal(key: bytes, kid: str, seq: int, status: str, fields: dict, nonce: bytes | None = None) -> str:
    nonce = nonce if nonce is not None else os.urandom(12)
    assert len(key) == 32 and len(nonce) == 12
    return b64u(nonce + AESGCM(key).encrypt(nonce, pad(location_plaintext(fields)), aad(kid, seq, status)))


def open_sealed(key: bytes, kid: str, seq: int, status: str, sealed: str) -> dict:
    raw = unb64u(sealed)
    plain = AESGCM(key).decrypt(raw[:12], raw[12:], aad(kid, seq, status))
    return json.loads(plain.decode("utf-8"))     # JSON ignores the trailing spaces


def wrap_key(member_secret: bytes) -> bytes:
    """HKDF-SHA256 of the member secret, salt 'vigil-e2e-v1', info 'vigil e2e member wrap v1', 32 bytes."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=SEALED_LABEL, info=WRAP_INFO).derive(member_secret)


def box_aad(kid: str, member: int) -> bytes:
    """'vigil-e2e-box-v1' 0x00 kid(22 ASCII) 0x00 member number (8 bytes big-endian)."""
    return BOX_LABEL + b"\x00" + kid.encode("ascii") + b"\x00" + member.to_bytes(8, "big")


def box(member_secret: bytes, kid: str, member: int, stream_key: bytes, nonce: bytes | None = None) -> str:
    nonce = nonce if nonce is not None else os.urandom(12)
    return b64u(nonce + AESGCM(wrap_key(member_secret)).encrypt(nonce, stream_key, box_aad(kid, member)))


def open_box(member_secret: bytes, kid: str, member: int, boxed: str) -> bytes:
    raw = unb64u(boxed)
    return AESGCM(wrap_key(member_secret)).decrypt(raw[:12], raw[12:], box_aad(kid, member))


# The fixed inputs of the vectors.
KEY = bytes(range(0x00, 0x20))
KID = b64u(bytes(range(0xA0, 0xB0)))
MEMBER_SECRET = bytes(range(0x40, 0x60))
MEMBER = 3


def vectors() -> dict:
    fix1 = {"lat": 51.5007, "lon": -0.1246, "accuracy_m": 12, "note": "by the bridge"}
    fix2 = {"lat": 51.5011, "lon": -0.1252, "accuracy_m": 8.5, "heading": 270, "speed_mps": 1.4}
    n1, n2, n3 = bytes(range(0xC0, 0xCC)), bytes(range(0xD0, 0xDC)), bytes(range(0xE0, 0xEC))
    return {
        "key": b64u(KEY),
        "kid": KID,
        "sealed": [
            {"seq": 1, "status": "red", "nonce": b64u(n1), "plaintext": location_plaintext(fix1).decode(),
             "aad_hex": aad(KID, 1, "red").hex(), "sealed": seal(KEY, KID, 1, "red", fix1, n1)},
            {"seq": 2, "status": "amber", "nonce": b64u(n2), "plaintext": location_plaintext(fix2).decode(),
             "aad_hex": aad(KID, 2, "amber").hex(), "sealed": seal(KEY, KID, 2, "amber", fix2, n2)},
        ],
        "box": {"member_secret": b64u(MEMBER_SECRET), "member": MEMBER, "wrap_key_hex": wrap_key(MEMBER_SECRET).hex(),
                "nonce": b64u(n3), "aad_hex": box_aad(KID, MEMBER).hex(),
                "box": box(MEMBER_SECRET, KID, MEMBER, KEY, n3)},
    }


if __name__ == "__main__":
    print(json.dumps(vectors(), indent=2))
