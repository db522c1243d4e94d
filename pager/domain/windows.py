"""The windows of SPEC §9: how long a lease, an ack wait, an unused identity, a retention
last. A domain value: `pager/config.py` reads them from config.toml and PAGER_WINDOW_*, and the
claim policy every claim follows is derived from them here, once.
"""

from __future__ import annotations

import attrs

from pager.domain.delivery import DEFAULT_REDELIVERY, ClaimPolicy, RedeliverySchedule


@attrs.frozen
class Windows:
    """The windows of SPEC §9, in seconds (the schedule as a tuple; the last delay repeats)."""

    lease_ttl: float = 90.0
    stream_grace: float = 15.0
    ack_wait: float = 60.0
    redelivery: tuple[float, ...] = DEFAULT_REDELIVERY
    max_attempts: int = 50
    message_expiry: float = 7 * 86400.0
    unused: float = 3600.0
    resumable_retention: float = 7 * 86400.0
    named_archive: float = 30 * 86400.0
    archive_retention: float = 30 * 86400.0
    idempotency: float = 86400.0
    event_retention: float = 7 * 86400.0
    event_heartbeat: float = 15.0  # a comment line on an idle operator stream
    #: How often a broker on a shared (PostgreSQL) store tells the others it is alive; a host
    #: whose last heartbeat is older than three of these is shown as not alive (SPEC §13).
    host_heartbeat: float = 5.0
    #: A wake run told to stop (SIGTERM) is killed (SIGKILL) this long after (docs/wake.md).
    wake_kill_after: float = 10.0

    @property
    def redelivery_schedule(self) -> RedeliverySchedule:
        return RedeliverySchedule(self.redelivery)

    @property
    def claim_policy(self) -> ClaimPolicy:
        """The windows every claim follows, taken from these (the broker builds it once)."""
        return ClaimPolicy(
            ack_wait=self.ack_wait,
            max_attempts=self.max_attempts,
            message_expiry=self.message_expiry,
            redelivery=self.redelivery_schedule,
        )
