"""The hint table's translation of an answer's advice into another edge's words."""

from __future__ import annotations

from pager.domain.addressing import unknown_recipient
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Edge, Hint, for_edge


def test_an_answer_for_one_edge_is_said_for_another() -> None:
    error = PagerError(ErrorCode.NOT_FOUND, "you sent no message 'msg_x'", hint=Hint.OWN_SENDS)
    for said in Edge:
        for edge in Edge:
            assert for_edge(error.to_json(said), edge) == error.text(edge)


def test_an_unknown_key_or_wording_leaves_the_message_as_it_came() -> None:
    newer = {"code": "conflict", "message": "no; do X", "hint": "from_a_newer_broker"}
    assert for_edge(newer, Edge.CLI) == "no; do X"
    changed = {"code": "not_found", "message": "gone; look elsewhere", "hint": "own_sends"}
    assert for_edge(changed, Edge.CLI) == "gone; look elsewhere"
    assert for_edge({"code": "internal", "message": "failed"}, Edge.CLI) == "failed"


def test_the_store_raises_its_hint_by_key() -> None:
    """An unknown recipient (raised in the store and the addressing rules) carries `roster` as
    a key, and each edge says it in its own words."""
    error = unknown_recipient("x")
    assert (error.message, error.hint) == ("no agent 'x'", Hint.ROSTER)
    assert error.text(Edge.CLI) == (
        "no agent 'x'; see `pager who` (`pager who --all` for other workspaces)"
    )


def test_a_message_is_never_read_for_a_hint() -> None:
    """Text that happens to end like an old hint (a caller's alias or body quoted in it) stays
    as written: hints come only from the key the raiser gives."""
    quoted = "the body ends with '; see `roster`'"
    error = PagerError(ErrorCode.VALIDATION_FAILED, quoted + "; see `roster`")
    assert (error.message, error.hint) == (quoted + "; see `roster`", None)
    assert error.text(Edge.CLI) == quoted + "; see `roster`"
