"""The pending-knock mark: the launch knocked (sent its `[pager]` wake prompt into the
harness's session) and the turn it starts has not begun yet. Stdlib-only: `pager hook` reads it.

Some harnesses begin every turn with a hook whose payload has no prompt (Cline CLI's
TaskStart), so the hook cannot see the `[pager]` mark of the wake prompt and would report the
knocked turn as typed by a person, clearing the loop guard's cause (SPEC §8.1). So the launch
leaves this mark in its private directory (0700; the session's token file is there too)
before it knocks, and `pager hook --prompt-only` takes it instead of reporting the prompt:
the first turn to begin after a knock is the knock's. A mark taken by a prompt typed in the
same moment errs on the guarded side (that prompt is not reported: the chain goes on).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The mark's file name, in the launch's private directory.
MARK = "knock-pending"


def leave_mark(directory: Path) -> None:
    """Marks a knock as pending (again: one mark however many knocks)."""
    fd = os.open(directory / MARK, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)


def has_mark(directory: Path) -> bool:
    return (directory / MARK).exists()


def take_mark(directory: Path) -> bool:
    """Whether a knock was pending; it is not any more. Two takers never both see it."""
    try:
        os.unlink(directory / MARK)
    except FileNotFoundError:
        return False
    return True
