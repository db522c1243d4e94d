"""The schema, as an ordered list of migrations.

The schema version lives in `PRAGMA user_version`. Migration N turns a version N-1 database into
a version N one. Never edit a released migration (databases in the field already ran it): add a
new one at the end of `MIGRATIONS`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from pager.store._errors import MigrationFailed, StoreError
from pager.store._transactions import database_path, immediate_transaction, store_errors


def _positive(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"migration versions start at 1, got {value}")


@attrs.frozen
class Migration:
    """One schema step.

    `apply` runs inside the upgrade's single transaction: it must use `conn.execute` only —
    never `executescript`, `commit` or `BEGIN`/`COMMIT`, which would end that transaction and
    make a failed upgrade impossible to roll back.
    """

    version: int = attrs.field(validator=_positive)
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _v1_broker_runs(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """
        CREATE TABLE broker_runs (
            id INTEGER PRIMARY KEY,
            instance_id TEXT NOT NULL UNIQUE,
            pid INTEGER NOT NULL,
            version TEXT NOT NULL,
            started_at TEXT NOT NULL
        )
        """
    )


def _v2_clean_stop_and_events(conn: sqlite3.Connection) -> None:
    # NULL stopped_at on a past run means it did not shut down cleanly.
    conn.execute("ALTER TABLE broker_runs ADD COLUMN stopped_at TEXT")
    conn.execute("ALTER TABLE broker_runs ADD COLUMN stop_reason TEXT")
    # AUTOINCREMENT: a seq is never reused, even after the newest events are deleted, so an
    # operator stream can resume from "after seq N" without skipping or repeating events.
    conn.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX events_at ON events (at)")


def _v3_messaging(conn: sqlite3.Connection) -> None:
    # Times are unix seconds (REAL): the actors compute deadlines from them.
    conn.execute(
        """
        CREATE TABLE workspaces (
            key TEXT PRIMARY KEY,
            slug TEXT NOT NULL UNIQUE,
            path TEXT NOT NULL,
            created_at REAL NOT NULL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE identities (
            id TEXT PRIMARY KEY,
            workspace_key TEXT NOT NULL REFERENCES workspaces (key),
            alias TEXT NOT NULL,
            alias_key TEXT NOT NULL,
            durable INTEGER NOT NULL,
            implementation TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen REAL NOT NULL,
            detached_at REAL,
            archived_at REAL,
            first_archived_at REAL,
            exchanged INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute("CREATE UNIQUE INDEX identities_alias ON identities (workspace_key, alias_key)")
    # Every alias an identity has held stays reserved for it until it is purged (SPEC §7).
    conn.execute(
        """
        CREATE TABLE alias_reservations (
            workspace_key TEXT NOT NULL,
            alias_key TEXT NOT NULL,
            identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
            PRIMARY KEY (workspace_key, alias_key)
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE conversations (
            implementation TEXT NOT NULL,
            key TEXT NOT NULL,
            identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
            PRIMARY KEY (implementation, key)
        )
        """
    )
    # Lookups by identity (the sweeper's "has a conversation", cascading deletes).
    conn.execute("CREATE INDEX conversations_identity ON conversations (identity_id)")
    conn.execute(
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
            epoch INTEGER NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            resume_hash TEXT NOT NULL UNIQUE,
            state TEXT NOT NULL,
            end_reason TEXT,
            conversation_key TEXT,
            delivery TEXT,
            created_at REAL NOT NULL,
            lease_expires_at REAL NOT NULL,
            ended_at REAL
        )
        """
    )
    conn.execute("CREATE INDEX sessions_identity ON sessions (identity_id, epoch)")
    conn.execute("CREATE INDEX sessions_live ON sessions (state) WHERE state = 'attached'")
    # No foreign keys on sender/recipient: history outlives a purged correspondent.
    conn.execute(
        """
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            sender_id TEXT NOT NULL,
            recipient_id TEXT NOT NULL,
            body TEXT NOT NULL,
            thread TEXT,
            reply_to TEXT,
            sent_at REAL NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            available_at REAL NOT NULL,
            dead_reason TEXT,
            settled_at REAL
        )
        """
    )
    # Unsettled mail only: the inbox stays fast however much history piles up.
    conn.execute(
        "CREATE INDEX messages_unsettled ON messages (recipient_id, seq)"
        " WHERE state IN ('queued', 'claimed', 'delivered')"
    )
    # For the inbox timers: the next retry and the oldest unsettled message, without a scan.
    conn.execute(
        "CREATE INDEX messages_retry ON messages (recipient_id, available_at)"
        " WHERE state = 'queued'"
    )
    conn.execute(
        "CREATE INDEX messages_age ON messages (recipient_id, sent_at)"
        " WHERE state IN ('queued', 'claimed', 'delivered')"
    )
    conn.execute("CREATE INDEX messages_by_recipient ON messages (recipient_id, seq)")
    conn.execute("CREATE INDEX messages_by_sender ON messages (sender_id, seq)")
    conn.execute(
        """
        CREATE TABLE idempotency (
            sender_id TEXT NOT NULL,
            key TEXT NOT NULL,
            message_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (sender_id, key)
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE claims (
            token_hash TEXT PRIMARY KEY,
            message_id TEXT NOT NULL REFERENCES messages (id),
            identity_id TEXT NOT NULL,
            session_id TEXT,
            attempt INTEGER NOT NULL,
            via TEXT NOT NULL,
            claimed_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            state TEXT NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX claims_open ON claims (identity_id, expires_at) WHERE state = 'open'"
    )
    conn.execute("CREATE INDEX claims_by_message ON claims (message_id, attempt)")


def _v4_operator_views(conn: sqlite3.Connection) -> None:
    # The snapshot's inbox counts: one covering scan gives every identity's queued, claimed,
    # delivered and dead counts without touching the table (rowid = seq ends each entry, so it
    # also lists one state of one inbox in seq order). Acknowledged mail, the bulk of history,
    # is left out; dead letters are kept forever and need it most.
    conn.execute(
        "CREATE INDEX messages_inbox ON messages (recipient_id, state)"
        " WHERE state IN ('queued', 'claimed', 'delivered', 'dead')"
    )
    # A purge deletes the identity and, by cascade, its sessions; their tokens are kept here so
    # a connector presenting one learns that it `ended` (purged), not that it is unknown.
    conn.execute(
        """
        CREATE TABLE purged_sessions (
            token_hash TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            purged_at REAL NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX purged_sessions_at ON purged_sessions (purged_at)")


def _v5_loop_guard(conn: sqlite3.Connection) -> None:
    # SPEC §8.1: every message's origin and hop (messages sent before are agents' at hop 0),
    # and each identity's cause: the deepest hop of the last batch delivered to it, cleared
    # when its person types a prompt.
    conn.execute("ALTER TABLE messages ADD COLUMN origin TEXT NOT NULL DEFAULT 'agent'")
    conn.execute("ALTER TABLE messages ADD COLUMN hop INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE identities ADD COLUMN cause_hop INTEGER")
    # The send rates count a sender's (and a pair's) sends of the last hour.
    conn.execute("CREATE INDEX messages_sent_recently ON messages (sender_id, sent_at)")
    # The snapshot counts the refused sends: a partial index keeps that off the event log.
    conn.execute("CREATE INDEX events_send_refused ON events (seq) WHERE type = 'send.refused'")


def _v6_named_chains(conn: sqlite3.Connection) -> None:
    # SPEC §8.1 names the chain a `hop_limit` refusal ends: each message keeps the message that
    # caused its send, and each identity the message of its current cause (with its hop), so
    # the chain reads back sender by sender. Messages sent before have no known cause.
    conn.execute("ALTER TABLE messages ADD COLUMN cause_id TEXT")
    conn.execute("ALTER TABLE identities ADD COLUMN cause_id TEXT")


def _v7_mailbox_tokens(conn: sqlite3.Connection) -> None:
    # SPEC §8.2: a mailbox token pages one identity and dies with it; only its hash is kept.
    # A revoked token's row stays (revoked_at), so the pages it sent still name their label.
    conn.execute(
        """
        CREATE TABLE mailbox_tokens (
            id TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
            label TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_used_at REAL,
            expires_at REAL,
            revoked_at REAL
        )
        """
    )
    conn.execute("CREATE INDEX mailbox_tokens_identity ON mailbox_tokens (identity_id)")
    # A page's structured fields (status, exit_code, logs, …) as JSON, beside the body that
    # shows them; NULL for every other message.
    conn.execute("ALTER TABLE messages ADD COLUMN fields TEXT")


def _v8_next_due(conn: sqlite3.Connection) -> None:
    # Identity actors passivate whatever mail waits (ARCHITECTURE.md, Ownership): each
    # identity's next due time (an ack wait ends, a retry comes, a message expires) is kept
    # here, indexed, and one scheduler re-activates identities when they fall due. Filled for
    # mail already waiting with the default expiry (7 days): a broker configured otherwise
    # corrects it when the identity next runs.
    conn.execute("ALTER TABLE identities ADD COLUMN next_due REAL")
    conn.execute(
        "CREATE INDEX identities_next_due ON identities (next_due) WHERE next_due IS NOT NULL"
    )
    conn.execute(
        """
        UPDATE identities SET next_due = (
            SELECT MIN(due) FROM (
                SELECT MIN(expires_at) AS due FROM claims
                WHERE claims.identity_id = identities.id AND state = 'open'
                UNION ALL
                SELECT MIN(available_at) FROM messages
                WHERE recipient_id = identities.id AND state = 'queued'
                AND available_at > CAST(strftime('%s', 'now') AS REAL)
                UNION ALL
                SELECT MIN(sent_at) + 604800.0 FROM messages
                WHERE recipient_id = identities.id AND state IN ('queued', 'claimed', 'delivered')
            )
        )
        """
    )


def _v9_hosts(conn: sqlite3.Connection) -> None:
    # The columns a store shared by several brokers needs (SPEC §13), so that both stores
    # have one schema and one set of statements: '' and NULL on a store of one broker.
    conn.execute("ALTER TABLE workspaces ADD COLUMN host TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE sessions ADD COLUMN host TEXT")


def _v10_wake(conn: sqlite3.Connection) -> None:
    # Launch on mail (docs/wake.md): the person's settings per identity, and each run (its
    # start decides the hourly bound; one without an end was cut short by a killed broker).
    conn.execute(
        """
        CREATE TABLE wake_settings (
            identity_id TEXT PRIMARY KEY REFERENCES identities (id) ON DELETE CASCADE,
            command TEXT,
            max_runs_per_hour INTEGER NOT NULL,
            timeout_s REAL NOT NULL,
            updated_at REAL NOT NULL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE wake_runs (
            id TEXT PRIMARY KEY,
            identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            host TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            outcome TEXT,
            exit_code INTEGER,
            pid INTEGER,
            log TEXT,
            acknowledged INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute("CREATE INDEX wake_runs_identity ON wake_runs (identity_id, started_at)")
    conn.execute("CREATE INDEX wake_runs_session ON wake_runs (session_id)")
    conn.execute("CREATE INDEX wake_runs_open ON wake_runs (identity_id) WHERE ended_at IS NULL")


def _v11_refusals_and_resets(conn: sqlite3.Connection) -> None:
    # Refused sends are counted, not written one by one: one row per (sender, reason, minute)
    # whatever their number, kept as long as events (the snapshot's `refused_sends` sums them).
    conn.execute(
        """
        CREATE TABLE refusals (
            sender_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            minute INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (sender_id, reason, minute)
        )
        """
    )
    conn.execute("CREATE INDEX refusals_minute ON refusals (minute)")
    # The refusals the retained events recorded one by one, counted the new way.
    conn.execute(
        "INSERT INTO refusals (sender_id, reason, minute, count)"
        " SELECT json_extract(data, '$.sender_id'), json_extract(data, '$.reason'),"
        " CAST(strftime('%s', at) AS INTEGER) / 60, COUNT(*) FROM events"
        " WHERE type = 'send.refused' GROUP BY 1, 2, 3"
    )
    conn.execute("DROP INDEX events_send_refused")
    # The typed-prompt report's budget (a token bucket: its level and when it was last
    # counted; NULL: full), so a report the agent forges cannot reset its chain without bound.
    conn.execute("ALTER TABLE identities ADD COLUMN chain_resets REAL")
    conn.execute("ALTER TABLE identities ADD COLUMN chain_resets_at REAL")


def _v12_reservations(conn: sqlite3.Connection) -> None:
    # Edit reservations (docs/reservations.md). `scope` is the workspace's key without its
    # host: what reservations are shared by. No foreign key on the identity: a reservation
    # ends with its identity (archived, reaped, purged: `end_reason` says which) and is kept
    # as history until the sweep prunes it with the events.
    conn.execute(
        """
        CREATE TABLE reservations (
            id TEXT PRIMARY KEY,
            identity_id TEXT NOT NULL,
            workspace_key TEXT NOT NULL,
            scope TEXT NOT NULL,
            pattern TEXT NOT NULL,
            prefix TEXT NOT NULL,
            exclusive INTEGER NOT NULL,
            reason TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            ended_at REAL,
            end_reason TEXT
        )
        """
    )
    # The check every edit hook makes: a scope's reservations that have not ended.
    conn.execute(
        "CREATE INDEX reservations_scope ON reservations (scope, expires_at) WHERE ended_at IS NULL"
    )
    conn.execute(
        "CREATE INDEX reservations_identity ON reservations (identity_id) WHERE ended_at IS NULL"
    )
    conn.execute("CREATE INDEX reservations_ended ON reservations (ended_at)")


def _v13_fewer_pages_per_send(conn: sqlite3.Connection) -> None:
    # Each index a new row enters is one more page the send's commit writes and waits for
    # (one fsync of them all). `messages_inbox` ends each entry with the seq, so it walks one
    # state of one inbox in send order: `messages_unsettled` (recipient_id, seq) over the same
    # mail is not needed. The next retry needs only the mail whose retry is later than its
    # send: new mail is available at once (available_at = sent_at) and stays out of it.
    conn.execute("DROP INDEX messages_unsettled")
    conn.execute("DROP INDEX messages_retry")
    conn.execute(
        "CREATE INDEX messages_delayed ON messages (recipient_id, available_at)"
        " WHERE state = 'queued' AND available_at > sent_at"
    )
    # Every event wrote `events_at` for the prune alone, which walks the log from its oldest
    # event in seq order instead (events are appended in time order).
    conn.execute("DROP INDEX events_at")


# Append only. Released migrations are frozen: fix mistakes with a new migration.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "broker runs", _v1_broker_runs),
    Migration(2, "clean-stop bookkeeping and operator events", _v2_clean_stop_and_events),
    Migration(3, "identities, sessions, messages and claims", _v3_messaging),
    Migration(4, "inbox count index and purged session tokens", _v4_operator_views),
    Migration(5, "message origin and hop, identity cause hop (loop guard)", _v5_loop_guard),
    Migration(6, "the message that caused each send (named chains)", _v6_named_chains),
    Migration(7, "mailbox tokens and page fields", _v7_mailbox_tokens),
    Migration(8, "each identity's next due time (virtual identity actors)", _v8_next_due),
    Migration(9, "each workspace's and session's host (brokers sharing a store)", _v9_hosts),
    Migration(10, "launch on mail: settings per identity and wake runs", _v10_wake),
    Migration(11, "refusals counted per minute, chain resets budgeted", _v11_refusals_and_resets),
    Migration(12, "edit reservations", _v12_reservations),
    Migration(13, "fewer indexes written by each send", _v13_fewer_pages_per_send),
)

CURRENT_SCHEMA_VERSION: int = MIGRATIONS[-1].version


def check_migrations(migrations: Sequence[Migration]) -> None:
    """Raise ValueError unless the versions are exactly 1, 2, …, N."""
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1..N in order without gaps, got {versions}")


def read_schema_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database (`PRAGMA user_version`)."""
    with store_errors(conn):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def migrate_to(
    conn: sqlite3.Connection,
    version: int,
    *,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> None:
    """Apply the missing migrations up to `version` in one transaction.

    A low-level step: `open_database` is the entry point, and it copies the database to
    `<name>.bak-<old version>` first. Raises `MigrationFailed` (database left at its old version)
    and ValueError for a downgrade or an unknown target version.
    """
    apply_migrations(conn, database_path(conn), version, migrations=migrations, backup=None)


def apply_migrations(
    conn: sqlite3.Connection,
    path: Path,
    target: int,
    *,
    migrations: Sequence[Migration],
    backup: Path | None,
) -> None:
    """`migrate_to` with the file's path and its backup named in errors."""
    check_migrations(migrations)
    if not 0 <= target <= len(migrations):
        raise ValueError(f"unknown schema version {target}; known: 0..{len(migrations)}")
    current = read_schema_version(conn)
    if target < current:
        raise ValueError(f"cannot migrate {path} down from version {current} to {target}")
    pending = migrations[current:target]
    if not pending:
        return
    step = pending[0]
    try:
        with store_errors(conn, path), immediate_transaction(conn):
            for step in pending:
                step.apply(conn)
            # Inside the transaction: the version moves if and only if the schema did.
            conn.execute(f"PRAGMA user_version = {int(target)}")
    except StoreError:
        # Unwritable, full or corrupt file: rolled back too, but the fix is the operator's
        # (free space, permissions), not a bug in the step — say that instead.
        raise
    except Exception as exc:
        raise MigrationFailed(
            path,
            version=step.version,
            description=step.description,
            from_version=current,
            detail=f"{type(exc).__name__}: {exc}",
            backup=backup,
        ) from exc
