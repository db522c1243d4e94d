"""The loop guard's and send rates' decision (pager/domain/loop_guard.py), as a pure function of
the facts a send read: both backends call it, SQLite inside its write, PostgreSQL before it."""

from __future__ import annotations

import pytest

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.loop_guard import (
    HOUR,
    SenderFacts,
    SendOrigin,
    Sent,
    TooDeep,
    chain_reset_budget,
    decide,
)

NOW = 1_800_000_000.0
NONE = Sent(0, None)
LIMITS = SendLimits(max_hops=3, agent_sends_per_hour=5, pair_sends_per_hour=2)


def agent(*, hop: int = 0, cause: str | None = None, sent: int = 0, pair: int = 0) -> SenderFacts:
    return SenderFacts(
        implementation="claude",
        cause_hop=hop,
        cause_id=cause,
        agent=Sent(sent, NOW - 600 if sent else None),
        pair=Sent(pair, NOW - 600 if pair else None),
        script=NONE,
    )


def test_an_agent_answering_mail_goes_one_hop_deeper() -> None:
    assert decide(agent(hop=1, cause="msg_1"), LIMITS, NOW) == SendOrigin("agent", 2, "msg_1")


def test_past_the_hop_limit_the_send_is_too_deep() -> None:
    assert decide(agent(hop=3, cause="msg_3"), LIMITS, NOW) == TooDeep(4, "msg_3")


def test_a_person_starts_a_chain_whatever_it_answered() -> None:
    person = SenderFacts("human", 7, "msg_7", Sent(99, NOW), Sent(99, NOW), NONE)
    assert decide(person, LIMITS, NOW) == SendOrigin("human", 0, None)


@pytest.mark.parametrize(("sent", "pair"), [(5, 0), (1, 2)])
def test_a_rate_reached_refuses_with_the_wait(sent: int, pair: int) -> None:
    with pytest.raises(PagerError) as refused:
        decide(agent(sent=sent, pair=pair), LIMITS, NOW)
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.details["retry_after_s"] == HOUR - 600


def test_a_sender_that_is_gone_is_ended() -> None:
    with pytest.raises(PagerError) as refused:
        decide(None, LIMITS, NOW)
    assert refused.value.code is ErrorCode.ENDED


def test_chain_restarts_are_budgeted_and_refill_over_the_hour() -> None:
    assert chain_reset_budget(0, None, None, NOW) is None  # off
    assert chain_reset_budget(20, None, None, NOW) == 19
    assert chain_reset_budget(20, 0.0, NOW - HOUR / 20, NOW) == pytest.approx(0)
    with pytest.raises(PagerError) as refused:
        chain_reset_budget(20, 0.0, NOW, NOW)
    assert refused.value.details["retry_after_s"] == HOUR / 20
