"""Aliases, generated handles and addresses (SPEC §2, §7).

Case: an alias is unique case-insensitively within its workspace (SPEC §7). Input may use `A-Z`
as well as `a-z 0-9 . _ -`; the alias keeps the form it was given for display, and every uniqueness
check and lookup goes through `alias_key` (lower case), so `Bob` and `bob` are one name.

Reserved: aliases beginning with `agt_` (in any case) are refused, so an address is never both an
alias and an agent id.

Addresses take three forms: `alias`, `alias@workspace-slug`, or an agent id (`agt_…`). Slugs are
always lower case; one given in upper case is accepted and lowered.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import NoReturn

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.ids import Kind, looks_like
from pager.domain.workspace import is_slug

ALIAS_MAX = 64
#: SPEC §7, plus upper case (compared case-insensitively via `alias_key`).
ALIAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ALIAS_RULE = (
    "1-64 characters of a-z (either case), 0-9, '.', '_', '-', starting with a letter or digit"
)
_ALIAS_CHAR = re.compile(r"[A-Za-z0-9._-]")
_RESERVED_PREFIX = f"{Kind.AGENT.value}_"

ADDRESS_FORMS = "`alias`, `alias@workspace-slug` (e.g. `bob@api-3f9a1c`), or an agent id (`agt_…`)"

# Handles: no q/w/x/y (awkward or ambiguous as letters), so a handle is easy to say and spell.
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
#: (length, tries): four letters first (17*5*17*5 = 7225 handles), then longer ones when crowded.
_HANDLE_PLAN = ((4, 40), (5, 40), (6, 200))
#: Unfortunate words (in a few languages) that consonant-vowel letters can spell; a handle
#: containing one anywhere is skipped.
_BLOCKLIST = frozenset(
    {
        "anal", "anus", "caca", "culo", "dago", "dike", "fagot", "hate", "homo", "hore",
        "jihad", "kaka", "kike", "kuso", "lame", "nazi", "nude", "pedo", "pene", "penis",
        "pija", "pito", "pubes", "puta", "pute", "puto", "rape", "semen", "sodom", "teta",
        "vagina", "zina",
    }
)  # fmt: skip


@attrs.frozen
class Address:
    """A parsed address: an alias (optionally in a workspace given by slug), or an agent id."""

    alias: str | None
    slug: str | None
    agent_id: str | None


def alias_key(alias: str) -> str:
    """The form of an alias for uniqueness and lookup (aliases are ASCII: lower == casefold)."""
    return alias.lower()


def validate_alias(text: str) -> str:
    """`text` if it is a valid alias, unchanged; else PagerError(validation_failed) saying why."""
    problem = _alias_problem(text)
    if problem is not None:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"invalid alias {_show(text)}: {problem}; give {ALIAS_RULE}",
        )
    return text


def _alias_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"it is {type(text).__name__}, not text"
    if not text:
        return "it is empty"
    if len(text) > ALIAS_MAX:
        return f"it is {len(text)} characters long, more than {ALIAS_MAX}"
    for position, char in enumerate(text, start=1):
        if not _ALIAS_CHAR.fullmatch(char):
            return f"character {position} ({char!r}) is not allowed"
    if not text[0].isalnum():
        return f"it starts with {text[0]!r}"
    if alias_key(text).startswith(_RESERVED_PREFIX):
        return f"the prefix {_RESERVED_PREFIX!r} is reserved for agent ids"
    return None


def generate_handle(taken: Callable[[str], bool], rng: random.Random | None = None) -> str:
    """A pronounceable lower-case handle (`hica`) for which `taken` is false; also a valid alias.

    Consonant-vowel pairs, four letters while free ones are easy to find, then five and six.
    `taken` receives the handle in lower case (compare it by `alias_key`). Raises
    PagerError(internal) after a bounded number of tries rather than spin forever.
    """
    source = rng if rng is not None else random.SystemRandom()
    tries = 0
    for length, attempts in _HANDLE_PLAN:
        for _ in range(attempts):
            tries += 1
            handle = "".join(
                source.choice(_CONSONANTS if i % 2 == 0 else _VOWELS) for i in range(length)
            )
            if any(word in handle for word in _BLOCKLIST) or taken(handle):
                continue
            return handle
    raise PagerError(ErrorCode.INTERNAL, f"no free handle found in {tries} tries")


def parse_address(text: str) -> Address:
    """Parse `alias`, `alias@slug` or an agent id; else PagerError(validation_failed)."""
    if looks_like(Kind.AGENT, text):
        return Address(alias=None, slug=None, agent_id=text)
    if not isinstance(text, str):
        _bad_address(text, "it is not text")
    alias, at, slug = text.partition("@")
    problem = _alias_problem(alias)
    if problem is not None:
        if text.lower().startswith(_RESERVED_PREFIX):
            problem = "it is not an agent id (`agt_` + 16 lower-case base32 characters)"
        else:
            part = f"the alias part {_show(alias)}:" if at else "as an alias,"
            problem = f"{part} {problem} ({ALIAS_RULE})"
        _bad_address(text, problem)
    if not at:
        return Address(alias=alias, slug=None, agent_id=None)
    if not is_slug(slug.lower()):
        _bad_address(
            text,
            f"the workspace slug {_show(slug)} is not a name, '-', and 6 hex digits",
        )
    return Address(alias=alias, slug=slug.lower(), agent_id=None)


def format_address(alias: str, slug: str) -> str:
    """The address reachable from any workspace: `alias@slug`."""
    return f"{alias}@{slug}"


def _bad_address(text: object, problem: str) -> NoReturn:
    raise PagerError(
        ErrorCode.VALIDATION_FAILED,
        f"{_show(text)} is not an address: {problem}. Give {ADDRESS_FORMS}",
    )


def _show(value: object, limit: int = 80) -> str:
    """A repr short enough for an error message (the input may be a whole message body)."""
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}…"


def alias_of_login(login: str) -> str:
    """The person's default alias (SPEC §4.2): the login name, made a valid alias (characters
    an alias cannot have become `-`; `person` when nothing of it is left)."""
    shaped = "".join(c if _ALIAS_CHAR.fullmatch(c) else "-" for c in login[:ALIAS_MAX])
    shaped = shaped.lstrip("._-")
    if not shaped or _alias_problem(shaped) is not None:
        return "person"
    return shaped
