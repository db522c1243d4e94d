"""A send's cost does not grow with what its sender sent before: with every send rate off, the
send guard reads none of the sender's past messages (it used to count its whole last hour on
every send, so an agent that sent much made each of its next sends, and the broker's loop
with them, slower). With a rate on, the count still runs, bounded by that rate."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pager.config import Limits
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from tests.messaging.conftest import open_harness
from tests.messaging.test_auth_round_trips import store_connections
from tests.statement_counter import statements_on

RATES_OFF = Limits(
    send=SendLimits(agent_sends_per_hour=0, pair_sends_per_hour=0, token_sends_per_hour=0)
)


def reads_past_sends(statements: list[str]) -> list[str]:
    """The statements that read the messages a sender sent (by `sender_id`)."""
    return [sql for sql in statements if "FROM messages WHERE sender_id" in " ".join(sql.split())]


async def test_with_every_rate_off_a_send_reads_none_of_its_senders_past_sends(
    tmp_path: Path,
) -> None:
    async with open_harness(tmp_path, limits=RATES_OFF) as harness:
        with trio.fail_after(30):
            _, alice = await harness.register("alice")
            await harness.register("bob")
            for n in range(5):  # a sender with a history
                await harness.service.send(alice, to="bob", body=f"before {n}")
            with statements_on(*store_connections(harness)) as seen:
                await harness.service.send(alice, to="bob", body="one more")
            assert seen, "the send ran no statement: the trace saw nothing"
            assert reads_past_sends(seen) == [], "\n".join(seen)


async def test_with_a_rate_on_a_send_still_counts_its_senders_hour(tmp_path: Path) -> None:
    limits = Limits(send=SendLimits(agent_sends_per_hour=3, pair_sends_per_hour=0))
    async with open_harness(tmp_path, limits=limits) as harness:
        with trio.fail_after(30):
            _, alice = await harness.register("alice")
            await harness.register("bob")
            for n in range(3):
                await harness.service.send(alice, to="bob", body=f"within {n}")
            with (
                statements_on(*store_connections(harness)) as seen,
                pytest.raises(PagerError) as refused,
            ):
                await harness.service.send(alice, to="bob", body="one too many")
            assert refused.value.code is ErrorCode.RATE_LIMITED
            assert reads_past_sends(seen), "\n".join(seen)
