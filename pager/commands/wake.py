"""`pager wake on|off|list`: launch on mail (docs/wake.md), the person's switch per agent, over
`PUT/DELETE /v1/agents/{id}/wake` and `GET /v1/wake` with the local secret. Stdlib-only.

Refused inside an agent's session or harness (SPEC §4.2 rules 1 and 2): only the person turns
it on, from their own terminal.
"""

from __future__ import annotations

import json
import os
import sys

from pager.commands.acting import Operator, harness_programs, resolve
from pager.commands.common import EXIT_OK, CommandError
from pager.domain.display import for_terminal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

WHAT = (
    "launch an agent headless when mail arrives and no session of it runs (docs/wake.md):"
    " the most powerful thing Pager does, so only you turn it on, per agent"
)


def _refuse_agents() -> None:
    """Only the person: not from inside a Pager session, nor inside a harness."""
    from pager.launch.ancestry import harness_ancestor
    from pager.launch.files import session_token

    if session_token(os.environ) is not None:
        raise CommandError(
            "pager wake changes what Pager launches, and this command runs inside an agent's"
            " session (PAGER_TOKEN is set): run it from your own terminal"
        )
    harness = harness_ancestor(harness_programs())
    if harness is not None:
        pid, _, name = harness
        raise CommandError(
            f"pager wake changes what Pager launches, and this command runs inside {name}"
            f" (pid {pid}): run it from your own terminal"
        )


def cmd_wake(args: argparse.Namespace) -> int:
    if args.wake_command is None:
        raise CommandError("say what to do: pager wake on NAME | off NAME | list")
    if args.wake_command != "list":
        _refuse_agents()
    operator = Operator()
    if args.wake_command == "list":
        return _show_list(operator.call("GET", "/v1/wake"), args.json)
    snapshot = operator.call("GET", "/v1/snapshot")
    agents = [agent for ws in snapshot["workspaces"] for agent in ws["agents"]]
    target = resolve(agents, args.agent)
    path = f"/v1/agents/{target['agent_id']}/wake"
    if args.wake_command == "off":
        done = operator.call("DELETE", path)
        _print(args.json, done, f"launch on mail is {'now' if done['was_on'] else 'already'} off"
               f" for {target['address']}")  # fmt: skip
        return EXIT_OK
    body: dict[str, Any] = {}
    if args.command_line is not None:
        import shlex  # here: `pager send` and the other fast paths load this module too

        try:
            body["command"] = shlex.split(args.command_line)
        except ValueError as exc:
            raise CommandError(f"--command: {exc}") from None
    if args.max_runs_per_hour is not None:
        body["max_runs_per_hour"] = args.max_runs_per_hour
    if args.timeout is not None:
        body["timeout_s"] = _duration(args.timeout)
    entry = operator.call("PUT", path, body)
    _print(args.json, entry, _said_on(entry))
    return EXIT_OK


def _duration(text: str) -> float:
    from pager.config import ConfigError, parse_duration

    try:
        return parse_duration(text, source="--timeout")
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def _said_on(entry: dict[str, Any]) -> str:
    import shlex

    args = " ".join(shlex.quote(part) for part in entry.get("launch_args") or [])
    return (
        f"launch on mail is on for {entry['address']}: when mail waits and no session of it"
        f" runs, Pager runs `{entry['implementation']} … {args}` in its workspace"
        f" (at most {entry['max_runs_per_hour']} runs an hour, each stopped after"
        f" {entry['timeout_s']:g} s). `pager wake off {entry['address']}` turns it off."
    )


def _show_list(listing: dict[str, Any], as_json: bool) -> int:
    if as_json:
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
        return EXIT_OK
    agents = listing.get("agents", [])
    if not agents:
        print("launch on mail is off for every agent (`pager wake on NAME` turns it on)")
        return EXIT_OK
    for entry in agents:
        state = "ready" if entry["launchable"] else f"cannot launch: {entry['why_not']}"
        _line(f"{entry['address']} ({entry['implementation']}): {state};"
              f" {entry['max_runs_per_hour']}/h, timeout {entry['timeout_s']:g} s")  # fmt: skip
        for run in entry.get("runs", []):
            outcome = run["outcome"] or "running"
            status = "" if run["exit_code"] is None else f" status {run['exit_code']}"
            _line(f"  {run['started_at']} {outcome}{status}, {run['acknowledged']} acknowledged"
                  f" ({run['log']})")  # fmt: skip
    return EXIT_OK


def _print(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        _line(text)


def _line(text: str) -> None:
    """One line for a person: what the broker said (reasons, paths) shown escaped."""
    print(for_terminal(text, one_line=True))


def add_commands(commands: Any) -> None:
    wake = commands.add_parser(
        "wake",
        description=f"Launch on mail: {WHAT}. The harness's own permission settings apply"
        " unchanged; the loop guard and send limits apply to what a run sends.",
    )
    actions = wake.add_subparsers(dest="wake_command", metavar="on|off|list")
    on = actions.add_parser(
        "on",
        help="turn launch on mail on for an agent (or change its settings)",
        description="Turn launch on mail on for AGENT (an agent id, an address alias@slug, or"
        " an alias unique across workspaces). Refused, saying why, for an agent that cannot be"
        " woken this way (no conversation to resume, or a harness with no headless resume).",
        epilog="example: pager wake on reviewer --max-runs-per-hour 2 --timeout 15m",
    )
    on.add_argument("agent", metavar="AGENT")
    on.add_argument(
        "--command",
        dest="command_line",
        metavar="ARGS",
        help="the headless arguments instead of the manifest's [wake.launch] (one string,"
        " split as a shell would; placeholders such as {conversation_key} and {prompt})",
    )
    on.add_argument(
        "--max-runs-per-hour", type=int, metavar="N", help="at most N runs an hour (default 4)"
    )
    on.add_argument("--timeout", metavar="D", help="stop a run after D, e.g. 10m (the default)")
    on.add_argument("--json", action="store_true", help="print the settings as JSON")
    off = actions.add_parser("off", help="turn launch on mail off for an agent")
    off.add_argument("agent", metavar="AGENT")
    off.add_argument("--json", action="store_true", help="print the result as JSON")
    listing = actions.add_parser(
        "list", help="the agents with launch on mail on, and their latest runs"
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")


HANDLERS: dict[str, Any] = {"wake": cmd_wake}
