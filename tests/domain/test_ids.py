"""Ids and tokens: shapes, time order of message ids, hashing and constant-time comparison."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.domain.ids import (
    ALPHABET,
    TOKEN_KINDS,
    Kind,
    hash_token,
    looks_like,
    message_time_ms,
    new_agent_id,
    new_message_id,
    new_session_id,
    new_token,
    tokens_equal,
)

_MAX_MS = (1 << 48) - 1


def test_new_agent_id_has_its_shape_and_is_unique() -> None:
    """Agent ids are `agt_` + 16 base32 characters and do not repeat."""
    ids = {new_agent_id() for _ in range(1000)}
    assert len(ids) == 1000
    for agent_id in ids:
        assert agent_id.startswith("agt_")
        assert len(agent_id) == 20
        assert set(agent_id[4:]) <= set(ALPHABET)
        assert looks_like(Kind.AGENT, agent_id)
        assert not looks_like(Kind.SESSION, agent_id)


def test_new_session_id_has_its_shape() -> None:
    """Session ids are `ses_` + 16 base32 characters."""
    session_id = new_session_id()
    assert session_id.startswith("ses_")
    assert looks_like("ses", session_id)
    assert new_session_id() != session_id


def test_new_message_id_has_its_shape_and_time() -> None:
    """Message ids are `msg_` + 20 characters and carry their millisecond timestamp."""
    message_id = new_message_id(now_ms=1_700_000_000_123)
    assert len(message_id) == 24
    assert looks_like(Kind.MESSAGE, message_id)
    assert message_time_ms(message_id) == 1_700_000_000_123


@given(
    st.integers(min_value=0, max_value=_MAX_MS - 1),
    st.integers(min_value=1, max_value=10**9),
)
def test_new_message_id_sorts_by_creation_time(earlier: int, gap: int) -> None:
    """An id made at a later millisecond sorts after one made earlier, as a plain string."""
    later = min(earlier + gap, _MAX_MS)
    assert new_message_id(now_ms=earlier) < new_message_id(now_ms=later)


def test_new_message_id_after_is_strictly_monotonic() -> None:
    """With `after`, ids increase within one millisecond and when the clock steps back."""
    previous = new_message_id(now_ms=5_000)
    for now in [5_000] * 50 + [4_000] * 50:
        current = new_message_id(now_ms=now, after=previous)
        assert current > previous
        previous = current
    assert message_time_ms(previous) == 5_000
    assert message_time_ms(new_message_id(now_ms=6_000, after=previous)) == 6_000


def test_new_message_id_uses_the_clock() -> None:
    """Without `now_ms` the id carries the current time."""
    import time

    before = time.time_ns() // 1_000_000
    stamp = message_time_ms(new_message_id())
    assert before <= stamp <= time.time_ns() // 1_000_000


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"now_ms": -1}, "48-bit"),
        ({"now_ms": 1 << 48}, "48-bit"),
        ({"now_ms": 1, "after": "msg_short"}, "not a message id"),
        ({"now_ms": 1, "after": "msg_" + "z" * 20}, "exhausted"),
    ],
)
def test_new_message_id_refuses_bad_arguments(kwargs: dict[str, object], fragment: str) -> None:
    """Out-of-range clocks, malformed `after` and an exhausted id space raise ValueError."""
    with pytest.raises(ValueError, match=fragment):
        new_message_id(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(TOKEN_KINDS))
def test_new_token_has_its_shape(kind: Kind) -> None:
    """Tokens are the prefix, `_`, and 43 URL-safe characters, fresh each time."""
    token = new_token(kind)
    assert token.startswith(f"{kind.value}_")
    assert len(token) == 4 + 43
    assert looks_like(kind, token)
    assert new_token(kind.value) != token


@pytest.mark.parametrize("prefix", ["agt", "msg", "ses", "xyz", "pst_", ""])
def test_new_token_refuses_non_token_kinds(prefix: str) -> None:
    """Id kinds and unknown prefixes are programming errors."""
    with pytest.raises(ValueError, match="kind"):
        new_token(prefix)


def test_hash_token_is_sha256_hex() -> None:
    """The stored form of a token is its sha256 hex digest."""
    token = new_token(Kind.SESSION_TOKEN)
    assert hash_token(token) == hashlib.sha256(token.encode()).hexdigest()
    assert hash_token(token) != hash_token(new_token(Kind.SESSION_TOKEN))
    assert len(hash_token("\ud800")) == 64  # malformed input hashes instead of raising


def test_tokens_equal_compares_whole_values() -> None:
    """Equal tokens compare equal; any difference, length or non-ASCII input compares unequal."""
    token = new_token(Kind.CLAIM_TOKEN)
    assert tokens_equal(token, str(token))
    assert not tokens_equal(token, token[:-1])
    assert not tokens_equal(token, token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert not tokens_equal(token, "é" + token[1:])
    assert tokens_equal(hash_token(token), hash_token(token))


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        (Kind.AGENT, "agt_0123456789abcde"),  # too short
        (Kind.AGENT, "agt_0123456789abcdef0"),  # too long
        (Kind.AGENT, "agt_0123456789ABCDEF"),  # upper case
        (Kind.AGENT, "agt_0123456789abcdei"),  # `i` is not in the alphabet
        (Kind.AGENT, "agt_0123456789abcdeu"),  # nor is `u`
        (Kind.AGENT, "agt_0123456789abcdef\n"),
        (Kind.AGENT, "AGT_0123456789abcdef"),
        (Kind.AGENT, "ses_0123456789abcdef"),
        (Kind.AGENT, 42),
        (Kind.AGENT, None),
        (Kind.MESSAGE, "msg_0123456789abcdef"),
        (Kind.SESSION_TOKEN, "pst_" + "a" * 42),
        (Kind.SESSION_TOKEN, "pst_" + "a" * 42 + "="),
        (Kind.SESSION_TOKEN, "clm_" + "a" * 43),
    ],
)
def test_looks_like_refuses_malformed_text(kind: Kind, text: object) -> None:
    """Wrong prefix, length, alphabet or type does not look like an id or token."""
    assert not looks_like(kind, text)


def test_looks_like_refuses_unknown_kind() -> None:
    """An unknown kind is a programming error, not a `False`."""
    with pytest.raises(ValueError, match="unknown id kind"):
        looks_like("zzz", "zzz_0123456789abcdef")
