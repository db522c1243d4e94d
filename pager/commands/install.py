"""`pager skill install [args…]` and `pager plugin install [HARNESS]` (SPEC §4).

    pager skill install [--no-npx] [--force] [--json] [--uninstall] [ARGS…]
    pager plugin install [HARNESS] [--force] [--json] [--uninstall]

Both print every file they touched, one per line with what happened to it (`written`,
`updated`, `unchanged`, `skipped`, `removed`, `kept`, `missing`), or JSON with `--json`.
Exit status: 0 done; 1 an error, or a file left alone because it is not Pager's; 2 usage
(including `pager plugin install` without a harness, which lists those that offer one).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pager.commands.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from pager.install.files import InstallError, Outcome, Status
from pager.install.usage import Parser, UsageRefused


def main(argv: Sequence[str]) -> int:
    """`argv` starts with `skill`, `plugin`, `setup` or `doctor`."""
    arguments = list(argv)
    if arguments[:1] in (["setup"], ["doctor"]):  # their own parsers, in pager.install
        import os
        from importlib import import_module

        try:
            return int(import_module(f"pager.install.{arguments[0]}").main(arguments[1:]))
        except BrokenPipeError:  # `pager doctor --json | head`: what it wanted is written
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
    try:
        if arguments[:1] == ["skill"]:
            return _skill(arguments[1:])
        return _plugin(arguments[1:])
    except UsageRefused as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except InstallError as exc:
        print(f"pager: {exc}", file=sys.stderr)
        return EXIT_ERROR


def skill_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pager skill",
        description="Install the Pager skill, which teaches a session to use the broker.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    install = commands.add_parser(
        "install",
        help="install the skill (or remove it with --uninstall)",
        usage="pager skill install [-h] [--no-npx] [--force] [--json] [--uninstall] [ARGS…]",
        description="With npx on PATH, runs `npx skills add <skill> -g [ARGS…]`, passing any "
        "arguments it does not know unchanged (everything after `--` too). Otherwise, or with "
        "--no-npx, writes <dir>/pager/SKILL.md into every skills directory of the "
        "implementations, and ~/.agents/skills.",
        allow_abbrev=False,
    )
    install.add_argument("--no-npx", action="store_true", help="write the files; do not use npx")
    _common(install, what="the skill")
    return parser


def plugin_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pager plugin",
        description="Install the plugin that lets sessions started without `pager` join.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    install = commands.add_parser(
        "install",
        help="install a harness's plugin (or remove it with --uninstall)",
        description="Write the plugin files of HARNESS and print the steps left to do by hand. "
        "Without HARNESS: list the harnesses that offer a plugin (exit status 2).",
        allow_abbrev=False,
    )
    install.add_argument("harness", nargs="?", metavar="HARNESS", help="e.g. claude")
    _common(install, what="the plugin")
    return parser


def _common(parser: argparse.ArgumentParser, *, what: str) -> None:
    parser.add_argument(
        "--force", action="store_true", help="replace files that exist and are not Pager's"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--uninstall",
        action="store_true",
        help=f"remove exactly the files the install of {what} wrote (changed ones are kept)",
    )


def _skill(argv: list[str]) -> int:
    from pager.implementations.registry import discover
    from pager.install import skill

    head, tail = _split_dashes(argv)
    parser = skill_parser()
    args, extra = parser.parse_known_args(head)
    if args.action != "install":
        parser.error("name an action: install")
    extra += tail
    state = _state_root()
    if args.uninstall:
        if extra:
            parser.error(f"--uninstall takes no other arguments: {' '.join(extra)}")
        record, outcomes, notes = skill.uninstall(state)
        return _report_removal(
            "skill", "the Pager skill", record is not None, outcomes, notes, args
        )
    try:
        result = skill.install(discover(), state, extra, use_npx=not args.no_npx, force=args.force)
    except skill.UsageProblem as exc:
        raise UsageRefused(f"pager skill install: {exc}") from None
    report: dict[str, Any] = {
        "command": "skill install",
        "via": result.via,
        "files": [item.to_json() for item in result.outcomes],
        "notes": result.notes,
    }
    if result.via == "npx":
        report["skills_installer"] = {"command": result.command, "exit_status": result.exit_status}
    status = _install_status(result.outcomes, extra_failure=result.exit_status != 0)
    if args.json:
        print(json.dumps(report, indent=2))
        return status
    title = (
        "Pager skill, handed to the skills installer:"
        if result.via == "npx"
        else "Pager skill (SKILL.md in each skills directory):"
    )
    _print_outcomes(title, result.outcomes)
    if result.via == "npx":
        print(f"Ran: {' '.join(result.command)}")
    _print_lines(result.notes, stream=sys.stderr, prefix="note: ")
    _print_skipped(result.outcomes)
    return status


def _plugin(argv: list[str]) -> int:
    from pager.implementations.registry import UnknownImplementation, discover
    from pager.install import plugin

    parser = plugin_parser()
    args = parser.parse_args(argv)
    if args.action != "install":
        parser.error("name an action: install")
    registry = discover()
    if args.harness is None:
        return _list_harnesses(registry, as_json=args.json)
    ident = args.harness
    if args.uninstall:
        state = _state_root()
        record, outcomes, steps = plugin.uninstall(ident, state)
        if record is None and ident not in registry:
            try:
                registry.get(ident)  # raises, naming the known ones
            except UnknownImplementation as exc:
                raise InstallError(str(exc)) from None
        return _report_removal(
            f"plugin {ident}", f"the {ident} plugin", record is not None, outcomes, steps, args
        )
    try:
        result = plugin.install(registry, ident, _state_root(), force=args.force)
    except UnknownImplementation as exc:
        raise InstallError(str(exc)) from None
    status = _install_status(result.outcomes)
    if args.json:
        report = {
            "command": "plugin install",
            "implementation": result.implementation,
            "location": result.location,
            "files": [item.to_json() for item in result.outcomes],
            "next_steps": result.next_steps,
            "notes": result.notes,
        }
        print(json.dumps(report, indent=2))
        return status
    _print_outcomes(f"{result.name} plugin ({result.location}):", result.outcomes)
    _print_lines(result.next_steps)
    _print_lines(result.notes, stream=sys.stderr, prefix="note: ")
    _print_skipped(result.outcomes)
    return status


def _list_harnesses(registry: Any, *, as_json: bool) -> int:
    from pager.install import plugin

    offered = [
        (impl.id, impl.name, plugin.find_builder(impl.manifest) is not None)
        for impl in plugin.offering(registry)
    ]
    if as_json:
        harnesses = [{"id": i, "name": n, "available": ok} for i, n, ok in offered]
        print(json.dumps({"error": "name a harness", "harnesses": harnesses}, indent=2))
    lines = ["pager plugin install: name the harness whose plugin to install. These offer one:"]
    width = max((len(ident) for ident, _, _ in offered), default=0)
    for ident, name, available in offered:
        lines.append(f"  {ident:<{width}}  {name}{'' if available else ' (not yet)'}")
    if not offered:
        lines.append("  (none)")
    print("\n".join(lines), file=sys.stderr)
    return EXIT_USAGE


def _report_removal(
    what: str, title: str, found: bool, outcomes: list[Outcome], notes: list[str], args: Any
) -> int:
    if args.json:
        report = {
            "command": f"{what} install --uninstall",
            "installed": found,
            "files": [item.to_json() for item in outcomes],
            "notes": notes,
        }
        print(json.dumps(report, indent=2))
        return EXIT_OK
    if not found:
        print(f"Nothing to remove: Pager has no record of installing {title}.")
        return EXIT_OK
    _print_outcomes(f"Removing {title}:", outcomes)
    kept = [item for item in outcomes if item.status is Status.KEPT and not item.is_dir]
    if kept:
        print(
            f"{len(kept)} file(s) changed since Pager wrote them and were kept; remove them "
            "yourself if you no longer need them.",
            file=sys.stderr,
        )
    _print_lines(notes)
    return EXIT_OK


def _install_status(outcomes: list[Outcome], *, extra_failure: bool = False) -> int:
    skipped = any(item.status is Status.SKIPPED for item in outcomes)
    return EXIT_ERROR if skipped or extra_failure else EXIT_OK


def _print_outcomes(title: str, outcomes: list[Outcome]) -> None:
    print(title)
    for item in outcomes:
        shown = f"{item.path}/" if item.is_dir else str(item.path)
        reason = f"  ({item.reason})" if item.reason else ""
        print(f"  {item.status.value:<9}  {shown}{reason}")
    if outcomes and all(item.status is Status.UNCHANGED for item in outcomes):
        print("Already installed; nothing changed.")


def _print_skipped(outcomes: list[Outcome]) -> None:
    if any(item.status is Status.SKIPPED for item in outcomes):
        print(
            "pager: some files exist with content that is not Pager's and were left alone;"
            " move them aside or rerun with --force to replace them",
            file=sys.stderr,
        )


def _print_lines(lines: list[str], *, stream: Any = None, prefix: str = "") -> None:
    for line in lines:
        print(f"{prefix}{line}", file=stream or sys.stdout)


def _split_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], argv[index + 1 :]
    return argv, []


def _state_root() -> Path:
    from pager.launch.paths import StateDirError, ensure_state_dir, state_paths

    try:
        paths = state_paths()
        ensure_state_dir(paths)
    except StateDirError as exc:
        raise InstallError(str(exc)) from None
    return paths.root
