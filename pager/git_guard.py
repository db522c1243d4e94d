"""`pager hook --git-pre-commit`: the git guard (docs/reservations.md, "What is enforced
where"). A `pre-commit` hook runs it; it refuses a commit whose staged changes touch a path
another live agent holds exclusively, naming each, and exits 1 (`git commit --no-verify` is the
person's way past it). `pager reserve --git-hook` and `pager setup` install it
(pager/install/git_hook.py).

It asks as whoever commits: the agent whose session runs `git commit` (its launch's relay or
session token), else the person at the terminal in this workspace. It fails open, as the edit
hooks do: no broker, no git, a slow or malformed answer, and the commit goes ahead (one line in
logs/hook.log). Stdlib-only: it runs on every commit.
"""

from __future__ import annotations

import os
import subprocess
import sys

#: The check takes at most this many paths per request.
CHUNK = 100


def main() -> int:
    """The hook's exit status: 1 refuses the commit, 0 lets it through."""
    from pager.hook import _log

    try:
        return _guard()
    except BaseException as exc:  # fail open, whatever happened
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return 0
        _log(f"git guard: let the commit through: {type(exc).__name__}: {exc}")
        return 0


def _guard() -> int:
    from pager import pretool
    from pager.enforce import mode_for

    top = _git("rev-parse", "--show-toplevel").strip()
    mode = mode_for(top)
    if mode == "off":
        return 0
    # Every path the commit adds, changes or removes (a rename is both of its paths).
    names = [n for n in _git("diff", "--cached", "--name-only", "-z", "--no-renames").split("\0")]
    paths = [os.path.join(top, name) for name in names if name]
    conflicts = []
    for start in range(0, len(paths), CHUNK):
        conflicts += pretool.ask(paths[start : start + CHUNK], workspace=top)
    if not conflicts:
        return 0
    refused = mode == "deny"
    lines = [
        "pager: this commit touches files another agent has reserved"
        + (" (refused):" if refused else ' (a warning: enforce = "warn"):')
    ]
    for c in conflicts[:20]:
        why = f" ({c['reason']})" if c.get("reason") else ""
        lines.append(
            f"  {c.get('path')}: held exclusively by {c.get('holder')} as {c.get('pattern')}{why}"
            f" until {c.get('until')}; ask: pager send {c.get('holder')} …"
        )
    if len(conflicts) > 20:
        lines.append(f"  and {len(conflicts) - 20} more")
    if refused:
        lines.append(
            "Ask the holder, wait until the reservation ends (`pager reservations`), or commit"
            " anyway with `git commit --no-verify`."
        )
    sys.stderr.write("\n".join(lines) + "\n")
    return 1 if refused else 0


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=True)
    return done.stdout
