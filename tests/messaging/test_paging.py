"""Mailbox tokens and pages (SPEC §8.2), in process on the mock clock: expiry, revocation,
the token's one mailbox, the per-token rate, and what a page looks like to its reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors.directory import PurgeIdentity
from pager.config import Limits
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.pages import parse_page
from tests.messaging.conftest import Harness, open_harness


async def _token(harness: Harness, to: str, **kwargs: Any) -> dict[str, Any]:
    made: dict[str, Any] = await harness.service.create_token(
        to=to, workspace=str(harness.workspace), label=kwargs.get("label"),
        expires_s=kwargs.get("expires_s"),
    )  # fmt: skip
    return made


def _count(harness: Harness) -> int:
    """Messages ever queued, as the operator event log tells."""
    return len(harness.events_of("message.queued"))


async def test_a_token_pages_its_identity_until_it_expires(
    harness: Harness, autojump_clock: MockClock
) -> None:
    with trio.fail_after(7200):
        _, ci = await harness.register("ci")
        made = await _token(harness, "ci", label="nightly", expires_s=3600)
        page = parse_page({"message": "build done", "job_id": "b-1", "status": "success"})
        sent = await harness.service.notify_with_token(
            await harness.service.mailbox(made["token"]), page
        )
        [claim] = (await harness.service.fetch(ci))["claims"]
        message = claim["message"]
        assert (message["id"], message["from"], message["origin"], message["hop"]) == (
            sent["message_id"], "nightly (script)", "script", 0
        )  # fmt: skip
        assert message["thread"] == "b-1"
        assert message["fields"] == {"job_id": "b-1", "status": "success"}
        await trio.sleep(3601)  # virtual time: the token's hour passes
        with pytest.raises(PagerError) as expired:
            await harness.service.mailbox(made["token"])
        assert expired.value.code is ErrorCode.UNAUTHENTICATED
        listed = (await harness.service.list_tokens())["tokens"]
        assert [t["last_used_at"] is not None for t in listed] == [True]
        assert made["token"] not in json.dumps(listed)  # never listed


async def test_the_operator_view_names_a_page_sender_as_the_script_it_is(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The operator's message view (the TUI's, `/v1/agents/{id}/messages`) names a page's
    sender by its token's label, as the reader's inbox does, not by the token's id."""
    with trio.fail_after(60):
        _, ci = await harness.register("ci")
        made = await _token(harness, "ci", label="nightly")
        page = parse_page({"message": "build done"})
        await harness.service.notify_with_token(await harness.service.mailbox(made["token"]), page)
        [view] = await harness.messages(ci.agent_id, "in")
        assert view.sender.address == "nightly (script)"
        assert view.sender.agent_id.startswith("mbx_")


async def test_a_token_revoked_after_it_was_checked_pages_nothing(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The token is checked again inside the page's own transaction."""
    with trio.fail_after(60):
        await harness.register("ci")
        made = await _token(harness, "ci")
        mailbox = await harness.service.mailbox(made["token"])
        await harness.service.revoke_token(made["id"])
        before = _count(harness)
        with pytest.raises(PagerError) as refused:
            await harness.service.notify_with_token(mailbox, parse_page({"message": "late"}))
        assert refused.value.code is ErrorCode.UNAUTHENTICATED
        assert _count(harness) == before


async def test_a_token_pages_no_other_identity_and_says_the_same_for_strangers(
    harness: Harness, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        await harness.register("ci")
        await harness.register("other")
        mailbox = await harness.service.mailbox((await _token(harness, "ci"))["token"])
        page = parse_page({"message": "hello"})
        answers = []
        for to in ("other", "nobody"):
            with pytest.raises(PagerError) as refused:
                await harness.service.notify_with_token(mailbox, page, to=to)
            assert refused.value.code is ErrorCode.UNKNOWN_RECIPIENT
            answers.append(refused.value.message.replace(to, "X"))
        assert answers[0] == answers[1]  # no way to learn who else exists
        assert _count(harness) == 0
        await harness.service.notify_with_token(mailbox, page, to="ci")
        assert _count(harness) == 1


async def test_a_token_dies_with_its_identity(harness: Harness, autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        registered, _ = await harness.register("ci")
        made = await _token(harness, "ci")
        await harness.service.directory.call(PurgeIdentity(registered["agent_id"], "test"))
        with pytest.raises(PagerError) as gone:
            await harness.service.mailbox(made["token"])
        assert gone.value.code is ErrorCode.UNAUTHENTICATED


async def test_the_per_token_rate(tmp_path: Path, autojump_clock: MockClock) -> None:
    async with open_harness(
        tmp_path, limits=Limits(send=SendLimits(token_sends_per_hour=2))
    ) as harness:
        with trio.fail_after(7200):
            await harness.register("ci")
            mailbox = await harness.service.mailbox((await _token(harness, "ci"))["token"])
            page = parse_page({"message": "tick"})
            for _ in range(2):
                await harness.service.notify_with_token(mailbox, page)
            with pytest.raises(PagerError) as limited:
                await harness.service.notify_with_token(mailbox, page)
            assert limited.value.code is ErrorCode.RATE_LIMITED
            assert limited.value.details["retry_after_s"] >= 1
            await trio.sleep(3601)
            await harness.service.notify_with_token(mailbox, page)


async def test_a_run_page_starts_a_chain_and_a_notify_is_a_send(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """`pager run`'s page has script origin and hop 0; `pager notify` from an agent is that
    agent's send, under the loop guard like any other."""
    with trio.fail_after(60):
        _, a = await harness.register("a")
        await harness.register("b")
        page = parse_page({"message": "done", "exit_code": 0})
        ran = await harness.service.notify(a, to="b", page=page, run=True)
        told = await harness.service.notify(a, to=None, page=page, run=False)
        assert told["recipient"]["address"] == (await harness.service.whoami(a))["address"]
        stands = [await harness.message(m) for m in (ran["message_id"], told["message_id"])]
        assert [(m.origin, m.hop) for m in stands] == [("script", 0), ("agent", 1)]
