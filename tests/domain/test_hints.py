"""The hint table's translation of an answer's advice into another edge's words."""

from __future__ import annotations

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


def test_a_hint_the_store_wrote_as_text_is_read_as_its_key() -> None:
    error = PagerError(
        ErrorCode.UNKNOWN_RECIPIENT, "no agent 'x'; see `roster` (scope 'all' for other workspaces)"
    )
    assert (error.message, error.hint) == ("no agent 'x'", Hint.ROSTER)
    assert error.text(Edge.CLI) == (
        "no agent 'x'; see `pager who` (`pager who --all` for other workspaces)"
    )
