"""Aliases, generated handles and addresses."""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.ids import new_agent_id
from pager.domain.names import (
    ALIAS_RE,
    Address,
    alias_key,
    format_address,
    generate_handle,
    parse_address,
    validate_alias,
)
from pager.domain.workspace import make_slug

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

_T = TypeVar("_T")

_CVC = re.compile(r"[bcdfghjklmnprstvz][aeiou][bcdfghjklmnprstvz][aeiou][bcdfghjklmnprstvz]")


@pytest.mark.parametrize(
    "alias", ["a", "7", "bob", "Bob", "api.v2", "the_builder-2", "x" * 64, "0.-_"]
)
def test_validate_alias_accepts_valid_aliases(alias: str) -> None:
    """Valid aliases come back unchanged, keeping their case for display."""
    assert validate_alias(alias) == alias


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "it is empty"),
        ("x" * 65, "65 characters long, more than 64"),
        ("-bob", "starts with '-'"),
        (".bob", "starts with '.'"),
        ("bo b", "character 3 (' ') is not allowed"),
        ("bób", "character 2 ('ó') is not allowed"),
        ("bob@api", "character 4 ('@') is not allowed"),
        ("bob\n", "character 4 ('\\n') is not allowed"),
        ("agt_bob", "reserved for agent ids"),
        ("AGT_0123456789abcdef", "reserved for agent ids"),
    ],
)
def test_validate_alias_refuses_invalid_aliases_with_the_reason(text: str, fragment: str) -> None:
    """Each broken rule gets validation_failed naming the rule and the bad character or length."""
    with pytest.raises(PagerError) as caught:
        validate_alias(text)
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert fragment in caught.value.message
    assert "1-64 characters" in caught.value.message


def test_validate_alias_refuses_non_text() -> None:
    """A non-string from a JSON payload is refused, not crashed on."""
    value: Any = 12
    with pytest.raises(PagerError, match="int, not text"):
        validate_alias(value)


@given(st.text(alphabet="abcAZ09._-_@ é", max_size=70))
def test_validate_alias_agrees_with_alias_re(text: str) -> None:
    """validate_alias accepts exactly what ALIAS_RE matches, minus the reserved prefix."""
    expected = ALIAS_RE.fullmatch(text) is not None and not text.lower().startswith("agt_")
    try:
        validate_alias(text)
    except PagerError:
        accepted = False
    else:
        accepted = True
    assert accepted is expected


def test_alias_key_ignores_case() -> None:
    """`Bob` and `bob` are one name; different names stay different."""
    assert alias_key("Bob.API") == alias_key("bob.api") == "bob.api"
    assert alias_key("bob") != alias_key("bob2")


def test_generate_handle_is_a_pronounceable_valid_alias() -> None:
    """Handles are lower-case consonant-vowel-consonant-vowel and valid aliases."""
    rng = random.Random(7)
    for _ in range(500):
        handle = generate_handle(lambda _: False, rng)
        assert re.fullmatch(r"[bcdfghjklmnprstvz][aeiou][bcdfghjklmnprstvz][aeiou]", handle)
        assert validate_alias(handle) == handle


def test_generate_handle_is_reproducible_with_a_seed() -> None:
    """The same seed gives the same handles (so tests can pin them)."""
    first = [generate_handle(lambda _: False, random.Random(3)) for _ in range(3)]
    assert first == [generate_handle(lambda _: False, random.Random(3)) for _ in range(3)]


def test_generate_handle_never_returns_a_taken_handle() -> None:
    """Handles already taken are skipped; each new one is added to the taken set."""
    taken: set[str] = set()
    rng = random.Random(11)
    for _ in range(300):
        handle = generate_handle(taken.__contains__, rng)
        assert handle not in taken
        taken.add(handle)


def test_generate_handle_grows_longer_when_four_letters_are_taken() -> None:
    """With every four-letter handle taken it falls back to five, then six letters."""
    five = generate_handle(lambda h: len(h) == 4, random.Random(1))
    assert _CVC.fullmatch(five)
    six = generate_handle(lambda h: len(h) <= 5, random.Random(1))
    assert len(six) == 6
    assert validate_alias(six) == six


def test_generate_handle_terminates_when_everything_is_taken() -> None:
    """A predicate that is always true ends in an internal error, not an endless loop."""
    calls: list[str] = []

    def taken(handle: str) -> bool:
        calls.append(handle)
        return True

    with pytest.raises(PagerError) as caught:
        generate_handle(taken, random.Random(5))
    assert caught.value.code is ErrorCode.INTERNAL
    assert 0 < len(calls) <= 280


class _Scripted(random.Random):
    """A Random whose `choice` spells out the given letters in order."""

    def __init__(self, letters: str) -> None:
        super().__init__(0)
        self._letters = iter(letters)

    def choice(self, seq: SupportsLenAndGetItem[_T]) -> _T:
        letter = next(self._letters)
        for index in range(len(seq)):
            if seq[index] == letter:
                return seq[index]
        raise AssertionError(f"{letter!r} is not among the choices")


def test_generate_handle_skips_blocklisted_words() -> None:
    """A handle spelling an unfortunate word is never returned, even when free."""
    asked: list[str] = []

    def taken(handle: str) -> bool:
        asked.append(handle)
        return False

    handle = generate_handle(taken, _Scripted("rapenazihica"))
    assert handle == "hica"
    assert asked == ["hica"]  # blocked words are not even offered to `taken`


def test_parse_address_accepts_the_three_forms() -> None:
    """An alias, an alias in a workspace, and an agent id each parse to their Address."""
    agent_id = new_agent_id()
    assert parse_address("bob") == Address(alias="bob", slug=None, agent_id=None)
    assert parse_address("Bob@api-3f9a1c") == Address(alias="Bob", slug="api-3f9a1c", agent_id=None)
    assert parse_address("bob@API-3F9A1C") == Address(alias="bob", slug="api-3f9a1c", agent_id=None)
    assert parse_address(agent_id) == Address(alias=None, slug=None, agent_id=agent_id)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "it is empty"),
        ("bo b", "character 3"),
        ("@api-3f9a1c", "it is empty"),
        ("bob@", "workspace slug ''"),
        ("bob@api", "workspace slug 'api'"),
        ("bob@api-3f9a1", "workspace slug"),
        ("bob@api-3f9a1c@x", "workspace slug"),
        ("bob@api 3f9a1c", "workspace slug"),
        ("agt_short", "not an agent id"),
        ("AGT_0123456789abcdef", "not an agent id"),
        ("agt_0123456789abcdef@api-3f9a1c", "not an agent id"),
        ("x" * 500, "more than 64"),
    ],
)
def test_parse_address_refuses_other_text_listing_the_forms(text: str, fragment: str) -> None:
    """Anything else is validation_failed, saying what is wrong and which forms are accepted."""
    with pytest.raises(PagerError) as caught:
        parse_address(text)
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert fragment in caught.value.message
    assert "`alias@workspace-slug`" in caught.value.message
    assert "agent id" in caught.value.message
    assert len(caught.value.message) < 400  # long input is shortened in the message


def test_parse_address_refuses_non_text() -> None:
    """A non-string `to` is refused with the accepted forms."""
    value: Any = ["bob"]
    with pytest.raises(PagerError, match="not text"):
        parse_address(value)


def test_format_address_round_trips_through_parse() -> None:
    """A formatted address parses back to its alias and slug."""
    slug = make_slug("/home/me/api", "/home/me/api/.git")
    address = format_address("Bob", slug)
    assert address == f"Bob@{slug}"
    assert parse_address(address) == Address(alias="Bob", slug=slug, agent_id=None)
