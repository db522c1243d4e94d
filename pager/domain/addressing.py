"""What an address names (SPEC §2, §7), decided here once for every backend and every edge.

An address is parsed by `names.parse_address`; this module says which stored identity it
names. A backend runs the one query `lookup_of` describes (the identity answering to the
address now, with its workspace's slug); when nothing answers, `not_named_now` says where to
look for a former holder of the alias and `unnamed` decides from what that look found: the
new address of a renamed identity (`recipient_alias_changed`, or the identity itself for a
history read), or `unknown_recipient`. The person is reachable from every workspace by their
name (`reaches_person`). Nothing here touches a database.

The rules, in one place:
- an agent id names that identity, wherever it is;
- `alias@slug` names the alias's holder in the workspace with that slug;
- a bare `alias` names the holder in the caller's own workspace;
- aliases compare case-insensitively (`names.alias_key`); an alias stays reserved for the
  identity that held it in its workspace, so an old address never reaches someone else.
"""

from __future__ import annotations

from typing import NoReturn

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.ids import Kind
from pager.domain.names import Address, alias_key, format_address
from pager.domain.records import Identity

_AGENT_PREFIX = f"{Kind.AGENT.value}_"

#: The implementation of the person's identity (SPEC §4.2): no harness, never a session.
PERSON = "human"


@attrs.frozen
class Resolved:
    """The identity an address names now, its current address and its implementation (what
    the CLI tells a sender about how the recipient will see the mail)."""

    id: str
    address: str
    implementation: str = attrs.field(default="", eq=False)


@attrs.frozen
class Lookup:
    """The one query for the identity an address names now: by `agent_id`; or by `alias_key`
    in the workspace of slug `slug`; or by `alias_key` in the workspace of identity `beside`
    (the caller's own)."""

    agent_id: str | None
    alias_key: str | None
    slug: str | None
    beside: str | None


def lookup_of(address: Address, caller_id: str) -> Lookup:
    if address.agent_id is not None:
        return Lookup(agent_id=address.agent_id, alias_key=None, slug=None, beside=None)
    key = alias_key(_alias(address))
    if address.slug is not None:
        return Lookup(agent_id=None, alias_key=key, slug=address.slug, beside=None)
    return Lookup(agent_id=None, alias_key=key, slug=None, beside=caller_id)


def named(identity: Identity, slug: str) -> Resolved:
    """What an address answers with when `identity` (in the workspace `slug`) holds it now."""
    return Resolved(identity.id, format_address(identity.alias, slug), identity.implementation)


@attrs.frozen
class FormerHolder:
    """Where to look for the identity that held an alias no one answers to now: the
    reservation of `alias_key` in the workspace of slug `slug` (None: the caller's own)."""

    alias_key: str
    slug: str | None


def not_named_now(address: Address, text: str) -> FormerHolder:
    """Nothing answers to `address` now: an agent id is then unknown (ids are never reused);
    an alias may have been held by someone since renamed."""
    if address.agent_id is not None:
        raise unknown_recipient(text)
    return FormerHolder(alias_key(_alias(address)), address.slug)


def unnamed(
    text: str,
    former: FormerHolder,
    *,
    workspace_known: bool,
    holder: tuple[Identity, str] | None,
    history: bool,
) -> Resolved:
    """The answer for an alias nobody holds now, given whether the workspace it names exists
    and the identity (with its slug) that reserved it there, if any. A send is refused with
    the new address (`recipient_alias_changed`: the sender decides whether it is still meant);
    a history read (`history`) follows the rename."""
    if not workspace_known:
        raise unknown_recipient(text, f"no workspace {former.slug!r} is known")
    if holder is None:
        raise unknown_recipient(text)
    resolved = named(*holder)
    if history:
        return resolved
    raise PagerError(
        ErrorCode.RECIPIENT_ALIAS_CHANGED,
        f"{text!r} is now {resolved.address}; send to the current address if it is still meant",
        current_address=resolved.address,
        agent_id=resolved.id,
    )


def reaches_person(address: Address, refused: PagerError, person_alias: str) -> bool:
    """Whether a send refused with `refused` reaches the person instead: a bare alias that
    names no one in the caller's workspace but is the person's name (SPEC §4.2)."""
    bare = address.alias is not None and address.slug is None
    return (
        refused.code is ErrorCode.UNKNOWN_RECIPIENT
        and bare
        and alias_key(_alias(address)) == alias_key(person_alias)
    )


def made_meanwhile(address: str) -> PagerError:
    """A send whose write was to make the person's identity (`address`) found it made by
    another write meanwhile: nothing was sent; the sender's service sends it again, once, to
    the identity made (`made_meanwhile` in the details says so)."""
    return PagerError(
        ErrorCode.UNKNOWN_RECIPIENT,
        f"{address} was made by another send meanwhile; nothing was sent: send again",
        made_meanwhile=True,
    )


def answers_to(given: str, *, agent_id: str, alias: str, address: str) -> bool:
    """Whether a listed identity answers to `given` as the operator names it: its agent id,
    its address (`alias@slug`), or its alias in any workspace, aliases and slugs compared
    case-insensitively."""
    if given.startswith(_AGENT_PREFIX):
        return given == agent_id
    if "@" in given:
        alias_part, _, slug = given.partition("@")
        mine, _, my_slug = address.partition("@")
        return alias_key(alias_part) == alias_key(mine) and slug.lower() == my_slug.lower()
    return alias_key(given) == alias_key(alias)


def unknown_recipient(text: str, why: str | None = None) -> PagerError:
    return PagerError(
        ErrorCode.UNKNOWN_RECIPIENT,
        f"no agent {text!r}" + (f" ({why})" if why else ""),
        hint=Hint.ROSTER,
    )


def _alias(address: Address) -> str:
    if address.alias is None:
        _not_parsed(address)
    return address.alias


def _not_parsed(address: Address) -> NoReturn:
    raise ValueError(f"{address!r} is neither an agent id nor an alias: not a parsed address")
