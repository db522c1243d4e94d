"""Ordered start, reverse-order bounded stop, start failures, cancellation."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from supervisors import ChildSpec, ChildStartFailed, Restart, Supervisor

from ._kit import Child, Journal, children, running, settle

LIMIT = 60  # virtual seconds; a hang guard, not a timing assertion


async def test_supervisor_starts_children_in_order(autojump_clock: trio.testing.MockClock) -> None:
    """Each child is ready before the next one starts."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c = children(journal, "a", "b", "c", start_delay=1.0)
        async with running(Supervisor("root", [a.spec, b.spec, c.spec])) as sup:
            assert journal.events == [
                "start a", "ready a", "start b", "ready b", "start c", "ready c",
            ]  # fmt: skip
            assert journal.time_of("start b") >= journal.time_of("ready a") >= 1.0
            assert sup.which_children() == [("a", True), ("b", True), ("c", True)]
            assert [sup.started_value(i) for i in "abc"] == ["a#1", "b#1", "c#1"]


async def test_supervisor_stops_children_in_reverse_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """On cancellation each child is fully stopped before the previous one is cancelled."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c = children(journal, "a", "b", "c", stop_delay=0.5)
        with trio.move_on_after(10) as scope:
            await Supervisor("root", [a.spec, b.spec, c.spec]).run()
        assert scope.cancelled_caught  # the Cancelled reached its scope: not swallowed
        assert journal.since(6) == [
            "stop c", "stopped c", "stop b", "stopped b", "stop a", "stopped a",
        ]  # fmt: skip
        assert journal.time_of("stop a") == pytest.approx(journal.time_of("stop c") + 1.0)


async def test_supervisor_stop_wait_is_bounded_by_shutdown_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A child overrunning shutdown_timeout is logged and left behind; run() still joins it."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        slow = Child(journal, "slow", shutdown_timeout=1.0, stop_delay=30.0)
        with trio.move_on_after(5):
            await Supervisor("root", [a.spec, slow.spec]).run()
        # The supervisor gave up waiting for "slow" after 1s and went on to stop "a" ...
        assert journal.time_of("stop a") == pytest.approx(journal.time_of("stop slow") + 1.0)
        assert journal.time_of("stopped a") < journal.time_of("stopped slow")
        # ... and run() returned only once the straggler had finished (trio cannot kill it).
        assert trio.current_time() == pytest.approx(journal.time_of("stopped slow"))
        overran = [r for r in caplog.records if "did not stop within" in r.getMessage()]
        assert len(overran) == 1
        assert overran[0].name == "pager.supervisors"
        assert overran[0].levelno == logging.WARNING
        assert "'slow'" in overran[0].getMessage()


async def test_supervisor_initial_start_failure_stops_started_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child raising before started() aborts run() after stopping earlier ones in reverse."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c, d = children(journal, "a", "b", "c", "d")
        c.failing_starts = 1
        sup = Supervisor("root", [a.spec, b.spec, c.spec, d.spec])
        with pytest.raises(ChildStartFailed) as raised:
            await sup.run()
        assert raised.value.child_id == "c"
        assert raised.value.__cause__ is c.start_error
        assert "'root'" in str(raised.value)
        assert "'c'" in str(raised.value)
        assert journal.events == [
            "start a", "ready a", "start b", "ready b", "start c",
            "stop b", "stopped b", "stop a", "stopped a",
        ]  # fmt: skip
        assert d.starts == 0
        assert sup.which_children() == [("a", False), ("b", False)]


async def test_supervisor_child_returning_before_started_fails_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child that returns without calling started() is a start failure too."""

    async def lazy(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        return None

    with trio.fail_after(LIMIT), pytest.raises(ChildStartFailed) as raised:
        await Supervisor("root", [ChildSpec("lazy", lazy)]).run()
    assert raised.value.__cause__ is None
    assert "exited before it was started" in str(raised.value)


async def test_supervisor_cancelled_while_child_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelling run() during a child's startup cancels that startup and propagates."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        b = Child(journal, "b", start_delay=100.0)
        with trio.move_on_after(1) as scope:
            await Supervisor("root", [a.spec, b.spec]).run()
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(1.0)
        assert journal.events == ["start a", "ready a", "start b", "stop a", "stopped a"]


async def test_supervisor_run_rejects_a_second_concurrent_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One Supervisor object runs one tree at a time."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        async with running(Supervisor("root", [Child(journal, "a").spec])) as sup:
            with pytest.raises(RuntimeError, match="already running"):
                await sup.run()


async def test_supervisor_child_exception_group_is_a_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child whose own nursery raises a group is restarted; the supervisor keeps running."""
    starts = 0

    async def crew(*, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal starts
        starts += 1
        task_status.started(starts)
        if starts == 1:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)
                raise ExceptionGroup("crew", [ValueError("one"), KeyError("two")])
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with running(Supervisor("root", [ChildSpec("crew", crew)])) as sup:
            await settle()
            assert sup.started_value("crew") == 2
            assert sup.which_children() == [("crew", True)]


def test_childspec_rejects_negative_shutdown_timeout() -> None:
    """ChildSpec validates itself."""
    with pytest.raises(ValueError, match="shutdown_timeout"):
        ChildSpec("x", trio.sleep_forever, shutdown_timeout=-1.0)
    with pytest.raises(ValueError, match="id"):
        ChildSpec("", trio.sleep_forever, restart=Restart.TEMPORARY)


def test_supervisor_rejects_bad_configuration() -> None:
    """Duplicate ids, negative max_restarts and a non-positive period are refused."""
    spec = ChildSpec("x", trio.sleep_forever)
    with pytest.raises(ValueError, match="duplicate"):
        Supervisor("root", [spec, spec])
    with pytest.raises(ValueError, match="max_restarts"):
        Supervisor("root", [spec], max_restarts=-1)
    with pytest.raises(ValueError, match="period"):
        Supervisor("root", [spec], period=0)


async def test_supervisor_propagates_base_exceptions_from_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only Exception subclasses are child failures; anything else propagates out of run()."""

    class Fatal(BaseException):
        pass

    async def doomed(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(1.0)
        raise Fatal

    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b = children(journal, "a", "b")
        sup = Supervisor("root", [a.spec, ChildSpec("doomed", doomed), b.spec])
        with pytest.RaisesGroup(Fatal, flatten_subgroups=True):
            await sup.run()
        assert journal.since(4) == ["stop b", "stopped b", "stop a", "stopped a"]


async def test_supervisor_logs_a_child_raising_while_stopping(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An error raised by a child's cleanup is logged; stopping goes on."""

    async def messy(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("cleanup failed")  # replaces the Cancelled on purpose

    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        with trio.move_on_after(1) as scope:
            await Supervisor("root", [a.spec, ChildSpec("messy", messy)]).run()
        assert scope.cancelled_caught
        assert journal.since(2) == ["stop a", "stopped a"]
        [record] = [r for r in caplog.records if "raised while stopping" in r.getMessage()]
        assert "'messy'" in record.getMessage()
        assert "cleanup failed" in record.getMessage()
