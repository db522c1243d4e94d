"""How a harness process is named (`pid:start time`): what `pager hook` reports is accepted,
anything else is refused before the broker looks it up or keeps it."""

from __future__ import annotations

import os

import pytest

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.harness_process import HARNESS_MAX, check_harness
from pager.launch.ancestry import _process


def test_the_name_the_hook_reports_is_accepted() -> None:
    """This process, named as `harness_ancestor` names a harness (Linux: /proc; macOS: `ps`
    lstart joined by `-`, month and day names in any locale)."""
    found = _process(os.getpid())
    assert found is not None
    _, started, _ = found
    for name in (f"{os.getpid()}:{started}", "4242:Mon-Dec-6-13:27:07-2026", "7:déc.-6"):
        assert check_harness(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "4242", ":1", "x:1", "1:", "1: a", "1:a\n", "1:a\x00", "1:" + "9" * (HARNESS_MAX - 1)],
)
def test_anything_else_is_refused_naming_the_form(name: str) -> None:
    with pytest.raises(PagerError) as refused:
        check_harness(name)
    assert refused.value.code is ErrorCode.VALIDATION_FAILED
    assert "pid:start time" in str(refused.value)
