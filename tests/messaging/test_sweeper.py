"""The retention windows of SPEC §9 in process, on the mock clock (actors/sweeper.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock, wait_all_tasks_blocked

from actors.directory import ArchiveIdentity, ReapIdentity
from actors.sweeper import MIN_PERIOD, sweep_period
from pager.domain.clock import TrioWallClock
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.views import AgentView
from pager.domain.windows import Windows
from pager.store import StoreBusy
from pager.store.sql_ports import SqlInbox, SqlRetention
from tests.messaging.conftest import Harness, open_harness

# Seconds. The sweep period is lease_ttl / 2 = 5 s, so each effect shows within 5 s of its window.
SHORT = Windows(
    lease_ttl=10.0,
    ack_wait=60.0,
    redelivery=(2.0, 10.0),
    max_attempts=5,
    message_expiry=100_000.0,
    unused=100.0,
    resumable_retention=1_000.0,
    named_archive=100.0,
    archive_retention=1_000.0,
    idempotency=50.0,
    event_retention=500.0,
)
SLACK = 6.0  # one sweep period and a bit


async def _identity(h: Harness, agent_id: str) -> AgentView | None:
    return await h.agent(agent_id)


async def _roster_ids(h: Harness, token: str) -> set[str]:
    caller = await h.service.authenticate(token)
    roster = await h.service.roster(caller, scope="all")
    return {agent["agent_id"] for agent in roster["agents"]}


async def _events(h: Harness, kind: str) -> list[dict[str, Any]]:
    return h.events_of(kind)


async def _keep_alive(
    h: Harness, token: str, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """An attached sender: renews its lease well within lease_ttl, forever."""
    task_status.started()
    while True:
        await h.service.authenticate(token)
        await trio.sleep(SHORT.lease_ttl / 4)


def test_sweep_period_is_bounded() -> None:
    """The sweep runs every half lease or shortest retention window, at most every minute,
    and never in a busy loop."""
    assert sweep_period(Windows()) == 45.0
    assert sweep_period(Windows(lease_ttl=3600.0)) == 60.0
    assert sweep_period(Windows(lease_ttl=0.0)) == MIN_PERIOD
    assert sweep_period(Windows(named_archive=0.4)) == 0.4
    assert sweep_period(Windows(archive_retention=5.0, unused=7.0)) == 5.0


async def test_ephemeral_reaped_when_its_lease_lapses(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """An unnamed identity without a conversation key goes once its lease lapses: off the
    roster, and mail sent to it is dead-lettered (`reaped`) as its sender sees."""
    with trio.fail_after(600):
        async with open_harness(tmp_path, windows=SHORT) as h, trio.open_nursery() as nursery:
            sender, alice = await h.register("alice")
            await nursery.start(_keep_alive, h, sender["token"])
            eph, _ = await h.register()
            assert eph["durable"] is False
            sent = await h.service.send(alice, to=eph["address"], body="for the ephemeral")
            assert eph["agent_id"] in await _roster_ids(h, sender["token"])
            await trio.sleep(SHORT.lease_ttl / 2)
            assert await _identity(h, eph["agent_id"]) is not None  # still within its lease
            await trio.sleep(SHORT.lease_ttl / 2 + SLACK)
            assert eph["agent_id"] not in await _roster_ids(h, sender["token"])
            assert await _identity(h, eph["agent_id"]) is None
            status = await h.service.message_status(alice, message_id=sent["message_id"])
            assert (status["state"], status["dead_reason"]) == ("dead", "reaped")
            [event] = await _events(h, "agent.reaped")
            assert event["agent_id"] == eph["agent_id"]
            assert event["reason"] == "lease lapsed"
            assert event["dead_lettered"] == 1
            assert sender["agent_id"] in await _roster_ids(h, sender["token"])  # attached: kept
            nursery.cancel_scope.cancel()


async def test_resumable_unused_reaped_but_one_with_mail_kept(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A resumable identity that never exchanged mail goes after `unused` detached; one that
    did stays until `resumable_retention`."""
    with trio.fail_after(3000):
        async with open_harness(tmp_path, windows=SHORT) as h, trio.open_nursery() as nursery:
            sender, alice = await h.register("alice")
            await nursery.start(_keep_alive, h, sender["token"])
            idle, idle_caller = await h.register(conversation_key="conv-idle")
            busy, busy_caller = await h.register(conversation_key="conv-busy")
            await h.service.send(alice, to=busy["address"], body="hello")
            await h.service.detach(idle_caller)
            await h.service.detach(busy_caller)
            await trio.sleep(SHORT.unused - SLACK)
            assert await _identity(h, idle["agent_id"]) is not None
            await trio.sleep(2 * SLACK)
            assert await _identity(h, idle["agent_id"]) is None
            [event] = await _events(h, "agent.reaped")
            assert (event["agent_id"], event["reason"]) == (idle["agent_id"], "unused")
            await trio.sleep(SHORT.resumable_retention - SHORT.unused - 2 * SLACK)
            assert await _identity(h, busy["agent_id"]) is not None
            await trio.sleep(2 * SLACK)
            assert await _identity(h, busy["agent_id"]) is None
            # Its conversation key went with it: registering with it makes a new identity.
            again, _ = await h.register(conversation_key="conv-busy")
            assert again["agent_id"] != busy["agent_id"]
            nursery.cancel_scope.cancel()


async def test_named_archived_unarchived_then_reaped(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A named identity detached `named_archive` is archived (session ended, mail waits);
    registering the name un-archives it with its mail; `archive_retention` after its FIRST
    archive it is reaped, its unsettled mail dead-lettered, the sender's history kept."""
    with trio.fail_after(5000):
        async with open_harness(tmp_path, windows=SHORT) as h, trio.open_nursery() as nursery:
            sender, alice = await h.register("alice")
            await nursery.start(_keep_alive, h, sender["token"])
            api, _ = await h.register("api")
            first = await h.service.send(alice, to="api", body="waits through the archive")
            start = trio.current_time()
            # Its lease lapses at 10 s; archived at 10 + 100 s.
            await trio.sleep(SHORT.lease_ttl + SHORT.named_archive - SLACK)
            identity = await _identity(h, api["agent_id"])
            assert identity is not None
            assert not identity.archived
            await trio.sleep(2 * SLACK)
            identity = await _identity(h, api["agent_id"])
            assert identity is not None
            assert identity.archived
            assert api["agent_id"] not in await _roster_ids(h, sender["token"])
            with pytest.raises(PagerError) as caught:
                await h.service.authenticate(api["token"])
            assert caught.value.code is ErrorCode.ENDED
            assert caught.value.details["reason"] == "archived"
            status = await h.service.message_status(alice, message_id=first["message_id"])
            assert status["state"] == "queued"
            [archived] = await _events(h, "agent.archived")
            assert archived["agent_id"] == api["agent_id"]
            assert archived["alias"] == "api"

            # Attaching again un-archives it, and the waiting mail is there.
            back, api_caller = await h.register("api")
            assert back["agent_id"] == api["agent_id"]
            identity = await _identity(h, api["agent_id"])
            assert identity is not None
            assert not identity.archived
            [claim] = (await h.service.fetch(api_caller))["claims"]
            assert claim["message"]["body"] == "waits through the archive"
            await h.service.ack(api_caller, tokens=[claim["token"]])
            await h.service.detach(api_caller)
            second = await h.service.send(alice, to="api", body="never read")

            # Archived again after another named_archive; reaped 1000 s after the FIRST archive
            # (at 110 s), not after the second one.
            first_archive = start + SHORT.lease_ttl + SHORT.named_archive
            await trio.sleep_until(first_archive + SHORT.archive_retention - SLACK)
            identity = await _identity(h, api["agent_id"])
            assert identity is not None
            assert identity.archived
            await trio.sleep(2 * SLACK)
            assert await _identity(h, api["agent_id"]) is None
            status = await h.service.message_status(alice, message_id=second["message_id"])
            assert (status["state"], status["dead_reason"]) == ("dead", "reaped")
            done = await h.service.message_status(alice, message_id=first["message_id"])
            assert done["state"] == "acknowledged"
            history = await h.service.history(alice)
            bodies = {m["body"] for m in history["messages"]}
            assert {"waits through the archive", "never read"} <= bodies
            [reaped] = await _events(h, "agent.reaped")
            assert reaped["agent_id"] == api["agent_id"]
            assert reaped["reason"] == "archive_retention"
            assert reaped["dead_lettered"] == 1
            # The name is free again (its reservation went with it).
            fresh, _ = await h.register("api")
            assert fresh["agent_id"] != api["agent_id"]
            nursery.cancel_scope.cancel()


async def test_idempotency_keys_and_events_pruned(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """Idempotency keys are forgotten after `idempotency`, operator events after
    `event_retention`."""
    clock = TrioWallClock()
    with trio.fail_after(3000):
        async with open_harness(tmp_path, windows=SHORT, clock=clock) as h:
            sender, alice = await h.register("alice")
            await h.register("bob")
            await h.service.send(alice, to="bob", body="once", idempotency_key="k1")
            await SqlInbox(h.checkpoint).record(clock.now(), "test.old", {})
            again = await h.service.send(alice, to="bob", body="once", idempotency_key="k1")
            assert again["duplicate"]  # the key is remembered within the window
            await trio.sleep(SHORT.idempotency + SLACK)
            later = await h.service.send(alice, to="bob", body="once", idempotency_key="k1")
            assert not later["duplicate"]  # forgotten: the same key sends anew
            assert len(h.events_of("test.old")) == 1
            await trio.sleep(SHORT.event_retention)
            assert h.events_of("test.old") == []
            assert sender["agent_id"]


async def test_restart_applies_windows_that_passed_while_down(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A broker started after the windows passed applies all of them in its first sweep,
    which runs as soon as it starts: a named identity is archived and reaped at once."""
    clock = TrioWallClock()
    with trio.fail_after(10_000):
        async with open_harness(tmp_path, windows=SHORT, clock=clock) as first:
            _, carol = await first.register(conversation_key="conv-carol")
            api, api_caller = await first.register("api")
            eph, eph_caller = await first.register()
            sent = await first.service.send(carol, to="api", body="left waiting")
            for caller in (carol, api_caller, eph_caller):
                await first.service.detach(caller)
        # Down for longer than every window.
        await trio.sleep(SHORT.named_archive + SHORT.archive_retention + SHORT.resumable_retention)
        async with open_harness(tmp_path, windows=SHORT, clock=clock) as second:
            await trio.lowlevel.checkpoint()  # the sweep is due now: let it run, no time passes
            await wait_all_tasks_blocked()
            for agent_id in (carol.agent_id, api["agent_id"], eph["agent_id"]):
                assert await _identity(second, agent_id) is None
            # Both its ends are gone; the log tells what became of the message.
            dead = second.events_of("message.dead")
            assert [e["reason"] for e in dead if e["message_id"] == sent["message_id"]] == [
                "reaped"
            ]
            archived = await _events(second, "agent.archived")
            assert [e["agent_id"] for e in archived] == [api["agent_id"]]
            reaped = {e["agent_id"]: e["reason"] for e in await _events(second, "agent.reaped")}
            assert reaped == {
                carol.agent_id: "resumable_retention",
                api["agent_id"]: "archive_retention",
                eph["agent_id"]: "lease lapsed",
            }


async def test_operator_archive_and_reap_end_attached_sessions(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """`ArchiveIdentity` ends an attached session (`ended`, archived) and hides it while its
    mail waits; `ReapIdentity` dead-letters its mail and it can no longer be sent to."""
    with trio.fail_after(60):
        async with open_harness(tmp_path, windows=SHORT) as h:
            _, alice = await h.register("alice")
            api, _ = await h.register("api")
            sent = await h.service.send(alice, to="api", body="pending")
            directory = h.service.directory
            identities = h.service.identities
            await directory.call(ArchiveIdentity(api["agent_id"], "operator"))
            with pytest.raises(PagerError) as caught:
                await h.service.authenticate(api["token"])
            assert caught.value.code is ErrorCode.ENDED
            assert api["agent_id"] not in identities.index.attached_ids()
            status = await h.service.message_status(alice, message_id=sent["message_id"])
            assert status["state"] == "queued"
            again, _ = await h.register("api")
            assert again["agent_id"] == api["agent_id"]
            await directory.call(ReapIdentity(api["agent_id"], "operator"))
            with pytest.raises(PagerError) as caught:
                await h.service.authenticate(again["token"])
            assert caught.value.code is ErrorCode.UNAUTHENTICATED
            status = await h.service.message_status(alice, message_id=sent["message_id"])
            assert (status["state"], status["dead_reason"]) == ("dead", "reaped")
            with pytest.raises(PagerError) as caught:
                await identities.activate(api["agent_id"])
            assert caught.value.code is ErrorCode.NOT_FOUND
            with pytest.raises(PagerError) as caught:
                await directory.call(ReapIdentity(api["agent_id"], "operator"))
            assert caught.value.code is ErrorCode.NOT_FOUND


async def test_reap_stops_the_identity_actor_before_its_inbox_is_emptied(
    tmp_path: Path, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention acts on an inbox only with its identity's actor stopped: when the sweeper
    dead-letters the mail of an ephemeral whose lease lapsed, no actor of it runs (one still
    running, idle but not yet passivated, was stopped first), and none starts again after."""
    running_while_applied: list[bool] = []
    apply = SqlRetention.apply

    async def watched(self: SqlRetention, due: Any, **kwargs: Any) -> Any:
        running_while_applied.extend(h.service.identities.get(d.agent_id) is not None for d in due)
        return await apply(self, due, **kwargs)

    monkeypatch.setattr(SqlRetention, "apply", watched)
    with trio.fail_after(600):
        async with open_harness(tmp_path, windows=SHORT) as h, trio.open_nursery() as nursery:
            sender, alice = await h.register("alice")
            await nursery.start(_keep_alive, h, sender["token"])
            eph, _ = await h.register()
            sent = await h.service.send(alice, to=eph["address"], body="for the ephemeral")
            assert h.service.identities.get(eph["agent_id"]) is not None
            await trio.sleep(SHORT.lease_ttl + SLACK)
            assert await _identity(h, eph["agent_id"]) is None  # reaped
            assert running_while_applied == [False]
            status = await h.service.message_status(alice, message_id=sent["message_id"])
            assert (status["state"], status["dead_reason"]) == ("dead", "reaped")
            await wait_all_tasks_blocked()
            assert h.service.identities.get(eph["agent_id"]) is None
            nursery.cancel_scope.cancel()


async def test_a_store_fault_costs_the_sweep_its_turn_only(
    tmp_path: Path, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sweeps that meet a busy store (three in a row) wait for their next turn: the sweeper
    goes on (a crash would fail the harness), and the windows apply at the first sweep the
    store answers."""
    plan = SqlRetention.plan
    faults = 3

    async def busy_at_first(self: SqlRetention, **kwargs: Any) -> Any:
        nonlocal faults
        if faults:
            faults -= 1
            raise StoreBusy("the database is busy: retry shortly")
        return await plan(self, **kwargs)

    monkeypatch.setattr(SqlRetention, "plan", busy_at_first)
    with trio.fail_after(600):
        async with open_harness(tmp_path, windows=SHORT) as h, trio.open_nursery() as nursery:
            sender, _ = await h.register("alice")
            await nursery.start(_keep_alive, h, sender["token"])
            eph, _ = await h.register()
            await trio.sleep(SHORT.lease_ttl + 4 * SLACK)
            assert faults == 0  # every fault was met
            assert await _identity(h, eph["agent_id"]) is None  # reaped once the store answered
            nursery.cancel_scope.cancel()
