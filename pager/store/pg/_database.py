"""Opening a PostgreSQL store (SPEC §13): connect, read the schema version, and upgrade it.

The first broker of a newer version to open the database upgrades it, all migrations in one
transaction under an advisory lock, so brokers starting together upgrade it once; the others
wait for the lock, then find it done. A database written by a newer Pager is refused and left
untouched, as the SQLite store does. Everything here blocks: call it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from pager.config import StoreConfig
from pager.store._errors import (
    StoreBusy,
    StoreConflict,
    StoreDamaged,
    StoreDenied,
    StoreFault,
    StoreFull,
    StoreIOError,
    StoreUnavailable,
)
from pager.store.pg._schema import PG_MIGRATIONS, PgMigration

#: The advisory lock held while a broker reads or upgrades the schema ("pager" in ASCII).
SCHEMA_LOCK = 0x7061676572
#: Seconds a connection attempt may take when the URL does not say (`connect_timeout`).
CONNECT_TIMEOUT = 10
#: How a connection notices a dead server or a cut link instead of waiting on it forever
#: (libpq's TCP settings, unless the URL sets them): a query whose bytes go unacknowledged for
#: 10 s fails, and an idle connection is probed after 5 s and given up after 3 lost probes.
TCP_SETTINGS = {
    "tcp_user_timeout": 10_000,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}
#: How the client lets the server check who it is (libpq's `require_auth`): SCRAM, so the
#: password never crosses in the clear nor as MD5 to a server (or an impostor) that asks for
#: it so; or no password at all (a server that trusts the connection: a client certificate,
#: a unix socket's peer check).
REQUIRE_AUTH = "scram-sha-256,none"
#: The same from the server's side (sent as startup `options`): a broker that vanished (a cut
#: link, a machine gone) has its sessions ended by the server within about 11 s, and with them
#: the locks its open transactions held, instead of after the system's 2-hour default.
SERVER_KEEPALIVES = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
}


class PgStoreError(Exception):
    """The PostgreSQL store cannot be used as asked; `where` names it without a password."""

    def __init__(self, message: str, *, where: str) -> None:
        super().__init__(message)
        self.where = where


class PgUnreachable(PgStoreError, StoreUnavailable):
    """No connection to the database: down, refused, wrong password, TLS refused."""

    def __init__(self, where: str, detail: str) -> None:
        self.detail = detail
        super().__init__(
            f"Pager cannot reach its PostgreSQL store {where} ({detail}); check that the server"
            " runs and that the URL, password file and sslmode in config.toml are right",
            where=where,
        )


def pg_fault(exc: psycopg.Error, where: str) -> StoreFault | None:
    """The fault an error the server answered with is (its connection still usable), by its
    SQLSTATE; None for anything else (a broken connection is `PgUnreachable`, a constraint or
    a bad statement is no fault of the store's)."""
    errors, detail = psycopg.errors, first_line(exc)
    said = f"the PostgreSQL store {where} refused the write ({detail})"
    match exc:
        case errors.DiskFull():
            return StoreFull(f"{said}: its server's disk is full; free space on it, then retry")
        case errors.IoError():
            return StoreIOError(f"{said}: its server failed a read or write; check its disk")
        case errors.LockNotAvailable() | errors.QueryCanceled():
            return StoreBusy(f"{said}: a lock stayed held too long; retry shortly")
        case errors.ReadOnlySqlTransaction():
            return StoreDenied(
                f"{said}: the server accepts no writes (a standby, or read-only); point the URL"
                " in config.toml at the primary"
            )
        case errors.DataCorrupted() | errors.IndexCorrupted():
            return StoreDamaged(f"{said}: its data is damaged; restore it from a backup")
        case errors.InsufficientResources():
            return StoreUnavailable(f"{said}: its server ran out of resources; retry shortly")
        case errors.TransactionRollback():
            return StoreConflict(
                f"{said}: it kept rolling the write back for concurrent ones; retry shortly"
            )
    return None


class PgStoreTooNew(PgStoreError):
    def __init__(self, where: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"the PostgreSQL store {where} has schema version {found}, written by a newer Pager"
            f" than this one (which supports up to version {supported}); upgrade Pager on this"
            " machine (the database was left untouched)",
            where=where,
        )


class PgMigrationFailed(PgStoreError):
    def __init__(self, where: str, version: int, description: str, detail: str) -> None:
        self.version = version
        super().__init__(
            f"upgrading the PostgreSQL store {where} to schema version {version} ({description})"
            f" failed: {detail}; nothing was changed",
            where=where,
        )


def connect(
    store: StoreConfig,
    *,
    application_name: str = "pager",
    server: Mapping[str, str] | None = None,
    timeout: int = CONNECT_TIMEOUT,
) -> psycopg.Connection[Any]:
    """A new connection to the store; PgUnreachable when there is none. In autocommit mode:
    every transaction is an explicit `conn.transaction()` block. `server`: settings of the
    server's session, beside SERVER_KEEPALIVES; `timeout` bounds the attempt and, on the
    connection, a round trip that goes unanswered (unless the URL says otherwise).

    The password comes from `store_password_file` when configured; otherwise libpq reads the
    PostgreSQL password file itself. Errors never quote the password (it is not in the URL)."""
    if store.url is None:
        raise ValueError("connect() needs a postgresql store")
    where = store.url
    settings = {**SERVER_KEEPALIVES, **(server or {})}
    extra: dict[str, Any] = {
        "application_name": application_name,
        "autocommit": True,
        "options": " ".join(f"-c {key}={value}" for key, value in settings.items()),
        "require_auth": REQUIRE_AUTH,
    }
    if "connect_timeout=" not in store.url:
        extra["connect_timeout"] = timeout
    tcp = {**TCP_SETTINGS, "tcp_user_timeout": min(timeout, CONNECT_TIMEOUT) * 1000}
    extra.update({key: value for key, value in tcp.items() if f"{key}=" not in store.url})
    password = store.read_password()
    if password is not None:
        extra["password"] = password
    try:
        return psycopg.connect(store.url, **extra)
    except psycopg.OperationalError as exc:
        raise PgUnreachable(where, first_line(exc)) from None


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The store's schema version; 0 for an empty database."""
    exists = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    if exists is None or not exists[0]:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return 0 if row is None else int(row[0])


def upgrade(
    conn: psycopg.Connection[Any],
    *,
    where: str,
    migrations: Sequence[PgMigration] = PG_MIGRATIONS,
) -> int:
    """Bring the store up to the last of `migrations`, once whichever brokers try together;
    the version it is at after. PgStoreTooNew for a newer store, PgMigrationFailed (all rolled
    back) when a migration fails."""
    supported = migrations[-1].version
    with conn.transaction():
        # Held to the end of the transaction: one broker upgrades, the others wait and then
        # find the version current.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        found = schema_version(conn)
        if found > supported:
            raise PgStoreTooNew(where, found, supported)
        for migration in migrations:
            if migration.version <= found:
                continue
            try:
                with conn.transaction():  # a savepoint: the failure is named, then rolled back
                    for statement in migration.statements:
                        conn.execute(statement.encode())
            except psycopg.Error as exc:
                raise PgMigrationFailed(
                    where, migration.version, migration.description, first_line(exc)
                ) from None
        if supported > found:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(supported),),
            )
    return max(found, supported)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
