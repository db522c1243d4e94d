"""`pager skill install`: the Pager skill (`SKILL.md`) where harnesses look for skills.

Two ways, as SPEC §4 allows:

- **The skills installer** (`npx skills add`), when `npx` is on PATH and `--no-npx` was not
  given: Pager writes the skill into its state directory (`<state>/skill/pager/SKILL.md`) and runs
  `npx skills add <that directory> -g [args…]`, the user's extra arguments unchanged (`-g` is
  added unless they chose `-g`/`--global` themselves). What that installer writes is its own.
- **Files** otherwise: `<dir>/pager/SKILL.md` in every `[skill] dirs` entry of the registry, plus
  `~/.agents/skills` (read by Codex, OpenCode, Pi and Gemini CLI).

Either way the files Pager itself writes are recorded (`files.py`), so `--uninstall` removes
exactly those.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pager.implementations.registry import ImplementationRegistry
from pager.install.files import InstallError, Outcome, Planned, Record, apply, remove

SKILL_NAME = "pager"
RECORD = "skill"
#: Read by several harnesses besides those whose manifests name it.
SHARED_DIR = "~/.agents/skills"
GLOBAL_FLAGS = ("-g", "--global")


@dataclass
class SkillResult:
    via: str  # "files" or "npx"
    outcomes: list[Outcome]
    command: list[str] = field(default_factory=list)  # the skills installer's argv (npx)
    exit_status: int = 0  # the skills installer's exit status
    notes: list[str] = field(default_factory=list)


def skill_text() -> bytes:
    """The shipped `SKILL.md`."""
    return resources.files("pager.install").joinpath("SKILL.md").read_bytes()


def skill_dirs(registry: ImplementationRegistry) -> list[Path]:
    """Every skills directory: each implementation's `[skill] dirs`, then the shared one."""
    found: list[Path] = []
    for impl in registry.all():
        for entry in impl.manifest.skill.dirs:
            path = Path(os.path.expanduser(entry))
            if path.is_absolute() and path not in found:
                found.append(path)
    shared = Path(os.path.expanduser(SHARED_DIR))
    if shared not in found:
        found.append(shared)
    return found


def planned_files(registry: ImplementationRegistry) -> list[Planned]:
    """The skill's files when written directly: `<dir>/pager/SKILL.md` in every skills dir."""
    text = skill_text()
    return [
        Planned(directory / SKILL_NAME / "SKILL.md", text) for directory in skill_dirs(registry)
    ]


def find_npx(path: str | None = None) -> str | None:
    return shutil.which("npx", path=path)


def install(
    registry: ImplementationRegistry,
    state_root: Path,
    args: Sequence[str] = (),
    *,
    use_npx: bool = True,
    npx: str | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> SkillResult:
    """Install the skill; `args` go to the skills installer unchanged. `dry_run` (files only,
    never with the skills installer) decides everything and writes nothing."""
    npx = npx or (find_npx() if use_npx else None)
    if npx is None:
        if args:
            raise UsageProblem(
                "extra arguments are for the skills installer (npx skills), which is "
                + ("disabled by --no-npx" if not use_npx else "not on PATH")
                + f": {' '.join(args)}"
            )
        planned = planned_files(registry)
        extra = {"via": "files"}
        outcomes = apply(state_root, RECORD, planned, force=force, extra=extra, dry_run=dry_run)
        return SkillResult("files", outcomes)
    if dry_run:
        raise UsageProblem("a dry run writes the skill's files directly; pass use_npx=False")
    text = skill_text()
    source = state_root / "skill" / SKILL_NAME
    scope = [] if any(arg in GLOBAL_FLAGS for arg in args) else ["-g"]
    command = [npx, "skills", "add", str(source), *scope, *args]
    outcomes = apply(
        state_root,
        RECORD,
        [Planned(source / "SKILL.md", text)],
        force=force,
        extra={"via": "npx", "command": command},
    )
    try:
        status = subprocess.run(command, check=False).returncode
    except OSError as exc:
        raise InstallError(f"could not run the skills installer {npx}: {exc}") from None
    notes = [] if status == 0 else [f"the skills installer exited with status {status}"]
    return SkillResult("npx", outcomes, command, status, notes)


def uninstall(state_root: Path) -> tuple[Record | None, list[Outcome], list[str]]:
    """Remove what `install` wrote. The skills installer's own copies are left to it."""
    record, outcomes = remove(state_root, RECORD)
    notes: list[str] = []
    if record is not None and record.extra.get("via") == "npx":
        notes.append(
            "the skills installer (npx skills) keeps its own copies of the skill; remove them"
            f" with: npx skills remove {SKILL_NAME} -g"
        )
    return record, outcomes, notes


class UsageProblem(Exception):
    """The command line cannot be honoured as given (exit status 2)."""
