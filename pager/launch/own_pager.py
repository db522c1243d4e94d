"""This Pager's own `pager` command, for whatever Pager launches or writes for a host to run.

`pager` is also another program's name (Debian's /usr/bin/pager is a link to `less`), and a
PATH may find that one, or another installation of Pager, first. So:

- files written for a host to run name this Pager by absolute path (`own_argv`);
- every process Pager launches (a wrapped harness, `pager shell`, a wake run) gets a private
  directory holding only this Pager's `pager` first on its PATH (`with_own_pager`). Not the
  whole bin directory of Pager's environment: that would put its `python` and `pip` ahead of
  the user's own in every launched shell.

Standard library only: the wrapper and the wake run's preparation import it.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

#: How much of a candidate file is read to tell whether it is Pager's console script.
_HEAD_BYTES = 4096


def console_script() -> Path | None:
    """The `pager` console script of the running interpreter's installation, or None.

    A venv (a wheel or an editable install alike, pipx too) puts it beside the interpreter;
    `pip install --user` puts it in the user scheme's scripts directory. A file of that name
    counts only if it is a script that runs `pager.cli` with this very interpreter: beside
    /usr/bin/python3 the file /usr/bin/pager is `less`."""
    import sysconfig

    candidates = [Path(sys.executable).parent]
    for scheme in (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user")):
        try:
            candidates.append(Path(sysconfig.get_path("scripts", scheme)))
        except KeyError:
            continue
    for directory in candidates:
        script = directory / "pager"
        if _is_this_pager(script):
            return script
    return None


def own_argv() -> tuple[str, ...]:
    """The argv prefix that runs this Pager by absolute path: its console script, else this
    interpreter with `-m pager` (a checkout run without an install)."""
    script = console_script()
    return (str(script),) if script is not None else (sys.executable, "-m", "pager")


def own_command() -> str:
    """`own_argv` as a shell command prefix (quoted where a path needs it)."""
    return shlex.join(own_argv())


def with_own_pager(environ: Mapping[str, str], directory: str) -> dict[str, str]:
    """`environ` with `directory/bin`, holding only this Pager's `pager`, first on PATH.

    `directory` is the launch's private directory (removed after the launch). Idempotent:
    a PATH that already starts with that bin directory is left as it is."""
    bin_dir = os.path.join(directory, "bin")
    found = environ.get("PATH")
    path = os.defpath if found is None else found
    if path.split(os.pathsep, 1)[0] == bin_dir:
        return dict(environ)
    _write_pager(bin_dir)
    return {**environ, "PATH": bin_dir + os.pathsep + path if path else bin_dir}


def _write_pager(bin_dir: str) -> None:
    os.makedirs(bin_dir, mode=0o700, exist_ok=True)
    target = os.path.join(bin_dir, "pager")
    if os.path.lexists(target):
        return
    argv = own_argv()
    if len(argv) == 1:
        os.symlink(argv[0], target)
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as file:
        file.write(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')


def _is_this_pager(script: Path) -> bool:
    """A console script (`#!…` text) that imports `pager.cli` and names this interpreter."""
    try:
        if not (script.is_file() and os.access(script, os.X_OK)):
            return False
        with script.open("rb") as file:
            head = file.read(_HEAD_BYTES)
    except OSError:
        return False
    return head.startswith(b"#!") and b"pager.cli" in head and os.fsencode(sys.executable) in head
