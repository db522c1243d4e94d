"""`pager store copy --to URL`: move a machine's SQLite store into a new PostgreSQL store.

Why: a machine that has used Pager alone holds identities, waiting mail and history that people
and agents refer to by address (`alias@slug`) and by id. To switch it to a store shared by
several machines (SPEC §13), the whole store is copied, row for row: every identity with its
alias reservations and conversations, every session, message (in its state), claim,
idempotency key, mailbox token, broker run and event (with its seq, so an operator stream
resumes where it was). An export and re-import would lose the ids, tokens and seqs.

What changes is only what a shared store needs to tell machines apart, as the broker itself
would write it (pager/domain/workspace.py `Workspace.on_host`):

- each workspace's key becomes `<host>:<key>`, and every reference to it (identities, alias
  reservations) with it; its `host` is this machine's host name (`[host] name`). Its slug is
  kept: the broker finds a workspace by key and never rewrites a stored slug, so every address
  stays valid;
- every session and broker run is this host's;
- the broker's kept port moves from `port` to `port@<host>`; the schema version is the target's.

All or nothing: the schema upgrade and the copy are one PostgreSQL transaction (a COPY per
table; the identity sequences are moved past the copied seqs), into a database that holds no
Pager data yet, while this state directory's broker lock is held (no broker uses the SQLite
file meanwhile). The SQLite file is only read, and left exactly as it was.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import psycopg
from psycopg import sql

from pager.config import ConfigError, StoreConfig
from pager.launch.lock import BrokerLock, LockHeld
from pager.launch.paths import StatePaths
from pager.store._database import open_read_only
from pager.store._errors import StoreError, StoreTooNew, StoreUnreadable
from pager.store._migrations import CURRENT_SCHEMA_VERSION, read_schema_version
from pager.store._transactions import translate_error
from pager.store.pg._database import (
    PgStoreError,
    PgUnreachable,
    connect,
    first_line,
    upgrade,
)

#: Told (table, rows copied so far, rows in the table) every `every` rows of a table, and at
#: the end of a table that had at least that many: silent for a small store.
Progress = Callable[[str, int, int], None]
#: Rows between two progress reports.
PROGRESS_EVERY = 10_000


class CopyRefused(Exception):
    """The copy was not made: the message says why and what to do. Nothing was written."""


#: Every error that means the copy was not made and the target was left as it was.
NOT_COPIED: tuple[type[Exception], ...] = (CopyRefused, ConfigError, StoreError, PgStoreError)

#: How a column's value is rewritten for the host: (value in SQLite, host name) -> value.
Rewrite = Callable[[Any, str], Any]


def host_key(key: str, host: str) -> str:
    """A workspace key of a shared store, as `Workspace.on_host` makes it."""
    return f"{host}:{key}"


def _this_host(_value: object, host: str) -> str:
    return host


def _meta_key(key: str, host: str) -> str:
    # A shared store keeps each host's port apart (pager/store/pg/backend.py `port_key`).
    return f"port@{host}" if key == "port" else key


@attrs.frozen
class Table:
    """One table to copy. Its columns are those of the SQLite table, plus any rewritten
    column SQLite does not have (it is given the rewrite's value)."""

    name: str
    rewrites: Mapping[str, Rewrite] = attrs.field(factory=dict)
    #: Rows left out, in SQL both engines read (the target's own rows of `meta`).
    skip: str | None = None
    #: The `GENERATED ALWAYS AS IDENTITY` column, whose sequence must go past the copied values.
    identity: str | None = None


#: Every table of the SQLite store at CURRENT_SCHEMA_VERSION, parents before children.
TABLES: tuple[Table, ...] = (
    Table("meta", {"key": _meta_key}, skip="key = 'schema_version'"),
    Table("broker_runs", {"host": _this_host}, identity="id"),
    Table("events", identity="seq"),
    Table("workspaces", {"key": host_key, "host": _this_host}),
    Table("identities", {"workspace_key": host_key}),
    Table("alias_reservations", {"workspace_key": host_key}),
    Table("conversations"),
    Table("sessions", {"host": _this_host}),
    Table("messages", identity="seq"),
    Table("idempotency"),
    Table("claims"),
    Table("purged_sessions"),
    Table("mailbox_tokens"),
    Table("wake_settings"),
    Table("wake_runs", {"host": _this_host}),
    Table("refusals"),
    Table("reservations", {"workspace_key": host_key}),
)


def copy_to_postgresql(
    paths: StatePaths,
    target: StoreConfig,
    host: str,
    *,
    progress: Progress | None = None,
    every: int = PROGRESS_EVERY,
) -> dict[str, int]:
    """Copy the SQLite store of `paths` into the PostgreSQL store `target` as host `host`;
    the rows copied per table (in `TABLES` order). Raises one of NOT_COPIED (PgUnreachable
    among them), having written nothing."""
    database = paths.database
    if not database.is_file():
        raise CopyRefused(
            f"there is no SQLite store to copy: {database} does not exist (is PAGER_HOME"
            f" {paths.root} the state directory of the machine's broker?)"
        )
    with _broker_stopped(paths), _read_only(database) as source:
        return copy_store(source, database, target, host, progress=progress, every=every)


@contextlib.contextmanager
def _broker_stopped(paths: StatePaths) -> Iterator[None]:
    """Hold the lock a broker holds for its whole life: none runs on the file meanwhile."""
    try:
        lock = BrokerLock.acquire(paths.lock)
    except LockHeld:
        raise CopyRefused(
            f"a broker is running on {paths.database} (it holds {paths.lock}); stop the broker"
            " first: pager exit"
        ) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store at the current schema version. With no WAL file
    (a clean stop) the file is opened immutable, so not even -wal/-shm files appear beside it."""
    try:
        if Path(f"{path}-wal").exists():
            conn = open_read_only(path)
        else:
            uri = f"{path.absolute().as_uri()}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, path) from exc
    try:
        _check_version(conn, path)
        yield conn
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, path) from exc
    finally:
        conn.close()


def _sqlite_error(exc: sqlite3.Error, path: Path) -> StoreError:
    return translate_error(exc, path) or StoreUnreadable(path, str(exc))


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    version = read_schema_version(conn)
    if version > CURRENT_SCHEMA_VERSION:
        raise StoreTooNew(path, version, CURRENT_SCHEMA_VERSION)
    if version == 0:
        raise CopyRefused(f"{path} holds no Pager store yet; there is nothing to copy")
    if version < CURRENT_SCHEMA_VERSION:
        raise CopyRefused(
            f"{path} is at schema version {version}, older than this Pager's"
            f" {CURRENT_SCHEMA_VERSION}: start the broker once so that it upgrades the file"
            " (pager start, then pager exit), then copy again"
        )
    found = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    known = {table.name for table in TABLES}
    if found != known:  # a schema this build's copy was not written for: a bug, said plainly
        raise CopyRefused(
            f"{path} has tables this copy does not know ({', '.join(sorted(found ^ known))});"
            " nothing was copied"
        )


def copy_store(
    source: sqlite3.Connection,
    path: Path,
    target: StoreConfig,
    host: str,
    *,
    progress: Progress | None = None,
    every: int = PROGRESS_EVERY,
) -> dict[str, int]:
    """Copy every table of `source` (the SQLite store at `path`) into `target`, in one
    transaction that also creates or upgrades the target's schema."""
    where = target.url or ""
    source.execute("BEGIN")  # one snapshot of the file for every table read
    try:
        totals = {table.name: _count(source, table) for table in TABLES}
        conn = connect(target, application_name="pager store copy")
        try:
            with conn.transaction():
                upgrade(conn, where=where)  # a savepoint: rolled back with the copy
                _refuse_unless_empty(conn, where)
                return {
                    table.name: _copy_table(
                        source, conn, table, host, totals[table.name], progress, every
                    )
                    for table in TABLES
                }
        except psycopg.OperationalError as exc:
            raise PgUnreachable(where, first_line(exc)) from None
        except psycopg.Error as exc:
            raise CopyRefused(
                f"copying into {where} failed ({first_line(exc)}); nothing was written"
            ) from None
        finally:
            conn.close()
    finally:
        if source.in_transaction:
            source.execute("ROLLBACK")


def _count(conn: sqlite3.Connection, table: Table) -> int:
    where = f" WHERE NOT ({table.skip})" if table.skip else ""
    (count,) = conn.execute(f'SELECT count(*) FROM "{table.name}"{where}').fetchone()
    return int(count)


def _refuse_unless_empty(conn: psycopg.Connection[Any], where: str) -> None:
    """No other writer until the commit (readers still read), then: nothing there yet."""
    names = sql.SQL(", ").join(sql.Identifier(table.name) for table in TABLES)
    conn.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(names))
    held = {}
    for table in TABLES:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table.name))
        if table.skip:
            query = query + sql.SQL(f" WHERE NOT ({table.skip})")  # a constant of TABLES
        row = conn.execute(query).fetchone()
        if row is not None and row[0]:
            held[table.name] = int(row[0])
    if held:
        rows = ", ".join(f"{name}: {count}" for name, count in held.items())
        raise CopyRefused(
            f"the target store {where} is not empty (rows held: {rows}); copy only into a new"
            " database"
        )


def _copy_table(
    source: sqlite3.Connection,
    conn: psycopg.Connection[Any],
    table: Table,
    host: str,
    total: int,
    progress: Progress | None,
    every: int,
) -> int:
    columns = [str(row[1]) for row in source.execute(f'PRAGMA table_info("{table.name}")')]
    added = [name for name in table.rewrites if name not in columns]
    names = columns + added
    rewrites = [(names.index(name), rewrite) for name, rewrite in table.rewrites.items()]
    select = ", ".join(f'"{name}"' for name in columns)
    where = f" WHERE NOT ({table.skip})" if table.skip else ""
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table.name), sql.SQL(", ").join(sql.Identifier(n) for n in names)
    )
    done = 0
    # COPY writes identity columns as given (as INSERT … OVERRIDING SYSTEM VALUE would), and
    # fires the events' statement triggers once.
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        rows = source.execute(f'SELECT {select} FROM "{table.name}"{where} ORDER BY rowid')
        for row in rows:
            values = [*row, *([None] * len(added))]
            for index, rewrite in rewrites:
                values[index] = rewrite(values[index], host)
            copy.write_row(values)
            done += 1
            if progress is not None and done % every == 0:
                progress(table.name, done, total)
    if progress is not None and done >= every and done % every:
        progress(table.name, done, total)
    if table.identity is not None:
        _move_sequence(source, conn, table.name, table.identity)
    return done


def _move_sequence(
    source: sqlite3.Connection, conn: psycopg.Connection[Any], name: str, column: str
) -> None:
    """The next value the target hands out comes after every one SQLite ever handed out
    (AUTOINCREMENT's high-water mark, which outlives deleted rows), so none is reused."""
    (highest,) = source.execute(f'SELECT max("{column}") FROM "{name}"').fetchone()
    kept = source.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (name,)).fetchone()
    high = max(int(highest or 0), int(kept[0]) if kept else 0)
    if high > 0:
        conn.execute(
            "SELECT setval(pg_get_serial_sequence(%s, %s), %s)", (name, column, high)
        ).fetchone()
