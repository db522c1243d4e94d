"""The identity rules of SPEC §7 as pure decisions: a registration, a rename, a move's alias
claim, the person's identity and a wake run's start.

Each function takes the request and the rows a backend read for it (inside the transaction
that will apply the answer) and returns a decision value; the backend writes what the decision
says (`pager/store/_registration.py`) and turns a `Refuse` into the error, adding the
holder's details it reads. Nothing here reads or writes a database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from pager.domain import ids
from pager.domain.addressing import PERSON
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.records import Identity, Session
from pager.domain.registration import Registration, WakeStart
from pager.domain.wake import hourly_retry_after

#: The end reason of a wake run's session when someone attaches to its identity.
WAKE_YIELDED = "a session attached to this agent: the wake run ends"

#: The end reason of a session a newer attachment of its identity replaced.
REPLACED = "replaced by a newer attachment"

#: The end reason of a holder's session. Its token never answers with it: it runs on as a
#: fresh unnamed agent.
TAKEN_OVER = "taken over by another session (force)"


@attrs.frozen
class Found:
    """An identity as a decision sees it: with its attached session, if any, and whether that
    session is a wake run's (which yields to anyone attaching: it holds nothing)."""

    identity: Identity
    attached: Session | None = None
    wake_run: bool = False

    @property
    def held(self) -> bool:
        """Whether a session other than a wake run is attached to it."""
        return self.attached is not None and not self.wake_run


@attrs.frozen
class Refuse:
    """A refusal: nothing changes. `about` is the identity whose holder details the error
    carries (the backend reads its address); `details` are further fields of the error."""

    code: ErrorCode
    message: str
    about: Identity | None = None
    details: tuple[tuple[str, Any], ...] = ()
    hint: Hint | None = None  # what to do next, said by each edge in its own words

    def error(self, holder: dict[str, Any] | None = None) -> PagerError:
        return PagerError(
            self.code, self.message, hint=self.hint, **(holder or {}), **dict(self.details)
        )


# -- a registration --------------------------------------------------------------------------


@attrs.frozen
class Name:
    """What the store holds for a registration's session name in its workspace: the identity
    holding that alias now; else the id (and identity, if it still exists) that reserved it."""

    holder: Found | None = None
    reserved_by: str | None = None
    reserver: Identity | None = None


@attrs.frozen
class RegistrationFacts:
    """The rows a registration's decision reads, each only when the request names it: the
    identity of the resume token's session, the identity the conversation is bound to, and
    the session name's holder."""

    resumed: Found | None = None
    conversation: Found | None = None
    name: Name = Name()


@attrs.frozen
class Create:
    """A new identity: named `alias` (durable), or a generated handle (`alias` None)."""

    alias: str | None

    @property
    def durable(self) -> bool:
        return self.alias is not None


@attrs.frozen
class Rejoin:
    """A new session of an existing identity; its attached session, if any, ends (`ending`)."""

    found: Found


@attrs.frozen
class TakeOver:
    """A forced takeover of an identity another session holds (`take_over`)."""

    found: Found


RegistrationDecision = Refuse | Create | Rejoin | TakeOver


def decide_registration(request: Registration, facts: RegistrationFacts) -> RegistrationDecision:
    """SPEC §7's order: a resume token names its identity (or is refused); else the bound
    conversation rejoins its identity; else a session name rejoins its holder (refused while
    another session holds it, unless `force` takes it over; refused when it is only reserved
    by the identity that held it before); else a new identity is made."""
    if request.resume_token is not None:
        if facts.resumed is None:
            return Refuse(
                ErrorCode.UNAUTHENTICATED,
                "unknown resume token (or its identity was purged); register without it",
            )
        return Rejoin(facts.resumed)
    if request.conversation_key is not None and facts.conversation is not None:
        return Rejoin(facts.conversation)
    name = request.session_name
    if name is None:
        return Create(None)
    holder = facts.name.holder
    if holder is None:
        if facts.name.reserved_by is not None:
            return Refuse(
                ErrorCode.ALIAS_CONFLICT,
                f"{name!r} is reserved for {facts.name.reserved_by}, which held it before;"
                " choose another name",
                about=facts.name.reserver,
            )
        return Create(name)
    if not holder.held:
        return Rejoin(holder)
    if not request.force:
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"{name!r} is attached to another session; choose another name, or force a takeover",
            about=holder.identity,
        )
    return TakeOver(holder)


@attrs.frozen
class Ending:
    """How an identity's attached session ends when another attaches: its end reason (what
    its token answers) and the event's cause."""

    session: Session
    reason: str
    cause: str


def ending(found: Found) -> Ending | None:
    """The end of `found`'s attached session when a new session rejoins it: a wake run yields
    (docs/wake.md), any other is replaced."""
    if found.attached is None:
        return None
    if found.wake_run:
        return Ending(found.attached, WAKE_YIELDED, "wake_yielded")
    return Ending(found.attached, REPLACED, "replaced")


def hands_on(found: Found) -> bool:
    """Whether a takeover hands the holder's token on to a fresh unnamed agent: yes, unless
    nobody is attached or the holder is a wake run (which just ends)."""
    return found.attached is not None and not found.wake_run


# -- a wake run's start ----------------------------------------------------------------------


def decide_wake_run(
    wake: WakeStart,
    target: Identity | None,
    *,
    attached: bool,
    starts: Sequence[float],
    now: float,
) -> Refuse | None:
    """Whether a wake run may attach a session to its identity (None) or why not: `not_found`
    (gone), `conflict` (archived, or a session is attached: the ordinary wake applies then),
    `rate_limited` with `retry_after_s` (the hourly bound, given the runs' `starts` within the
    last hour)."""
    if target is None:
        return Refuse(ErrorCode.NOT_FOUND, f"no agent {wake.agent_id}")
    if target.archived_at is not None:
        return Refuse(ErrorCode.CONFLICT, f"{wake.agent_id} is archived")
    if attached:
        return Refuse(ErrorCode.CONFLICT, f"{wake.agent_id} has a session attached")
    retry = hourly_retry_after(list(starts), wake.max_runs_per_hour, now)
    if retry is not None:
        return Refuse(
            ErrorCode.RATE_LIMITED,
            f"{wake.agent_id} had {len(starts)} wake runs in the last hour"
            f" (at most {wake.max_runs_per_hour})",
            details=(("retry_after_s", round(retry, 3)),),
        )
    return None


# -- an alias claimed by an identity (a rename, a move) --------------------------------------


@attrs.frozen
class AliasFree:
    """The alias is free for the identity; `reassign` moves its reservation to it (a forced
    claim of an alias merely reserved by a former holder)."""

    reassign: bool


def decide_alias_claim(
    alias: str,
    agent_id: str,
    *,
    holder: Found | None,
    reserved_by: str | None,
    reserver: Identity | None,
    force: bool,
) -> Refuse | AliasFree:
    """Whether `agent_id` may take `alias` in a workspace where `holder` holds it now and
    `reserved_by` reserved it. An alias another identity holds now is never freed, even with
    `force` (a forced rename takes that identity over instead); `force` only frees an alias
    merely reserved by an identity that held it before."""
    if holder is not None and holder.identity.id != agent_id:
        state = "attached" if holder.attached is not None else "not attached"
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"the alias {alias!r} belongs to {holder.identity.id} ({state})",
            about=holder.identity,
            hint=Hint.ALIAS_FORCE,
        )
    if reserved_by is None or reserved_by == agent_id:
        return AliasFree(reassign=False)
    if not force:
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"the alias {alias!r} is reserved: {reserved_by} held it before; choose another",
            about=reserver,
        )
    return AliasFree(reassign=True)


@attrs.frozen
class ClaimAlias:
    """A plain rename: claim the alias (`decide_alias_claim`), then take it."""


RenameDecision = Refuse | TakeOver | ClaimAlias


def decide_rename(
    alias: str,
    me: Identity,
    holder: Found | None,
    *,
    force: bool,
    claim: bool,
    session_open: bool,
) -> RenameDecision:
    """`update_agent_alias` / `pager claim`: with `claim`, the alias must name an identity in
    the caller's workspace, taken over only with `force` while a session is attached to it; a
    forced (or claimed) alias held by another identity takes that identity over, which needs
    the caller's session still open (`session_open`); else a plain rename."""
    if claim and holder is None:
        return Refuse(
            ErrorCode.UNKNOWN_RECIPIENT,
            f"no identity is named {alias!r} in this workspace",
            hint=Hint.WHO_LISTS,
        )
    if claim and not force and holder is not None and holder.attached is not None:
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"{alias!r} is attached to a session",
            about=holder.identity,
            hint=Hint.CLAIM_FORCE,
        )
    if (force or claim) and holder is not None and holder.identity.id != me.id:
        if not session_open:  # it ended while this request waited
            return Refuse(
                ErrorCode.ENDED, "this session ended before the takeover; nothing changed"
            )
        return TakeOver(holder)
    return ClaimAlias()


# -- the person's identity -------------------------------------------------------------------


@attrs.frozen
class UsePerson:
    """The person's identity exists: use it (shown again if it was archived)."""

    identity: Identity


@attrs.frozen
class CreatePerson:
    """The person's first use in this workspace: a durable identity named `alias`."""

    alias: str

    def identity(self, workspace_key: str, now: float) -> Identity:
        """The identity made: durable, the person's, never attached (its retention clock
        starts now)."""
        return Identity(
            id=ids.new_agent_id(),
            workspace_key=workspace_key,
            alias=self.alias,
            durable=True,
            implementation=PERSON,
            created_at=now,
            last_seen=now,
            detached_at=now,
        )


def decide_person(
    alias: str,
    *,
    person: Identity | None,
    by_alias: Identity | None,
    reserved_by: str | None,
) -> Refuse | UsePerson | CreatePerson:
    """The person's identity in a workspace (SPEC §4.2): the one of implementation `PERSON`
    (`person`, whatever its alias now), else the holder of `alias` if it is the person's;
    an agent holding the name, or a former holder's reservation of it, refuses."""
    holder = person if person is not None else by_alias
    if holder is not None and holder.implementation != PERSON:
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"the name {alias!r} in this workspace belongs to an agent ({holder.id},"
            f" {holder.implementation}), so you cannot use it; choose your name with"
            ' `[cli] name = "…"` in config.toml',
            about=holder,
        )
    if holder is not None:
        return UsePerson(holder)
    if reserved_by is not None:
        return Refuse(
            ErrorCode.ALIAS_CONFLICT,
            f"the name {alias!r} in this workspace is reserved for {reserved_by}, which held it"
            ' before; choose your name with `[cli] name = "…"` in config.toml',
        )
    return CreatePerson(alias)
