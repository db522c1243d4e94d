"""The PostgreSQL backend of the `Exports` port: one read-only REPEATABLE READ transaction per
export on a connection of its own, its rows streamed from server-side cursors, so an export of
any size is one consistent instant in constant memory while the brokers go on writing."""

from __future__ import annotations

import itertools
from typing import Any

from pager.config import StoreConfig
from pager.domain.exports import ExportReader
from pager.store._export import export_records
from pager.store.off_loop import open_export
from pager.store.pg._conn import PgConn
from pager.store.pg._database import connect


class PgExportReader:
    def __init__(self, store: StoreConfig, since: float | None) -> None:
        self._raw = connect(store, application_name="pager export")
        try:
            self._raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._records = export_records(PgConn(self._raw, streaming=True), since=since)
        except BaseException:
            self._raw.close()
            raise

    def batch(self, size: int) -> list[dict[str, Any]]:
        return list(itertools.islice(self._records, size))

    def close(self) -> None:
        self._raw.close()  # ends the read-only transaction with it


class PgExports:
    def __init__(self, store: StoreConfig) -> None:
        self._store = store

    async def open(self, *, since: float | None) -> ExportReader:
        return await open_export(lambda: PgExportReader(self._store, since))
