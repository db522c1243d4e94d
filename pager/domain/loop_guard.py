"""The loop guard and send rates of SPEC §8.1, as decisions: the facts a send reads about
its sender (its chain, its sends of the last hour) with the limits and the time give the new
message's origin, hop and cause, or the refusal. The store reads the facts, and makes sure
they still hold when it writes (a sender racing its own sends cannot slip past a limit); the
rule itself is here, once, whichever backend runs it.
"""

from __future__ import annotations

import math

import attrs

from pager.domain.addressing import PERSON
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.results import Origin

HUMAN, AGENT, SCRIPT = Origin.HUMAN.value, Origin.AGENT.value, Origin.SCRIPT.value
#: The window every send rate counts over.
HOUR = 3600.0


@attrs.frozen
class SendOrigin:
    """Where a new message stands in its chain (SPEC §8.1)."""

    origin: str
    hop: int
    cause_id: str | None  # the message whose delivery led to this send


@attrs.frozen
class Sent:
    """How many messages of a kind were sent in the last hour, and when the oldest was."""

    count: int
    oldest: float | None


@attrs.frozen
class SenderFacts:
    """What a send's decision reads about an identity that sends."""

    implementation: str
    cause_hop: int
    cause_id: str | None
    agent: Sent  # its sends and run-pages (origins agent and script)
    pair: Sent  # the same, to this recipient
    script: Sent  # its run-pages


@attrs.frozen
class TooDeep:
    """The send would make its chain too deep: the store names the chain's senders
    (`hop_limit_error`), which takes reads the decision does not need otherwise."""

    hop: int
    cause_id: str | None


def decide(
    sender: SenderFacts | None, limits: SendLimits, now: float, *, script: bool = False
) -> SendOrigin | TooDeep:
    """The new message's origin, hop and cause; `TooDeep` past the hop limit; PagerError
    `rate_limited` past a rate, `ended` when the sender no longer exists. `script`: a page
    about a job (`pager run`), which starts a chain like a person's message."""
    if sender is None:
        raise PagerError(ErrorCode.ENDED, "the sending identity no longer exists (purged)")
    if script:
        within_rate(limits.script_per_hour, sender.script, now, "you paged")
    if sender.implementation == PERSON:
        return SendOrigin(SCRIPT, 0, None) if script else SendOrigin(HUMAN, 0, None)
    hop = 1 + sender.cause_hop
    # A run-page starts a chain: no hop to check.
    refused_from = refused_from_cause_hop(limits)
    if not script and refused_from is not None and sender.cause_hop >= refused_from:
        return TooDeep(hop, sender.cause_id)
    # An agent's sends and its `pager run` pages share its budgets: a run-page starts no
    # chain, but it is still this agent writing to that recipient.
    within_rate(limits.agent_per_hour, sender.agent, now, "you sent")
    within_rate(limits.pair_per_hour, sender.pair, now, "you sent this recipient")
    if script:
        return SendOrigin(SCRIPT, 0, None)
    return SendOrigin(AGENT, hop, sender.cause_id)


def refused_from_cause_hop(limits: SendLimits) -> int | None:
    """The least `cause_hop` of an agent whose next send (message `1 + cause_hop` of its
    chain) passes the hop limit; None when the limit is off. `decide` refuses by it, and a
    read made ahead of the decision reads the chain a refusal names only from it on."""
    return limits.max_hops or None


def decide_token_page(pages: Sent, limits: SendLimits, now: float) -> SendOrigin:
    """A page with a mailbox token: script origin, within the token's rate."""
    within_rate(limits.script_per_hour, pages, now, "this token sent")
    return SendOrigin(SCRIPT, 0, None)


def hop_limit_error(too_deep: TooDeep, max_hops: int, chain: list[str]) -> PagerError:
    """The refusal of a send past the hop limit; `chain`: its senders by address, first to
    last, the sender and the recipient at the end."""
    return PagerError(
        ErrorCode.HOP_LIMIT,
        f"not sent: this would be message {too_deep.hop} of a chain in which agents answer each"
        f" other without a person in between ({' → '.join(chain)}; the limit is"
        f" {max_hops}). Ask your person whether to go on; once they type a prompt"
        " to you, the chain starts again.",
        hop=too_deep.hop,
        max_hops=max_hops,
        chain=chain,
    )


def within_rate(limit: int, sent: Sent, now: float, who: str) -> None:
    """PagerError `rate_limited` when `sent` reached `limit` in the last hour (0: no limit)."""
    if not limit or sent.count < limit:
        return
    oldest = now if sent.oldest is None else sent.oldest
    retry = max(1, math.ceil(oldest + HOUR - now))
    raise PagerError(
        ErrorCode.RATE_LIMITED,
        f"not sent: {who} {sent.count} messages in the last hour (the limit is {limit})."
        f" Wait {retry} s, and ask your person whether this many are needed.",
        retry_after_s=retry,
        limit=limit,
    )


def chain_reset_budget(per_hour: int, left: object, counted_at: object, now: float) -> float | None:
    """A typed prompt restarts an agent's chain: the budget of such restarts left after this
    one (`left` restarts as of `counted_at`, refilled evenly over the hour up to `per_hour`;
    None: never counted), or PagerError `rate_limited` when none is left, since an agent can
    report a prompt it made up. None when the budget is off (`per_hour` 0)."""
    if not per_hour:
        return None
    level = float(per_hour)
    if left is not None:
        level = min(level, float(str(left)) + (now - float(str(counted_at))) * per_hour / HOUR)
    if level < 1:
        retry = max(1, math.ceil((1 - level) * HOUR / per_hour))
        raise PagerError(
            ErrorCode.RATE_LIMITED,
            f"the chain was not started again: {per_hour} prompts an hour restart this"
            f" agent's chain after mail from agents, and it used them (the loop guard"
            f" counts on from where it is). It can restart in {retry} s.",
            retry_after_s=retry,
            limit=per_hour,
        )
    return level - 1
