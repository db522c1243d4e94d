"""`pager setup`: wire every installed harness for sessions started without `pager`.

    pager setup [--dry-run] [--only ID,…] [--undo] [--json]

Finds the harnesses the registry's `[detect]` tables find here (detect.py), then, with the
existing installers and nothing of its own: the Pager skill (skill.py, written as files), each
harness's plugin or extension with its hooks and MCP server (plugin.py), and the entries a
harness needs in its own settings to enable that plugin (entries.py), and, run inside a git
repository, the git guard's `pre-commit` hook there (git_hook.py). It records which of
those installs it made in `<state dir>/installed/setup.json`, so that `--undo` takes back
exactly them (in the reverse order) and nothing installed before it or by the user.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pager.implementations.manifest import tilde
from pager.implementations.registry import ImplementationRegistry
from pager.install import detect, git_hook, plugin, skill
from pager.install.entries import EntryOutcome, EntryStatus, apply_entries, undo_entries
from pager.install.files import (
    InstallError,
    Outcome,
    Status,
    _write_atomic,
    load_record,
    record_path,
    remove,
)
from pager.install.harness_commands import Ran, on_path, run_all, run_one
from pager.install.usage import Parser, UsageRefused

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
SETUP_RECORD = "setup"  # installed/setup.json
ENTRIES_RECORD = "setup-entries"  # installed/setup-entries.json (entries.py)
_CHANGES = (Status.WRITTEN, Status.UPDATED, Status.REMOVED)


@dataclass
class HarnessResult:
    ident: str
    name: str
    found: list[str]
    location: str = ""
    files: list[Outcome] = field(default_factory=list)
    entries: list[EntryOutcome] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str = ""  # why it could not be wired
    #: The harness's own registration commands run (pager/install/harness_commands.py).
    ran: list[Ran] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.ident,
            "name": self.name,
            "found": self.found,
            "location": self.location,
            "files": [item.to_json() for item in self.files],
            "entries": [item.to_json() for item in self.entries],
            "ran": [item.to_json() for item in self.ran],
            "next_steps": self.steps,
            "notes": self.notes,
            "problem": self.problem,
        }


@dataclass
class SetupResult:
    dry_run: bool
    skill: list[Outcome] = field(default_factory=list)
    harnesses: list[HarnessResult] = field(default_factory=list)
    git_guard: list[Outcome] = field(default_factory=list)

    def files(self) -> list[Outcome]:
        return [*self.skill, *(item for h in self.harnesses for item in h.files), *self.git_guard]

    def entries(self) -> list[EntryOutcome]:
        return [item for harness in self.harnesses for item in harness.entries]

    @property
    def changed(self) -> bool:
        return (
            any(item.status in _CHANGES for item in self.files())
            or any(item.status is EntryStatus.ADDED for item in self.entries())
            or any(harness.ran for harness in self.harnesses)
        )

    @property
    def troubled(self) -> bool:
        """Something was left undone: a file or entry skipped, or a harness not wired."""
        return (
            any(item.status is Status.SKIPPED for item in self.files())
            or any(item.status is EntryStatus.SKIPPED for item in self.entries())
            or any(harness.problem for harness in self.harnesses)
            or any(not ran.ok for harness in self.harnesses for ran in harness.ran)
        )


class Progress(Protocol):
    """Told as each part of a setup is done (the command line prints it)."""

    def skill(self, outcomes: list[Outcome]) -> None: ...

    def harness(self, harness: HarnessResult) -> None: ...


# -- the work ----------------------------------------------------------------------------------


def run_setup(
    registry: ImplementationRegistry,
    state_root: Path,
    only: Sequence[str] = (),
    *,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> SetupResult:
    """Install what each found (or named) harness needs, telling `progress` as each part is
    done. Raises `UnknownImplementation` for a name in `only` the registry lacks."""
    if only:
        picked = [registry.get(ident) for ident in only]
        chosen = [(impl, detect.evidence(impl.manifest, environ)) for impl in picked]
    else:
        chosen = detect.installed(registry, environ)
    result = SetupResult(dry_run)
    if not chosen:
        return result
    made = _load_setup(state_root)
    before = {name for name in (skill.RECORD, *_plugin_records(chosen)) if _has(state_root, name)}
    result.skill = skill.install(registry, state_root, use_npx=False, dry_run=dry_run).outcomes
    if progress is not None:
        progress.skill(result.skill)
    for impl, found in chosen:
        harness = _wire(
            registry, impl.id, found, state_root, made, dry_run=dry_run, environ=environ
        )
        result.harnesses.append(harness)
        if progress is not None:
            progress.harness(harness)
    result.git_guard = _git_guard(made, Path.cwd(), dry_run=dry_run, environ=environ)
    if not dry_run:
        wired = [skill.RECORD, *(plugin.record_name(h.ident) for h in result.harnesses if h.files)]
        for name in wired:
            made["records"].setdefault(name, name not in before)
            if name in made["order"]:
                continue
            made["order"].append(name)
        _save_setup(state_root, made)
    return result


def _wire(
    registry: ImplementationRegistry,
    ident: str,
    found: list[str],
    state_root: Path,
    made: dict[str, Any],
    *,
    dry_run: bool,
    environ: Mapping[str, str] | None,
) -> HarnessResult:
    impl = registry.get(ident)
    harness = HarnessResult(ident, impl.name, found)
    if not impl.manifest.plugin.supported or plugin.find_builder(impl.manifest) is None:
        harness.notes.append(nothing_to_wire(ident))
        return harness
    try:
        plan = plugin.build(registry, ident, environ)
        done = plugin.install(registry, ident, state_root, environ=environ, dry_run=dry_run)
    except InstallError as exc:
        harness.problem = str(exc)
        return harness
    harness.location = tilde(done.location)
    harness.files = done.outcomes
    harness.notes = done.notes
    if plan.entries:
        harness.entries = apply_entries(state_root, ENTRIES_RECORD, plan.entries, dry_run=dry_run)
        harness.steps = list(plan.entries_steps)
    else:
        harness.steps = done.next_steps
    if plan.register:
        _register(harness, plan, made, dry_run=dry_run, environ=environ)
    return harness


def _register(
    harness: HarnessResult,
    plan: plugin.PluginPlan,
    made: dict[str, Any],
    *,
    dry_run: bool,
    environ: Mapping[str, str] | None,
) -> None:
    """Run the harness's own registration commands: when its files changed, or setup has not
    registered it yet (so a second setup runs nothing). Recorded for --undo once they all ran;
    when one fails, what is left is printed as the manual steps."""
    undo = [list(argv) for argv in plan.unregister]
    changed = any(item.status in _CHANGES for item in harness.files)
    if not changed and undo and all(argv in made["commands"] for argv in undo):
        return
    program = plan.register[0][0]
    if not on_path(program, environ):
        harness.notes.append(f"`{program}` is not on PATH here: run the steps below once it is")
        return
    harness.ran = run_all(plan.register, environ, dry_run=dry_run)
    if all(ran.ok for ran in harness.ran):
        harness.steps = list(plan.register_steps)
        if not dry_run:
            made["commands"] += [argv for argv in undo if argv not in made["commands"]]
    else:
        failed = harness.ran[-1]
        harness.problem = f"`{shlex.join(failed.argv)}` failed: {failed.said}; do it by hand:"


def _git_guard(
    made: dict[str, Any], directory: Path, *, dry_run: bool, environ: Mapping[str, str] | None
) -> list[Outcome]:
    """The git guard in the repository holding `directory` (none outside one), recorded in
    `made` for --undo when setup wrote it."""
    from pager.install.command import pager_argv

    try:
        path = git_hook.hook_path(directory)
    except InstallError:
        return []  # not in a repository: no commits to guard here
    if dry_run:
        return [Outcome(path, Status.UNCHANGED if path.exists() else Status.WRITTEN)]
    try:
        path, done = git_hook.install(directory, pager_argv(environ))
    except InstallError as exc:
        return [Outcome(path, Status.SKIPPED, str(exc))]
    if str(path) not in made["git_hooks"]:
        made["git_hooks"].append(str(path))
    status = {"installed": Status.WRITTEN, "updated": Status.UPDATED}.get(done, Status.UNCHANGED)
    return [Outcome(path, status)]


def nothing_to_wire(ident: str) -> str:
    """For a harness Pager has no plugin for: how its sessions join all the same."""
    return f"nothing to install: its sessions join when started with `pager {ident}`"


def _plugin_records(chosen: Sequence[tuple[Any, list[str]]]) -> list[str]:
    return [plugin.record_name(impl.id) for impl, _ in chosen]


def _has(state_root: Path, name: str) -> bool:
    try:
        return load_record(state_root, name) is not None
    except InstallError:
        return True  # unreadable: someone's; never treat it as setup's own


@dataclass
class UndoResult:
    found: bool
    files: list[Outcome] = field(default_factory=list)
    entries: list[EntryOutcome] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    ran: list[Ran] = field(default_factory=list)


def run_undo(state_root: Path) -> UndoResult:
    """Take back what setup wrote: its settings entries, then its installs, newest first."""
    made = _load_setup(state_root)
    if (
        not made["order"]
        and not made["git_hooks"]
        and not made["commands"]
        and not record_path(state_root, ENTRIES_RECORD).exists()
    ):
        return UndoResult(found=False)
    result = UndoResult(found=True, entries=undo_entries(state_root, ENTRIES_RECORD))
    # The harnesses' own registrations first, while the files they name are still there.
    result.ran = [run_one(tuple(argv), None) for argv in made["commands"]]
    for hook in made["git_hooks"]:  # the git guard, where it is still Pager's
        removed = git_hook.uninstall(Path(hook))
        result.files.append(Outcome(Path(hook), Status.REMOVED if removed else Status.KEPT))
    for name in reversed(made["order"]):
        if not made["records"].get(name):
            continue  # installed before setup ran: not setup's to remove
        record, outcomes = remove(state_root, name)
        result.files += outcomes
        if record is not None:
            result.steps += [str(step) for step in record.extra.get("uninstall_steps") or []]
    with contextlib.suppress(FileNotFoundError):
        record_path(state_root, SETUP_RECORD).unlink()
    with contextlib.suppress(OSError):
        record_path(state_root, SETUP_RECORD).parent.rmdir()  # only when empty
    return result


def _load_setup(state_root: Path) -> dict[str, Any]:
    path = record_path(state_root, SETUP_RECORD)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        order = [str(name) for name in data["order"]]
        records = {str(name): bool(made) for name, made in data["records"].items()}
        hooks = [str(path) for path in data.get("git_hooks", [])]
        commands = [[str(word) for word in argv] for argv in data.get("commands", [])]
    except FileNotFoundError:
        return {"order": [], "records": {}, "git_hooks": [], "commands": []}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InstallError(
            f"the setup record {path} cannot be read ({exc}); move it aside to start afresh"
        ) from None
    return {"order": order, "records": records, "git_hooks": hooks, "commands": commands}


def _save_setup(state_root: Path, made: dict[str, Any]) -> None:
    path = record_path(state_root, SETUP_RECORD)
    text = (json.dumps(made, indent=2, sort_keys=True) + "\n").encode()
    with contextlib.suppress(OSError):
        if path.read_bytes() == text:
            return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_atomic(path, text, 0o600)


# -- the command line --------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    command = Parser(
        prog="pager setup",
        description="Find the harnesses installed here and install, for each, what sessions "
        "started without `pager` need: the Pager skill, its plugin or extension (hooks and "
        "the MCP server), and the settings entries that enable it. Idempotent; --undo takes "
        "back exactly what it wrote. Check the result with `pager doctor`.",
        allow_abbrev=False,
    )
    command.add_argument(
        "--dry-run", action="store_true", help="show what would be written where; write nothing"
    )
    command.add_argument(
        "--only", metavar="ID,…", help="these harnesses only (even if not found here)"
    )
    command.add_argument(
        "--undo", action="store_true", help="remove exactly what pager setup wrote"
    )
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    return command


def main(argv: Sequence[str]) -> int:
    """`argv` follows `setup`."""
    try:
        return _main(list(argv))
    except UsageRefused as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except InstallError as exc:
        print(f"pager: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _main(argv: list[str]) -> int:
    from pager.implementations.registry import UnknownImplementation, discover

    command = parser()
    args = command.parse_args(argv)
    if args.undo and (args.dry_run or args.only):
        command.error("--undo takes back everything setup wrote; it takes no --dry-run or --only")
    only = [item.strip() for item in (args.only or "").split(",") if item.strip()]
    if args.only is not None and not only:
        command.error("--only needs harness ids, e.g. --only claude,codex")
    state = _state_root(create=not args.dry_run)
    if args.undo:
        return _print_undo(run_undo(state), as_json=args.json)
    registry = discover()
    unknown = [ident for ident in only if ident not in registry]
    if unknown:
        try:
            registry.get(unknown[0])
        except UnknownImplementation as exc:
            command.error(str(exc).strip("'\""))
    if not args.json:
        if args.dry_run:
            print("Dry run: nothing is written.")
        if not only:
            _print_found(registry)
    printer = None if args.json else _Printer(args.dry_run)
    result = run_setup(registry, state, only, dry_run=args.dry_run, progress=printer)
    if args.json:
        report = {
            "command": "setup",
            "dry_run": result.dry_run,
            "changed": result.changed,
            "ok": not result.troubled,
            "skill": {"files": [item.to_json() for item in result.skill]},
            "harnesses": [harness.to_json() for harness in result.harnesses],
            "git_guard": {"files": [item.to_json() for item in result.git_guard]},
        }
        print(json.dumps(report, indent=2))
    else:
        if result.git_guard:
            print("git guard (pre-commit: refuses a commit of files another agent reserved)")
            for item in result.git_guard:
                _print_file(item, args.dry_run)
        _print_summary(result)
    return EXIT_ERROR if result.troubled else EXIT_OK


def _state_root(*, create: bool) -> Path:
    from pager.launch.paths import StateDirError, ensure_state_dir, state_paths

    try:
        paths = state_paths()
        if create:
            ensure_state_dir(paths)
    except StateDirError as exc:
        raise InstallError(str(exc)) from None
    return paths.root


# -- printing ----------------------------------------------------------------------------------

#: What a dry run says instead of what happened.
_WOULD = {
    "written": "write",
    "updated": "update",
    "removed": "remove",
    "added": "add",
    "skipped": "skip",
}


def _word(status: str, dry_run: bool) -> str:
    return _WOULD.get(status, status) if dry_run else status


def _print_found(registry: ImplementationRegistry) -> None:
    found = detect.installed(registry)
    if not found:
        looked = ", ".join(
            impl.id
            for impl in registry.all()
            if impl.manifest.detect.executables or impl.manifest.detect.paths
        )
        print(
            f"No harness found here (looked for: {looked}). Install one, or name it: "
            "pager setup --only ID"
        )
        return
    print("Found: " + "; ".join(f"{impl.id} ({', '.join(why)})" for impl, why in found))


class _Printer:
    """Progress lines: the skill's files, then each harness as it is wired."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run

    def skill(self, outcomes: list[Outcome]) -> None:
        print("skill (the Pager skill in each skills directory)")
        for item in outcomes:
            _print_file(item, self.dry_run)
        sys.stdout.flush()

    def harness(self, harness: HarnessResult) -> None:
        title = f"{harness.ident} ({harness.name})"
        if harness.location:
            title += f": plugin {harness.location}"
        print(title)
        for item in harness.files:
            _print_file(item, self.dry_run)
        for entry in harness.entries:
            reason = f"  ({entry.reason})" if entry.reason else ""
            word = _word(entry.status.value, self.dry_run)
            print(f"  {word:<9}  {tilde(str(entry.path))}  {entry.key}{reason}")
        for ran in harness.ran:
            word = "would run" if self.dry_run else ("ran" if ran.ok else "failed")
            said = f"  ({ran.said})" if ran.said and not self.dry_run else ""
            print(f"  {word:<9}  {shlex.join(ran.argv)}{said}")
        if harness.problem:
            print(f"  not wired: {harness.problem}")
        for line in harness.notes:
            print(f"  note: {line}")
        if (
            any(item.status in _CHANGES for item in harness.files)
            or any(entry.status is EntryStatus.ADDED for entry in harness.entries)
            or harness.ran
        ):
            for line in harness.steps:
                print(f"  {line}")
        sys.stdout.flush()


def _print_file(item: Outcome, dry_run: bool) -> None:
    shown = tilde(str(item.path)) + ("/" if item.is_dir else "")
    reason = f"  ({item.reason})" if item.reason else ""
    print(f"  {_word(item.status.value, dry_run):<9}  {shown}{reason}")


def _print_summary(result: SetupResult) -> None:
    if not result.harnesses:
        return
    files = [item for item in result.files() if item.status in _CHANGES]
    added = [item for item in result.entries() if item.status is EntryStatus.ADDED]
    if result.troubled:
        print(
            "pager setup: some things were left alone (see above): move aside or fix what is"
            " named, then run pager setup again",
            file=sys.stderr,
        )
    if not result.changed:
        print("Nothing changed: everything was already set up. Check it with: pager doctor")
    elif result.dry_run:
        print(
            f"Would change {len(files)} file(s) and add {len(added)} settings entry(ies);"
            " run pager setup to do it."
        )
    else:
        print(
            f"Changed {len(files)} file(s), added {len(added)} settings entry(ies). "
            "Check it with: pager doctor (undo with: pager setup --undo)"
        )


def _print_undo(result: UndoResult, *, as_json: bool) -> int:
    if as_json:
        report = {
            "command": "setup --undo",
            "found": result.found,
            "files": [item.to_json() for item in result.files],
            "entries": [item.to_json() for item in result.entries],
            "ran": [item.to_json() for item in result.ran],
            "next_steps": result.steps,
        }
        print(json.dumps(report, indent=2))
        return EXIT_OK
    if not result.found:
        print("Nothing to undo: Pager has no record of pager setup writing anything.")
        return EXIT_OK
    print("Removing what pager setup wrote:")
    for ran in result.ran:
        said = f"  ({ran.said})" if ran.said else ""
        print(f"  {'ran' if ran.ok else 'failed':<9}  {shlex.join(ran.argv)}{said}")
    for entry in result.entries:
        reason = f"  ({entry.reason})" if entry.reason else ""
        print(f"  {entry.status.value:<9}  {tilde(str(entry.path))}  {entry.key}{reason}")
    for item in result.files:
        _print_file(item, False)
    kept = [item for item in result.files if item.status is Status.KEPT]
    kept_entries = [item for item in result.entries if item.status is EntryStatus.KEPT]
    if kept or kept_entries:
        print(
            "What you changed since was kept; remove it yourself if you no longer need it.",
            file=sys.stderr,
        )
    for line in result.steps:
        print(line)
    return EXIT_OK
