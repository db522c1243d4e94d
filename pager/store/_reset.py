"""Clearing the store for `pager reset` (SPEC §4.1, §5), with no broker running: what it held
is counted, a backup copy made, then the database removed with its WAL files, so the next
broker starts on a fresh one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pager.store._database import backup_copy

#: What a reset reports it deleted, in the order it names them.
RESET_COUNTED = ("identities", "sessions", "messages")


def clear_database(database: Path, label: str) -> tuple[dict[str, int], Path | None]:
    """How many of each of `RESET_COUNTED` the database held, and its backup copy
    (`<name>.bak-<label>`, see `backup_copy`); then the database and its WAL files are gone.
    No database: all counts 0 and no backup."""
    if not database.exists():
        return dict.fromkeys(RESET_COUNTED, 0), None
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        deleted = {
            table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in RESET_COUNTED
        }
        backup = backup_copy(conn, database, label)
    finally:
        conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    return deleted, backup
