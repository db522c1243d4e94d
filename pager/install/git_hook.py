"""The git guard's `pre-commit` hook in a workspace (docs/reservations.md): `pager reserve
--git-hook` and `pager setup` install it, `pager setup --undo` removes it.

The hook is a two-line shell script marked as Pager's; it runs `pager hook --git-pre-commit`
(pager/git_guard.py) by absolute path. A `pre-commit` that is not Pager's is the user's own:
it is never replaced, and the refusal says which line to add to it instead. The hooks
directory is git's own answer (`git rev-parse --git-path hooks`), so `core.hooksPath` and
linked worktrees are honoured.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pager.install.files import InstallError

#: The line that marks the hook as Pager's (and so Pager's to update or remove).
MARKER = "# pager: reservations guard"


def guard_line(pager: Sequence[str]) -> str:
    """The command that runs the guard; a user's own hook can run it too."""
    return shlex.join([*pager, "hook", "--git-pre-commit"])


def hook_path(directory: Path) -> Path:
    """Where git looks for the `pre-commit` hook of the repository holding `directory`."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-path", "hooks"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError as exc:
        raise InstallError(f"git cannot be run ({exc.strerror}); the git guard needs git") from None
    if done.returncode != 0:
        raise InstallError(
            f"{directory} is not inside a git repository; run this in the repository whose"
            " commits the guard should check"
        )
    return Path(done.stdout.strip()) / "pre-commit"


def install(directory: Path, pager: Sequence[str]) -> tuple[Path, str]:
    """(the hook's path, `installed` | `updated` | `unchanged`). Refuses, in words, to replace
    a hook that is not Pager's."""
    path = hook_path(directory)
    line = guard_line(pager)
    script = (
        f"#!/bin/sh\n{MARKER}: refuses a commit touching files another agent reserved.\n"
        "# `git commit --no-verify` skips it; `pager setup --undo` removes it.\n"
        f"exec {line}\n"
    )
    try:
        before = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise InstallError(f"{path} cannot be read ({exc.strerror})") from None
    if before is not None and MARKER not in before:
        raise InstallError(
            f"{path} is your own pre-commit hook, and Pager does not replace it. To add the"
            f" guard, put this line in it (before any `exec`): {line} || exit 1"
        )
    if before == script:
        return path, "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.pager")
    temporary.write_text(script, encoding="utf-8")
    temporary.chmod(0o755)
    os.replace(temporary, path)
    return path, "installed" if before is None else "updated"


def uninstall(path: Path) -> bool:
    """Remove the hook at `path` if it is still Pager's; True when removed."""
    try:
        if MARKER not in path.read_text(encoding="utf-8", errors="replace"):
            return False
        path.unlink()
    except OSError:
        return False
    return True
