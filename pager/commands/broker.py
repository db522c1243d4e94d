"""The broker's lifecycle: `pager serve|start|status|exit|restart` (docs/cli.md)."""

from __future__ import annotations

import sys

from pager.commands.common import (
    EXIT_ERROR,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    ensure_running,
    state_paths,
)
from pager.launch.status_report import status_report
from pager.versions import VERSION

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_commands(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
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
        description="Start the broker in the background (or adopt the running one) and print "
        "its status.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")
    commands.add_parser(
        "status",
        description="Show the running broker: pid, its address (for /v1 and curl), its MCP"
        " endpoint, database, versions, uptime. Exit status 0 when running, 3 when not.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")
    commands.add_parser(
        "exit",
        description="Stop the running broker: gracefully, then forcibly after a bound.",
    )
    commands.add_parser(
        "restart",
        description="Stop the running broker (if any) and start a fresh one.",
    ).add_argument("--json", action="store_true", help="print the status as JSON")


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
    paths = state_paths()
    try:
        config = load_config(paths.config, host=args.host, port=args.port)
    except ConfigError as exc:
        logging.getLogger("pager").error("bad configuration: %s", exc)
        return EXIT_ERROR
    return serve_main(paths, config)


def cmd_start(args: argparse.Namespace) -> int:
    paths, broker = ensure_running()
    _print_status(status_report(paths, broker, ""), as_json=args.json)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from pager.launch.discovery import discover

    paths = state_paths()
    found = discover(paths)
    _print_status(status_report(paths, found.broker, found.reason), as_json=args.json)
    return EXIT_OK if found.broker is not None else EXIT_NOT_RUNNING


def cmd_exit(args: argparse.Namespace) -> int:
    from pager.launch.discovery import discover
    from pager.launch.lifecycle import stop_broker

    paths = state_paths()
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

    paths = state_paths()
    found = discover(paths)
    if found.broker is not None:
        stop_broker(paths, found.broker)
    return cmd_start(args)


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
        f"  broker        {report['url']}  (/v1, curl)",
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


HANDLERS: dict[str, Any] = {
    "serve": cmd_serve,
    "start": cmd_start,
    "status": cmd_status,
    "exit": cmd_exit,
    "restart": cmd_restart,
}
