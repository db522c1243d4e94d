"""The delivery state machine (SPEC §8) as pure functions."""

from __future__ import annotations

import pytest

from pager.domain import delivery
from pager.domain.delivery import Dead, DeadReason, NotApplied, Requeued, Via
from pager.domain.records import ClaimState, MessageState


@pytest.mark.parametrize(
    ("via", "state"),
    [
        (Via.FETCH, MessageState.CLAIMED),
        (Via.HOOK, MessageState.CLAIMED),
        (Via.DELIVERY, MessageState.DELIVERED),
    ],
)
def test_claim_counts_an_attempt_and_sets_the_ack_deadline(via: Via, state: MessageState) -> None:
    """A claim makes the next attempt; a delivery address's claim is `delivered`."""
    taken = delivery.claim(2, via, now=100.0, ack_wait=60.0)
    assert (taken.state, taken.attempt, taken.expires_at) == (state, 3, 160.0)


def test_returned_requeues_until_the_last_attempt() -> None:
    """A lapsed or refused claim requeues the message, unless that was its last attempt."""
    assert delivery.returned(4, 5, available_at=10.0) == Requeued(10.0)
    assert delivery.returned(5, 5, available_at=10.0) == Dead(DeadReason.MAX_ATTEMPTS)


def test_refused_waits_on_the_redelivery_schedule() -> None:
    """A refusal retries after the delay of the attempt that was refused."""
    schedule = delivery.RedeliverySchedule((2.0, 10.0))
    outcome = delivery.refused(2, 2, 5, now=100.0, schedule=schedule)
    assert outcome == Requeued(110.0)
    assert [schedule.delay(n) for n in (1, 2, 3, 10)] == [2.0, 10.0, 10.0, 10.0]


def test_released_does_not_count_the_attempt() -> None:
    """A claim handed back unshown gives its attempt back (never below zero)."""
    assert delivery.released(3) == 2
    assert delivery.released(0) == 0


@pytest.mark.parametrize(
    ("caller", "claim_state", "attempt", "attempts", "message_state", "expected"),
    [
        ("bob", ClaimState.OPEN, 1, 1, MessageState.CLAIMED, None),
        ("eve", ClaimState.OPEN, 1, 1, MessageState.CLAIMED, NotApplied.NOT_YOURS),
        ("bob", ClaimState.ACKNOWLEDGED, 1, 1, MessageState.ACKNOWLEDGED,
         NotApplied.ALREADY_ACKNOWLEDGED),
        ("bob", ClaimState.EXPIRED, 1, 2, MessageState.CLAIMED, NotApplied.SUPERSEDED),
        ("bob", ClaimState.EXPIRED, 1, 1, MessageState.ACKNOWLEDGED, NotApplied.SUPERSEDED),
        ("bob", ClaimState.EXPIRED, 1, 1, MessageState.QUEUED, NotApplied.EXPIRED),
        ("bob", ClaimState.REFUSED, 1, 1, MessageState.QUEUED, NotApplied.EXPIRED),
    ],
)  # fmt: skip
def test_ack_rules(
    caller: str,
    claim_state: ClaimState,
    attempt: int,
    attempts: int,
    message_state: MessageState,
    expected: NotApplied | None,
) -> None:
    """SPEC §8's ack reasons, decided from the claim and its message."""
    got = delivery.ack(
        caller=caller,
        owner="bob",
        claim_state=claim_state,
        attempt=attempt,
        attempts=attempts,
        message_state=message_state,
    )
    assert got is expected


def test_next_due_is_the_earliest_deadline() -> None:
    """An ack wait, a retry or an expiry, whichever comes first; none: no timer."""
    due = delivery.next_due(
        open_claim_deadline=500.0,
        next_retry=300.0,
        oldest_unsettled_sent_at=100.0,
        message_expiry=1000.0,
    )
    assert due == 300.0
    nothing = delivery.next_due(
        open_claim_deadline=None, next_retry=None, oldest_unsettled_sent_at=None,
        message_expiry=1000.0,
    )  # fmt: skip
    assert nothing is None
    assert delivery.expiry_cutoff(1100.0, 1000.0) == 100.0


Q, C, D, A, X = (
    MessageState.QUEUED,
    MessageState.CLAIMED,
    MessageState.DELIVERED,
    MessageState.ACKNOWLEDGED,
    MessageState.DEAD,
)
S = delivery.Step

#: The whole machine, written out: for each step, each state it may take a message from and
#: the states it may leave it in. Every (state, step) pair not listed is refused.
MACHINE: dict[tuple[MessageState, delivery.Step], frozenset[MessageState]] = {
    (Q, S.CLAIM): frozenset({C}),
    (Q, S.DELIVER): frozenset({D}),
    **{(out, S.ACK): frozenset({A}) for out in (C, D)},
    **{(out, S.LAPSE): frozenset({Q, X}) for out in (C, D)},
    **{(out, S.REFUSE): frozenset({Q, X}) for out in (C, D)},
    **{(out, S.RELEASE): frozenset({Q}) for out in (C, D)},
    **{(out, S.UNRENDERABLE): frozenset({X}) for out in (C, D)},
    **{(unsettled, S.EXPIRE): frozenset({X}) for unsettled in (Q, C, D)},
    **{(unsettled, S.RETIRE): frozenset({X}) for unsettled in (Q, C, D)},
}


@pytest.mark.parametrize("step", list(delivery.Step))
@pytest.mark.parametrize("state", list(MessageState))
@pytest.mark.parametrize("to", list(MessageState))
def test_every_transition_and_every_refused_one(
    state: MessageState, step: delivery.Step, to: MessageState
) -> None:
    """A step applies to the states the machine lists, leads only where it lists, and
    refuses everything else: a settled message (acknowledged, dead) never moves again."""
    allowed = to in MACHINE.get((state, step), frozenset())
    assert delivery.allowed(state, step) is ((state, step) in MACHINE)
    if allowed:
        assert delivery.transition(state, step, to) is to
    else:
        with pytest.raises(delivery.RefusedTransition):
            delivery.transition(state, step, to)


@pytest.mark.parametrize(
    ("step", "claim_end"),
    [
        (S.CLAIM, None),
        (S.DELIVER, None),
        (S.ACK, ClaimState.ACKNOWLEDGED),
        (S.LAPSE, ClaimState.EXPIRED),
        (S.REFUSE, ClaimState.REFUSED),
        (S.RELEASE, ClaimState.RELEASED),
        (S.UNRENDERABLE, ClaimState.EXPIRED),
        (S.EXPIRE, ClaimState.EXPIRED),
        (S.RETIRE, ClaimState.EXPIRED),
    ],
)
def test_what_each_step_makes_of_the_open_claim(
    step: delivery.Step, claim_end: ClaimState | None
) -> None:
    assert delivery.TRANSITIONS[step].claim_end is claim_end


@pytest.mark.parametrize(
    ("attempt", "now", "due"),
    [(1, 100.0, 102.0), (2, 100.0, 110.0), (3, 100.0, 130.0), (6, 0.0, 1800.0), (9, 0.0, 1800.0)],
)
def test_the_next_due_time_after_a_refused_attempt(attempt: int, now: float, due: float) -> None:
    """The default schedule: 2 s, 10 s, 30 s, 2 min, 10 min, 30 min, the last repeating."""
    schedule = delivery.RedeliverySchedule()
    assert delivery.retry_at(attempt, now, schedule) == due
    assert delivery.refused(attempt, attempt, 99, now, schedule) == Requeued(due)
    assert delivery.refused(attempt, 5, 5, now, schedule) == Dead(DeadReason.MAX_ATTEMPTS)


def test_a_lapsed_claim_is_available_again_at_once_until_its_last_attempt() -> None:
    assert delivery.lapsed(1, 3, now=50.0) == Requeued(50.0)
    assert delivery.lapsed(3, 3, now=50.0) == Dead(DeadReason.MAX_ATTEMPTS)
