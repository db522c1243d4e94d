"""The `pager` command line (SPEC §4): `main(argv) -> int`.

Keep module-level imports stdlib-only: `pager status` and hooks must start fast, so each
command imports what it needs (the server stack only in `serve`).
"""

from __future__ import annotations

import os
import sys

from pager.versions import SCHEMA_VERSION, VERSION

# Not `typing.TYPE_CHECKING`: importing typing alone costs milliseconds on every hook run.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

#: The exit statuses (docs/cli.md lists them): 3 is `pager status`'s "no broker runs", 4 is
#: `pager read`'s "no mail came".
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_NO_MAIL = 0, 1, 2, 3, 4


class CommandError(Exception):
    """A failure reported as one line on stderr with exit status 1."""


class UsageError(CommandError):
    """The command line itself is wrong (a misspelt command): one line, exit status 2."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, with `only`, of that command alone (building every
    command's parser costs a script's command ~20 ms it never uses)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="pager",
        description="Pager: a durable local message broker for coding-agent sessions.",
        epilog="Also:\n"
        "  pager                open the operator TUI (starts the broker if needed)\n"
        "  pager IMPLEMENTATION [--session-name NAME] [--] [ARGS…]\n"
        "                       launch a harness as a Pager agent (`pager claude`,\n"
        "                       `pager shell -- make test`; `pager implementations` lists\n"
        "                       them; `pager IMPLEMENTATION --help` shows the options)\n"
        "  pager help COMMAND   the help of one command\n\n"
        "State lives in $PAGER_HOME (default: the platform's user state directory).\n"
        "The everyday commands: docs/cli.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pager {VERSION}")
    commands: Any = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only is not None:
        commands = _OnlyCommand(commands, only)

    serve = commands.add_parser(
        "serve",
        help="run the broker in the foreground (logs to stderr)",
        description="Run the broker in the foreground. SIGINT/SIGTERM stop it gracefully.",
    )
    serve.add_argument("--host", help="bind address (default 127.0.0.1; env PAGER_HOST)")
    serve.add_argument("--port", type=int, help="bind port (default: kept from the first start)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--log-file",
        help="write the log to this file, size-capped and rotated (a background broker writes"
        " logs/broker.log in the state directory); default: stderr",
    )

    commands.add_parser(
        "start",
        help="start the broker in the background, or adopt the running one",
        description="Start the broker in the background (or adopt the running one) and print "
        "its status.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")
    commands.add_parser(
        "status",
        help="show whether a broker runs (exit 3 when none)",
        description="Show the running broker: pid, MCP endpoint, database, versions, uptime. "
        "Exit status 0 when running, 3 when not.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")
    commands.add_parser(
        "exit",
        help="stop the running broker",
        description="Stop the running broker: gracefully, then forcibly after a bound.",
    )
    commands.add_parser(
        "restart",
        help="stop the running broker and start a fresh one",
        description="Stop the running broker (if any) and start a fresh one.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")
    commands.add_parser(
        "implementations",
        help="list the implementations: id, name, manifest source, capabilities",
        description="List the implementations Pager knows (built-in, user manifests, entry "
        "points), where each manifest came from, and the manifests that could not be read.",
    ).add_argument("--json", action="store_true", help="print the listing as JSON")
    mcp = commands.add_parser(
        "mcp",
        help="a stdio MCP server that registers this session and forwards to the broker",
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
    from pager import everyday, operator_cli, paging_cli, run, wake_cli

    everyday.add_commands(commands)
    run.add_command(commands)
    operator_cli.add_commands(commands)
    paging_cli.add_commands(commands)
    wake_cli.add_commands(commands)
    _add_store_command(commands)
    commands.add_parser(
        "help",
        help="the help of a command: pager help [COMMAND]",
        description="Show the help of COMMAND (a command or an implementation), or of pager.",
    ).add_argument("topic", metavar="COMMAND", nargs="?")
    # Parsed by pager.install.cli (main dispatches there first); listed here for --help.
    commands.add_parser(
        "skill",
        help="install the Pager skill: `pager skill install [args…]` (see `pager skill -h`)",
        add_help=False,
    )
    commands.add_parser(
        "plugin",
        help="install a harness's plugin: `pager plugin install HARNESS` (see `pager plugin -h`)",
        add_help=False,
    )
    commands.add_parser(
        "setup",
        help="wire every installed harness: skill, hooks, plugins (see `pager setup -h`)",
        add_help=False,
    )
    commands.add_parser(
        "doctor", help="check the broker, PATH and each harness's wiring", add_help=False
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["hook"]:  # every prompt runs it: skip argparse and everything else
        from pager.hook import main as hook_main

        return hook_main(arguments[1:])
    if arguments[:1] in (["skill"], ["plugin"]):  # own parsers: skill passes unknown args on
        from pager.install.cli import main as install_main

        return install_main(arguments)
    if arguments[:1] in (["setup"], ["doctor"]):  # own parsers, in pager.install
        from importlib import import_module

        try:
            return int(import_module(f"pager.install.{arguments[0]}").main(arguments[1:]))
        except BrokenPipeError:  # `pager doctor --json | head`: as for the other commands
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
    first = arguments[0] if arguments else ""
    named = first and not first.startswith("-") and first != "help"
    parser = build_parser(only=first if named else None)
    if first and not first.startswith("-") and first not in _subcommands(parser):
        try:
            return cmd_launch(first, arguments[1:])
        except CommandError as exc:
            _print_error(exc)
            return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR
    args = parser.parse_args(arguments)
    handlers = {
        "serve": cmd_serve,
        "start": cmd_start,
        "status": cmd_status,
        "exit": cmd_exit,
        "restart": cmd_restart,
        "implementations": cmd_implementations,
        "mcp": cmd_mcp,
        "store": cmd_store,
    }
    if args.command not in handlers and args.command is not None:
        from pager import everyday, operator_cli, paging_cli, run, wake_cli

        handlers.update(everyday.HANDLERS)
        handlers["run"] = run.cmd_run
        handlers.update(operator_cli.HANDLERS)
        handlers.update(paging_cli.HANDLERS)
        handlers.update(wake_cli.HANDLERS)
    try:
        if args.command is None:
            return cmd_tui()
        if args.command == "help":
            return cmd_help(parser, args.topic)
        return handlers[args.command](args)
    except CommandError as exc:
        _print_error(exc)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (`pager who | head -1`): what it wanted is written. Python would
        # print a traceback flushing stdout at exit; point it at nothing instead.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def cmd_help(parser: argparse.ArgumentParser, topic: str | None) -> int:
    """`pager help [COMMAND]`: a command's help, an implementation's wrapper options, or all."""
    if topic is None:
        parser.print_help()
        return EXIT_OK
    if topic in ("hook", "skill", "plugin", "setup", "doctor"):  # parsed by their own modules
        return main([topic, "--help"])
    if topic in _subcommands(parser):
        return _subcommand_help(parser, topic)
    return cmd_launch(topic, ["--help"])


def _add_store_command(commands: Any) -> None:
    """`pager store copy --to URL`: this machine's SQLite store into a new PostgreSQL one."""
    store = commands.add_parser(
        "store",
        help="the store: pager store copy --to postgresql://… (SQLite to a shared store)",
        description="Commands on Pager's store. `pager store copy --to URL` copies this"
        " machine's SQLite store into a new PostgreSQL database, to switch the machine to a"
        " store shared by several machines (docs/multi-host.md).",
    )
    actions = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    copy = actions.add_parser(
        "copy",
        help="copy this machine's SQLite store into a new PostgreSQL database",
        description="Copy every identity, session, message (in its state) and event of this"
        " state directory's SQLite store into the PostgreSQL database at URL, which must hold"
        " no Pager data yet, in one transaction (all or nothing); its schema is created. The"
        " workspaces become this host's (`[host] name`) and keep their slugs, so every"
        " address alias@slug stays valid. The SQLite file is only read. Stop the broker"
        " first (`pager exit`); afterwards, set `store = URL` in config.toml and start it.",
        epilog="example: pager store copy --to"
        " 'postgresql://pager@db.example:5432/pager?sslmode=verify-full'"
        " --password-file ~/.config/pager/store-password",
    )
    copy.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="postgresql://user@host:port/database[?sslmode=…], without a password",
    )
    copy.add_argument(
        "--password-file",
        metavar="FILE",
        help="the database password on its first line (mode 600); default: PGPASSFILE or"
        " ~/.pgpass, as libpq reads them",
    )
    copy.add_argument("--json", action="store_true", help="print the counts as JSON")


def _subcommand_help(parser: argparse.ArgumentParser, name: str) -> int:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.choices[name].print_help()
    return EXIT_OK


class _OnlyCommand:
    """The subcommands action of `build_parser(only=…)`: it adds the parser of that command and
    hands every other command's registration a stand-in that accepts and ignores it."""

    def __init__(self, action: Any, only: str) -> None:
        self.action, self.only = action, only

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        return self.action.add_parser(name, **kwargs) if name == self.only else _Unused()


class _Unused:
    """A parser nobody will use: every method accepts anything and returns this again."""

    def __getattr__(self, name: str) -> Any:
        return self._ignore

    def _ignore(self, *args: Any, **kwargs: Any) -> _Unused:
        return self


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def cmd_launch(implementation: str, argv: list[str]) -> int:
    """`pager <implementation> [--session-name NAME] [--] [args…]`."""
    from pager.implementations import UnknownImplementation, discover
    from pager.implementations.launching import launch_spec
    from pager.launch.wrapper import LaunchError, run_wrapped
    from pager.launch.wrapper_args import WrapperUsageError, asks_for_help, wrapper_help

    registry = discover()
    try:
        manifest = registry.get(implementation).manifest
    except UnknownImplementation:
        known = sorted(registry.ids())
        close = _closest(implementation, [*_subcommands(build_parser()), "hook", *known])
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
        return run_wrapped(_paths(), spec, argv)
    except WrapperUsageError as exc:
        print(f"pager: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LaunchError as exc:
        raise CommandError(str(exc)) from None


def _closest(word: str, names: list[str]) -> str | None:
    """The name `word` most likely misspells; two letters swapped (`sedn`) count first."""
    import difflib

    close = difflib.get_close_matches(word, names, n=3)
    close.sort(key=lambda name: sorted(name) != sorted(word))  # stable: else by likeness
    return close[0] if close else None


def _paths() -> Any:
    from pager.launch.paths import StateDirError, state_paths

    try:
        return state_paths()
    except StateDirError as exc:
        raise CommandError(str(exc)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from pager.config import ConfigError, load_config
    from pager.launch.broker_log import configure_broker_logging
    from pager.launch.serve import serve_main, tune_gc

    tune_gc()
    configure_broker_logging(args.log_level, Path(args.log_file) if args.log_file else None)
    if args.log_level != "debug":
        # The MCP SDK logs every stateless request at INFO ("Terminating session: None").
        logging.getLogger("mcp").setLevel(logging.WARNING)
    paths = _paths()
    try:
        config = load_config(paths.config, host=args.host, port=args.port)
    except ConfigError as exc:
        logging.getLogger("pager").error("bad configuration: %s", exc)
        return EXIT_ERROR
    return serve_main(paths, config)


def _ensure_running() -> Any:
    from pager.config import ConfigError, load_config
    from pager.launch.lifecycle import LifecycleError, ensure_broker
    from pager.launch.paths import StateDirError, ensure_state_dir

    paths = _paths()
    try:
        ensure_state_dir(paths)
        load_config(paths.config)  # a bad value fails here, before a broker is spawned
        return paths, ensure_broker(paths)
    except (ConfigError, LifecycleError, StateDirError) as exc:
        raise CommandError(str(exc)) from None


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
    paths, broker = _ensure_running()
    from pager.tui.main import run_tui  # Textual: only when the TUI opens

    return run_tui(paths, broker)


def cmd_start(args: argparse.Namespace) -> int:
    paths, broker = _ensure_running()
    _print_status(_status_report(paths, broker, ""), as_json=args.json)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from pager.launch.discovery import discover

    paths = _paths()
    found = discover(paths)
    _print_status(_status_report(paths, found.broker, found.reason), as_json=args.json)
    return EXIT_OK if found.broker is not None else EXIT_NOT_RUNNING


def cmd_exit(args: argparse.Namespace) -> int:
    from pager.launch.discovery import discover
    from pager.launch.lifecycle import stop_broker

    paths = _paths()
    found = discover(paths)
    if found.broker is None:
        print(f"No broker was running ({found.reason}).")
        return EXIT_OK
    killed = stop_broker(paths, found.broker)
    how = "killed after it did not stop in time" if killed else "stopped"
    print(f"Broker (pid {found.broker.pid}) {how}.")
    return EXIT_OK


def cmd_restart(args: argparse.Namespace) -> int:
    from pager.launch.discovery import discover
    from pager.launch.lifecycle import stop_broker

    paths = _paths()
    found = discover(paths)
    if found.broker is not None:
        stop_broker(paths, found.broker)
    return cmd_start(args)


def cmd_store(args: argparse.Namespace) -> int:
    """`pager store copy --to URL [--password-file FILE] [--json]` (its only action)."""
    import json
    from pathlib import Path

    from pager.config import ConfigError, load_config, parse_store

    paths = _paths()
    password_file = None
    if args.password_file is not None:
        password_file = Path(args.password_file).expanduser().absolute()
    try:
        target = parse_store(args.to, source="--to", password_file=password_file)
        if target.url is None:
            raise ConfigError(
                "--to: give the postgresql:// URL of the new database, such as"
                " postgresql://pager@db.example:5432/pager?sslmode=verify-full"
            )
        try:
            target.read_password()  # a missing, empty or shared password file: said now
        except ConfigError as exc:  # it names the option config.toml has for the file
            raise ConfigError(
                str(exc).replace("store_password_file", "--password-file", 1)
            ) from None
        host = load_config(paths.config).host_name
    except ConfigError as exc:  # advice about config.toml's key is about --password-file here
        advice = str(exc).replace("store_password_file in config.toml", "--password-file")
        raise CommandError(f"nothing was copied: {advice}") from None
    from pager.store.copy import NOT_COPIED, copy_to_postgresql  # psycopg: only here

    try:
        copied = copy_to_postgresql(paths, target, host, progress=_copy_progress)
    except NOT_COPIED as exc:
        raise CommandError(f"nothing was copied: {exc}") from None
    if args.json:
        report = {"copied": copied, "to": target.url, "host": host, "from": str(paths.database)}
        sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
        return EXIT_OK
    others = ", ".join(
        f"{table.replace('_', ' ')} {count}"
        for table, count in copied.items()
        if table not in ("identities", "messages", "events", "meta")
    )
    print(f"Copied {paths.database} into {target.url}:")
    print(f"  {copied['identities']} identities, {copied['messages']} messages and"
          f" {copied['events']} events")  # fmt: skip
    print(f"  also: {others}")
    print(
        f"Its workspaces are now those of host {host!r}, and every address (alias@slug) is"
        " unchanged. The SQLite store was left as it was."
    )
    print(f"Next: switch this machine to the shared store; put in {paths.config}:")
    print(f"  store = {json.dumps(target.url)}")
    if password_file is not None:
        print(f"  store_password_file = {json.dumps(str(password_file))}")
    else:
        print("  (the password comes from PGPASSFILE or ~/.pgpass, as for this copy)")
    print(
        f"keep this machine's host name {host!r} ([host] name), then start the broker:"
        " pager start. Running sessions re-attach as after a restart."
    )
    return EXIT_OK


def _copy_progress(table: str, done: int, total: int) -> None:
    """`pager store copy`'s progress on a large store: one line per report (redrawn in place
    on a terminal)."""
    line = f"copying {table.replace('_', ' ')}: {done} of {total}"
    if sys.stderr.isatty():
        print(f"\r{line}", end="\n" if done >= total else "", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


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


def _status_report(paths: Any, broker: Any, reason: str) -> dict[str, Any]:
    from datetime import UTC, datetime

    report: dict[str, Any] = {
        "running": broker is not None,
        "state_dir": str(paths.root),
        "database": str(paths.database),
        "installed_version": VERSION,
        "installed_schema_version": SCHEMA_VERSION,
    }
    if broker is None:
        report["reason"] = reason
        return report
    started = datetime.fromisoformat(broker.started_at)
    report.update(
        pid=broker.pid,
        url=broker.url,
        mcp_url=broker.mcp_url,
        broker_version=broker.version,
        schema_version=broker.schema_version,
        instance_id=broker.instance_id,
        started_at=broker.started_at,
        uptime_s=round((datetime.now(UTC) - started).total_seconds(), 3),
        warnings=list(broker.warnings),
    )
    report.update(_health(broker.url))
    report.update(_counts(paths, broker.url))
    return report


def _health(url: str) -> dict[str, Any]:
    """The broker's `status` (`ok` or `degraded`) and, when any, its `degraded` list as
    `GET /health` gives them (no credential, no store read), or `health_error` saying why
    not. A broker older than the health board gives neither field."""
    from pager.client import BrokerUnreachable, request_json

    try:
        status, answer = request_json(url, "GET", "/health", timeout=5.0)
    except BrokerUnreachable as exc:
        return {"health_error": f"could not read the broker's health: {exc}"}
    if status != 200 or not isinstance(answer, dict):
        return {"health_error": f"the broker answered {status} to GET /health"}
    return {key: answer[key] for key in ("status", "degraded") if key in answer}


def _counts(paths: Any, url: str) -> dict[str, Any]:
    """`counts` from the snapshot's totals (aggregates only), or `counts_error` saying why not:
    the broker's identity above is worth reporting even when this part fails."""
    from pager.client import BrokerUnreachable, request_json

    try:
        secret = paths.secret.read_text().strip()
        status, answer = request_json(
            url, "GET", "/v1/snapshot?agents=false", token=secret, timeout=5.0
        )
    except (OSError, BrokerUnreachable) as exc:
        return {"counts_error": f"could not read the counts: {exc}"}
    if status != 200 or not isinstance(answer, dict) or "totals" not in answer:
        return {"counts_error": f"the broker answered {status} to GET /v1/snapshot"}
    totals = answer["totals"]
    found: dict[str, Any] = {"counts": {key: totals.get(key) for key in _COUNT_KEYS}}
    broker = answer.get("broker")
    if isinstance(broker, dict):  # the store and, when shared, its hosts (SPEC §13)
        found.update({key: broker[key] for key in ("store", "hosts") if key in broker})
    return found


#: What `pager status` shows of the snapshot's totals (SPEC §6 names them).
_COUNT_KEYS = ("workspaces", "agents", "attached", "archived", "queued", "claimed", "dead")


def _print_error(exc: Exception) -> None:
    """A command's error on stderr; it may quote what others sent, so shown escaped."""
    from pager.domain.display import for_terminal

    print(f"pager: {for_terminal(str(exc))}", file=sys.stderr)


def _print_status(report: dict[str, Any], *, as_json: bool) -> None:
    import json

    from pager.domain.display import for_terminal

    for warning in report.get("warnings", []):  # on stderr in both forms: it must be seen
        print(f"pager: WARNING: {for_terminal(str(warning), one_line=True)}", file=sys.stderr)
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    for line in _status_lines(report):  # hosts, messages: the broker's words, shown escaped
        print(for_terminal(line, one_line=True))


def _status_lines(report: dict[str, Any]) -> list[str]:
    """`pager status` for a person, a line each."""
    if not report["running"]:
        return [
            f"No Pager broker is running ({report['reason']}).",
            f"  state      {report['state_dir']}",
            "Start one with `pager start`.",
        ]
    lines = [
        f"Pager broker running (pid {report['pid']}, up {_duration(report['uptime_s'])})",
        f"  MCP endpoint  {report['mcp_url']}",
    ]
    store = report.get("store")
    if isinstance(store, dict) and store.get("kind") == "postgresql":
        lines.append(f"  store         {store.get('where')}")
        lines += _host_lines(report.get("hosts"), this=str(store.get("host", "")))
    else:
        lines.append(f"  database      {report['database']} (schema {report['schema_version']})")
    lines.append(f"  version       broker {report['broker_version']}, installed {VERSION}")
    degraded = report.get("degraded")
    for entry in degraded if isinstance(degraded, list) else []:
        if isinstance(entry, dict):
            kind, message = entry.get("kind", "?"), entry.get("message", "")
            lines.append(f"  degraded      {kind} (since {entry.get('since', '?')}): {message}")
    if "health_error" in report:
        lines.append(f"  health        unknown ({report['health_error']})")
    counts = report.get("counts")
    if counts is not None:
        lines.append(
            f"  agents        {counts['agents']} in {counts['workspaces']} workspaces,"
            f" {counts['attached']} attached, {counts['archived']} archived"
        )
        lines.append(
            f"  mail          {counts['queued']} waiting, {counts['claimed']} claimed,"
            f" {counts['dead']} dead"
        )
    else:
        lines.append(f"  counts        unavailable ({report.get('counts_error', 'unknown')})")
    return lines


def _host_lines(hosts: object, *, this: str) -> list[str]:
    """This broker's host, then every other broker sharing the store and whether it runs."""
    import time

    lines = [f"  host          {this}"]
    others = (
        [h for h in hosts if isinstance(h, dict) and not h.get("this")]
        if isinstance(hosts, list)
        else []
    )
    for host in others:
        beat = float(host.get("heartbeat_at") or 0)
        seen = f"heartbeat {_duration(max(time.time() - beat, 0))} ago" if beat else "stopped"
        state = "alive" if host.get("alive") else "not alive"
        lines.append(
            f"  other host    {host.get('name')} ({state}, {seen}, version {host.get('version')})"
        )
    return lines


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{value}{unit}" for value, unit in parts if value] or ["0s"]
    return " ".join(shown[:2])
