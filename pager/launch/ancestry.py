"""Which harness process a command runs inside (SPEC §4.2, rule 2). Stdlib-only: `pager hook`
and the everyday commands use it.

A harness started without `pager` has no Pager session in its environment, but its hooks run
as its descendants, and so does every command its agent runs in its shell tool. The hook names
the harness process it found (pid and start time, so a reused pid never matches) when it binds
the conversation; a command run later by the same harness finds the same process and asks the
broker which identity that hook bound.
"""

from __future__ import annotations

import os
import sys

#: Programs that run a harness's script (`node …/claude`, `sh …/claude`): the script's name
#: is the program's name then.
INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "python", "python3", "sh", "bash",
                          "zsh", "dash"})  # fmt: skip
#: How far up the process tree to look.
MAX_DEPTH = 32


def harness_ancestor(names: frozenset[str]) -> tuple[int, str, str] | None:
    """The nearest ancestor whose program is one of `names`: (pid, start time, name)."""
    pid = os.getppid()
    for _ in range(MAX_DEPTH):
        if pid <= 1:
            return None
        found = _process(pid)
        if found is None:
            return None
        parent, started, argv = found
        name = program_name(argv)
        if name in names:
            return pid, started, name
        pid = parent
    return None


def program_name(argv: list[str]) -> str:
    """The name a process runs under: its program's, or its script's for an interpreter."""
    if not argv:
        return ""
    first = os.path.basename(argv[0])
    if first.rstrip("0123456789.") in INTERPRETERS:
        for arg in argv[1:]:
            if arg in ("-c", "-e", "--eval", "-m"):
                break  # inline code or a module: the interpreter is the program
            if not arg.startswith("-"):
                return os.path.basename(arg)
    return first


def _process(pid: int) -> tuple[int, str, list[str]] | None:
    """(parent pid, start time, argv) of `pid`, or None when it cannot be read."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                stat = file.read().decode(errors="replace")
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                argv = [a.decode(errors="replace") for a in file.read().split(b"\0") if a]
        except OSError:
            return None
        fields = stat[stat.rfind(")") + 2 :].split()  # after the name, which may hold spaces
        return int(fields[1]), fields[19], argv  # ppid, starttime (in clock ticks since boot)
    import subprocess  # macOS: no /proc

    try:
        out = subprocess.run(
            ["ps", "-o", "ppid=,lstart=,command=", "-p", str(pid)],
            capture_output=True, text=True, timeout=2, check=False,
        ).stdout.split()  # fmt: skip
    except OSError:
        return None
    if len(out) < 7:
        return None
    return int(out[0]), "-".join(out[1:6]), out[6:]
