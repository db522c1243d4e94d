"""The schema, as an ordered list of migrations.

The schema version lives in `PRAGMA user_version`. Migration N turns a version N-1 database into
a version N one. Never edit a released migration (databases in the field already ran it): add a
new one at the end of `MIGRATIONS`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from pager.store._errors import MigrationFailed, StoreError
from pager.store._transactions import database_path, immediate_transaction, store_errors


def _positive(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"migration versions start at 1, got {value}")


@attrs.frozen
class Migration:
    """One schema step.

    `apply` runs inside the upgrade's single transaction: it must use `conn.execute` only —
    never `executescript`, `commit` or `BEGIN`/`COMMIT`, which would end that transaction and
    make a failed upgrade impossible to roll back.
    """

    version: int = attrs.field(validator=_positive)
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _v1_broker_runs(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """
        CREATE TABLE broker_runs (
            id INTEGER PRIMARY KEY,
            instance_id TEXT NOT NULL UNIQUE,
            pid INTEGER NOT NULL,
            version TEXT NOT NULL,
            started_at TEXT NOT NULL
        )
        """
    )


def _v2_clean_stop_and_events(conn: sqlite3.Connection) -> None:
    # NULL stopped_at on a past run means it did not shut down cleanly.
    conn.execute("ALTER TABLE broker_runs ADD COLUMN stopped_at TEXT")
    conn.execute("ALTER TABLE broker_runs ADD COLUMN stop_reason TEXT")
    # AUTOINCREMENT: a seq is never reused, even after the newest events are deleted, so an
    # operator stream can resume from "after seq N" without skipping or repeating events.
    conn.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX events_at ON events (at)")


# Append only. Released migrations are frozen: fix mistakes with a new migration.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "broker runs", _v1_broker_runs),
    Migration(2, "clean-stop bookkeeping and operator events", _v2_clean_stop_and_events),
)

CURRENT_SCHEMA_VERSION: int = MIGRATIONS[-1].version


def check_migrations(migrations: Sequence[Migration]) -> None:
    """Raise ValueError unless the versions are exactly 1, 2, …, N."""
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1..N in order without gaps, got {versions}")


def read_schema_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database (`PRAGMA user_version`)."""
    with store_errors(conn):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def migrate_to(
    conn: sqlite3.Connection,
    version: int,
    *,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> None:
    """Apply the missing migrations up to `version` in one transaction.

    A low-level step: `open_database` is the entry point, and it copies the database to
    `<name>.bak-<old version>` first. Raises `MigrationFailed` (database left at its old version)
    and ValueError for a downgrade or an unknown target version.
    """
    apply_migrations(conn, database_path(conn), version, migrations=migrations, backup=None)


def apply_migrations(
    conn: sqlite3.Connection,
    path: Path,
    target: int,
    *,
    migrations: Sequence[Migration],
    backup: Path | None,
) -> None:
    """`migrate_to` with the file's path and its backup named in errors."""
    check_migrations(migrations)
    if not 0 <= target <= len(migrations):
        raise ValueError(f"unknown schema version {target}; known: 0..{len(migrations)}")
    current = read_schema_version(conn)
    if target < current:
        raise ValueError(f"cannot migrate {path} down from version {current} to {target}")
    pending = migrations[current:target]
    if not pending:
        return
    step = pending[0]
    try:
        with store_errors(conn, path), immediate_transaction(conn):
            for step in pending:
                step.apply(conn)
            # Inside the transaction: the version moves if and only if the schema did.
            conn.execute(f"PRAGMA user_version = {int(target)}")
    except StoreError:
        # Unwritable, full or corrupt file: rolled back too, but the fix is the operator's
        # (free space, permissions), not a bug in the step — say that instead.
        raise
    except Exception as exc:
        raise MigrationFailed(
            path,
            version=step.version,
            description=step.description,
            from_version=current,
            detail=f"{type(exc).__name__}: {exc}",
            backup=backup,
        ) from exc
