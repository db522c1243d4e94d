"""Errors of the store: faults of the moment on a request path (`StoreFault` and its kinds,
for every backend), and what is wrong with a SQLite file when it is opened (`StoreError`).

Each error says what is wrong with which file in one sentence, then what the operator can do.
None of them is ever answered by recreating the database: Pager only does that on an explicit
`pager reset --yes`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pager.domain.faults import Unavailable


class StoreFault(Unavailable):
    """The store cannot do this right now, for a reason outside the broker's own state: its
    disk, its lock, its server (ARCHITECTURE.md, "Errors by kind"). Raised by each backend
    where it runs the statement (never recognised afterwards); the transaction was rolled back,
    so nothing changed. Its caller is answered `unavailable` with this message (what is wrong,
    then what to do), the store is marked degraded on /health until a write succeeds again, and
    no actor crashes for it: only a broken invariant of an actor's own state does."""


class StoreFull(StoreFault):
    """The disk (or the database server's) has no room for the write."""


class StoreIOError(StoreFault):
    """The system refused a read or write of the database (a failing, full or vanished disk)."""


class StoreBusy(StoreFault):
    """The database stayed locked by another writer (another process) past the busy timeout."""


class StoreDenied(StoreFault):
    """The database may not be written (permissions, a read-only disk)."""


class StoreDamaged(StoreFault):
    """The database file turned out damaged while in use."""


class StoreConflict(StoreFault):
    """The database kept rolling the transaction back for concurrent ones (deadlock,
    serialization) after every retry: nothing is wrong with the store, retry shortly."""

    degrades: ClassVar[bool] = False


class StoreUnavailable(StoreFault):
    """The store cannot be reached right now (its database server is down, restarting or cut
    off, or the broker's writer did not answer in time): callers are answered `unavailable`
    and the broker reconnects by itself. The message names the store without a password and
    says what to check."""


class StoreError(Unavailable):
    """The database at `path` cannot be used as asked."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class StoreCorrupt(StoreError):
    """The file exists but is not a (healthy) Pager database."""

    def __init__(self, path: Path, detail: str) -> None:
        self.detail = detail
        super().__init__(
            f"{path} is not a usable Pager database ({detail}); Pager will not recreate it: "
            f"move it aside to start with an empty database, or restore a backup "
            f"({path.name}.bak-N beside it) in its place.",
            path=path,
        )


class StoreUnreadable(StoreError):
    """The file exists but this user cannot read it (permissions, not a regular file, I/O)."""

    def __init__(self, path: Path, detail: str) -> None:
        self.detail = detail
        super().__init__(
            f"Pager cannot read {path} ({detail}); make it a regular file readable and "
            f"writable by this user (chmod 600 {path}) or move it aside.",
            path=path,
        )


class StoreUnwritable(StoreError):
    """The database or its directory cannot be written (permissions, missing directory, disk)."""

    def __init__(self, path: Path, detail: str, *, fix: str | None = None) -> None:
        self.detail = detail
        fix = fix or (
            f"make {path.parent} and {path.name} writable by this user, "
            f"or set PAGER_HOME to a writable directory"
        )
        super().__init__(f"Pager cannot write {path} ({detail}); {fix}.", path=path)


class StoreTooNew(StoreError):
    """The database was written by a newer Pager; it is refused and left untouched."""

    def __init__(self, path: Path, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path} has schema version {found}, written by a newer Pager than this one "
            f"(which supports up to version {supported}); upgrade Pager to use it "
            f"(the file was left untouched).",
            path=path,
        )


class MigrationFailed(StoreError):
    """A schema migration raised; the whole upgrade was rolled back."""

    def __init__(
        self,
        path: Path,
        *,
        version: int,
        description: str,
        from_version: int,
        detail: str,
        backup: Path | None = None,
    ) -> None:
        self.version = version
        self.description = description
        self.from_version = from_version
        self.detail = detail
        self.backup = backup
        copy = f"; a copy from before the upgrade is at {backup}" if backup is not None else ""
        super().__init__(
            f"Upgrading {path} failed at migration {version} ({description}): {detail}; "
            f"the database was rolled back to schema version {from_version}{copy}: "
            f"keep using the previous Pager release and report this bug.",
            path=path,
        )
