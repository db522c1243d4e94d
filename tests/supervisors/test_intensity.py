"""Restart intensity: a sliding window of restarts on trio's clock."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from supervisors import Supervisor

from ._kit import Child, Journal, children, until_gave_up

LIMIT = 600  # virtual seconds; a hang guard, not a timing assertion


async def crash_every(child: Child, interval: float, times: int) -> list[Exception]:
    """Crash ``child`` ``times`` times, ``interval`` seconds apart; return the errors."""
    errors = []
    for n in range(times):
        await trio.sleep(interval)
        errors.append(child.crash(ValueError(f"crash {n}")))
    return errors


async def test_intensity_exceeded_gives_up(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """More than max_restarts within period raises SupervisorGaveUp out of run()."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c = children(journal, "a", "b", "c")
        sup = Supervisor("root", [a.spec, b.spec, c.spec], max_restarts=2, period=5.0)
        errors: list[Exception] = []

        async def chaos() -> None:
            errors.extend(await crash_every(b, 1.0, 3))

        gave_up = await until_gave_up(sup, chaos)
        assert b.starts == 3  # two restarts allowed, the third is one too many
        assert gave_up.__cause__ is errors[-1]
        assert gave_up.child_id == "b"
        assert "'root'" in str(gave_up)
        assert "'b'" in str(gave_up)
        assert "crash 2" in str(gave_up)
        # the children still running were stopped in reverse order
        assert journal.events[-4:] == ["stop c", "stopped c", "stop a", "stopped a"]
        assert sup.which_children() == [("a", False), ("b", False), ("c", False)]
        [record] = [r for r in caplog.records if "giving up" in r.getMessage()]
        assert record.name == "pager.supervisors"
        assert record.levelno == logging.ERROR
        assert "'b'" in record.getMessage()
        assert "crash 2" in record.getMessage()


async def test_intensity_ignores_restarts_spread_beyond_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Restarts further apart than the period never trip the limit, however many."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        b = Child(journal, "b")
        sup = Supervisor("root", [b.spec], max_restarts=1, period=5.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await crash_every(b, 5.5, 10)
            await trio.sleep(0.1)
            assert b.starts == 11
            assert sup.which_children() == [("b", True)]
            nursery.cancel_scope.cancel()


async def test_intensity_window_slides(autojump_clock: trio.testing.MockClock) -> None:
    """Only the restarts of the last period count: 0, 6, 12 pass; a fourth at 14 does not."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        b = Child(journal, "b")
        sup = Supervisor("root", [b.spec], max_restarts=2, period=10.0)
        started = trio.current_time()

        async def chaos() -> None:
            for at in (0.0, 6.0, 12.0):
                await trio.sleep_until(started + at)
                b.crash()
            await trio.sleep(0.1)
            assert b.starts == 4  # restarts at 0, 6, 12: never more than 2 within 10s
            await trio.sleep_until(started + 14.0)
            b.crash()  # 6, 12, 14: three within 10s

        await until_gave_up(sup, chaos)
        assert b.starts == 4
        assert trio.current_time() == pytest.approx(started + 14.0)


async def test_intensity_zero_gives_up_on_first_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With max_restarts=0 the first exit that needs a restart fails the supervisor."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        b = Child(journal, "b")

        async def finish() -> None:
            b.finish()  # a normal return of a permanent child needs a restart too

        gave_up = await until_gave_up(Supervisor("root", [b.spec], max_restarts=0), finish)
        assert gave_up.__cause__ is None
        assert "a normal return" in str(gave_up)
        assert b.starts == 1


async def test_intensity_bounds_a_child_that_never_starts_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Failed restarts count, so a child that cannot start makes the supervisor give up."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        b = Child(journal, "b")

        async def break_it() -> None:
            b.failing_starts = 1_000
            b.crash()

        sup = Supervisor("root", [b.spec], max_restarts=3, period=5.0)
        gave_up = await until_gave_up(sup, break_it)
        assert b.starts == 4
        assert gave_up.__cause__ is b.start_error
