"""Opening the database: create or inspect, back up, migrate, configure.

`open_database` is the one way the broker gets its connection. It never recreates or rewrites a
database it does not understand: a corrupt, foreign or newer file is refused with a message, and
is left byte-for-byte as it was.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from pager.store._errors import (
    StoreCorrupt,
    StoreError,
    StoreTooNew,
    StoreUnreadable,
    StoreUnwritable,
)
from pager.store._migrations import MIGRATIONS, Migration, apply_migrations, check_migrations
from pager.store._transactions import store_errors, translate_error

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_WAL_FORMAT = 2  # header bytes 18/19 (write/read format version): 2 means WAL mode
_BUSY_TIMEOUT_MS = 5000
_PRIVATE_MODE = 0o600


@attrs.frozen
class CheckpointResult:
    """Outcome of `PRAGMA wal_checkpoint(TRUNCATE)`."""

    busy: bool  # True: a reader or writer prevented a complete checkpoint
    wal_frames: int
    checkpointed_frames: int


@attrs.frozen
class _Found:
    """What inspection learned about the file before anything writes to it."""

    version: int
    has_schema: bool


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an open Pager database, for readers beside the one writer.

    In WAL mode it reads the last committed state without ever blocking or being blocked by
    the writer. Autocommit (each query its own read transaction), `query_only`, and handed to
    one worker thread at a time (`check_same_thread=False`). The writer must have opened the
    database first (it creates the WAL's shared-memory file).
    """
    conn = sqlite3.connect(
        f"{Path(path).absolute().as_uri()}?mode=ro",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    except BaseException:
        conn.close()
        raise
    return conn


def open_database(
    path: Path,
    *,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> sqlite3.Connection:
    """Open (creating or upgrading) the Pager database at `path` and return its connection.

    The connection is in autocommit mode (`isolation_level=None`; writers use explicit
    `BEGIN IMMEDIATE` transactions), WAL journal, `synchronous=FULL`, foreign keys on, and may be
    handed to one worker thread at a time (`check_same_thread=False`).

    `migrations` is injectable so tests can build older databases (`MIGRATIONS[:1]`) or break a
    step; production callers use the default.

    Raises `StoreCorrupt`, `StoreUnreadable`, `StoreUnwritable`, `StoreTooNew`,
    `MigrationFailed` or `StoreError`.
    """
    check_migrations(migrations)
    if not migrations:
        raise ValueError("open_database needs at least one migration")
    supported = migrations[-1].version
    path = Path(path)

    found = _create_or_inspect(path, supported)
    conn = _connect(path)
    try:
        with store_errors(conn, path):
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            # WAL before migrating: a crash mid-upgrade then leaves uncommitted WAL frames, which
            # any later reader (even read-only) ignores, rather than a hot rollback journal that
            # only a writer can undo.
            _enable_wal(conn, path)
            conn.execute("PRAGMA synchronous = FULL")  # before the upgrade commits, too
            backup = None
            if 0 < found.version < supported:
                backup = backup_copy(conn, path, str(found.version))
            apply_migrations(conn, path, supported, migrations=migrations, backup=backup)
            # After migrating: SQLite's table-rebuild recipe for schema changes needs foreign
            # keys off, and the pragma is a no-op inside a transaction anyway.
            conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def checkpoint(conn: sqlite3.Connection) -> CheckpointResult:
    """Copy the WAL into the database file and truncate it (for a clean shutdown)."""
    with store_errors(conn):
        busy, wal_frames, checkpointed = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return CheckpointResult(
        busy=bool(busy), wal_frames=int(wal_frames), checkpointed_frames=int(checkpointed)
    )


def close_database(conn: sqlite3.Connection) -> None:
    """Close the connection; an open transaction is rolled back, never committed."""
    conn.close()


def _create_or_inspect(path: Path, supported: int) -> _Found:
    """Create a missing file (0600) or check an existing one; nothing is written to the latter."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if _create_private_file(path):
            return _Found(version=0, has_schema=False)
        st = os.stat(path)  # lost a creation race: inspect the file that won
    except NotADirectoryError as exc:
        raise StoreUnwritable(
            path,
            "a component of its directory path is not a directory",
            fix="set PAGER_HOME to a directory",
        ) from exc
    except OSError as exc:
        raise StoreUnreadable(path, exc.strerror or str(exc)) from exc

    if not stat.S_ISREG(st.st_mode):
        raise StoreUnreadable(path, "it is not a regular file")
    found = _inspect(path, supported)
    if found.version == 0 and found.has_schema:
        raise StoreCorrupt(path, "it is a SQLite database with tables but no Pager schema version")
    _check_writable(path, st)
    return found


def _create_private_file(path: Path) -> bool:
    """Create an empty 0600 file at `path`; False if one appeared meanwhile."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _PRIVATE_MODE)
    except FileExistsError:
        return False
    except FileNotFoundError as exc:
        raise StoreUnwritable(
            path,
            f"its directory {path.parent} does not exist",
            fix=f"create {path.parent} (mode 0700) or set PAGER_HOME to an existing directory",
        ) from exc
    except NotADirectoryError as exc:
        raise StoreUnwritable(
            path,
            "a component of its directory path is not a directory",
            fix="set PAGER_HOME to a directory",
        ) from exc
    except PermissionError as exc:
        raise StoreUnwritable(path, f"its directory {path.parent} is not writable") from exc
    except OSError as exc:
        raise StoreUnwritable(path, exc.strerror or str(exc)) from exc
    try:
        # SQLite is handed an existing file, so it never creates one with umask-derived bits;
        # fchmod makes the mode exactly 0600 whatever the umask removed.
        os.fchmod(fd, _PRIVATE_MODE)
    finally:
        os.close(fd)
    return True


def _inspect(path: Path, supported: int) -> _Found:
    """Read the schema version and check integrity through a read-only connection."""
    try:
        with open(path, "rb") as f:
            header = f.read(_HEADER_SIZE)
    except OSError as exc:
        raise StoreUnreadable(path, exc.strerror or str(exc)) from exc
    if not header:
        # SQLite treats an empty file as an empty database: a creation that never got further.
        return _Found(version=0, has_schema=False)
    if len(header) < _HEADER_SIZE or not header.startswith(_SQLITE_MAGIC):
        # Checked before SQLite sees the file, so a stray file never gets -wal/-shm companions.
        raise StoreCorrupt(path, "it is not a SQLite database")

    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    if header[18] == _WAL_FORMAT and not os.path.lexists(f"{path}-wal"):
        # Without a -wal file the main file holds every committed page. A plain read-only open
        # of a WAL database would create -wal and -shm and leave them behind; immutable=1 reads
        # the file without them, so a refused database keeps its directory as it was.
        uri += "&immutable=1"
    try:
        ro = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=_BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise _inspection_error(exc, path) from exc
    try:
        # user_version comes from the header; read it before anything parses the schema, which
        # a newer Pager may have written in a form this build's SQLite does not understand.
        version = int(ro.execute("PRAGMA user_version").fetchone()[0])
        if version > supported:
            raise StoreTooNew(path, version, supported)
        if needs_integrity_check(ro, path, version, supported):
            problems = [str(row[0]) for row in ro.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreCorrupt(path, "integrity check: " + "; ".join(problems[:3]))
        has_schema = int(ro.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) > 0
    except sqlite3.Error as exc:
        raise _inspection_error(exc, path) from exc
    finally:
        ro.close()
    return _Found(version=version, has_schema=has_schema)


def needs_integrity_check(ro: sqlite3.Connection, path: Path, version: int, supported: int) -> bool:
    """Whether opening must read the whole file with `PRAGMA quick_check` first.

    Not after a clean stop: the last broker recorded it, then checkpointed and truncated the
    WAL, so nothing was left half-written (at 640 MB the check is 0.8 s of every start). Yes
    after a crash or a kill (the last run has no stop), when nothing says how the last writer
    ended (no runs, or another program left WAL frames), and before any migration, whose
    backup must be of a sound file. Damage that appears later is still caught: SQLite
    reports a malformed page as `SQLITE_CORRUPT` when it reads one.
    """
    if version != supported:
        return True
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return True
    try:
        row = ro.execute("SELECT stopped_at FROM broker_runs ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # no such table or column: not a current schema
        return True
    return row is None or row[0] is None


def _inspection_error(exc: sqlite3.Error, path: Path) -> StoreError:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreCorrupt(path, str(exc))
    return StoreUnreadable(path, str(exc))


def _check_writable(path: Path, st: os.stat_result) -> None:
    """Refuse early, with the fix, rather than failing half-way through an upgrade."""
    if not os.access(path, os.R_OK | os.W_OK):
        raise StoreUnwritable(
            path, "the file is not writable by this user", fix=f"run chmod 600 {path}"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StoreUnwritable(
            path,
            f"its directory {path.parent} is not writable, and SQLite keeps "
            f"{path.name}-wal and {path.name}-shm beside it",
        )
    # The database holds every session's mail: keep it (and the WAL files SQLite copies the mode
    # from) private to the user, as the spec requires, even if something loosened it.
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = st.st_mode if file == path else os.stat(file).st_mode
            if mode & 0o077:
                os.chmod(file, _PRIVATE_MODE)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreUnwritable(
                path, f"cannot make {file.name} private: {exc.strerror or exc}"
            ) from exc


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            path,
            isolation_level=None,
            check_same_thread=False,
            timeout=_BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreUnwritable(path, str(exc)) from exc


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise StoreError(
            f"{path} could not be switched to write-ahead logging (journal mode stayed {mode}); "
            f"keep PAGER_HOME on a local disk, not a network or read-only file system.",
            path=path,
        )


def backup_copy(conn: sqlite3.Connection, path: Path, version: str) -> Path:
    """Copy the database to `<name>.bak-<version>` (0600): before it is migrated (`version`
    the schema version it had), or before `pager reset` (`reset-<time>`).

    The copy is made under a temporary name and then hard-linked to its final name, so a crash
    never leaves a half-written backup under a real backup name, and an existing backup is
    never overwritten: the next free `<name>.bak-<version>.<n>` is used instead.
    """
    directory = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{path.name}.bak-{version}.", suffix=".partial", dir=directory
        )  # mkstemp creates the file 0600
        os.close(fd)
    except OSError as exc:
        raise StoreUnwritable(path, f"cannot create a backup: {exc.strerror or exc}") from exc
    tmp = Path(tmp_name)
    try:
        dst = sqlite3.connect(tmp, isolation_level=None)
        try:
            # The backup API copies a consistent snapshot through the source connection, so
            # committed pages still in the WAL are included.
            conn.backup(dst)
            # The copy inherits the WAL flag; a rollback-journal copy is one self-contained file.
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
        final = _link_to_unused_name(tmp, directory / f"{path.name}.bak-{version}")
        _fsync_directory(directory)
    except OSError as exc:
        raise StoreUnwritable(path, f"cannot create a backup: {exc.strerror or exc}") from exc
    except sqlite3.Error as exc:
        mapped = translate_error(exc, path) or StoreUnwritable(
            path, f"cannot create a backup: {exc}"
        )
        raise mapped from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return final


def _link_to_unused_name(tmp: Path, base: Path) -> Path:
    numbered = (base.with_name(f"{base.name}.{n}") for n in itertools.count(1))
    for candidate in itertools.chain([base], numbered):
        try:
            os.link(tmp, candidate)
            return candidate
        except FileExistsError:
            continue
        except OSError:
            # No hard links on this file system: a checked rename instead (the adoption lock
            # keeps other Pager processes from naming backups at the same time).
            if os.path.lexists(candidate):
                continue
            os.rename(tmp, candidate)
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def _fsync_directory(directory: Path) -> None:
    """Make the backup's directory entry durable before the upgrade commits."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some file systems cannot fsync a directory
            os.fsync(fd)
    finally:
        os.close(fd)
