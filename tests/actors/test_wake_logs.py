"""Wake run logs (docs/wake.md): one file per run, named by the agent and the time; the newest
LOGS_KEPT of one agent are kept, and another agent's logs are never touched."""

from __future__ import annotations

from pathlib import Path

from actors.wake_run import LOGS_KEPT, WakeRuns, _log_path
from pager.domain.clock import SystemClock


def test_wake_log_path_keeps_the_newest_logs_of_that_agent_only(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in range(LOGS_KEPT + 5):
        (logs / f"wake-bot-20260101T0000{n:02d}-000000000.log").write_text("x")
    other = logs / "wake-bot-2-20250101T000000-000000000.log"
    other.write_text("y")
    runs = WakeRuns(clock=SystemClock(), state_dir=tmp_path)
    path = _log_path(runs, "bot")
    assert path.parent == logs
    assert path.name.startswith("wake-bot-")
    kept = sorted(p.name for p in logs.glob("wake-bot-2026*.log"))
    assert len(kept) == LOGS_KEPT - 1  # the new run's log makes LOGS_KEPT
    assert kept[0] == "wake-bot-20260101T000006-000000000.log"
    assert other.exists()
    assert _log_path(runs, "../../etc").parent == logs  # a name never leaves logs/
