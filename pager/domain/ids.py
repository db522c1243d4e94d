"""Identifiers and bearer tokens: how they are made, what they look like, how tokens are compared.

Ids are a three-letter prefix, `_`, and lower-case Crockford base32 (`0-9 a-z` without `i l o u`),
so one alphabet serves every id and ids survive case-insensitive handling unharmed:

- `agt_`, `ses_` and `mbx_` (a mailbox token's id) + 16 characters (80 random bits);
- `msg_` + 20 characters: a 48-bit millisecond timestamp and 50 random bits, ULID-like, so
  message ids sort by creation time (to the millisecond; pass `after=` for strict order within one).

Tokens are a prefix and 43 URL-safe base64 characters (`secrets.token_urlsafe(32)`, 256 bits):
`pst_` session tokens, `clm_` claim tokens, `prt_` resume tokens, `pmt_` mailbox tokens (SPEC
§8.2). They are stored only as
`hash_token` digests and compared with `tokens_equal` (constant time).

`looks_like(kind, text)` checks shape only (prefix, alphabet, length) so malformed input is refused
before it reaches a lookup.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
import time

#: Lower-case Crockford base32: no `i l o u`, so ids are hard to misread.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


class Kind(enum.StrEnum):
    """The prefix of each kind of id or token (without the `_`)."""

    AGENT = "agt"
    MESSAGE = "msg"
    SESSION = "ses"
    SESSION_TOKEN = "pst"
    CLAIM_TOKEN = "clm"
    RESUME_TOKEN = "prt"
    MAILBOX = "mbx"  # a mailbox token's id (SPEC §8.2): listed, revoked, a page's sender
    MAILBOX_TOKEN = "pmt"
    WAKE_RUN = "run"  # a wake run (docs/wake.md)
    RESERVATION = "rsv"  # an edit reservation (docs/reservations.md)


TOKEN_KINDS = frozenset(
    {Kind.SESSION_TOKEN, Kind.CLAIM_TOKEN, Kind.RESUME_TOKEN, Kind.MAILBOX_TOKEN}
)

_ID_LENGTH = {
    Kind.AGENT: 16,
    Kind.SESSION: 16,
    Kind.MESSAGE: 20,
    Kind.MAILBOX: 16,
    Kind.WAKE_RUN: 16,
    Kind.RESERVATION: 16,
}
_TOKEN_LENGTH = 43  # len(secrets.token_urlsafe(32))
_TOKEN_BYTES = 32

_TIME_BITS = 48
_MESSAGE_RANDOM_BITS = 50  # 20 chars * 5 bits = 100 bits = 2 spare + 48 time + 50 random
_MESSAGE_MAX = 1 << (5 * _ID_LENGTH[Kind.MESSAGE])

_SHAPES: dict[Kind, re.Pattern[str]] = {
    **{
        kind: re.compile(rf"{kind.value}_[{ALPHABET}]{{{length}}}")
        for kind, length in _ID_LENGTH.items()
    },
    **{kind: re.compile(rf"{kind.value}_[A-Za-z0-9_-]{{{_TOKEN_LENGTH}}}") for kind in TOKEN_KINDS},
}
_DECODE = {char: value for value, char in enumerate(ALPHABET)}


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = value * 32 + _DECODE[char]
    return value


def _kind(kind: Kind | str) -> Kind:
    try:
        return Kind(kind)
    except ValueError:
        raise ValueError(f"unknown id kind {kind!r}; one of {[k.value for k in Kind]}") from None


def _random_id(kind: Kind) -> str:
    length = _ID_LENGTH[kind]
    return f"{kind.value}_{_encode(secrets.randbits(5 * length), length)}"


def new_agent_id() -> str:
    """A fresh agent id: `agt_` + 16 random base32 characters."""
    return _random_id(Kind.AGENT)


def new_mailbox_id() -> str:
    """A fresh mailbox token id: `mbx_` + 16 random base32 characters."""
    return _random_id(Kind.MAILBOX)


def new_session_id() -> str:
    """A fresh session id: `ses_` + 16 random base32 characters."""
    return _random_id(Kind.SESSION)


def new_run_id() -> str:
    """A fresh wake run id: `run_` + 16 random base32 characters."""
    return _random_id(Kind.WAKE_RUN)


def new_reservation_id() -> str:
    """A fresh reservation id: `rsv_` + 16 random base32 characters."""
    return _random_id(Kind.RESERVATION)


def new_message_id(*, now_ms: int | None = None, after: str | None = None) -> str:
    """A fresh message id, `msg_` + 20 characters, sorting by creation time.

    `now_ms` overrides the clock (milliseconds since the epoch; tests). `after`, the last id the
    caller made, makes the result sort strictly after it even within one millisecond or when the
    clock stepped back (the ULID "monotonic" rule: increment instead of drawing new randomness).
    """
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if not 0 <= ms < 1 << _TIME_BITS:
        raise ValueError(f"timestamp {ms} ms is outside the 48-bit range")
    value = (ms << _MESSAGE_RANDOM_BITS) | secrets.randbits(_MESSAGE_RANDOM_BITS)
    if after is not None:
        if not looks_like(Kind.MESSAGE, after):
            raise ValueError(f"{after!r} is not a message id")
        previous = _decode(after[4:])
        if value <= previous:
            value = previous + 1
            if value >= _MESSAGE_MAX:  # 2**50 ids in one millisecond: cannot happen in practice
                raise ValueError("message id space exhausted")
    return f"{Kind.MESSAGE.value}_{_encode(value, _ID_LENGTH[Kind.MESSAGE])}"


def message_time_ms(message_id: str) -> int:
    """The creation time (milliseconds since the epoch) encoded in a message id."""
    if not looks_like(Kind.MESSAGE, message_id):
        raise ValueError(f"{message_id!r} is not a message id")
    return _decode(message_id[4:]) >> _MESSAGE_RANDOM_BITS


def new_token(prefix: Kind | str) -> str:
    """A fresh token of kind `pst`, `clm`, `prt` or `pmt`: the prefix, `_`, 43 URL-safe
    characters."""
    kind = _kind(prefix)
    if kind not in TOKEN_KINDS:
        raise ValueError(f"{kind.value!r} is an id kind, not a token kind")
    return f"{kind.value}_{secrets.token_urlsafe(_TOKEN_BYTES)}"


def hash_token(token: str) -> str:
    """The sha256 hex digest under which a token is stored (the token itself never is)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def tokens_equal(a: str, b: str) -> bool:
    """Whether two tokens (or digests) are equal, in time independent of where they differ."""
    # compare_digest refuses non-ASCII str; bytes take any input, including bad input.
    return hmac.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )


def looks_like(kind: Kind | str, text: object) -> bool:
    """Whether `text` has the shape of an id or token of `kind` (prefix, alphabet and length)."""
    return isinstance(text, str) and _SHAPES[_kind(kind)].fullmatch(text) is not None
