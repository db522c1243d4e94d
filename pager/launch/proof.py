"""The broker's proof that it is this user's broker, checked before any credential is sent.

Anyone on the machine can bind a loopback port and answer `GET /health` with a copy of what
the real broker said, so `/health` alone proves nothing. A client sends a fresh random
challenge; the broker answers with an HMAC of it keyed by the local secret (which only this
user can read), bound to the broker's instance id and to the address it listens on. Binding
the address defeats a relay: a squatter on the old port that forwards the challenge to the real
broker on its new port gets a proof for the new port, which a client talking to the old port
refuses. Stdlib-only: `pager hook` and `pager status` check it on every run.

See docs/security.md.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256
    from hmac import compare_digest
else:
    # The builtin SHA-256: `hashlib` (and so `hmac`) loads OpenSSL, ~3 ms on every hook run.
    try:
        from _sha256 import sha256
    except ImportError:  # a Python built without it
        from hashlib import sha256
    try:
        from _operator import _compare_digest as compare_digest  # = `hmac.compare_digest`
    except ImportError:
        from hmac import compare_digest

#: A challenge is this many random bytes, hex-encoded.
CHALLENGE_BYTES = 16
_CONTEXT = b"pager /health proof v1"


def new_challenge() -> str:
    return os.urandom(CHALLENGE_BYTES).hex()


def valid_challenge(challenge: str) -> bool:
    """A well-formed challenge: exactly the hex of CHALLENGE_BYTES bytes (the broker refuses
    anything else rather than sign attacker-chosen text)."""
    return len(challenge) == 2 * CHALLENGE_BYTES and all(c in "0123456789abcdef" for c in challenge)


def health_proof(secret: str, challenge: str, instance_id: str, address: str) -> str:
    """What the broker listening on `address` (`host:port`) answers to `challenge`."""
    message = b"\n".join((_CONTEXT, challenge.encode(), instance_id.encode(), address.encode()))
    return _hmac_sha256(secret.encode(), message)


def proof_holds(secret: str, challenge: str, instance_id: str, address: str, proof: object) -> bool:
    """Whether `proof` is the answer of a broker that knows `secret` and listens on `address`."""
    if not isinstance(proof, str):
        return False
    expected = health_proof(secret, challenge, instance_id, address)
    return compare_digest(expected, proof)


def _hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) as `hmac.new(key, message, "sha256").hexdigest()`, without
    importing `hmac` (tests/launch/test_discovery_proof.py compares the two)."""
    block = 64
    if len(key) > block:
        key = sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest()
