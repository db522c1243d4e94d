"""The harness's own commands `pager setup` runs to register what it wrote (for example
Codex's `codex plugin marketplace add` and `codex plugin add`), and `--undo` runs to take
them back. Only where the harness offers such a command: files alone do not enable every
plugin, and some registrations live in the harness's own cache and settings, which only the
harness should write. The argv's first word is the harness's executable, found on PATH."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Seconds one registration command may take (a first run may unpack the harness's cache).
TIMEOUT = 60.0


@dataclass(frozen=True)
class Ran:
    """A command run (or, in a dry run, that would run) and how it ended."""

    argv: tuple[str, ...]
    ok: bool
    said: str = ""  # its last line of output, or why it could not run

    def to_json(self) -> dict[str, object]:
        return {"argv": list(self.argv), "ok": self.ok, "said": self.said}


def run_all(
    commands: Sequence[Sequence[str]], environ: Mapping[str, str] | None, *, dry_run: bool
) -> list[Ran]:
    """Run each command in turn, stopping at the first that fails (a later one depends on the
    earlier); in a dry run, name them without running anything."""
    done: list[Ran] = []
    for argv in commands:
        argv = tuple(argv)
        if dry_run:
            done.append(Ran(argv, True))
            continue
        ran = run_one(argv, environ)
        done.append(ran)
        if not ran.ok:
            break
    return done


def on_path(name: str, environ: Mapping[str, str] | None) -> bool:
    return _which(name, environ) is not None


def _which(name: str, environ: Mapping[str, str] | None) -> str | None:
    return shutil.which(name, path=None if environ is None else environ.get("PATH"))


def run_one(argv: tuple[str, ...], environ: Mapping[str, str] | None) -> Ran:
    env = dict(environ) if environ is not None else None
    program = _which(argv[0], environ)
    if program is None:
        return Ran(argv, False, f"`{argv[0]}` is not on PATH")
    try:
        finished = subprocess.run(
            [program, *argv[1:]],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Ran(argv, False, str(exc))
    lines = [line for line in (finished.stdout + finished.stderr).splitlines() if line.strip()]
    said = lines[-1].strip() if lines else ""
    return Ran(argv, finished.returncode == 0, said or f"exit status {finished.returncode}")
