"""The provider's wake helper: a subprocess with its manifest's templates filled, bounded by
its timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors._runtime import start_actor
from actors.identity_delivery import WakeSession
from actors.provider import DeliveryProvider
from pager.implementations.manifest import Wake

VALUES = {"agent_id": "agt_x", "session_id": "ses_y", "conversation_key": "conv-1"}


async def test_wake_helper_runs_with_filled_templates(tmp_path: Path) -> None:
    """The command runs with the session's values in its arguments."""
    out = tmp_path / "woken"
    wake = Wake(command=("sh", "-c", f"echo {{conversation_key}} {{session_id}} > {out}"))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            provider = await start_actor(nursery, DeliveryProvider(nursery, wake=wake), name="p")
            await provider.call(WakeSession(dict(VALUES)))
            # The helper runs in a provider task; it is done once nothing is left to run.
            with trio.fail_after(10):
                while not out.exists() or not out.read_text():
                    await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            nursery.cancel_scope.cancel()
    assert out.read_text().split() == ["conv-1", "ses_y"]


async def test_wake_helper_is_cut_off_at_its_timeout(
    mock_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A helper that hangs is ended at its timeout; the provider keeps serving. (The mock
    clock is jumped by hand: autojumping while a real process runs would jump every deadline.)"""
    wake = Wake(command=("sleep", "600"), timeout=5.0)
    async with trio.open_nursery() as nursery:
        provider = await start_actor(nursery, DeliveryProvider(nursery, wake=wake), name="p")
        await provider.call(WakeSession(dict(VALUES)))
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)  # the helper is running
        mock_clock.jump(6)  # past its 5 s timeout
        for _ in range(400):  # the kill is real process work: a bounded wait, not a timer
            if "wake helper sleep failed" in caplog.text:
                break
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert "wake helper sleep failed" in caplog.text
        assert provider.alive
        nursery.cancel_scope.cancel()


async def test_wake_helper_bad_template_is_logged_not_raised(tmp_path: Path) -> None:
    """A template naming a value the provider does not have is skipped with a log line."""
    wake = Wake(command=("true", "{token}"))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            provider = await start_actor(nursery, DeliveryProvider(nursery, wake=wake), name="p")
            await provider.call(WakeSession(dict(VALUES)))
            assert provider.alive
            nursery.cancel_scope.cancel()
