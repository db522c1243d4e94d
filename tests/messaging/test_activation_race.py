"""Store calls are awaited now, and on PostgreSQL each one yields to the event loop: two
requests that activate the same identity at once must still start one actor, not two (the
second waits for the first's start)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import trio

from actors._runtime import ActorRef
from actors.identity_protocol import IdentityMessage
from pager.store.ports import Sessions
from tests.messaging.conftest import open_harness


class YieldingSessions:
    """The harness's Sessions, each `exists` answered after a pass through the event loop (as
    a lookup in a worker thread is)."""

    def __init__(self, inner: Sessions) -> None:
        self._inner = inner

    async def exists(self, identity_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return await self._inner.exists(identity_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_two_requests_activating_one_identity_start_one_actor(tmp_path: Path) -> None:
    async with open_harness(tmp_path) as harness:
        with trio.fail_after(30):
            registered, _ = await harness.register("alice")
            agent_id = registered["agent_id"]
            identities = harness.service.unwrapped.identities
            identities._sessions = cast(Sessions, YieldingSessions(identities._sessions))
            await identities.stop(agent_id)  # passivated: the next request starts it again
            refs: list[ActorRef[IdentityMessage]] = []

            async def activate() -> None:
                refs.append(await identities.activate(agent_id))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(activate)
                nursery.start_soon(activate)
            assert len(refs) == 2
            assert refs[0] is refs[1]
            assert refs[0].alive
