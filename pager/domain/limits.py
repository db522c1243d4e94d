"""The loop guard's and send rates' limits (SPEC §8.1), defined once: `config.toml`'s
`[limits]` (and PAGER_LIMIT_*) reads them by the keyword each field is built with, the send's
transaction checks them (the guard), and the identity actor hands them on.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class SendLimits:
    """SPEC §8.1's limits, counts where 0 turns one off. Each field is built with the name
    the person writes in `[limits]` (`agent_sends_per_hour = 120`, PAGER_LIMIT_AGENT_SENDS_PER_HOUR)
    and read by the guard under the shorter name that says what it counts."""

    max_hops: int = 3
    #: An agent's sends (its `pager run` pages included) an hour.
    agent_per_hour: int = attrs.field(default=120, alias="agent_sends_per_hour")
    #: An agent's sends an hour to one recipient.
    pair_per_hour: int = attrs.field(default=60, alias="pair_sends_per_hour")
    #: Pages an hour per mailbox token, or per identity's `pager run`.
    script_per_hour: int = attrs.field(default=600, alias="token_sends_per_hour")
    #: Typed-prompt reports an hour that start an agent's chain again after mail from agents.
    chain_resets_per_hour: int = 20


#: The `[limits]` keys that are send limits: the keywords `SendLimits` is built with.
SEND_LIMIT_KEYS: tuple[str, ...] = tuple(
    field.alias or field.name for field in attrs.fields(SendLimits)
)
