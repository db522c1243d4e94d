"""The loop guard and send rates of SPEC §8.1, in process on the mock clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from pager.config import Limits
from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from tests.messaging.conftest import Harness, open_harness


async def relay(harness: Harness, reader: Caller, to: str) -> dict[str, Any]:
    """`reader` takes its mail (one batch), then sends `to`: the send's result."""
    fetched = await harness.service.fetch(reader)
    await harness.service.ack(reader, tokens=[c["token"] for c in fetched["claims"]])
    sent: dict[str, Any] = await harness.service.send(reader, to=to, body="and on")
    return sent


async def hops(harness: Harness, *message_ids: str) -> list[tuple[str, int]]:
    """Each message's origin and hop, as the operator views show them."""
    return [((m := await harness.message(i)).origin, m.hop) for i in message_ids]


async def test_person_a_b_a_b_then_a_is_refused_until_a_prompt_is_typed(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """person → a (hop 0) → b (1) → a (2) → b (3) → a: refused (hop 4 > 3), naming the
    chain and telling the agent to ask its person; a typed prompt in b resets the chain."""
    with trio.fail_after(60):
        person = await harness.service.person(str(harness.workspace))
        _, a = await harness.register("a")
        _, b = await harness.register("b", conversation_key="conv-b")
        first = await harness.service.send(person, to="a", body="please ask b")
        to_b = await relay(harness, a, "b")
        to_a = await relay(harness, b, "a")
        to_b_again = await relay(harness, a, "b")
        assert await hops(harness, first["message_id"], to_b["message_id"], to_a["message_id"],
                    to_b_again["message_id"]) == [
            ("human", 0), ("agent", 1), ("agent", 2), ("agent", 3)
        ]  # fmt: skip
        with pytest.raises(PagerError) as refused:
            await relay(harness, b, "a")
        assert refused.value.code is ErrorCode.HOP_LIMIT
        person_at, a_at, b_at = [
            (await harness.service.whoami(c))["address"] for c in (person, a, b)
        ]
        # The chain, named sender by sender: who started it and who answered whom.
        chain = [person_at, a_at, b_at, a_at, f"{b_at} (you)", a_at]
        assert refused.value.details == {"hop": 4, "max_hops": 3, "chain": chain}
        assert " → ".join(chain) in refused.value.message
        assert "Ask your person" in refused.value.message
        [event] = harness.events_of("send.refused")
        assert event["reason"] == "hop_limit"
        # b's person types a prompt (the hook reports it): b's next send starts a new chain.
        await harness.service.hook_claim(
            implementation="shell", conversation_key="conv-b", max_chars=9000, prompted=True
        )
        restarted = await harness.service.send(b, to="a", body="my person says go on")
        assert await hops(harness, restarted["message_id"]) == [("agent", 1)]


async def test_a_later_hop_0_message_brings_the_chain_back_down(
    harness: Harness, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        person = await harness.service.person(str(harness.workspace))
        _, a = await harness.register("a")
        _, b = await harness.register("b")
        await harness.service.send(person, to="a", body="start")
        await relay(harness, a, "b")
        await relay(harness, b, "a")  # a's inbox now has hop 2
        await harness.service.fetch(a)  # cause 2
        await harness.service.send(person, to="a", body="a new request")
        sent = await relay(harness, a, "b")  # the last batch: the person's hop 0
        assert await hops(harness, sent["message_id"]) == [("agent", 1)]


@pytest.mark.parametrize(
    ("limits", "to", "refused_at"),
    [
        (Limits(send=SendLimits(pair_sends_per_hour=3, agent_sends_per_hour=0)), ["b"] * 5, 3),
        (Limits(send=SendLimits(pair_sends_per_hour=0, agent_sends_per_hour=4)), ["b", "c"] * 3, 4),
    ],
)
async def test_send_rates_refuse_with_a_retry_time_and_recover_after_the_hour(
    tmp_path: Path, autojump_clock: MockClock, limits: Limits, to: list[str], refused_at: int
) -> None:
    with trio.fail_after(7200):
        async with open_harness(tmp_path, limits=limits) as harness:
            _, a = await harness.register("a")
            await harness.register("b")
            await harness.register("c")
            for n, name in enumerate(to):
                if n < refused_at:
                    await harness.service.send(a, to=name, body=f"m{n}")
                    await trio.sleep(60)
                    continue
                with pytest.raises(PagerError) as refused:
                    await harness.service.send(a, to=name, body=f"m{n}")
                assert refused.value.code is ErrorCode.RATE_LIMITED
                retry = refused.value.details["retry_after_s"]
                assert 0 < retry <= 3600
                break
            await trio.sleep(retry)
            await harness.service.send(a, to=to[refused_at], body="an hour later")


async def test_the_person_is_not_rate_limited(tmp_path: Path, autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        limits = Limits(send=SendLimits(pair_sends_per_hour=2, agent_sends_per_hour=2))
        async with open_harness(tmp_path, limits=limits) as harness:
            person = await harness.service.person(str(harness.workspace))
            await harness.register("b")
            for n in range(5):
                await harness.service.send(person, to="b", body=f"m{n}")


async def test_limits_of_zero_turn_the_guard_off(tmp_path: Path, autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        limits = Limits(send=SendLimits(max_hops=0, pair_sends_per_hour=0, agent_sends_per_hour=0))
        async with open_harness(tmp_path, limits=limits) as harness:
            _, a = await harness.register("a")
            _, b = await harness.register("b")
            await harness.service.send(a, to="b", body="start")
            for _ in range(4):  # deeper than 3: no refusal
                await relay(harness, b, "a")
                await relay(harness, a, "b")
