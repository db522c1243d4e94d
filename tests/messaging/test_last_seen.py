"""`last seen` follows any authenticated activity, not only attaches (issue 11, item 7)."""

from __future__ import annotations

from datetime import datetime

import trio
from trio.testing import MockClock

from tests.messaging.conftest import Harness


async def test_a_session_that_keeps_calling_is_seen_lately(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """bob fetches every 30 s for five minutes: his last seen moves with him (within
    lease_ttl / 2, when the lease is persisted), where it used to stay at registration."""
    with trio.fail_after(600):
        info, bob = await harness.register("bob")
        registered = harness.service.clock.now()
        for _ in range(10):
            await trio.sleep(30)
            await harness.service.authenticate(info["token"])  # what every call does first
            await harness.service.fetch(bob)
        roster = await harness.service.roster(bob)
        [me] = [a for a in roster["agents"] if a["agent_id"] == info["agent_id"]]
        seen = datetime.fromisoformat(me["last_seen"]).timestamp()
        assert seen - registered >= 300 - 90 / 2  # within lease_ttl / 2 of the last call
