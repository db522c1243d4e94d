"""A long poll whose caller leaves while its claim commits (its request cancelled: the client
hung up, a timeout) never sees that claim. The identity actor hands it back at once, so the mail
waits again now, for the next fetch or poll, not until the claim's ack wait runs out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from pager.store.sql_ports import SqlInbox
from tests.messaging.conftest import Harness


class Gate:
    """Holds the identity actor just after the store committed `method`, until let go."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
        self.committed = trio.Event()
        self.go = trio.Event()
        self.armed = False
        real: Callable[..., Awaitable[Any]] = getattr(SqlInbox, method)

        async def held(inbox: SqlInbox, *args: Any, **kwargs: Any) -> Any:
            changed = await real(inbox, *args, **kwargs)
            if self.armed and getattr(changed.value, "claims", changed.value):
                self.armed = False
                self.committed.set()
                await self.go.wait()
            return changed

        monkeypatch.setattr(SqlInbox, method, held)


async def test_a_send_claimed_for_a_long_poll_whose_caller_left_waits_again_at_once(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob long-polls; alice's send claims for his poll in its own commit; bob's request is
    cancelled meanwhile: the send is answered, and bob's next fetch gets the mail at once."""
    gate = Gate(monkeypatch, "enqueue")
    with trio.fail_after(30):  # virtual seconds: far less than the ack wait
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        sent: list[dict[str, Any]] = []

        async def send() -> None:
            sent.append(await harness.service.send(alice, to="bob", body="for whoever asks"))

        poll = trio.CancelScope()

        async def long_poll() -> None:
            with poll:
                await harness.service.fetch(bob, limit=10, wait_s=30)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await wait_all_tasks_blocked()  # the poll waits in bob's actor
            gate.armed = True
            nursery.start_soon(send)
            await gate.committed.wait()
            poll.cancel()  # bob's caller is gone before the claim is handed over
            await wait_all_tasks_blocked()
            gate.go.set()
        [answer] = sent
        assert answer["wake"] != "delivered"  # nobody took it
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "for whoever asks"
        assert claim["message"]["attempt"] == 1  # handed back unshown: no attempt counted


async def test_mail_claimed_for_a_fetch_whose_caller_left_waits_again_at_once(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mail waits; bob's fetch claims it, and his request is cancelled while the claim
    commits: his next fetch gets it at once, as its first attempt."""
    gate = Gate(monkeypatch, "claim")
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.send(alice, to="bob", body="waiting mail")
        gate.armed = True
        fetching = trio.CancelScope()

        async def fetch() -> None:
            with fetching:
                await harness.service.fetch(bob, limit=10, wait_s=30)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await gate.committed.wait()
            fetching.cancel()  # bob's caller is gone before the claim is handed over
            await wait_all_tasks_blocked()
            gate.go.set()
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "waiting mail"
        assert claim["message"]["attempt"] == 1
