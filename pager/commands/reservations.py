"""`pager reserve`, `pager release` and `pager reservations` (docs/reservations.md): thin
clients of `/v1/me/reservations`, which runs every rule, acting as `pager.commands.acting.Me`
says (the session this runs in, else the person); `pager reservations break ID` is the
person's, with the local secret.

Paths are taken as a shell gives them, relative to the current directory (as `git add` takes
them) and sent absolute: the broker makes them relative to the top of the checkout.
"""

from __future__ import annotations

import os
import sys

from pager.commands.acting import CommandRefused, Me, Operator
from pager.commands.common import EXIT_ERROR, EXIT_OK, CommandError, UsageError
from pager.commands.show import print_json, table
from pager.domain.display import for_terminal

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _absolute(paths: list[str]) -> list[str]:
    """Each path as the shell meant it: relative to the current directory."""
    here = os.getcwd()
    return [p if p.startswith("/") else os.path.join(here, p) for p in paths]


def _when(stamp: str | None) -> str:
    """An ISO time as a person reads it: to the second, in UTC."""
    return "-" if not stamp else stamp[:19].replace("T", " ") + "Z"


def cmd_reserve(args: argparse.Namespace) -> int:
    if args.git_hook:
        _git_hook()
        if not args.paths:
            return EXIT_OK
    elif not args.paths:
        raise UsageError("name what to reserve: pager reserve PATH… (or --git-hook)")
    body: dict[str, Any] = {"paths": _absolute(args.paths), "shared": args.shared}
    if args.reason is not None:
        body["reason"] = args.reason
    if args.ttl is not None:
        from pager.config import ConfigError, parse_duration

        try:
            body["ttl_s"] = parse_duration(args.ttl, source="--ttl")
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
    try:
        made = Me().call("POST", "/reservations", body)
    except CommandRefused as refused:
        if refused.code != "conflict":
            raise
        return _conflict(refused, args.json)
    if args.json:
        print_json(made)
        return EXIT_OK
    for held in made["reserved"]:
        mode = "exclusive" if held["exclusive"] else "shared"
        line = f"reserved {held['pattern']} ({mode}, {held['id']}) until {_when(held['until'])}"
        print(for_terminal(line, one_line=True))
    return EXIT_OK


def _git_hook() -> None:
    """Install the git guard in this repository (pager/install/git_hook.py)."""
    from pathlib import Path

    from pager.install import git_hook
    from pager.install.command import pager_argv
    from pager.install.files import InstallError

    try:
        path, done = git_hook.install(Path.cwd(), pager_argv())
    except InstallError as exc:
        raise CommandError(str(exc)) from None
    print(for_terminal(f"git guard {done}: {path}", one_line=True))


def _conflict(refused: CommandRefused, as_json: bool) -> int:
    """Who holds what against the request, and how to ask them; nothing was taken (exit 1)."""
    if as_json:
        print_json({"error": refused.error})
        return EXIT_ERROR
    print(f"pager: {for_terminal(str(refused))}", file=sys.stderr)
    for found in refused.error.get("conflicts", []):
        mode = "exclusively" if found.get("exclusive") else "shared"
        why = f", reason {found['reason']!r}" if found.get("reason") else ""
        line = (
            f"  {found.get('wanted')}: held {mode} by {found.get('holder')} as"
            f" {found.get('pattern')}{why}, since {_when(found.get('since'))} until"
            f" {_when(found.get('until'))}; ask: pager send {found.get('holder')} …"
        )
        print(for_terminal(line, one_line=True), file=sys.stderr)
    return EXIT_ERROR


def cmd_release(args: argparse.Namespace) -> int:
    body = {"paths": _absolute(args.paths)} if args.paths else {}
    done = Me().call("POST", "/reservations/release", body)
    if args.json:
        print_json(done)
        return EXIT_OK
    if not done["released"] and not done["not_held"]:
        print("you held no reservations")
    for held in done["released"]:
        print(for_terminal(f"released {held['pattern']} ({held['id']})", one_line=True))
    for pattern in done["not_held"]:
        print(for_terminal(f"you held no reservation of {pattern}", one_line=True))
    return EXIT_ERROR if done["not_held"] else EXIT_OK


def cmd_reservations(args: argparse.Namespace) -> int:
    words = args.words
    if words:
        if words[0] != "break" or len(words) != 2:
            raise UsageError(
                "pager reservations takes no arguments, or `break ID` (the ids are listed"
                " by `pager reservations --all`)"
            )
        return _break(words[1], args.json)
    listed = Me().call("GET", "/reservations" + ("?scope=all" if args.all else ""))
    if args.json:
        print_json(listed)
        return EXIT_OK
    held = listed["reservations"]
    if not held:
        where = "anywhere" if args.all else "in this workspace"
        print(f"no reservations {where}; `pager reserve PATH…` takes one")
        return EXIT_OK
    rows = [
        [
            r["id"],
            r["pattern"] + (" (you)" if r["you"] else ""),
            r["holder"],
            "exclusive" if r["exclusive"] else "shared",
            r["state"],
            _when(r["until"]),
            r["reason"] or "-",
        ]
        for r in held
    ]
    head = ["ID", "PATTERN", "HOLDER", "MODE", "STATE", "UNTIL", "REASON"]
    print(for_terminal(table(head, rows)))
    if listed["truncated"]:
        print("(more are held than shown; --json lists the same)")
    return EXIT_OK


def _break(reservation_id: str, as_json: bool) -> int:
    from urllib.parse import quote

    ended = Operator().call("DELETE", f"/v1/reservations/{quote(reservation_id, safe='')}")
    if as_json:
        print_json(ended)
        return EXIT_OK
    said = f"broke {ended['id']}: {ended['pattern']}, held by {ended['holder']}"
    print(for_terminal(said, one_line=True))
    return EXIT_OK


def add_commands(commands: Any) -> None:
    reserve = commands.add_parser(
        "reserve",
        description="Reserve files before changing them (docs/reservations.md): paths or globs"
        " (* and ? within a directory, ** across them; a directory holds what is beneath it),"
        " exclusive unless --shared. All or nothing: when another agent holds one, it says who,"
        " since and until when, takes nothing and exits 1. Reserving again renews.",
        epilog="example: pager reserve 'src/api/**' README.md --reason 'auth refactor' --ttl 2h",
    )
    reserve.add_argument("paths", metavar="PATH", nargs="*", help="relative to this directory")
    reserve.add_argument(
        "--shared", action="store_true", help="others may hold it shared too; none exclusively"
    )
    reserve.add_argument("--ttl", metavar="D", help="how long: 1m to 24h (default 1h)")
    reserve.add_argument("--reason", metavar="TEXT", help="what you are doing (others see it)")
    reserve.add_argument("--json", action="store_true", help="print the result as JSON")
    reserve.add_argument(
        "--git-hook",
        action="store_true",
        help="install the git guard: a pre-commit hook refusing a commit of files another agent"
        " reserved (with no PATH: only that)",
    )

    release = commands.add_parser(
        "release",
        description="Release your reservations (docs/reservations.md) of PATH… as you reserved"
        " them; all of yours when none is given. Exits 1 when you held none of a PATH.",
        epilog="example: pager release 'src/api/**'",
    )
    release.add_argument("paths", metavar="PATH", nargs="*")
    release.add_argument("--json", action="store_true", help="print the result as JSON")

    listing = commands.add_parser(
        "reservations",
        description="The reservations (docs/reservations.md) in force in this workspace (--all:"
        " every workspace):"
        " pattern, holder, mode, state (a stale one's holder has no live session: it blocks"
        " nothing), until when, why. `pager reservations break ID` ends anyone's (yours to"
        " decide: the holder is not asked).",
        epilog="example: pager reservations --all; pager reservations break rsv_…",
    )
    listing.add_argument("words", metavar="break ID", nargs="*", help="break one by its id")
    listing.add_argument("--all", action="store_true", help="every workspace's")
    listing.add_argument("--json", action="store_true", help="print them as JSON")


HANDLERS: dict[str, Any] = {
    "reserve": cmd_reserve,
    "release": cmd_release,
    "reservations": cmd_reservations,
}
