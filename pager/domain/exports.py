"""The export (SPEC §4.1 `pager export`, §6 `GET /v1/export`) as its readers see it: a port
each backend implements (pager/store/sqlite_export.py, pager/store/pg/_export.py) and the
composition root hands to the web edge.
"""

from __future__ import annotations

from typing import Any, Protocol


class ExportReader(Protocol):
    """One export in progress: a consistent read, pulled a batch at a time (one call at a
    time; each runs off the event loop)."""

    async def batch(self, size: int) -> list[dict[str, Any]]:
        """The next `size` records at most; empty at the end."""
        ...

    async def close(self) -> None: ...


class Exports(Protocol):
    """The whole store as export records (SPEC §4.1 `pager export`, §6 `GET /v1/export`):
    every identity, then every message sent at or after `since`, oldest first, in the record
    format of `EXPORT_VERSION`."""

    async def open(self, *, since: float | None) -> ExportReader:
        """Start one export: what it reads is the store at this instant."""
        ...
