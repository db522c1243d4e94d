"""Argument handling of a wrapped launch `pager <implementation> [--session-name NAME] [--] [args…]`
(SPEC §4), and finding the conversation a harness is asked to resume."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import attrs


class WrapperUsageError(Exception):
    """The wrapper's own options are wrong; the message says how to write them."""


@attrs.frozen
class WrapperArgs:
    session_name: str | None
    force: bool
    harness_args: tuple[str, ...]


WRAPPER_OPTIONS = ("--session-name", "--force")


def wrapper_help(implementation: str, name: str) -> str:
    """`pager <implementation> --help`: the wrapper's own options."""
    return f"""usage: pager {implementation} [--session-name NAME] [--force] [--] [ARGS…]

{name}, launched as a Pager agent in this terminal: Pager registers a session (starting the
broker if needed), runs the harness with Pager wired in for this launch only, holds the
session while it runs, and exits with the harness's status.

options:
  --session-name NAME  the alias to join as; a name held by an attached session is refused
  --force              take the name over even while its session is attached
  --                   end of Pager's options: everything after goes to the harness, so
                       `pager {implementation} -- --help` shows the harness's own help
"""


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether the wrapper's options (before the harness's arguments) ask for its help."""
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            return True
        if arg == "--session-name":
            next(args, None)  # its value
        elif arg == "--" or arg.partition("=")[0] not in WRAPPER_OPTIONS:
            return False
    return False


def parse_wrapper_args(argv: Sequence[str]) -> WrapperArgs:
    """Wrapper options come first; the first argument that is not one, or `--`, ends them.
    Everything after belongs to the harness, unchanged."""
    session_name: str | None = None
    force = False
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            index += 1
            break
        name, eq, value = arg.partition("=")
        if name == "--session-name":
            if not eq:
                index += 1
                if index >= len(argv):
                    raise WrapperUsageError("--session-name needs a value: --session-name NAME")
                value = argv[index]
            if not value:
                raise WrapperUsageError("--session-name needs a non-empty NAME")
            session_name = value
        elif arg == "--force":
            force = True
        else:
            break
        index += 1
    return WrapperArgs(session_name, force, tuple(argv[index:]))


@attrs.frozen
class Conversation:
    """The conversation key the harness will run under, and the arguments to launch it with."""

    key: str | None
    args: tuple[str, ...]
    chosen: bool  # the wrapper picked the id itself (a new conversation)


def find_conversation(
    args: Sequence[str],
    *,
    resume_flags: Sequence[str],
    continue_flags: Sequence[str],
    choose_flag: str | None,
    subcommand: str | None = None,
    other_subcommands: Sequence[str] = (),
) -> Conversation:
    """The conversation the arguments resume (`--resume X`, `--resume=X`, or a resume
    subcommand such as `codex resume X`); else, when the harness lets the wrapper choose the
    id, a fresh one passed with `choose_flag`, so that a later resume always rejoins. A
    leading subcommand of `other_subcommands` (`gemini mcp list`) starts no conversation."""
    if args and args[0] in other_subcommands:
        return Conversation(None, tuple(args), chosen=False)
    if subcommand is not None and list(args[:1]) == [subcommand]:
        target = args[1] if len(args) > 1 else ""
        known = target and not target.startswith("-")
        return Conversation(target if known else None, tuple(args), chosen=False)
    for index, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in resume_flags:
            if eq and value:
                return Conversation(value, tuple(args), chosen=False)
            if not eq and index + 1 < len(args) and not args[index + 1].startswith("-"):
                return Conversation(args[index + 1], tuple(args), chosen=False)
            return Conversation(None, tuple(args), chosen=False)  # an interactive picker
        if name in continue_flags:
            return Conversation(None, tuple(args), chosen=False)  # "the last one": unknown here
        if choose_flag is not None and name == choose_flag:
            if eq and value:
                return Conversation(value, tuple(args), chosen=False)
            if index + 1 < len(args):
                return Conversation(args[index + 1], tuple(args), chosen=False)
    if choose_flag is None:
        return Conversation(None, tuple(args), chosen=False)
    chosen = str(uuid.uuid4())
    return Conversation(chosen, (choose_flag, chosen, *args), chosen=True)
