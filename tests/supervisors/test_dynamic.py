"""Dynamic children: start_child, terminate_child, started_value, which_children."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from supervisors import ChildSpec, ChildStartFailed, Restart, Supervisor

from ._kit import Child, Journal, children, running, settle

LIMIT = 60  # virtual seconds; a hang guard, not a timing assertion


async def test_start_child_appends_and_returns_started_value(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dynamic child starts after the others, is supervised, and stops first."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b = children(journal, "a", "b")
        dyn = Child(journal, "dyn", start_delay=1.0)
        async with running(Supervisor("root", [a.spec, b.spec])) as sup:
            assert await sup.start_child(dyn.spec) == "dyn#1"
            assert sup.which_children() == [("a", True), ("b", True), ("dyn", True)]
            dyn.crash()
            await settle(2.0)  # past its start_delay
            assert sup.started_value("dyn") == "dyn#2"
            mark = len(journal.entries)
        assert journal.since(mark)[::2] == ["stop dyn", "stop b", "stop a"]


async def test_start_child_failure_raises_and_adds_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dynamic child failing before started() raises ChildStartFailed to the caller."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        bad = Child(journal, "bad")
        bad.failing_starts = 1
        async with running(Supervisor("root", [a.spec])) as sup:
            with pytest.raises(ChildStartFailed) as raised:
                await sup.start_child(bad.spec)
            assert raised.value.__cause__ is bad.start_error
            assert sup.which_children() == [("a", True)]
            with pytest.raises(KeyError):
                sup.started_value("bad")


async def test_start_child_rejects_duplicate_id(autojump_clock: trio.testing.MockClock) -> None:
    """Child ids are unique within a supervisor."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        async with running(Supervisor("root", [a.spec])) as sup:
            with pytest.raises(ValueError, match="already has a child 'a'"):
                await sup.start_child(Child(journal, "a").spec)
            assert a.starts == 1


async def test_terminate_child_stops_and_removes_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A terminated child is stopped within its shutdown_timeout and never restarted."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        b = Child(journal, "b", shutdown_timeout=1.0, stop_delay=5.0)
        async with running(Supervisor("root", [a.spec, b.spec])) as sup:
            before = trio.current_time()
            await sup.terminate_child("b")
            assert trio.current_time() == pytest.approx(before + 1.0)
            assert sup.which_children() == [("a", True)]
            with pytest.raises(KeyError):
                sup.started_value("b")
            await settle(10.0)  # the straggler finishes; its exit must not count as a failure
            assert b.starts == 1
            assert "stopped b" in journal.events
            with pytest.raises(KeyError, match="'zzz'"):
                await sup.terminate_child("zzz")


async def test_dynamic_api_refuses_a_supervisor_that_is_not_running() -> None:
    """start_child and terminate_child need a running supervisor."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        sup = Supervisor("root", [Child(journal, "a").spec])
        with pytest.raises(RuntimeError, match="not running"):
            await sup.start_child(Child(journal, "b").spec)
        with pytest.raises(RuntimeError, match="not running"):
            await sup.terminate_child("a")
        assert sup.which_children() == []


async def test_started_value_follows_the_latest_incarnation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a restart started_value returns the new value; a stopped transient keeps its last."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        job = Child(journal, "job", restart=Restart.TRANSIENT)
        async with running(Supervisor("root", [job.spec])) as sup:
            assert sup.started_value("job") == "job#1"
            job.crash()
            await settle()
            assert sup.started_value("job") == "job#2"
            job.finish()
            await settle()
            assert sup.which_children() == [("job", False)]
            assert sup.started_value("job") == "job#2"


async def test_start_child_cancelled_caller_leaves_child_cancellable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """If start_child's caller is cancelled while the child starts, the child is cancelled too."""
    finished = trio.Event()

    async def stubborn(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with trio.CancelScope(shield=True):
                await trio.sleep(1.0)  # the caller gives up meanwhile
            task_status.started()  # trio cannot move it then: it must stay cancellable
            await trio.sleep_forever()
        finally:
            finished.set()

    with trio.fail_after(LIMIT):
        journal = Journal()
        async with running(Supervisor("root", [Child(journal, "a").spec])) as sup:
            with trio.move_on_after(0.5) as scope:
                await sup.start_child(ChildSpec("stubborn", stubborn))
            assert scope.cancelled_caught
            assert finished.is_set()
            assert sup.which_children() == [("a", True)]
