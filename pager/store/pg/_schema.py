"""The PostgreSQL schema, as an ordered list of migrations (SPEC §13).

The same tables as the SQLite store (pager/store/_migrations.py; version 3 here is SQLite's
11), so that the store's statements, written in the SQL both engines speak, run on either; plus
what several brokers sharing one database need: the hosts and their heartbeats, and the order
events become visible in. Times are unix seconds (`double precision`, SQLite's REAL) and flags
are integers 0/1 (SQLite has no booleans), exactly as in the SQLite schema.

The version is the `schema_version` row of `meta`. Migration N turns a version N-1 database into
a version N one, all of it in one transaction. Append only: never edit a released migration.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class PgMigration:
    version: int
    description: str
    statements: tuple[str, ...]


#: The advisory lock held from a transaction's first event to its commit ("pagerv" in ASCII).
EVENTS_LOCK = 0x706167657276
#: The advisory lock the broker that sweeps holds (SPEC §13: retention on one broker at a time).
SWEEP_LOCK = 0x706167657273
#: The channel NOTIFYed when events commit.
EVENTS_CHANNEL = "pager_events"
#: The channel of wakes across hosts: "<identity id> <host that changed it>".
WAKE_CHANNEL = "pager_wake"

_V1 = (
    "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
    # Every broker sharing the database (SPEC §13): its name, the run it is on and its last
    # heartbeat, in the database's clock (a host whose heartbeat is old is not alive).
    """
    CREATE TABLE hosts (
        name text PRIMARY KEY,
        instance_id text NOT NULL,
        version text NOT NULL,
        started_at double precision NOT NULL,
        heartbeat_at double precision NOT NULL
    )
    """,
    """
    CREATE TABLE broker_runs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        host text NOT NULL,
        instance_id text NOT NULL UNIQUE,
        pid integer NOT NULL,
        version text NOT NULL,
        started_at text NOT NULL,
        stopped_at text,
        stop_reason text
    )
    """,
    # A sequence never hands a seq out twice, so a stream resumes "after seq N" without
    # repeating an event (reading them in commit order is the event feed's business).
    """
    CREATE TABLE events (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at text NOT NULL,
        type text NOT NULL,
        data text NOT NULL
    )
    """,
    "CREATE INDEX events_at ON events (at)",
    "CREATE INDEX events_send_refused ON events (seq) WHERE type = 'send.refused'",
    # Events become visible in seq order, so a reader that goes on "after seq N" never skips
    # one: a transaction takes this lock before it draws a seq and holds it to its commit (a
    # statement trigger fires before the rows' defaults draw from the sequence), so no later
    # seq can commit while an earlier one is still open.
    f"""
    CREATE FUNCTION pager_events_in_commit_order() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock({EVENTS_LOCK});
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER events_in_commit_order BEFORE INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION pager_events_in_commit_order()
    """,
    # Every broker's event feed LISTENs here: new events, from any host, at their commit (a
    # transaction's notifications are sent once it commits, and one per channel and payload).
    f"""
    CREATE FUNCTION pager_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{EVENTS_CHANNEL}', '');
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION pager_events_notify()
    """,
    # A workspace is a directory on one host: the same path on two machines is two workspaces
    # (its key is the host's name and the path's key: pager/domain/workspace.py `on_host`). A
    # path may have two keys, as on SQLite (a directory that later became a git checkout).
    """
    CREATE TABLE workspaces (
        key text PRIMARY KEY,
        host text NOT NULL DEFAULT '',
        slug text NOT NULL UNIQUE,
        path text NOT NULL,
        created_at double precision NOT NULL
    )
    """,
    """
    CREATE TABLE identities (
        id text PRIMARY KEY,
        workspace_key text NOT NULL REFERENCES workspaces (key),
        alias text NOT NULL,
        alias_key text NOT NULL,
        durable integer NOT NULL,
        implementation text NOT NULL,
        created_at double precision NOT NULL,
        last_seen double precision NOT NULL,
        detached_at double precision,
        archived_at double precision,
        first_archived_at double precision,
        exchanged integer NOT NULL DEFAULT 0,
        cause_hop integer,
        cause_id text,
        next_due double precision
    )
    """,
    "CREATE UNIQUE INDEX identities_alias ON identities (workspace_key, alias_key)",
    "CREATE INDEX identities_next_due ON identities (next_due) WHERE next_due IS NOT NULL",
    """
    CREATE TABLE alias_reservations (
        workspace_key text NOT NULL,
        alias_key text NOT NULL,
        identity_id text NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
        PRIMARY KEY (workspace_key, alias_key)
    )
    """,
    """
    CREATE TABLE conversations (
        implementation text NOT NULL,
        key text NOT NULL,
        identity_id text NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
        PRIMARY KEY (implementation, key)
    )
    """,
    "CREATE INDEX conversations_identity ON conversations (identity_id)",
    # `host`: the broker the session is attached through (it holds the lease and pushes).
    """
    CREATE TABLE sessions (
        id text PRIMARY KEY,
        identity_id text NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
        host text,
        epoch integer NOT NULL,
        token_hash text NOT NULL UNIQUE,
        resume_hash text NOT NULL UNIQUE,
        state text NOT NULL,
        end_reason text,
        conversation_key text,
        delivery text,
        created_at double precision NOT NULL,
        lease_expires_at double precision NOT NULL,
        ended_at double precision
    )
    """,
    "CREATE INDEX sessions_identity ON sessions (identity_id, epoch)",
    "CREATE INDEX sessions_live ON sessions (state) WHERE state = 'attached'",
    # No foreign keys on sender/recipient: history outlives a purged correspondent.
    """
    CREATE TABLE messages (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        sender_id text NOT NULL,
        recipient_id text NOT NULL,
        body text NOT NULL,
        thread text,
        reply_to text,
        sent_at double precision NOT NULL,
        state text NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        available_at double precision NOT NULL,
        dead_reason text,
        settled_at double precision,
        origin text NOT NULL DEFAULT 'agent',
        hop integer NOT NULL DEFAULT 0,
        cause_id text,
        fields text
    )
    """,
    "CREATE INDEX messages_unsettled ON messages (recipient_id, seq)"
    " WHERE state IN ('queued', 'claimed', 'delivered')",
    "CREATE INDEX messages_retry ON messages (recipient_id, available_at) WHERE state = 'queued'",
    "CREATE INDEX messages_age ON messages (recipient_id, sent_at)"
    " WHERE state IN ('queued', 'claimed', 'delivered')",
    "CREATE INDEX messages_by_recipient ON messages (recipient_id, seq)",
    "CREATE INDEX messages_by_sender ON messages (sender_id, seq)",
    "CREATE INDEX messages_inbox ON messages (recipient_id, state)"
    " WHERE state IN ('queued', 'claimed', 'delivered', 'dead')",
    "CREATE INDEX messages_sent_recently ON messages (sender_id, sent_at)",
    """
    CREATE TABLE idempotency (
        sender_id text NOT NULL,
        key text NOT NULL,
        message_id text NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (sender_id, key)
    )
    """,
    """
    CREATE TABLE claims (
        token_hash text PRIMARY KEY,
        message_id text NOT NULL REFERENCES messages (id),
        identity_id text NOT NULL,
        session_id text,
        attempt integer NOT NULL,
        via text NOT NULL,
        claimed_at double precision NOT NULL,
        expires_at double precision NOT NULL,
        state text NOT NULL
    )
    """,
    "CREATE INDEX claims_open ON claims (identity_id, expires_at) WHERE state = 'open'",
    "CREATE INDEX claims_by_message ON claims (message_id, attempt)",
    """
    CREATE TABLE purged_sessions (
        token_hash text PRIMARY KEY,
        session_id text NOT NULL,
        agent_id text NOT NULL,
        purged_at double precision NOT NULL
    )
    """,
    "CREATE INDEX purged_sessions_at ON purged_sessions (purged_at)",
    """
    CREATE TABLE mailbox_tokens (
        id text PRIMARY KEY,
        token_hash text NOT NULL UNIQUE,
        identity_id text NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
        label text NOT NULL,
        created_at double precision NOT NULL,
        last_used_at double precision,
        expires_at double precision,
        revoked_at double precision
    )
    """,
    "CREATE INDEX mailbox_tokens_identity ON mailbox_tokens (identity_id)",
)

# Launch on mail (docs/wake.md), as SQLite's schema 10.
_V2 = (
    """
    CREATE TABLE wake_settings (
        identity_id text PRIMARY KEY REFERENCES identities (id) ON DELETE CASCADE,
        command text,
        max_runs_per_hour integer NOT NULL,
        timeout_s double precision NOT NULL,
        updated_at double precision NOT NULL
    )
    """,
    """
    CREATE TABLE wake_runs (
        id text PRIMARY KEY,
        identity_id text NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
        session_id text NOT NULL,
        host text NOT NULL,
        started_at double precision NOT NULL,
        ended_at double precision,
        outcome text,
        exit_code integer,
        pid integer,
        log text,
        acknowledged integer NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX wake_runs_identity ON wake_runs (identity_id, started_at)",
    "CREATE INDEX wake_runs_session ON wake_runs (session_id)",
    "CREATE INDEX wake_runs_open ON wake_runs (identity_id) WHERE ended_at IS NULL",
)

# Refusals counted per minute and the chain resets' budget, as SQLite's schema 11.
_V3 = (
    """
    CREATE TABLE refusals (
        sender_id text NOT NULL,
        reason text NOT NULL,
        minute bigint NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (sender_id, reason, minute)
    )
    """,
    "CREATE INDEX refusals_minute ON refusals (minute)",
    """
    INSERT INTO refusals (sender_id, reason, minute, count)
    SELECT data::json->>'sender_id', data::json->>'reason',
        floor(extract(epoch FROM at::timestamptz) / 60)::bigint, COUNT(*)
    FROM events WHERE type = 'send.refused' GROUP BY 1, 2, 3
    """,
    "DROP INDEX events_send_refused",
    "ALTER TABLE identities ADD COLUMN chain_resets double precision",
    "ALTER TABLE identities ADD COLUMN chain_resets_at double precision",
)

# A write that decided on facts read before it (a send: pager/store/_guard.py
# `expect_unchanged`) checks them in a statement of its own batch; this fails the
# transaction when they changed (SQLSTATE PGR01, which the writer reports as `StaleFacts`).
_V4 = (
    """
    CREATE FUNCTION pager_expect(ok boolean) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        IF ok IS NOT TRUE THEN
            RAISE EXCEPTION 'what this write decided on changed before it ran'
                USING ERRCODE = 'PGR01';
        END IF;
        RETURN true;
    END
    $$
    """,
)

# Edit reservations, as SQLite's schema 12.
_V5 = (
    """
    CREATE TABLE reservations (
        id text PRIMARY KEY,
        identity_id text NOT NULL,
        workspace_key text NOT NULL,
        scope text NOT NULL,
        pattern text NOT NULL,
        prefix text NOT NULL,
        exclusive integer NOT NULL,
        reason text NOT NULL,
        created_at double precision NOT NULL,
        expires_at double precision NOT NULL,
        ended_at double precision,
        end_reason text
    )
    """,
    "CREATE INDEX reservations_scope ON reservations (scope, prefix) WHERE ended_at IS NULL",
    "CREATE INDEX reservations_identity ON reservations (identity_id) WHERE ended_at IS NULL",
    "CREATE INDEX reservations_ended ON reservations (ended_at)",
)

# Append only. Released migrations are frozen: fix mistakes with a new migration.
PG_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration(1, "the store of schema 9, with the hosts and their heartbeats", _V1),
    PgMigration(2, "launch on mail: settings per identity and wake runs (schema 10)", _V2),
    PgMigration(3, "refusals counted per minute, chain resets budgeted (schema 11)", _V3),
    PgMigration(4, "a write checks the facts it decided on (pager_expect)", _V4),
    PgMigration(5, "edit reservations (schema 12)", _V5),
)

PG_SCHEMA_VERSION: int = PG_MIGRATIONS[-1].version
