"""What an address names (SPEC §2, §7), decided by `pager.domain.addressing` alone."""

from __future__ import annotations

import pytest

from pager.domain import addressing
from pager.domain.addressing import FormerHolder, Lookup, Resolved
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import parse_address
from pager.domain.records import Identity

AGENT = "agt_" + "a" * 16
ME = "agt_" + "m" * 16


def identity(alias: str, agent_id: str = AGENT, implementation: str = "claude") -> Identity:
    return Identity(agent_id, "ws-key", alias, True, implementation, 1.0, 1.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (AGENT, Lookup(agent_id=AGENT, alias_key=None, slug=None, beside=None)),
        ("Bob", Lookup(agent_id=None, alias_key="bob", slug=None, beside=ME)),
        ("Bob@API-3f9a1c", Lookup(agent_id=None, alias_key="bob", slug="api-3f9a1c", beside=None)),
    ],
)
def test_an_address_names_one_query(text: str, expected: Lookup) -> None:
    """An id by id; `alias@slug` in that workspace; a bare alias in the caller's own; aliases
    and slugs case-insensitively."""
    assert addressing.lookup_of(parse_address(text), ME) == expected


def test_the_holder_now_answers_with_its_current_address() -> None:
    resolved = addressing.named(identity("Bob"), "api-3f9a1c")
    assert resolved == Resolved(AGENT, "Bob@api-3f9a1c")
    assert resolved.implementation == "claude"


def test_an_unknown_agent_id_is_unknown_and_names_no_former_holder() -> None:
    with pytest.raises(PagerError) as refused:
        addressing.not_named_now(parse_address(AGENT), AGENT)
    assert refused.value.code is ErrorCode.UNKNOWN_RECIPIENT


@pytest.mark.parametrize(
    ("text", "former"),
    [("bob", FormerHolder("bob", None)), ("BOB@api-3f9a1c", FormerHolder("bob", "api-3f9a1c"))],
)
def test_an_alias_nobody_holds_is_looked_up_in_its_reservations(
    text: str, former: FormerHolder
) -> None:
    assert addressing.not_named_now(parse_address(text), text) == former


@pytest.mark.parametrize(
    ("workspace_known", "holder", "history", "code", "answer"),
    [
        (False, None, False, ErrorCode.UNKNOWN_RECIPIENT, None),
        (False, None, True, ErrorCode.UNKNOWN_RECIPIENT, None),
        (True, None, False, ErrorCode.UNKNOWN_RECIPIENT, None),
        (True, (identity("carol"), "api-3f9a1c"), False, ErrorCode.RECIPIENT_ALIAS_CHANGED, None),
        (True, (identity("carol"), "api-3f9a1c"), True, None, Resolved(AGENT, "carol@api-3f9a1c")),
    ],
)  # fmt: skip
def test_a_former_alias_never_reaches_anyone_but_says_where_its_holder_went(
    workspace_known: bool,
    holder: tuple[Identity, str] | None,
    history: bool,
    code: ErrorCode | None,
    answer: Resolved | None,
) -> None:
    """A send to a renamed identity's old address is refused with the new one (the sender
    decides); a history read follows the rename; nothing else answers."""
    former = FormerHolder("bob", "api-3f9a1c")
    if code is None:
        decided = addressing.unnamed(
            "bob@api-3f9a1c", former, workspace_known=workspace_known, holder=holder,
            history=history,
        )  # fmt: skip
        assert decided == answer
        return
    with pytest.raises(PagerError) as refused:
        addressing.unnamed(
            "bob@api-3f9a1c", former, workspace_known=workspace_known, holder=holder,
            history=history,
        )  # fmt: skip
    assert refused.value.code is code
    if code is ErrorCode.RECIPIENT_ALIAS_CHANGED:
        assert refused.value.details["current_address"] == "carol@api-3f9a1c"
    if not workspace_known:
        assert "no workspace 'api-3f9a1c' is known" in refused.value.message


@pytest.mark.parametrize(
    ("text", "code", "reaches"),
    [
        ("Jo", ErrorCode.UNKNOWN_RECIPIENT, True),
        ("jo", ErrorCode.UNKNOWN_RECIPIENT, True),
        ("jo@api-3f9a1c", ErrorCode.UNKNOWN_RECIPIENT, False),  # an address, not the name
        ("jo", ErrorCode.RECIPIENT_ALIAS_CHANGED, False),  # someone held it: say so
        ("bob", ErrorCode.UNKNOWN_RECIPIENT, False),
        (AGENT, ErrorCode.UNKNOWN_RECIPIENT, False),
    ],
)
def test_the_person_is_reached_by_their_bare_name_from_any_workspace(
    text: str, code: ErrorCode, reaches: bool
) -> None:
    refused = PagerError(code, "no")
    assert addressing.reaches_person(parse_address(text), refused, "JO") is reaches
