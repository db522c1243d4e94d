"""`pager reset --yes` (SPEC §4.1, §5): an empty database after a backup copy of the old one.

Under the starters' lock, so no broker starts meanwhile: the running broker is stopped, the
database copied to `pager.db.bak-reset-<UTC time>` (SQLite's backup API, 0600), then removed
with its WAL files. The counts of what it held are reported; the next caller starts a broker
on a fresh database."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import NamedTuple

from pager.launch.discovery import discover
from pager.launch.lifecycle import LifecycleError, stop_broker
from pager.launch.lock import LockHeld, holder_alive, start_lock
from pager.launch.paths import StatePaths

#: The tables whose rows `reset` reports, in the order it names them.
COUNTED = ("identities", "sessions", "messages")


class Reset(NamedTuple):
    deleted: dict[str, int]
    backup: Path | None  # None: there was no database


def reset_database(paths: StatePaths, *, timeout: float = 30.0) -> Reset:
    from pager.store import backup_copy

    try:
        with start_lock(paths.start_lock, timeout):
            found = discover(paths)
            if found.broker is not None:
                stop_broker(paths, found.broker)
            if holder_alive(paths.lock):
                raise LifecycleError(
                    f"a broker still holds {paths.lock} (one that did not prove itself?);"
                    " stop it, then run `pager reset --yes` again"
                )
            if not paths.database.exists():
                return Reset(dict.fromkeys(COUNTED, 0), None)
            conn = sqlite3.connect(paths.database, isolation_level=None)
            try:
                deleted = {
                    table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                    for table in COUNTED
                }
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                backup = backup_copy(conn, paths.database, f"reset-{stamp}")
            finally:
                conn.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{paths.database}{suffix}").unlink(missing_ok=True)
            return Reset(deleted, backup)
    except LockHeld:
        raise LifecycleError(
            "another `pager` is starting the broker; try `pager reset --yes` again"
        ) from None
