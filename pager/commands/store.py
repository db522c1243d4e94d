"""`pager store copy --to URL`: this machine's SQLite store into a new PostgreSQL one."""

from __future__ import annotations

import sys

from pager.commands.common import EXIT_OK, CommandError, state_paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_commands(commands: Any) -> None:
    """`pager store copy --to URL`: this machine's SQLite store into a new PostgreSQL one."""
    store = commands.add_parser(
        "store",
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


def cmd_store(args: argparse.Namespace) -> int:
    """`pager store copy --to URL [--password-file FILE] [--json]` (its only action)."""
    import json
    from pathlib import Path

    from pager.config import ConfigError, load_config, parse_store

    paths = state_paths()
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


HANDLERS: dict[str, Any] = {"store": cmd_store}
