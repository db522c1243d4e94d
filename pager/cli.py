"""The `pager` command line (docs/cli.md): `main(argv) -> int`, the entry point.

It reads the command's name and imports that command's module under `pager.commands` alone,
which builds that command's parser alone: a script's `pager send` or a prompt's `pager hook`
pays for nothing else, and `pager --version` and `pager help` import no command module. Keep
this module's own imports stdlib-only and lazy.
"""

from __future__ import annotations

import sys

# Not `typing.TYPE_CHECKING`: importing typing alone costs milliseconds on every hook run.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

#: Every command with its own parser here: its module under `pager.commands` and its line in
#: `pager --help`, in the order listed there. `help` is this module's.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("broker", "run the broker in the foreground (logs to stderr)"),
    "start": ("broker", "start the broker in the background, or adopt the running one"),
    "status": ("broker", "show whether a broker runs (exit 3 when none)"),
    "exit": ("broker", "stop the running broker"),
    "restart": ("broker", "stop the running broker and start a fresh one"),
    "implementations": (
        "harnesses",
        "list the implementations: id, name, manifest source, capabilities",
    ),
    "mcp": (
        "harnesses",
        "a stdio MCP server that registers this session and forwards to the broker",
    ),
    "send": ("everyday", "send a message: pager send TO [BODY]"),
    "inbox": ("everyday", "your waiting mail, oldest first, without claiming it"),
    "read": ("everyday", "read waiting mail (claim, print whole, acknowledge)"),
    "ack": ("everyday", "acknowledge claims: pager ack TOKEN…"),
    "alias": ("everyday", "rename yourself: pager alias NAME"),
    "claim": ("everyday", "take over NAME's identity and inbox: pager claim NAME [--force]"),
    "whoami": ("everyday", "which identity commands here act as, and why"),
    "who": (
        "everyday",
        "who you can reach: address, implementation, host, attached, last seen, waiting",
    ),
    "history": ("everyday", "your past messages (read-only)"),
    "sent": ("everyday", "your recent sends and their delivery state; with an id, that message's"),
    "run": ("run", "run a command and page when it ends: pager run [--to TO] -- CMD [ARGS…]"),
    "reserve": (
        "reservations",
        "reserve files before changing them: pager reserve PATH… [--shared] [--ttl D]",
    ),
    "release": ("reservations", "release your reservations: pager release [PATH…]"),
    "reservations": (
        "reservations",
        "the reservations in force: pager reservations [--all] | break ID",
    ),
    "archive": (
        "operator",
        "archive agents: hide it from rosters and end its sessions; its mail is kept"
        " (unarchive undoes it)",
    ),
    "unarchive": ("operator", "unarchive agents: show an archived agent again"),
    "purge": (
        "operator",
        "purge agents: delete it for good: its waiting mail is dead-lettered and its name freed",
    ),
    "export": ("operator", "the whole store as JSON Lines: pager export [-o FILE] [--since WHEN]"),
    "reset": ("operator", "recreate an empty database (after a backup copy): pager reset --yes"),
    "notify": ("paging", "page an agent with a structured message: pager notify TO MESSAGE"),
    "token": (
        "paging",
        "mailbox tokens that let a script page one agent: pager token create|list|revoke",
    ),
    "wake": ("wake", "launch on mail: pager wake on NAME | off NAME | list"),
    "store": (
        "store",
        "the store: pager store copy --to postgresql://… (SQLite to a shared store)",
    ),
    "help": ("", "the help of a command: pager help [COMMAND]"),
    # Parsed by their own module, which main() hands the whole command line.
    "skill": (
        "install",
        "install the Pager skill: `pager skill install [args…]` (see `pager skill -h`)",
    ),
    "plugin": (
        "install",
        "install a harness's plugin: `pager plugin install HARNESS` (see `pager plugin -h`)",
    ),
    "setup": (
        "install",
        "wire every installed harness: skill, hooks, plugins (see `pager setup -h`)",
    ),
    "doctor": ("install", "check the broker, PATH and each harness's wiring"),
}
USAGE = "usage: pager [-h] [--version] COMMAND ..."
DESCRIPTION = "Pager: a durable local message broker for coding-agent sessions."
EPILOG = (
    "Also:\n"
    "  pager                open the operator TUI (starts the broker if needed)\n"
    "  pager IMPLEMENTATION [--session-name NAME] [--] [ARGS…]\n"
    "                       launch a harness as a Pager agent (`pager claude`,\n"
    "                       `pager shell -- make test`; `pager implementations` lists\n"
    "                       them; `pager IMPLEMENTATION --help` shows the options)\n"
    "  pager help COMMAND   the help of one command\n\n"
    "State lives in $PAGER_HOME (default: the platform's user state directory).\n"
    "The everyday commands: docs/cli.md."
)
VERSION_HELP = "show the version and exit"

#: The commands that parse their own arguments; `hook`, which every prompt runs, is not
#: listed in `pager --help` (a harness runs it, not a person).
OWN_PARSER = ("hook", "skill", "plugin", "setup", "doctor")


#: What needs only the standard library and Pager itself. scripts/pager starts Python without
#: `site` (a third of a bare start); main() adds site-packages first for every other command.
QUICK = frozenset(
    {"--version", "-h", "--help", "help", "hook", "status", "send", "inbox", "read", "ack"}
    | {"alias", "claim", "whoami", "who", "history", "sent", "notify", "token", "run"}
)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    first = arguments[0] if arguments else ""
    if sys.flags.no_site and first not in QUICK:
        from pager.commands.common import add_site_packages

        add_site_packages()
    if first == "hook":  # every prompt runs it: skip argparse and everything else
        from pager.hook import main as hook_main

        return hook_main(arguments[1:])
    if first in OWN_PARSER:  # skill, plugin, setup, doctor: skill passes unknown arguments on
        from pager.commands.install import main as install_main

        return install_main(arguments)
    if first == "--version":
        from pager.versions import VERSION

        print(f"pager {VERSION}")
        return 0
    if first in ("-h", "--help") or arguments == ["help"]:
        sys.stdout.write(overview_text())
        return 0
    from pager.commands.common import (
        EXIT_ERROR,
        EXIT_OK,
        EXIT_USAGE,
        CommandError,
        UsageError,
        print_error,
    )

    try:
        if not arguments:
            from pager.commands.operator import cmd_tui

            return cmd_tui()
        if first.startswith("-") or (first == "help" and len(arguments) > 2):
            overview().parse_args(arguments)  # argparse says what is wrong, and exits 2
            return EXIT_USAGE
        if first == "help":
            return _help(arguments[1])
        if first not in COMMANDS:
            from pager.commands.harnesses import cmd_launch

            return cmd_launch(first, arguments[1:], [*COMMANDS, *OWN_PARSER])
        module = _module(first)
        quick = getattr(module, "QUICK_PARSERS", {}).get(first)
        args = quick(arguments[1:]) if quick is not None else None
        if args is None:
            args = _parser_of(first, module)[0].parse_args(arguments)
        handler: Any = module.HANDLERS[first]
        return int(handler(args))
    except CommandError as exc:
        print_error(exc)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (`pager who | head -1`): what it wanted is written. Python would
        # print a traceback flushing stdout at exit; point it at nothing instead.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def overview() -> argparse.ArgumentParser:
    """`pager`'s parser with every command listed (each one's own arguments are its module's,
    read only when that command runs): it reports a wrong option before any command."""
    parser, commands = _top()
    for name, (_, summary) in COMMANDS.items():
        commands.add_parser(name, help=summary, add_help=False)
    return parser


def overview_text() -> str:
    """`pager --help`, as argparse would print `overview()`'s, without importing argparse
    (which costs `pager help` a third of a bare interpreter's start)."""
    import os

    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            width = os.get_terminal_size(sys.stdout.fileno()).columns
        except (OSError, ValueError):
            width = 80
    width = max(width - 2, 40)
    lines = [USAGE, "", DESCRIPTION, "", "positional arguments:", "  COMMAND"]
    for name, (_, summary) in COMMANDS.items():
        lines += _listed(f"    {name}", summary, width)
    lines += ["", "options:"]
    lines += _listed("  -h, --help", "show this help message and exit", width)
    lines += _listed("  --version", VERSION_HELP, width)
    return "\n".join(lines) + "\n\n" + EPILOG + "\n"


def _listed(name: str, text: str, width: int, column: int = 19) -> list[str]:
    """One entry of the help: its name, then its text from `column`, wrapped at `width`."""
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and column + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if len(name) + 2 > column:  # a long name (`implementations`) stands on its own line
        return [name, *(" " * column + text for text in lines)]
    return [name.ljust(column) + lines[0], *(" " * column + text for text in lines[1:])]


def _help(topic: str) -> int:
    """`pager help COMMAND`: a command's help, or an implementation's wrapper options."""
    if topic in OWN_PARSER:
        return main([topic, "--help"])
    if topic in COMMANDS and topic != "help":
        _parser_of(topic, _module(topic))[1].print_help()
        return 0
    if topic == "help":
        sys.stdout.write(overview_text())
        return 0
    from pager.commands.harnesses import cmd_launch

    return cmd_launch(topic, ["--help"], [*COMMANDS, *OWN_PARSER])


def _module(command: str) -> Any:
    """The module of `command` under `pager.commands`, imported now."""
    name = f"pager.commands.{COMMANDS[command][0]}"
    __import__(name)
    return sys.modules[name]


def _parser_of(command: str, module: Any) -> tuple[argparse.ArgumentParser, Any]:
    """`pager`'s parser holding `command`'s alone, and that command's own parser: its module
    registers all its commands, and every other registration is ignored (building every
    command's parser costs a script's command ~20 ms it never uses)."""
    parser, commands = _top()
    only = _OnlyCommand(commands, command)
    module.add_commands(only)
    return parser, only.made


def _top() -> tuple[argparse.ArgumentParser, Any]:
    import argparse

    parser = argparse.ArgumentParser(
        prog="pager",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `--vers` is not `--version`, which main() answers alone
    )
    parser.add_argument("--version", action="store_true", help=VERSION_HELP)
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


class _OnlyCommand:
    """The subcommands action handed to a module's `add_commands`: it adds the parser of one
    command (kept as `made`) and hands every other registration a stand-in that accepts and
    ignores it."""

    def __init__(self, action: Any, only: str) -> None:
        self.action, self.only = action, only
        self.made: Any = None

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if name != self.only:
            return _Unused()
        self.made = self.action.add_parser(name, **kwargs)
        return self.made


class _Unused:
    """A parser nobody will use: every method accepts anything and returns this again."""

    def __getattr__(self, name: str) -> Any:
        return self._ignore

    def _ignore(self, *args: Any, **kwargs: Any) -> _Unused:
        return self
