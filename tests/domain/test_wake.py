"""Launch on mail's pure rules (pager/domain/wake.py): the settings' bounds, the hourly bound."""

from __future__ import annotations

import pytest

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.wake import (
    HOUR,
    MAX_COMMAND_CHARS,
    MAX_COMMAND_PARTS,
    WakeSettings,
    check_settings,
    hourly_retry_after,
)


def test_hourly_retry_after_counts_only_the_last_hour() -> None:
    """Under the bound a run may start now; at it, when the oldest counted run turns an hour
    old; runs older than an hour do not count."""
    now = 10_000.0
    assert hourly_retry_after([], 2, now) is None
    assert hourly_retry_after([now - 10], 2, now) is None
    assert hourly_retry_after([now - 10, now - 20], 2, now) == pytest.approx(HOUR - 20)
    assert hourly_retry_after([now - HOUR - 1, now - 20], 2, now) is None
    assert hourly_retry_after([now - 30, now - 20, now - 10], 2, now) == pytest.approx(HOUR - 20)


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        (WakeSettings("agt_x", max_runs_per_hour=0), "max_runs_per_hour"),
        (WakeSettings("agt_x", max_runs_per_hour=61), "max_runs_per_hour"),
        (WakeSettings("agt_x", timeout=0.5), "timeout"),
        (WakeSettings("agt_x", timeout=2 * 86400), "timeout"),
        (WakeSettings("agt_x", command=()), "at least one argument"),
        (WakeSettings("agt_x", command=("-p", "")), "none of them empty"),
        (WakeSettings("agt_x", command=("a",) * (MAX_COMMAND_PARTS + 1)), "too long"),
        (WakeSettings("agt_x", command=("a" * (MAX_COMMAND_CHARS + 1),)), "too long"),
        (WakeSettings("agt_x", command=("a\x00b",)), "NUL"),
    ],
)
def test_check_settings_refuses_what_is_out_of_bounds(settings: WakeSettings, needle: str) -> None:
    """Each bad setting is refused with `validation_failed`, naming it."""
    with pytest.raises(PagerError) as caught:
        check_settings(settings)
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert needle in caught.value.message


def test_check_settings_keeps_good_settings() -> None:
    settings = WakeSettings("agt_x", command=("-p", "{prompt}"), max_runs_per_hour=60)
    assert check_settings(settings) is settings
