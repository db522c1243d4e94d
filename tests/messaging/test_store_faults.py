"""Errors by kind: a store that fails its writes (a full disk) answers the callers it fails
`unavailable`, naming the cause, and changes nothing else. No actor crashes and no supervisor
restarts, the sessions go on (no registration again), `/health` says `degraded` while it fails
and clears at the next write that succeeds, and all mail answered 2xx is delivered (pushed, or
handed to a long poll) once the store writes again."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from pager.domain.errors import ErrorCode, PagerError
from pager.health import HealthBoard
from pager.store import StoreFault, StoreFull
from pager.web.store_trouble import unavailable_cause
from tests.fakes.failing_store import failing_commits
from tests.messaging.conftest import http_delivery, open_harness

#: Commits that fail in a row, and what the four senders try meanwhile (2 mails a round).
FAULTS = 40
ROUNDS = 12


async def test_failing_commits_answer_unavailable_and_every_session_goes_on(
    tmp_path: Path, autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """4 senders and a long-polling receiver, and a pushed one, while the next 40 commits fail
    as on a full disk: each send is answered (2xx or `unavailable`), and afterwards every
    session is the one it registered, the identity actors are the same incarnations, nothing
    was restarted, and every mail answered 2xx reached its receiver."""
    board = HealthBoard()
    async with open_harness(tmp_path, board=board) as harness:
        assert harness.writer is not None
        with trio.fail_after(3600):  # virtual seconds (autojump)
            senders = [(await harness.register(f"sender{n}"))[1] for n in range(4)]
            registered, pushed = await harness.register("pushed", delivery=http_delivery())
            _, polling = await harness.register("polling")
            identities = harness.service.identities
            incarnations = {c.agent_id: identities.get(c.agent_id) for c in (pushed, polling)}
            sent: dict[str, set[str]] = {"pushed": set(), "polling": set()}
            refusals: list[tuple[str, str]] = []
            degraded: list[dict[str, object]] = []
            polled: set[str] = set()
            failed_polls = 0

            async def send_all(n: int) -> None:
                for i in range(ROUNDS):
                    for to in ("pushed", "polling"):
                        body = f"{n}-{i}-{to}"
                        try:
                            await harness.service.send(senders[n], to=to, body=body)
                        except StoreFault as exc:
                            answer = unavailable_cause(exc)  # what every edge answers
                            assert answer is not None
                            refusals.append((answer.code.value, answer.message))
                            if fault.remaining:  # once a commit succeeds, health clears
                                degraded.append(board.snapshot())
                        else:
                            sent[to].add(body)
                        await trio.sleep(0.05)

            async def long_poll(done: trio.Event) -> None:
                nonlocal failed_polls
                while not done.is_set() or not sent["polling"] <= polled:
                    try:
                        answer = await harness.service.fetch(polling, limit=10, wait_s=5)
                    except StoreFault:
                        failed_polls += 1
                        await trio.sleep(0.5)  # as a client would: retry shortly
                        continue
                    claims = answer["claims"]
                    polled.update(claim["message"]["body"] for claim in claims)
                    if claims:
                        tokens = [claim["token"] for claim in claims]
                        # Unacknowledged, the claims come back after the ack wait: seen once.
                        with contextlib.suppress(StoreFault):
                            await harness.service.ack(polling, tokens=tokens)

            with (
                caplog.at_level(logging.WARNING, logger="pager.supervisors"),
                failing_commits(harness.writer) as fault,
            ):
                fault.fail(FAULTS)
                senders_done = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(long_poll, senders_done)
                    async with trio.open_nursery() as sending:
                        for n in range(4):
                            sending.start_soon(send_all, n)
                    senders_done.set()
                    while not sent["pushed"] <= set(
                        harness.inbox.bodies_pushed_to(pushed.session_id)
                    ):
                        await harness.inbox.pushed(len(harness.inbox.pushes) + 1)
                assert fault.failed == FAULTS  # every fault was met, and answered

            # Callers got `unavailable` naming the full disk; health said so meanwhile.
            assert refusals, "no send met the fault"
            assert {code for code, _ in refusals} == {ErrorCode.UNAVAILABLE.value}
            assert all("disk" in message and "full" in message for _, message in refusals)
            assert degraded
            assert all(snapshot["status"] == "degraded" for snapshot in degraded)
            assert sent["pushed"]  # and the rest went through
            assert sent["polling"]
            assert sum(len(s) for s in sent.values()) + len(refusals) == 4 * ROUNDS * 2
            # Nothing crashed or restarted; the same sessions and actors go on.
            restarts = [r.getMessage() for r in caplog.records if r.name == "pager.supervisors"]
            assert restarts == []
            for caller in (pushed, polling):
                assert identities.get(caller.agent_id) is incarnations[caller.agent_id]
            again = await harness.service.authenticate(registered["token"])
            assert again.session_id == pushed.session_id
            for caller in (*senders, pushed, polling):
                assert (await harness.service.whoami(caller))["agent_id"] == caller.agent_id
            # The store wrote again: health cleared by itself.
            assert board.snapshot() == {"status": "ok"}
            assert sent["polling"] <= polled


async def test_health_is_degraded_while_writes_fail_and_clears_at_the_next_write(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """The failed commit marks the store degraded with what to do; the next commit that
    succeeds (a send, no timer) clears it."""
    board = HealthBoard()
    async with open_harness(tmp_path, board=board) as harness:
        assert harness.writer is not None
        with trio.fail_after(60):
            _, alice = await harness.register("alice")
            await harness.register("bob")
            with failing_commits(harness.writer) as fault:
                fault.fail(1)
                with pytest.raises(StoreFull) as refused:
                    await harness.service.send(alice, to="bob", body="lost to the full disk")
                health = board.snapshot()
                assert health["status"] == "degraded"
                [entry] = health["degraded"]
                assert entry["kind"] == "store"
                assert entry["message"] == str(refused.value)
                assert "free space" in entry["message"]
                sent = await harness.service.send(alice, to="bob", body="after")
            assert sent["message_id"]
            assert board.snapshot() == {"status": "ok"}


async def test_health_stays_degraded_through_a_batch_whose_writes_all_failed_otherwise(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A batch that wrote nothing (each of its writes refused by a rule of its own) says
    nothing of the disk: the store stays degraded until a write commits."""
    board = HealthBoard()
    async with open_harness(tmp_path, board=board) as harness:
        assert harness.writer is not None
        with trio.fail_after(60):
            _, alice = await harness.register("alice")
            await harness.register("bob")
            with failing_commits(harness.writer) as fault:
                fault.fail(1)
                with pytest.raises(StoreFull):
                    await harness.service.send(alice, to="bob", body="lost to the full disk")

            def refused(conn: sqlite3.Connection) -> None:
                raise PagerError(ErrorCode.RATE_LIMITED, "a rule of the write's own")

            with pytest.raises(PagerError):
                await harness.checkpoint.write(refused)
            assert board.snapshot()["status"] == "degraded"
            await harness.service.send(alice, to="bob", body="after")
            assert board.snapshot() == {"status": "ok"}
