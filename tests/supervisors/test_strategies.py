"""Restart strategies and restart types."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from supervisors import Restart, Strategy, Supervisor

from ._kit import Child, Journal, children, running, settle

LIMIT = 60  # virtual seconds; a hang guard, not a timing assertion


async def test_one_for_one_restarts_only_the_failed_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Siblings of the failed child keep running untouched."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c = children(journal, "a", "b", "c")
        sup = Supervisor("root", [a.spec, b.spec, c.spec], strategy=Strategy.ONE_FOR_ONE)
        async with running(sup):
            mark = len(journal.entries)
            b.crash()
            await settle()
            assert journal.since(mark) == ["start b", "ready b"]
            assert (a.starts, b.starts, c.starts) == (1, 2, 1)
            assert sup.started_value("b") == "b#2"
            assert sup.which_children() == [("a", True), ("b", True), ("c", True)]


async def test_one_for_all_restarts_every_child(autojump_clock: trio.testing.MockClock) -> None:
    """The others stop in reverse order, then all start again in order."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c = children(journal, "a", "b", "c")
        sup = Supervisor("root", [a.spec, b.spec, c.spec], strategy=Strategy.ONE_FOR_ALL)
        async with running(sup):
            mark = len(journal.entries)
            b.crash()
            await settle()
            assert journal.since(mark) == [
                "stop c", "stopped c", "stop a", "stopped a",
                "start a", "ready a", "start b", "ready b", "start c", "ready c",
            ]  # fmt: skip
            assert [sup.started_value(i) for i in "abc"] == ["a#2", "b#2", "c#2"]


async def test_rest_for_one_restarts_the_failed_child_and_later_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Children started before the failed one are untouched."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b, c, d = children(journal, "a", "b", "c", "d")
        specs = [a.spec, b.spec, c.spec, d.spec]
        async with running(Supervisor("root", specs, strategy=Strategy.REST_FOR_ONE)):
            mark = len(journal.entries)
            b.crash()
            await settle()
            assert journal.since(mark) == [
                "stop d", "stopped d", "stop c", "stopped c",
                "start b", "ready b", "start c", "ready c", "start d", "ready d",
            ]  # fmt: skip
            assert a.starts == 1


@pytest.mark.parametrize(
    ("restart", "crashes", "restarted"),
    [
        (Restart.PERMANENT, True, True),
        (Restart.PERMANENT, False, True),
        (Restart.TRANSIENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TEMPORARY, True, False),
        (Restart.TEMPORARY, False, False),
    ],
)
async def test_restart_type_decides_whether_an_exit_restarts(
    autojump_clock: trio.testing.MockClock, restart: Restart, crashes: bool, restarted: bool
) -> None:
    """permanent: always; transient: only after an exception; temporary: never."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        x = Child(journal, "x", restart=restart)
        async with running(Supervisor("root", [a.spec, x.spec])) as sup:
            if crashes:
                x.crash()
            else:
                x.finish()
            await settle()
            assert x.starts == (2 if restarted else 1)
            assert a.starts == 1
            expected = {
                Restart.PERMANENT: [("a", True), ("x", True)],
                Restart.TRANSIENT: [("a", True), ("x", restarted)],
                Restart.TEMPORARY: [("a", True)],  # as in OTP, it leaves the supervisor
            }[restart]
            assert sup.which_children() == expected


async def test_restart_is_logged_with_child_id_and_error(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Each restart logs a warning naming the child and carrying its exception."""
    caplog.set_level(logging.INFO, logger="pager.supervisors")
    with trio.fail_after(LIMIT):
        journal = Journal()
        b = Child(journal, "b")
        async with running(Supervisor("root", [b.spec])):
            error = b.crash(ValueError("disk on fire"))
            await settle()
    [record] = [r for r in caplog.records if "restarting" in r.getMessage()]
    assert record.name == "pager.supervisors"
    assert record.levelno == logging.WARNING
    assert "'b'" in record.getMessage()
    assert "disk on fire" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[1] is error


async def test_one_for_all_drops_temporary_siblings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A group restart stops a temporary sibling and does not start it again."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        tmp = Child(journal, "tmp", restart=Restart.TEMPORARY)
        sup = Supervisor("root", [a.spec, tmp.spec], strategy=Strategy.ONE_FOR_ALL)
        async with running(sup):
            a.crash()
            await settle()
            assert tmp.starts == 1
            assert "stopped tmp" in journal.events
            assert sup.which_children() == [("a", True)]


async def test_one_for_all_restarts_a_transient_sibling_that_had_finished(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As in OTP, a group restart starts every non-temporary child in the group."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a = Child(journal, "a")
        job = Child(journal, "job", restart=Restart.TRANSIENT)
        sup = Supervisor("root", [a.spec, job.spec], strategy=Strategy.ONE_FOR_ALL)
        async with running(sup):
            job.finish()
            await settle()
            assert sup.which_children() == [("a", True), ("job", False)]
            a.crash()
            await settle()
            assert sup.which_children() == [("a", True), ("job", True)]
            assert job.starts == 2


async def test_failed_restart_is_retried(autojump_clock: trio.testing.MockClock) -> None:
    """A restart whose start fails counts as another failure and is tried again."""
    with trio.fail_after(LIMIT):
        journal = Journal()
        a, b = children(journal, "a", "b")
        async with running(Supervisor("root", [a.spec, b.spec], max_restarts=3)) as sup:
            b.failing_starts = 2
            b.crash()
            await settle()
            assert b.starts == 4  # the first run, two failed restarts, one good one
            assert sup.which_children() == [("a", True), ("b", True)]
            assert sup.started_value("b") == "b#4"
