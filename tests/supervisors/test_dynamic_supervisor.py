"""DynamicSupervisor: children by id, transient restarts, leaving on a normal exit, intensity."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from supervisors import ChildStartFailed, DynamicSupervisor, Restart, SupervisorGaveUp

from ._kit import Child, Journal, settle

LIMIT = 60  # virtual seconds; a hang guard, not a timing assertion


async def test_dynamic_supervisor_restarts_a_crashed_transient_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A transient child that crashes runs again; one that returns leaves the supervisor."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        child = Child(journal, "one", restart=Restart.TRANSIENT)
        async with trio.open_nursery() as nursery:
            sup: DynamicSupervisor = await nursery.start(DynamicSupervisor("ids").run)
            assert await sup.start_child(child.spec) == "one#1"
            child.crash()
            await settle()
            assert child.starts == 2
            assert sup.running("one")
            child.finish()
            await settle()
            assert not sup.running("one")
            assert len(sup) == 0
            assert child.starts == 2
            # Gone for good, so the same id may start again.
            assert await sup.start_child(child.spec) == "one#3"
            nursery.cancel_scope.cancel()


async def test_dynamic_supervisor_first_start_failure_raises_and_adds_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child failing before started() raises ChildStartFailed to its starter."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        bad = Child(journal, "bad", restart=Restart.TRANSIENT)
        bad.failing_starts = 1
        async with trio.open_nursery() as nursery:
            sup: DynamicSupervisor = await nursery.start(DynamicSupervisor("ids").run)
            with pytest.raises(ChildStartFailed) as raised:
                await sup.start_child(bad.spec)
            assert raised.value.__cause__ is bad.start_error
            assert len(sup) == 0
            good = Child(journal, "good")
            await sup.start_child(good.spec)
            with pytest.raises(ValueError, match="already has a child 'good'"):
                await sup.start_child(good.spec)
            nursery.cancel_scope.cancel()


async def test_dynamic_supervisor_gives_up_past_its_intensity(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """More crashes than max_restarts within period: run() raises SupervisorGaveUp bare,
    after stopping the other children."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        flaky = Child(journal, "flaky", restart=Restart.TRANSIENT)
        other = Child(journal, "other", restart=Restart.TRANSIENT)
        sup = DynamicSupervisor("ids", max_restarts=2, period=10.0)
        caught: list[SupervisorGaveUp] = []
        async with trio.open_nursery() as nursery:

            async def supervise(*, task_status: trio.TaskStatus[DynamicSupervisor]) -> None:
                try:
                    await sup.run(task_status=task_status)
                except SupervisorGaveUp as exc:
                    caught.append(exc)

            await nursery.start(supervise)
            await sup.start_child(flaky.spec)
            await sup.start_child(other.spec)
            for _ in range(3):
                flaky.crash()
                await settle()
        [gave_up] = caught
        assert gave_up.child_id == "flaky"
        assert "stop other" in journal.events


async def test_dynamic_supervisor_terminate_child_stops_it_without_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """terminate_child cancels the child and it does not come back."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        child = Child(journal, "one", restart=Restart.PERMANENT)
        async with trio.open_nursery() as nursery:
            sup: DynamicSupervisor = await nursery.start(DynamicSupervisor("ids").run)
            await sup.start_child(child.spec)
            await sup.terminate_child("one")
            await settle()
            assert journal.events[-2:] == ["stop one", "stopped one"]
            assert child.starts == 1
            assert len(sup) == 0
            nursery.cancel_scope.cancel()
