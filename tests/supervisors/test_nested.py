"""Supervisors as children of supervisors."""

from __future__ import annotations

import trio
import trio.testing

from supervisors import ChildSpec, Strategy, Supervisor, SupervisorGaveUp

from ._kit import Journal, children, running, settle, until_gave_up

LIMIT = 60  # virtual seconds; a hang guard, not a timing assertion


async def test_nested_tree_starts_depth_first_and_stops_in_reverse(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An inner supervisor is ready once its own children are; it stops them before its elders."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, x, y, b = children(journal, "a", "x", "y", "b")
        inner = Supervisor("inner", [x.spec, y.spec])
        outer = Supervisor("outer", [a.spec, ChildSpec("inner", inner.run), b.spec])
        async with running(outer):
            assert journal.events == [
                "start a", "ready a", "start x", "ready x",
                "start y", "ready y", "start b", "ready b",
            ]  # fmt: skip
            assert outer.started_value("inner") is inner
            assert inner.which_children() == [("x", True), ("y", True)]
        assert journal.since(8) == [
            "stop b", "stopped b", "stop y", "stopped y",
            "stop x", "stopped x", "stop a", "stopped a",
        ]  # fmt: skip


async def test_nested_inner_gave_up_is_a_child_failure_of_the_outer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The outer restarts the inner supervisor (one_for_one), which starts its children afresh."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, x, y = children(journal, "a", "x", "y")
        inner = Supervisor("inner", [x.spec, y.spec], max_restarts=0)
        outer = Supervisor("outer", [a.spec, ChildSpec("inner", inner.run)], max_restarts=2)
        async with running(outer):
            y.crash()
            await settle()
            assert (a.starts, x.starts, y.starts) == (1, 2, 2)
            assert inner.which_children() == [("x", True), ("y", True)]
            assert outer.which_children() == [("a", True), ("inner", True)]


async def test_nested_inner_gave_up_applies_the_outer_strategy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under one_for_all the inner supervisor's siblings restart with it."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, x = children(journal, "a", "x")
        inner = Supervisor("inner", [x.spec], max_restarts=0)
        outer = Supervisor(
            "outer", [a.spec, ChildSpec("inner", inner.run)], strategy=Strategy.ONE_FOR_ALL
        )
        async with running(outer):
            x.crash()
            await settle()
            assert (a.starts, x.starts) == (2, 2)


async def test_nested_outer_gives_up_with_the_inner_failure_as_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Failures climb the tree until a supervisor with spare intensity handles them."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, x = children(journal, "a", "x")
        inner = Supervisor("inner", [x.spec], max_restarts=0)
        outer = Supervisor("outer", [a.spec, ChildSpec("inner", inner.run)], max_restarts=1)
        errors: list[Exception] = []

        async def crash_twice() -> None:
            for _ in range(2):
                await trio.sleep(0.1)
                errors.append(x.crash())

        gave_up = await until_gave_up(outer, crash_twice)
        assert gave_up.child_id == "inner"
        assert isinstance(gave_up.__cause__, SupervisorGaveUp)
        assert gave_up.__cause__.supervisor == "inner"
        assert gave_up.__cause__.__cause__ is errors[-1]
        assert journal.events[-2:] == ["stop a", "stopped a"]
