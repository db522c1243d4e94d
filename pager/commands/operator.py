"""`pager archive|unarchive|purge AGENT…`: the operator actions of SPEC §11 from the command
line, over the operator routes (`POST /v1/agents/{id}/…`, the local secret); `pager export` and
`pager reset`; and `pager` alone, the operator TUI. Stdlib-only.

AGENT is an agent id, an address (`alias@slug`), or an alias that names one agent across all
workspaces (otherwise the command lists the candidates and changes nothing). `purge` asks on a
terminal and needs `--yes` elsewhere.
"""

from __future__ import annotations

import json
import sys

from pager.commands.acting import Operator, resolve
from pager.commands.common import EXIT_OK, EXIT_USAGE, CommandError, ensure_running, state_paths
from pager.commands.show import counted
from pager.domain.display import for_terminal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

ACTIONS = {
    "archive": "hide it from rosters and end its sessions; its mail is kept (unarchive undoes it)",
    "unarchive": "show an archived agent again",
    "purge": "delete it for good: its waiting mail is dead-lettered and its name freed",
}


def cmd_tui() -> int:
    """`pager` alone: the operator TUI (SPEC §11), after starting or adopting the broker."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "pager: the operator TUI needs a terminal; from a script use `pager status`, "
            "`pager --help` for the commands, or the HTTP API (GET /v1/snapshot with the local "
            "secret)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    paths, broker = ensure_running()
    from pager.tui.main import run_tui  # Textual: only when the TUI opens

    return run_tui(paths, broker)


def cmd_action(args: argparse.Namespace) -> int:
    action: str = args.command
    operator = Operator()
    snapshot = operator.call("GET", "/v1/snapshot")
    agents = [agent for ws in snapshot["workspaces"] for agent in ws["agents"]]
    targets = [resolve(agents, given) for given in args.agents]  # all named before any acts
    if action == "purge" and not args.yes:
        _confirm(targets)
    results = []
    for target in targets:
        done = operator.call("POST", f"/v1/agents/{target['agent_id']}/{action}", {})
        results.append(done)
        if not args.json:
            print(for_terminal(_said(action, target, done), one_line=True))
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    return EXIT_OK


def _confirm(targets: list[dict[str, Any]]) -> None:
    if not sys.stdin.isatty():
        raise CommandError("purge deletes for good: add --yes to confirm (not on a terminal)")
    for target in targets:
        waiting = target.get("inbox", {}).get("queued", 0)
        print(for_terminal(f"purge {target['address']} ({target['agent_id']}): {waiting} waiting"
                           " message(s) will be dead-lettered", one_line=True))  # fmt: skip
    if input("type yes to purge: ").strip().lower() != "yes":
        raise CommandError("nothing purged")


def _said(action: str, target: dict[str, Any], done: dict[str, Any]) -> str:
    address = target["address"]
    if action == "archive":
        return f"archived {address} ({done.get('ended_sessions', 0)} session(s) ended)"
    if action == "unarchive":
        return f"unarchived {address}"
    return (
        f"purged {address}: {done.get('dead_lettered', 0)} message(s) dead-lettered,"
        f" {done.get('ended_sessions', 0)} session(s) ended"
    )


def since_iso(text: str) -> str:
    """`--since`: an ISO 8601 time as given, or a duration back from now (`90m`, `7d`)."""
    import re
    from datetime import UTC, datetime, timedelta

    match = re.fullmatch(r"(\d+)([smhd])", text)
    if match is None:
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise CommandError(
                f"--since {text!r}: give an ISO 8601 time (2026-12-01, 2026-12-01T09:00Z) or"
                " a duration back from now (90m, 12h, 7d)"
            ) from None
        return text
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match.group(2)]
    moment = datetime.now(UTC) - timedelta(**{unit: int(match.group(1))})
    return moment.isoformat()


def cmd_export(args: argparse.Namespace) -> int:
    from pager.client import BrokerRefused, BrokerUnreachable, quote, stream_lines

    operator = Operator()
    path = "/v1/export" + (f"?since={quote(since_iso(args.since))}" if args.since else "")
    out = sys.stdout.buffer if args.output in (None, "-") else open(args.output, "wb")  # noqa: SIM115
    counts = {"identity": 0, "message": 0}
    show = sys.stderr.isatty()
    try:
        for line in stream_lines(operator.url, path, token=operator.secret):
            out.write(line)
            counts["identity" if b'"kind": "identity"' in line[:40] else "message"] += 1
            total = counts["identity"] + counts["message"]
            if show and total % 10000 == 0:
                print(f"\rexported {total} records…", end="", file=sys.stderr, flush=True)
    except BrokerRefused as exc:
        error = exc.answer.get("error", {}) if isinstance(exc.answer, dict) else {}
        raise CommandError(error.get("message") or f"the broker answered {exc}") from None
    except BrokerUnreachable as exc:
        raise CommandError(f"the broker did not answer ({exc}); see `pager status`") from None
    finally:
        out.flush()
        if out is not sys.stdout.buffer:
            out.close()
    where = "" if args.output in (None, "-") else f" to {args.output}"
    identities = counted(counts["identity"], "identity", "identities")
    messages = counted(counts["message"], "message", "messages")
    print(f"{chr(13) if show else ''}exported {identities} and {messages}{where}", file=sys.stderr)
    return EXIT_OK


def cmd_reset(args: argparse.Namespace) -> int:
    from pager.launch.lifecycle import LifecycleError
    from pager.launch.reset import reset_database
    from pager.store import StoreError

    if not args.yes:
        raise CommandError(
            "reset deletes every identity, session and message (a backup copy is kept):"
            " add --yes to go ahead"
        )
    try:
        done = reset_database(state_paths())
    except (LifecycleError, StoreError, OSError) as exc:
        raise CommandError(f"nothing was reset: {exc}") from None
    ensure_running()  # a fresh broker on an empty database
    if args.json:
        backup = None if done.backup is None else str(done.backup)
        sys.stdout.write(json.dumps({"deleted": done.deleted, "backup": backup}) + "\n")
        return EXIT_OK
    counts = ", ".join(f"{count} {table}" for table, count in done.deleted.items())
    kept = f"; the old database is kept at {done.backup}" if done.backup else ""
    print(f"reset: deleted {counts}{kept}")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    for action, what in ACTIONS.items():
        parser = commands.add_parser(
            action,
            description=f"{action.capitalize()} each AGENT (an agent id, an address"
            f" alias@slug, or an alias unique across workspaces): {what}.",
        )
        parser.add_argument("agents", metavar="AGENT", nargs="+")
        if action == "purge":
            parser.add_argument("--yes", action="store_true", help="do not ask (scripts)")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    export = commands.add_parser(
        "export",
        description="Write every identity, then every message (with its delivery state,"
        " thread and attempts), one JSON record per line, each with its format version `v`."
        " Streamed in constant memory.",
        epilog="example: pager export -o pager-backup.jsonl --since 7d",
    )
    export.add_argument("-o", dest="output", metavar="FILE", help="write to FILE (default: stdout)")
    export.add_argument(
        "--since", metavar="WHEN", help="only messages sent since WHEN: an ISO time, or 7d, 12h"
    )

    reset = commands.add_parser(
        "reset",
        description="Stop the broker, copy the database to pager.db.bak-reset-<time>, delete"
        " it and start a fresh broker on an empty one; prints how many identities, sessions"
        " and messages it deleted.",
    )
    reset.add_argument("--yes", action="store_true", help="go ahead (required)")
    reset.add_argument("--json", action="store_true", help="print the counts as JSON")


HANDLERS: dict[str, Any] = {
    **dict.fromkeys(ACTIONS, cmd_action),
    "export": cmd_export,
    "reset": cmd_reset,
}
