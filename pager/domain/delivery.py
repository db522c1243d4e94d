"""The delivery state machine of SPEC §8, as pure code every store backend calls.

A message is `queued` until a claim takes it (`claimed` by a fetch or a hook, `delivered` when
written to a delivery address), then `acknowledged` by its claim's token, or back to `queued`
when the claim lapses, is refused or is released, or `dead` (its last attempt lapsed or was
refused, it expired, its recipient was reaped or purged, or its claim found that it cannot be
rendered). A backend reads the rows, asks these functions what follows, and writes the answer
with a guarded update (`… WHERE state = <the state it read>`), so two brokers racing on one
message cannot both apply a transition.
"""

from __future__ import annotations

import enum

import attrs

from pager.domain.records import ClaimState, MessageState

#: The states of a message not settled yet: they count towards expiry and the inbox.
UNSETTLED = frozenset({MessageState.QUEUED, MessageState.CLAIMED, MessageState.DELIVERED})
#: The states of a message out on an open claim.
OUT = frozenset({MessageState.CLAIMED, MessageState.DELIVERED})


class Step(enum.StrEnum):
    """What can happen to a message (SPEC §8): each a transition of `TRANSITIONS`."""

    CLAIM = "claim"  # a fetch or a hook takes it: `claimed`
    DELIVER = "deliver"  # written to the session's delivery address: `delivered`
    ACK = "ack"  # its claim's token acknowledged it
    LAPSE = "lapse"  # its claim's ack wait passed: queued again at once, or dead
    REFUSE = "refuse"  # the delivery address refused it: queued on the schedule, or dead
    RELEASE = "release"  # handed back unshown: queued again, its attempt not counted
    UNRENDERABLE = "unrenderable"  # its claim found it cannot be shown: dead
    EXPIRE = "expire"  # unsettled past the message expiry: dead
    RETIRE = "retire"  # its recipient was reaped or purged: dead


@attrs.frozen
class Transition:
    """A step's rule: the message states it applies to (any other refuses it), the states it
    may leave the message in, and what it makes of the open claim it closes (None: it takes
    no claim, or makes a new one)."""

    sources: frozenset[MessageState]
    targets: frozenset[MessageState]
    claim_end: ClaimState | None


_QUEUED = frozenset({MessageState.QUEUED})
_DEAD = frozenset({MessageState.DEAD})
_BACK = frozenset({MessageState.QUEUED, MessageState.DEAD})

#: The delivery state machine, whole: every transition a message may make. A backend guards
#: each update with the step's `sources` (`guard`), so a transition another broker (or a
#: lapse) applied first is never applied twice.
TRANSITIONS: dict[Step, Transition] = {
    Step.CLAIM: Transition(_QUEUED, frozenset({MessageState.CLAIMED}), None),
    Step.DELIVER: Transition(_QUEUED, frozenset({MessageState.DELIVERED}), None),
    Step.ACK: Transition(OUT, frozenset({MessageState.ACKNOWLEDGED}), ClaimState.ACKNOWLEDGED),
    Step.LAPSE: Transition(OUT, _BACK, ClaimState.EXPIRED),
    Step.REFUSE: Transition(OUT, _BACK, ClaimState.REFUSED),
    Step.RELEASE: Transition(OUT, _QUEUED, ClaimState.RELEASED),
    Step.UNRENDERABLE: Transition(OUT, _DEAD, ClaimState.EXPIRED),
    Step.EXPIRE: Transition(UNSETTLED, _DEAD, ClaimState.EXPIRED),
    Step.RETIRE: Transition(UNSETTLED, _DEAD, ClaimState.EXPIRED),
}


class RefusedTransition(ValueError):
    """A step asked of a message in a state it does not apply to."""


def allowed(state: MessageState, step: Step) -> bool:
    return state in TRANSITIONS[step].sources


def transition(state: MessageState, step: Step, to: MessageState) -> MessageState:
    """`to`, when `step` may take a message from `state` to it; else RefusedTransition."""
    rule = TRANSITIONS[step]
    if state not in rule.sources or to not in rule.targets:
        raise RefusedTransition(f"a message {state.value} cannot {step.value} to {to.value}")
    return to


class Via(enum.StrEnum):
    """How a claim was made (SPEC §8)."""

    FETCH = "fetch"
    HOOK = "hook"
    DELIVERY = "delivery"


class Wake(enum.StrEnum):
    """How a send's wake went (SPEC §8 `send`)."""

    DELIVERED = "delivered"  # handed to the recipient's session (a waiting fetch or its address)
    QUEUED = "queued"  # waiting for the attached session to fetch
    NO_SESSION = "no_session"  # waiting: no session is attached


class NotApplied(enum.StrEnum):
    """Why an ack token was not applied (SPEC §8 `ack`)."""

    UNKNOWN_TOKEN = "unknown_token"
    NOT_YOURS = "not_yours"
    ALREADY_ACKNOWLEDGED = "already_acknowledged"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"


class DeadReason(enum.StrEnum):
    EXPIRED = "expired"
    MAX_ATTEMPTS = "max_attempts"
    REAPED = "reaped"
    PURGED = "purged"
    #: Its stored content cannot be turned into what a reader gets (`pager.rendering`): it
    #: dies alone, at the claim that met it, so it never costs the rest of its batch.
    UNRENDERABLE = "unrenderable"


@attrs.frozen
class Claimed:
    """A queued message taken by a claim: its new state and attempt, and the ack deadline."""

    state: MessageState
    attempt: int
    expires_at: float


def claim(attempts: int, via: Via, now: float, ack_wait: float) -> Claimed:
    """What a claim does to a queued message that has had `attempts` attempts."""
    step = Step.DELIVER if via is Via.DELIVERY else Step.CLAIM
    (state,) = TRANSITIONS[step].targets
    return Claimed(state, attempts + 1, now + ack_wait)


@attrs.frozen
class Requeued:
    """The message waits again from `available_at`."""

    available_at: float


@attrs.frozen
class Dead:
    reason: DeadReason


def returned(attempts: int, max_attempts: int, available_at: float) -> Requeued | Dead:
    """A claim lapsed or was refused: the message waits again, unless that was its last
    attempt."""
    if attempts >= max_attempts:
        return Dead(DeadReason.MAX_ATTEMPTS)
    return Requeued(available_at)


#: The default redelivery schedule, in seconds (`[windows] redelivery`).
DEFAULT_REDELIVERY = (2.0, 10.0, 30.0, 120.0, 600.0, 1800.0)


@attrs.frozen
class RedeliverySchedule:
    """How long a message waits after its delivery address refused the claim of attempt `n`
    (n ≥ 1): the n-th delay, the last one repeating. The identity actor holds it (in its
    claim policy) and hands it to each refusal it commits: the retry time lands on the
    message (`available_at`) and on the identity's next due time, its checkpoint in the
    store, from which a restarted actor or the scheduler carries on."""

    delays: tuple[float, ...] = DEFAULT_REDELIVERY

    def __attrs_post_init__(self) -> None:
        if not self.delays:
            raise ValueError("a redelivery schedule needs at least one delay")

    def delay(self, attempt: int) -> float:
        """Delay before attempt `attempt + 1`, given that `attempt` attempts were made."""
        return self.delays[min(max(attempt, 1), len(self.delays)) - 1]


def retry_at(attempt: int, now: float, schedule: RedeliverySchedule) -> float:
    """When a message whose claim of attempt `attempt` was refused at `now` is due again."""
    return now + schedule.delay(attempt)


def refused(
    attempt: int, attempts: int, max_attempts: int, now: float, schedule: RedeliverySchedule
) -> Requeued | Dead:
    """The delivery address refused the claim of attempt `attempt`: retry on the schedule."""
    return returned(attempts, max_attempts, retry_at(attempt, now, schedule))


def lapsed(attempts: int, max_attempts: int, now: float) -> Requeued | Dead:
    """A claim's ack wait passed at `now`: the message is available again at once, unless
    that was its last attempt."""
    return returned(attempts, max_attempts, now)


def released(attempts: int) -> int:
    """A claim handed back unshown: the message waits again, its attempt not counted."""
    return max(attempts - 1, 0)


def ack(
    *,
    caller: str,
    owner: str,
    claim_state: ClaimState,
    attempt: int,
    attempts: int,
    message_state: MessageState,
) -> NotApplied | None:
    """Whether an ack by `caller` of a claim applies (None) or why not."""
    if owner != caller:
        return NotApplied.NOT_YOURS
    if claim_state is ClaimState.ACKNOWLEDGED:
        return NotApplied.ALREADY_ACKNOWLEDGED
    if claim_state is not ClaimState.OPEN:
        newer = attempts > attempt or message_state is MessageState.ACKNOWLEDGED
        return NotApplied.SUPERSEDED if newer else NotApplied.EXPIRED
    return None


def expiry_cutoff(now: float, message_expiry: float) -> float:
    """An unsettled message sent at or before this time is a dead letter (`expired`)."""
    return now - message_expiry


def next_due(
    *,
    open_claim_deadline: float | None,
    next_retry: float | None,
    oldest_unsettled_sent_at: float | None,
    message_expiry: float,
) -> float | None:
    """The earliest time something changes for an inbox on its own: an ack wait ends, a retry
    becomes available, a message expires. Mail available already needs no timer: whoever
    consumes it is woken when it arrives."""
    candidates = [open_claim_deadline, next_retry]
    if oldest_unsettled_sent_at is not None:
        candidates.append(oldest_unsettled_sent_at + message_expiry)
    found = [value for value in candidates if value is not None]
    return min(found) if found else None


@attrs.frozen
class ClaimPolicy:
    """The windows a claim follows."""

    ack_wait: float
    max_attempts: int
    message_expiry: float
    redelivery: RedeliverySchedule = attrs.Factory(RedeliverySchedule)


@attrs.frozen
class AckResult:
    """What an acknowledgement did: the tokens applied, and why each other one was not."""

    applied: list[str]
    not_applied: list[tuple[str, str]]  # (token, reason)
