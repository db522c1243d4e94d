"""The SQLite checkpoint: schema, migrations and sync functions on one connection.

Everything here is blocking stdlib `sqlite3` code; the broker calls it from one owner at a time
(e.g. through `trio.to_thread.run_sync`). Only stdlib and attrs are imported.
"""

from pager.store._database import (
    CheckpointResult,
    backup_copy,
    checkpoint,
    close_database,
    open_database,
    open_read_only,
)
from pager.store._errors import (
    MigrationFailed,
    StoreBusy,
    StoreConflict,
    StoreCorrupt,
    StoreDamaged,
    StoreDenied,
    StoreError,
    StoreFault,
    StoreFull,
    StoreIOError,
    StoreTooNew,
    StoreUnavailable,
    StoreUnreadable,
    StoreUnwritable,
)
from pager.store._meta import get_meta, set_meta
from pager.store._migrations import (
    CURRENT_SCHEMA_VERSION,
    MIGRATIONS,
    Migration,
    migrate_to,
    read_schema_version,
)
from pager.store._reset import RESET_COUNTED, clear_database
from pager.store._runs import (
    BrokerRun,
    last_unclean_run,
    list_broker_runs,
    record_broker_start,
    record_broker_stop,
)
from pager.store._transactions import as_fault, faults_typed, immediate_transaction, rollback

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "MIGRATIONS",
    "RESET_COUNTED",
    "BrokerRun",
    "CheckpointResult",
    "Migration",
    "MigrationFailed",
    "StoreBusy",
    "StoreConflict",
    "StoreCorrupt",
    "StoreDamaged",
    "StoreDenied",
    "StoreError",
    "StoreFault",
    "StoreFull",
    "StoreIOError",
    "StoreTooNew",
    "StoreUnavailable",
    "StoreUnreadable",
    "StoreUnwritable",
    "as_fault",
    "backup_copy",
    "checkpoint",
    "clear_database",
    "close_database",
    "faults_typed",
    "get_meta",
    "immediate_transaction",
    "last_unclean_run",
    "list_broker_runs",
    "migrate_to",
    "open_database",
    "open_read_only",
    "read_schema_version",
    "record_broker_start",
    "record_broker_stop",
    "rollback",
    "set_meta",
]
