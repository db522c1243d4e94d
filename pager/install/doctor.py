"""`pager doctor [--json]`: is everything Pager needs in place, and what to do where not.

Each check is a `Check(name, ok, detail, fix)`: `fix` is one line in the command line's words.
It checks, without starting or changing anything: the configuration, the broker (running,
answering /health, degraded?), its store (where, its schema version), PATH (is the first
`pager` this installation's, not Debian's /usr/bin/pager = less), the skill, and the wiring of
each harness found here (its plugin's hooks and MCP server present and running this Pager, the
settings entries that enable it). The wiring is checked by planning `pager setup` as a dry run:
one implementation of what "set up" means. Exit status 0 when all is well, 1 when something
needs doing, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pager.implementations.manifest import tilde
from pager.implementations.registry import Implementation, ImplementationRegistry
from pager.install import detect, plugin, skill
from pager.install.entries import EntryStatus, apply_entries
from pager.install.files import InstallError, Status, load_record
from pager.install.setup import ENTRIES_RECORD, nothing_to_wire
from pager.install.usage import Parser, UsageRefused
from pager.versions import SCHEMA_VERSION, VERSION

EXIT_OK, EXIT_NEEDS_DOING, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""  # what to do, when not ok

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def run_checks(environ: Mapping[str, str] | None = None) -> list[Check]:
    from pager.launch.paths import StateDirError, state_paths

    env = os.environ if environ is None else environ
    checks: list[Check] = []
    try:
        paths = state_paths()
    except StateDirError as exc:
        return [Check("state", False, str(exc), "fix the state directory as said, then doctor")]
    config_check, store_display = _config(paths)
    checks.append(config_check)
    checks += _broker_and_store(paths, store_display)
    checks.append(_path(env))
    from pager.implementations.registry import discover

    registry = discover()
    harnesses = detect.installed(registry, env)
    if harnesses:
        checks.append(_skill(registry, paths.root))
    else:
        checks.append(Check("skill", True, "no harness found here to read it"))
    for impl, found in harnesses:
        checks += _harness(registry, impl, found, paths.root, env)
    return checks


# -- the checks --------------------------------------------------------------------------------


def _config(paths: Any) -> tuple[Check, str]:
    from pager.config import ConfigError, load_config

    try:
        config = load_config(paths.config)
    except ConfigError as exc:
        fix = f"fix {tilde(str(paths.config))} or the PAGER_* variable named, then pager doctor"
        return Check("config", False, str(exc), fix), "unknown (the configuration has errors)"
    shown = "defaults" if not paths.config.exists() else tilde(str(paths.config))
    store = config.store.display()
    if config.store.kind == "sqlite":
        store = f"SQLite at {tilde(str(paths.database))}"
    return Check("config", True, f"{shown}; store: {store}"), store


def _broker_and_store(paths: Any, store_display: str) -> list[Check]:
    from pager.launch.discovery import discover
    from pager.launch.status_report import status_report

    found = discover(paths)
    if found.broker is None:
        return [
            Check("broker", False, f"not running: {found.reason}", "pager start"),
            Check(
                "store",
                False,
                f"not checked while the broker is stopped (configured: {store_display})",
                "pager start, then pager doctor",
            ),
        ]
    report = status_report(paths, found.broker, "")
    where = f"running at {report['url']} (pid {report['pid']}, Pager {report['broker_version']})"
    checks: list[Check] = []
    if "health_error" in report:
        checks.append(Check("broker", False, report["health_error"], "pager restart"))
    elif report.get("status") == "degraded":
        problems = "; ".join(str(item.get("message", item)) for item in report.get("degraded", []))
        checks.append(
            Check(
                "broker",
                False,
                f"{where}, degraded: {problems}",
                "fix what is named (pager status shows the log), then pager restart",
            )
        )
    elif report["broker_version"] != VERSION:
        checks.append(
            Check(
                "broker",
                False,
                f"{where}, but this is Pager {VERSION}",
                "pager restart (to run this version)",
            )
        )
    else:
        checks.append(Check("broker", True, where))
    store = report.get("store")
    shown = (
        f"{store.get('kind')} at {store.get('where')}" if isinstance(store, dict) else store_display
    )
    schema = report.get("schema_version")
    if "counts_error" in report:
        checks.append(Check("store", False, f"{shown}: {report['counts_error']}", "pager status"))
    elif schema != SCHEMA_VERSION:
        checks.append(
            Check(
                "store",
                False,
                f"{shown}: schema version {schema}, this Pager's is {SCHEMA_VERSION}",
                "pager restart (the broker migrates the store when it starts)",
            )
        )
    else:
        checks.append(Check("store", True, f"{shown}, schema version {schema}, answering"))
    return checks


def _path(environ: Mapping[str, str]) -> Check:
    from pager.launch.own_pager import _is_this_pager, console_script

    own = console_script()
    first = shutil.which("pager", path=environ.get("PATH", os.defpath))
    # A link, not the environment's bin directory on PATH: that would put its python and pip
    # before the user's own.
    before = "" if first is None else f" before {os.path.dirname(first)}"
    put_first = (
        f"ln -sf {own} ~/.local/bin/pager, with ~/.local/bin{before} on PATH"
        if own is not None
        else "install Pager (pipx install, or pip install in a venv): it has no pager command"
    )
    if first is None:
        return Check("path", False, "no `pager` on PATH", put_first)
    same = own is not None and os.path.realpath(first) == os.path.realpath(own)
    if same or _is_this_pager(Path(first)):
        return Check("path", True, f"the first `pager` on PATH is this Pager's ({tilde(first)})")
    target = os.path.basename(os.path.realpath(first))
    what = f"the first `pager` on PATH is {first}"
    if target in ("less", "more", "most", "pg") or first == "/usr/bin/pager":
        what += f" (the system's text pager, {target}: Debian's /usr/bin/pager is less)"
    what += f", not this Pager's ({own or 'none installed'})"
    return Check("path", False, what, put_first)


def _skill(registry: ImplementationRegistry, state_root: Path) -> Check:
    try:
        record = load_record(state_root, skill.RECORD)
    except InstallError as exc:
        return Check("skill", False, str(exc), "move the record aside, then pager setup")
    if record is not None and record.extra.get("via") == "npx":
        return Check("skill", True, "installed through the skills installer (npx skills)")
    outcomes = skill.install(registry, state_root, use_npx=False, dry_run=True).outcomes
    planned = [item for item in outcomes if item.status is not Status.REMOVED]
    missing = [tilde(str(item.path)) for item in planned if item.status is not Status.UNCHANGED]
    if missing:
        return Check("skill", False, "missing or out of date: " + ", ".join(missing), "pager setup")
    return Check("skill", True, f"in {len(planned)} skills directories")


def _harness(
    registry: ImplementationRegistry,
    impl: Implementation,
    found: list[str],
    state_root: Path,
    environ: Mapping[str, str],
) -> list[Check]:
    name = f"harness {impl.id}"
    fix = f"pager setup --only {impl.id}"
    if not impl.manifest.plugin.supported or plugin.find_builder(impl.manifest) is None:
        return [Check(name, True, f"found ({', '.join(found)}); {nothing_to_wire(impl.id)}")]
    try:
        plan = plugin.build(registry, impl.id, environ)
        outcomes = plugin.install(registry, impl.id, state_root, environ=environ, dry_run=True)
    except InstallError as exc:
        return [Check(name, False, str(exc), f"pager {impl.id} (launch it through Pager)")]
    checks: list[Check] = []
    planned = [item for item in outcomes.outcomes if item.status is not Status.REMOVED]
    missing = [tilde(str(item.path)) for item in planned if item.status is Status.WRITTEN]
    differ = [tilde(str(item.path)) for item in planned if item.status in _DIFFERS]
    problems = []
    if missing:
        problems.append("missing: " + ", ".join(missing))
    if differ:
        problems.append(
            "not this Pager's (another pager, or an older install): " + ", ".join(differ)
        )
    if problems:
        checks.append(Check(f"{name} hooks and MCP", False, "; ".join(problems), fix))
    else:
        where = tilde(str(plan.location))
        checks.append(
            Check(f"{name} hooks and MCP", True, f"{where}: hooks and MCP server run this Pager")
        )
    if plan.entries:
        entries = apply_entries(state_root, ENTRIES_RECORD, plan.entries, dry_run=True)
        absent = [f"{tilde(str(e.path))} {e.key}" for e in entries if e.status is EntryStatus.ADDED]
        refused = [e for e in entries if e.status is EntryStatus.SKIPPED]
        if refused:
            detail = "; ".join(f"{e.key}: {e.reason}" for e in refused)
            checks.append(Check(f"{name} settings", False, detail, refused[0].reason))
        elif absent:
            detail = "not enabled: " + ", ".join(absent)
            checks.append(Check(f"{name} settings", False, detail, fix))
        else:
            checks.append(Check(f"{name} settings", True, "the plugin is enabled in its settings"))
    mcp = plugin.PluginContext(Path.home(), _pager_argv(environ), environ).pager[0]
    if not (os.path.isfile(mcp) and os.access(mcp, os.X_OK)):
        checks.append(
            Check(
                f"{name} MCP",
                False,
                f"the MCP server's command {mcp} cannot be run",
                "reinstall Pager, then pager setup",
            )
        )
    return checks


_DIFFERS = (Status.UPDATED, Status.SKIPPED)


def _pager_argv(environ: Mapping[str, str]) -> tuple[str, ...]:
    from pager.install.command import pager_argv

    return pager_argv(environ)


# -- the command line --------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    command = Parser(
        prog="pager doctor",
        description="Check that Pager is ready: its configuration, the broker and its store, "
        "that the first `pager` on PATH is this one, the skill, and each installed harness's "
        "wiring (hooks, MCP server, settings). Prints what to do for each problem. Exit "
        "status 0 when all is well, 1 when something needs doing. Changes nothing.",
        allow_abbrev=False,
    )
    command.add_argument(
        "--json", action="store_true", help="print the checks as JSON: {name, ok, detail, fix}"
    )
    return command


def main(argv: Sequence[str]) -> int:
    """`argv` follows `doctor`."""
    try:
        args = parser().parse_args(list(argv))
    except UsageRefused as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    checks = run_checks()
    healthy = all(check.ok for check in checks)
    if args.json:
        report = {"ok": healthy, "checks": [check.to_json() for check in checks]}
        print(json.dumps(report, indent=2))
    else:
        for check in checks:
            print(f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
            if not check.ok:
                print(f"      do: {check.fix}")
        todo = sum(not check.ok for check in checks)
        things = "1 thing" if todo == 1 else f"{todo} things"
        print("All is well." if healthy else f"{things} to do (see `do:` above).")
    return EXIT_OK if healthy else EXIT_NEEDS_DOING
