"""The identity rules of SPEC §7 as pure decisions (`pager.domain.identity_rules`): properties
of a registration's decision over every combination of request and rows, and tables of the
rename, alias claim, person and wake run decisions."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st

from pager.domain import identity_rules as rules
from pager.domain.addressing import PERSON
from pager.domain.errors import ErrorCode
from pager.domain.identity_rules import (
    AliasFree,
    ClaimAlias,
    Create,
    CreatePerson,
    Found,
    Name,
    Refuse,
    RegistrationFacts,
    Rejoin,
    TakeOver,
    UsePerson,
)
from pager.domain.records import Identity, Session, SessionState
from pager.domain.registration import Registration, WakeStart
from pager.domain.workspace import Workspace

WS = Workspace(key="k", slug="api-3f9a1c", path="/w/api", host="")
ME = "agt_" + "m" * 16


def identity(agent_id: str, *, implementation: str = "claude", archived: bool = False) -> Identity:
    return Identity(
        agent_id, WS.key, agent_id[-4:], True, implementation, 1.0, 1.0,
        archived_at=5.0 if archived else None,
    )  # fmt: skip


def session(identity_id: str) -> Session:
    return Session(
        "ses_" + identity_id[-16:], identity_id, 1, "t", "r", SessionState.ATTACHED, 1.0, 91.0
    )


def found(agent_id: str, *, attached: bool, wake_run: bool) -> Found:
    return Found(identity(agent_id), session(agent_id) if attached else None, wake_run)


founds = st.builds(
    found,
    st.sampled_from(["agt_" + c * 16 for c in "abc"]),
    attached=st.booleans(),
    wake_run=st.booleans(),
)
RESERVER = "agt_" + "r" * 16
names = st.one_of(
    st.builds(Name),
    st.builds(Name, holder=founds),
    st.builds(Name, reserved_by=st.just(RESERVER), reserver=st.none()),
    st.builds(Name, reserved_by=st.just(RESERVER), reserver=st.just(identity(RESERVER))),
)
requests = st.builds(
    Registration,
    workspace=st.just(WS),
    implementation=st.just("claude"),
    session_name=st.one_of(st.none(), st.just("Bob")),
    conversation_key=st.one_of(st.none(), st.just("conv-1")),
    delivery=st.none(),
    force=st.booleans(),
    resume_token=st.one_of(st.none(), st.just("rsm_x")),
)
facts = st.builds(
    RegistrationFacts,
    resumed=st.one_of(st.none(), founds),
    conversation=st.one_of(st.none(), founds),
    name=names,
)


def decide(request: Registration, known: RegistrationFacts) -> rules.RegistrationDecision:
    """The decision, given only the rows a backend reads for this request."""
    return rules.decide_registration(
        request,
        RegistrationFacts(
            resumed=known.resumed if request.resume_token is not None else None,
            conversation=known.conversation if request.conversation_key is not None else None,
            name=known.name if request.session_name is not None else Name(),
        ),
    )


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(requests, facts)
def test_a_resume_token_names_its_identity_or_is_refused(
    request: Registration, known: RegistrationFacts
) -> None:
    decided = decide(request, known)
    if request.resume_token is None:
        return
    if known.resumed is None:
        assert isinstance(decided, Refuse)
        assert decided.code is ErrorCode.UNAUTHENTICATED
    else:
        assert decided == Rejoin(known.resumed)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(requests, facts)
def test_a_bound_conversation_rejoins_before_any_name(
    request: Registration, known: RegistrationFacts
) -> None:
    if request.resume_token is not None or request.conversation_key is None:
        return
    if known.conversation is not None:
        assert decide(request, known) == Rejoin(known.conversation)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(requests, facts)
def test_nobody_takes_over_a_held_identity_without_force(
    request: Registration, known: RegistrationFacts
) -> None:
    """A takeover only with `force`, only of an identity a session (not a wake run) holds,
    and only by name; without `force` a held name is refused with its holder's details."""
    decided = decide(request, known)
    if isinstance(decided, TakeOver):
        assert request.force
        assert request.session_name is not None
        assert decided.found.held
        assert decided.found == known.name.holder
    by_name = request.resume_token is None and (
        request.conversation_key is None or known.conversation is None
    )
    holder = known.name.holder
    if by_name and request.session_name is not None and holder is not None and holder.held:
        if request.force:
            assert decided == TakeOver(holder)
        else:
            assert isinstance(decided, Refuse)
            assert decided.code is ErrorCode.ALIAS_CONFLICT
            assert decided.about == holder.identity


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(requests, facts)
def test_a_new_identity_is_named_durably_or_gets_a_handle(
    request: Registration, known: RegistrationFacts
) -> None:
    """A name nobody holds nor reserved makes a durable identity of that name (never with a
    reserved name: that refuses, even forced); no name makes an unnamed one."""
    decided = decide(request, known)
    if isinstance(decided, Create):
        assert decided.alias == request.session_name
        assert decided.durable is (request.session_name is not None)
        if request.session_name is not None:
            assert known.name.holder is None
            assert known.name.reserved_by is None
    if (
        isinstance(decided, Refuse)
        and request.resume_token is None
        and known.name.reserved_by is not None
    ):
        assert decided.code is ErrorCode.ALIAS_CONFLICT
        assert decided.about == known.name.reserver


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(founds)
def test_a_rejoin_replaces_the_attached_session_and_a_wake_run_yields(target: Found) -> None:
    ending = rules.ending(target)
    if target.attached is None:
        assert ending is None
        assert not rules.hands_on(target)
        return
    assert ending is not None
    assert ending.session == target.attached
    assert ending.cause == ("wake_yielded" if target.wake_run else "replaced")
    assert rules.hands_on(target) is (not target.wake_run)


ALICE = identity("agt_" + "a" * 16)


@pytest.mark.parametrize(
    ("holder", "reserved_by", "force", "expected"),
    [
        (None, None, False, AliasFree(False)),
        (None, ME, False, AliasFree(False)),  # its own reservation
        (Found(identity(ME)), ME, False, AliasFree(False)),  # its own alias
        (None, ALICE.id, False, ErrorCode.ALIAS_CONFLICT),
        (None, ALICE.id, True, AliasFree(True)),  # force frees a mere reservation
        (Found(ALICE), ALICE.id, False, ErrorCode.ALIAS_CONFLICT),
        (Found(ALICE), ALICE.id, True, ErrorCode.ALIAS_CONFLICT),  # a holder: never, even forced
    ],
)
def test_an_alias_claim(
    holder: Found | None, reserved_by: str | None, force: bool, expected: object
) -> None:
    decided = rules.decide_alias_claim(
        "alice", ME, holder=holder, reserved_by=reserved_by, reserver=None, force=force
    )
    if isinstance(expected, ErrorCode):
        assert isinstance(decided, Refuse)
        assert decided.code is expected
    else:
        assert decided == expected


HELD = Found(ALICE, session(ALICE.id))


@pytest.mark.parametrize(
    ("holder", "force", "claim", "session_open", "expected"),
    [
        (None, False, False, True, ClaimAlias()),
        (None, True, False, True, ClaimAlias()),
        (None, False, True, True, ErrorCode.UNKNOWN_RECIPIENT),
        (HELD, False, False, True, ClaimAlias()),  # the claim then refuses: held
        (HELD, False, True, True, ErrorCode.ALIAS_CONFLICT),
        (HELD, True, False, True, TakeOver(HELD)),
        (HELD, True, True, True, TakeOver(HELD)),
        (HELD, True, False, False, ErrorCode.ENDED),
        (Found(ALICE), False, True, True, TakeOver(Found(ALICE))),  # detached: claimed
        (Found(identity(ME)), True, False, True, ClaimAlias()),  # its own alias
    ],
)
def test_a_rename(
    holder: Found | None, force: bool, claim: bool, session_open: bool, expected: object
) -> None:
    decided = rules.decide_rename(
        "alice", identity(ME), holder, force=force, claim=claim, session_open=session_open
    )
    if isinstance(expected, ErrorCode):
        assert isinstance(decided, Refuse)
        assert decided.code is expected
    else:
        assert decided == expected


PERSON_ID = identity("agt_" + "p" * 16, implementation=PERSON)


@pytest.mark.parametrize(
    ("person", "by_alias", "reserved_by", "expected"),
    [
        (None, None, None, CreatePerson("jo")),
        (PERSON_ID, None, None, UsePerson(PERSON_ID)),
        (None, PERSON_ID, None, UsePerson(PERSON_ID)),
        (None, ALICE, None, ErrorCode.ALIAS_CONFLICT),  # an agent holds the name
        (None, None, ALICE.id, ErrorCode.ALIAS_CONFLICT),  # a former holder reserved it
    ],
)
def test_the_persons_identity(
    person: Identity | None, by_alias: Identity | None, reserved_by: str | None, expected: object
) -> None:
    decided = rules.decide_person("jo", person=person, by_alias=by_alias, reserved_by=reserved_by)
    if isinstance(expected, ErrorCode):
        assert isinstance(decided, Refuse)
        assert decided.code is expected
    else:
        assert decided == expected


WAKE = WakeStart(ALICE.id, "run_1", max_runs_per_hour=2)


@pytest.mark.parametrize(
    ("target", "attached", "starts", "expected"),
    [
        (ALICE, False, [], None),
        (None, False, [], ErrorCode.NOT_FOUND),
        (identity(ALICE.id, archived=True), False, [], ErrorCode.CONFLICT),
        (ALICE, True, [], ErrorCode.CONFLICT),
        (ALICE, False, [3000.0], None),
        (ALICE, False, [3000.0, 3500.0], ErrorCode.RATE_LIMITED),
    ],
)
def test_a_wake_runs_start(
    target: Identity | None, attached: bool, starts: list[float], expected: ErrorCode | None
) -> None:
    refused = rules.decide_wake_run(WAKE, target, attached=attached, starts=starts, now=4000.0)
    assert (None if refused is None else refused.code) is expected
    if expected is ErrorCode.RATE_LIMITED:
        assert refused is not None
        assert dict(refused.details)["retry_after_s"] == 2600.0
