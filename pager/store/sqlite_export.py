"""The SQLite backend of the `Exports` port: one read-only connection and one read
transaction per export, so its records are one consistent view while the writer goes on."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pager.domain.exports import ExportReader
from pager.store._database import open_read_only
from pager.store._export import export_records
from pager.store.off_loop import open_export


class SqliteExportReader:
    def __init__(self, database: Path, since: float | None) -> None:
        self._conn = open_read_only(database)
        try:
            self._conn.execute("BEGIN")  # one snapshot for the whole export
            self._records = export_records(self._conn, since=since)
        except BaseException:
            self._conn.close()
            raise

    def batch(self, size: int) -> list[dict[str, Any]]:
        return list(itertools.islice(self._records, size))

    def close(self) -> None:
        self._conn.close()


class SqliteExports:
    def __init__(self, database: Path) -> None:
        self._database = database

    async def open(self, *, since: float | None) -> ExportReader:
        return await open_export(lambda: SqliteExportReader(self._database, since))
