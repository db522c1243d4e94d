"""`pager reset --yes` (SPEC §4.1, §5): an empty database after a backup copy of the old one.

Under the starters' lock, so no broker starts meanwhile: the running broker is stopped, then
the store (`pager.store.clear_database`) copies the database to `pager.db.bak-reset-<UTC time>`
(SQLite's backup API, 0600) and removes it with its WAL files. The counts of what it held are
reported; the next caller starts a broker on a fresh database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

from pager.launch.discovery import discover
from pager.launch.lifecycle import LifecycleError, stop_broker
from pager.launch.lock import LockHeld, holder_alive, start_lock
from pager.launch.paths import StatePaths


class Reset(NamedTuple):
    deleted: dict[str, int]
    backup: Path | None  # None: there was no database


def reset_database(paths: StatePaths, *, timeout: float = 30.0) -> Reset:
    from pager.store import clear_database

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
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            deleted, backup = clear_database(paths.database, f"reset-{stamp}")
            return Reset(deleted, backup)
    except LockHeld:
        raise LifecycleError(
            "another `pager` is starting the broker; try `pager reset --yes` again"
        ) from None
