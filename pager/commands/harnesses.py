"""The harnesses: `pager implementations` lists them, `pager IMPLEMENTATION [--session-name
NAME] [--] [ARGS…]` launches one as a Pager agent, and `pager mcp` is the stdio MCP server a
harness configured with a command runs."""

from __future__ import annotations

import sys

from pager.commands.common import EXIT_OK, EXIT_USAGE, CommandError, UsageError, state_paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable
    from typing import Any


def add_commands(commands: Any) -> None:
    commands.add_parser(
        "implementations",
        description="List the implementations Pager knows (built-in, user manifests, entry "
        "points), where each manifest came from, and the manifests that could not be read.",
    ).add_argument("--json", action="store_true", help="print the listing as JSON")
    mcp = commands.add_parser(
        "mcp",
        description="A stdio MCP server for harnesses configured with a command: registers the "
        "calling session and forwards Pager's tools to the broker. See docs/mcp-stdio.md.",
    )
    mcp.add_argument("--implementation", help="implementation id (env PAGER_IMPLEMENTATION; mcp)")
    mcp.add_argument("--session-name", help="the alias to register (env PAGER_SESSION_NAME)")
    mcp.add_argument("--conversation-key", help="rejoin key (env PAGER_CONVERSATION_KEY)")
    mcp.add_argument("--conversation-key-env", metavar="VAR", help="read the key from env VAR")
    mcp.add_argument("--workspace", help="workspace directory (env PAGER_WORKSPACE; the cwd)")
    mcp.add_argument("--no-hold-lease", action="store_true", help="let an idle session lapse")
    mcp.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def cmd_launch(implementation: str, argv: list[str], commands: Iterable[str]) -> int:
    """`pager <implementation> [--session-name NAME] [--] [args…]`; `commands`: the names of
    the commands, which a misspelt word may mean."""
    from pager.implementations import UnknownImplementation, discover
    from pager.implementations.launching import launch_spec
    from pager.launch.wrapper import LaunchError, run_wrapped
    from pager.launch.wrapper_args import WrapperUsageError, asks_for_help, wrapper_help

    registry = discover()
    try:
        manifest = registry.get(implementation).manifest
    except UnknownImplementation:
        known = sorted(registry.ids())
        close = _closest(implementation, [*commands, *known])
        hint = f"did you mean {close}? " if close else ""
        raise UsageError(
            f"{implementation!r} is neither a command nor an implementation; {hint}commands:"
            f" `pager --help`; implementations: {', '.join(known)} (`pager implementations`)"
        ) from None
    if asks_for_help(argv):
        print(wrapper_help(implementation, manifest.name), end="")
        return EXIT_OK
    try:
        spec = launch_spec(manifest)
    except ImportError:
        raise CommandError(
            f"{implementation}: its connector {manifest.connector} is not available in this"
            " version of Pager; see docs/implementations/ for the state of each harness"
        ) from None
    try:
        return run_wrapped(state_paths(), spec, argv)
    except WrapperUsageError as exc:
        print(f"pager: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LaunchError as exc:
        raise CommandError(str(exc)) from None


#: Words people reach for that name a command of another name (`pager stop` is `pager exit`).
SYNONYMS = {"stop": "exit", "quit": "exit", "shutdown": "exit", "ls": "who", "mail": "inbox"}


def _closest(word: str, names: list[str]) -> str | None:
    """The name `word` most likely means: a synonym, else the name it misspells (two letters
    swapped, `sedn`, count first)."""
    import difflib

    if SYNONYMS.get(word) in names:
        return SYNONYMS[word]

    close = difflib.get_close_matches(word, names, n=3)
    close.sort(key=lambda name: sorted(name) != sorted(word))  # stable: else by likeness
    return close[0] if close else None


def cmd_mcp(args: argparse.Namespace) -> int:
    from pager.mcp_stdio import main as mcp_main  # the MCP SDK: only for this command

    return mcp_main(args)


def cmd_implementations(args: argparse.Namespace) -> int:
    import json

    from pager.implementations.listing import listing_json, listing_text, problems_text
    from pager.implementations.registry import discover

    registry = discover()
    if args.json:
        print(json.dumps(listing_json(registry), indent=2, sort_keys=True, default=str))
        return EXIT_OK
    sys.stdout.write(listing_text(registry))
    sys.stderr.write(problems_text(registry))
    return EXIT_OK


HANDLERS: dict[str, Any] = {"implementations": cmd_implementations, "mcp": cmd_mcp}
