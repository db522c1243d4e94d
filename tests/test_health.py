"""The health board (pager/health.py): what `GET /health` reports degraded, and since when."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

import pytest

from pager.health import MCP, STORE, HealthBoard, provider_kind

#: 2027-01-15T08:00:00Z, as Unix seconds.
T0 = 1_800_000_000.0


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.seconds = T0

    def now(self) -> float:
        return self.seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def board(clock: Clock) -> HealthBoard:
    return HealthBoard(clock.now)


def test_health_board_starts_ok_without_a_degraded_list(board: HealthBoard) -> None:
    """Nothing marked: `status` is ok and there is no `degraded` key at all."""
    assert board.snapshot() == {"status": "ok"}


def test_health_board_degrade_reports_kind_message_and_since(
    board: HealthBoard, clock: Clock
) -> None:
    """A marked kind is listed with its message and the wall-clock time it began (ISO UTC)."""
    clock.seconds = T0 + 0.25
    board.degrade(STORE, "the disk is full: free space, then retry")
    assert board.snapshot() == {
        "status": "degraded",
        "degraded": [
            {
                "kind": "store",
                "message": "the disk is full: free space, then retry",
                "since": "2027-01-15T08:00:00.250+00:00",
            }
        ],
    }


def test_health_board_degrade_again_keeps_since_and_takes_the_new_message(
    board: HealthBoard, clock: Clock
) -> None:
    """Marking a kind that is already degraded: the newest message, the first time."""
    board.degrade(STORE, "the database is busy: retry shortly")
    clock.seconds = T0 + 60
    board.degrade(STORE, "the disk is full: free space, then retry")
    [entry] = board.snapshot()["degraded"]
    assert entry["message"] == "the disk is full: free space, then retry"
    assert entry["since"] == "2027-01-15T08:00:00.000+00:00"


def test_health_board_lists_kinds_in_the_order_they_began(board: HealthBoard, clock: Clock) -> None:
    """Several kinds: each listed once, oldest first; a re-marked kind keeps its place."""
    board.degrade(MCP, "the MCP endpoint failed to load")
    clock.seconds = T0 + 1
    board.degrade(provider_kind("codex"), "codex's provider keeps failing")
    clock.seconds = T0 + 2
    board.degrade(STORE, "the disk is full")
    board.degrade(MCP, "the MCP endpoint failed to load, still")
    kinds = [entry["kind"] for entry in board.snapshot()["degraded"]]
    assert kinds == ["mcp", "provider:codex", "store"]


def test_health_board_recover_clears_one_kind(board: HealthBoard, clock: Clock) -> None:
    """Recovering a kind removes it alone; recovering the last one is `ok` again, and a
    later degradation of it starts anew."""
    board.degrade(STORE, "the disk is full")
    board.degrade(MCP, "the MCP endpoint failed to load")
    board.recover(STORE)
    assert [entry["kind"] for entry in board.snapshot()["degraded"]] == ["mcp"]
    board.recover(MCP)
    assert board.snapshot() == {"status": "ok"}
    clock.seconds = T0 + 5
    board.degrade(STORE, "the disk is full again")
    assert board.snapshot()["degraded"][0]["since"] == "2027-01-15T08:00:05.000+00:00"


def test_health_board_recover_of_a_healthy_kind_does_nothing(board: HealthBoard) -> None:
    """Clearing what was never marked (the store's every successful write) is a no-op."""
    board.recover(STORE)
    board.degrade(MCP, "the MCP endpoint failed to load")
    board.recover(STORE)
    assert [entry["kind"] for entry in board.snapshot()["degraded"]] == ["mcp"]


def test_health_board_snapshot_is_a_copy(board: HealthBoard) -> None:
    """Changing a snapshot changes nothing on the board."""
    board.degrade(STORE, "the disk is full")
    taken = board.snapshot()
    taken["degraded"].clear()
    taken["degraded"].append({"kind": "x"})
    assert board.snapshot()["degraded"][0]["kind"] == "store"


@pytest.mark.parametrize(("kind", "message"), [("", "something"), ("store", "")])
def test_health_board_refuses_a_degradation_without_kind_or_message(
    board: HealthBoard, kind: str, message: str
) -> None:
    """A degradation nobody could read is a bug in its caller: refused, naming both."""
    with pytest.raises(ValueError, match="needs a kind and a message"):
        board.degrade(kind, message)
    assert board.snapshot() == {"status": "ok"}


def test_health_board_logs_only_transitions(
    board: HealthBoard, caplog: pytest.LogCaptureFixture
) -> None:
    """The log hears when a kind becomes degraded and when it recovers, not each repeat."""
    with caplog.at_level(logging.INFO, logger="pager.health"):
        for _ in range(3):
            board.degrade(STORE, "the disk is full")
        board.recover(STORE)
        board.recover(STORE)
    assert [r.getMessage() for r in caplog.records] == [
        "health degraded (store): the disk is full",
        "health recovered (store)",
    ]


def test_health_board_default_clock_is_the_system_wall_clock() -> None:
    """Without a clock, `since` is now, in the same ISO form as the broker's `started_at`."""
    board = HealthBoard()
    before = time.time()
    board.degrade(STORE, "the disk is full")
    after = time.time()
    since = board.snapshot()["degraded"][0]["since"]
    assert since.endswith("+00:00")
    assert before - 0.001 <= datetime.fromisoformat(since).timestamp() <= after


def test_health_board_marks_from_threads(board: HealthBoard) -> None:
    """Marked and cleared from several threads at once, it stays consistent."""

    def churn(kind: str) -> None:
        for _ in range(200):
            board.degrade(kind, f"{kind} failed")
            board.snapshot()
            board.recover(kind)
        board.degrade(kind, f"{kind} failed")

    threads = [threading.Thread(target=churn, args=(f"k{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(entry["kind"] for entry in board.snapshot()["degraded"]) == [
        "k0",
        "k1",
        "k2",
        "k3",
    ]
