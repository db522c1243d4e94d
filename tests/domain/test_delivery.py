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
