"""open_database: creation, inspection, refusal, backup and migration on real SQLite files."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pager.store import (
    CURRENT_SCHEMA_VERSION,
    MIGRATIONS,
    Migration,
    MigrationFailed,
    StoreCorrupt,
    StoreTooNew,
    StoreUnreadable,
    StoreUnwritable,
    checkpoint,
    close_database,
    migrate_to,
    open_database,
    read_schema_version,
    record_broker_start,
    record_broker_stop,
)
from pager.store._database import needs_integrity_check

META_ROWS = [("created_by", "pager 0.1.0"), ("note", "keep me"), ("empty", "")]
RUN_ROWS = [
    ("inst-a", 101, "0.1.0", "2025-01-01T00:00:00Z"),
    ("inst-b", 202, "0.1.0", "2025-01-02T00:00:00Z"),
    ("inst-c", 303, "0.1.1", "2025-01-03T00:00:00Z"),
]

running_as_root = pytest.mark.skipif(
    os.geteuid() == 0, reason="root bypasses file permission checks"
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in the directory with its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(name) for (name,) in rows}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]


def _make_v1(path: Path) -> None:
    """A database as the first release left it, with meta and broker_runs rows."""
    conn = open_database(path, migrations=MIGRATIONS[:1])
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", META_ROWS)
    conn.executemany(
        "INSERT INTO broker_runs (instance_id, pid, version, started_at) VALUES (?, ?, ?, ?)",
        RUN_ROWS,
    )
    close_database(conn)


def _v1_contents(
    conn: sqlite3.Connection,
) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
    meta = conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    runs = conn.execute(
        "SELECT instance_id, pid, version, started_at FROM broker_runs ORDER BY id"
    ).fetchall()
    return meta, runs


def _make_current_with_rows(path: Path, rows: int = 3) -> None:
    conn = open_database(path)
    conn.executemany(
        "INSERT INTO broker_runs (instance_id, pid, version, started_at) VALUES (?, ?, ?, ?)",
        [(f"inst-{i}", i, "0.2.0", f"2025-02-{i % 28 + 1:02d}T00:00:00Z") for i in range(rows)],
    )
    close_database(conn)


def _broken(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE half_done (x INTEGER)")
    raise RuntimeError("step exploded")


def test_open_database_creates_fresh_database(tmp_path: Path) -> None:
    """A missing file becomes a private, WAL-mode database at the current schema version."""
    path = tmp_path / "pager.db"
    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)
        assert conn.isolation_level is None
        assert {"meta", "broker_runs", "events"} <= _tables(conn)
        assert _mode(path) == 0o600
        conn.execute("INSERT INTO meta VALUES ('k', 'v')")
        assert _mode(Path(f"{path}-wal")) == 0o600  # SQLite copies the database's mode
    finally:
        close_database(conn)
    assert not list(tmp_path.glob("*.bak-*"))


def test_open_database_fresh_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """The new file is exactly 0600 even when the umask strips owner bits."""
    path = tmp_path / "pager.db"
    old = os.umask(0o277)
    try:
        close_database(open_database(path))
    finally:
        os.umask(old)
    assert _mode(path) == 0o600


def test_open_database_reopens_current_without_backup(tmp_path: Path) -> None:
    """Reopening a current database keeps its rows and makes no backup."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path, rows=5)
    conn = open_database(path)
    try:
        assert conn.execute("SELECT count(*) FROM broker_runs").fetchone() == (5,)
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
    finally:
        close_database(conn)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pager.db"]


def test_open_database_upgrades_v1_keeping_every_row(tmp_path: Path) -> None:
    """A v1 database is backed up to pager.db.bak-1, then migrated with all rows intact."""
    path = tmp_path / "pager.db"
    _make_v1(path)
    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert _v1_contents(conn) == (sorted(META_ROWS), RUN_ROWS)
        rows = conn.execute("SELECT stopped_at, stop_reason FROM broker_runs").fetchall()
        assert rows == [(None, None)] * len(RUN_ROWS)
        assert "events" in _tables(conn)
    finally:
        close_database(conn)

    backup = tmp_path / "pager.db.bak-1"
    assert _mode(backup) == 0o600
    bak = sqlite3.connect(f"{backup.as_uri()}?mode=ro", uri=True)
    try:
        assert read_schema_version(bak) == 1
        assert bak.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one file
        assert bak.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert _v1_contents(bak) == (sorted(META_ROWS), RUN_ROWS)
        assert "stopped_at" not in _columns(bak, "broker_runs")
    finally:
        bak.close()
    assert not list(tmp_path.glob(".*partial"))


def test_open_database_upgrades_v3_adding_operator_views(tmp_path: Path) -> None:
    """A v3 database (messaging) gains the inbox count index and the purged sessions table
    (v4), keeping its messages; its backup is pager.db.bak-3."""
    path = tmp_path / "pager.db"
    conn = open_database(path, migrations=MIGRATIONS[:3])
    conn.execute("INSERT INTO workspaces VALUES ('/w', 'w-0a1b2c', '/w', 1.0)")
    conn.execute(
        "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
        " created_at, last_seen) VALUES ('agt_a', '/w', 'a', 'a', 1, 'shell', 1.0, 1.0)"
    )
    rows = [
        (f"msg_{n}", "agt_a", "agt_a", "hi", 1.0, state, 1.0)
        for n, state in enumerate(("queued", "dead", "acknowledged"))
    ]
    conn.executemany(
        "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
        " available_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    close_database(conn)

    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert "purged_sessions" in _tables(conn)
        indexes = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "messages_inbox" in indexes
        counted = conn.execute(
            "SELECT state, COUNT(*) FROM messages WHERE"
            " state IN ('queued', 'claimed', 'delivered', 'dead') GROUP BY state"
        ).fetchall()
        assert sorted(counted) == [("dead", 1), ("queued", 1)]
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (3,)
    finally:
        close_database(conn)
    assert (tmp_path / "pager.db.bak-3").exists()


def test_open_database_upgrades_v5_adding_causes(tmp_path: Path) -> None:
    """A v5 database gains each message's and identity's cause (v6, the loop guard names
    chains): every row is kept, with no known cause, and a cause hop stays as it was."""
    path = tmp_path / "pager.db"
    conn = open_database(path, migrations=MIGRATIONS[:5])
    conn.execute("INSERT INTO workspaces VALUES ('/w', 'w-0a1b2c', '/w', 1.0)")
    conn.execute(
        "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
        " created_at, last_seen, cause_hop) VALUES ('agt_a', '/w', 'a', 'a', 1, 'shell', 1.0,"
        " 1.0, 2)"
    )
    conn.execute(
        "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
        " available_at, origin, hop) VALUES ('msg_1', 'agt_a', 'agt_a', 'hi', 1.0, 'queued',"
        " 1.0, 'agent', 2)"
    )
    close_database(conn)

    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert conn.execute("SELECT id, body, hop, cause_id FROM messages").fetchall() == [
            ("msg_1", "hi", 2, None)
        ]
        assert conn.execute("SELECT id, cause_hop, cause_id FROM identities").fetchall() == [
            ("agt_a", 2, None)
        ]
    finally:
        close_database(conn)
    assert (tmp_path / "pager.db.bak-5").exists()


def test_open_database_upgrades_v4_adding_origin_and_hop(tmp_path: Path) -> None:
    """A v4 database gains each message's origin and hop and each identity's cause hop (v5,
    the loop guard): every row is kept, earlier messages count as agents' at hop 0."""
    path = tmp_path / "pager.db"
    conn = open_database(path, migrations=MIGRATIONS[:4])
    conn.execute("INSERT INTO workspaces VALUES ('/w', 'w-0a1b2c', '/w', 1.0)")
    conn.execute(
        "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
        " created_at, last_seen) VALUES ('agt_a', '/w', 'a', 'a', 1, 'shell', 1.0, 1.0)"
    )
    conn.executemany(
        "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
        " available_at) VALUES (?, 'agt_a', 'agt_a', 'hi', 1.0, ?, 1.0)",
        [("msg_1", "queued"), ("msg_2", "acknowledged")],
    )
    close_database(conn)

    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert conn.execute(
            "SELECT id, body, state, origin, hop FROM messages ORDER BY id"
        ).fetchall() == [
            ("msg_1", "hi", "queued", "agent", 0),
            ("msg_2", "hi", "acknowledged", "agent", 0),
        ]
        assert conn.execute("SELECT id, cause_hop FROM identities").fetchall() == [("agt_a", None)]
    finally:
        close_database(conn)
    assert (tmp_path / "pager.db.bak-4").exists()


def test_open_database_upgrade_keeps_an_existing_backup(tmp_path: Path) -> None:
    """An existing pager.db.bak-1 is never overwritten; the new copy goes to .bak-1.1."""
    path = tmp_path / "pager.db"
    _make_v1(path)
    earlier = tmp_path / "pager.db.bak-1"
    earlier.write_bytes(b"an older backup")
    close_database(open_database(path))
    assert earlier.read_bytes() == b"an older backup"
    bak = sqlite3.connect(tmp_path / "pager.db.bak-1.1")
    try:
        assert read_schema_version(bak) == 1
        assert _v1_contents(bak) == (sorted(META_ROWS), RUN_ROWS)
    finally:
        bak.close()


def test_open_database_upgrade_backs_up_rows_still_in_the_wal(tmp_path: Path) -> None:
    """After a crash, committed rows only in pager.db-wal reach both the backup and the upgrade."""
    live = tmp_path / "live"
    live.mkdir()
    _make_v1(live / "pager.db")
    writer = sqlite3.connect(live / "pager.db", isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # keep new commits in the WAL
        writer.execute("INSERT INTO meta VALUES ('late', 'only in the wal')")
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        for name in ("pager.db", "pager.db-wal"):  # what a crash leaves on disk
            shutil.copy2(live / name, crashed / name)
    finally:
        writer.close()

    conn = open_database(crashed / "pager.db")
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'late'").fetchone() == (
            "only in the wal",
        )
    finally:
        close_database(conn)
    bak = sqlite3.connect(crashed / "pager.db.bak-1")
    try:
        assert bak.execute("SELECT value FROM meta WHERE key = 'late'").fetchone() == (
            "only in the wal",
        )
    finally:
        bak.close()


def test_open_database_failed_migration_rolls_back(tmp_path: Path) -> None:
    """A failing step raises MigrationFailed naming it and leaves version and rows as they were."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path, rows=4)
    with contextlib.closing(sqlite3.connect(path)) as raw:
        rows_before = raw.execute("SELECT * FROM broker_runs ORDER BY id").fetchall()
    broken = (*MIGRATIONS, Migration(CURRENT_SCHEMA_VERSION + 1, "broken step", _broken))

    with pytest.raises(MigrationFailed) as info:
        open_database(path, migrations=broken)

    err = info.value
    assert err.version == CURRENT_SCHEMA_VERSION + 1
    assert err.from_version == CURRENT_SCHEMA_VERSION
    assert "broken step" in str(err)
    assert "step exploded" in str(err)
    assert str(path) in str(err)
    assert err.backup == tmp_path / f"pager.db.bak-{CURRENT_SCHEMA_VERSION}"
    assert err.backup.exists()
    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert conn.execute("SELECT * FROM broker_runs ORDER BY id").fetchall() == rows_before
        assert len(rows_before) == 4
        assert "half_done" not in _tables(conn)
    finally:
        close_database(conn)


def test_open_database_failed_upgrade_rolls_back_every_step(tmp_path: Path) -> None:
    """All pending steps share one transaction: a late failure undoes the earlier steps too."""
    path = tmp_path / "pager.db"
    _make_v1(path)
    broken = (*MIGRATIONS, Migration(CURRENT_SCHEMA_VERSION + 1, "broken step", _broken))

    with pytest.raises(
        MigrationFailed, match=rf"migration {CURRENT_SCHEMA_VERSION + 1} \(broken step\)"
    ):
        open_database(path, migrations=broken)

    conn = open_database(path, migrations=MIGRATIONS[:1])
    try:
        assert read_schema_version(conn) == 1
        assert "stopped_at" not in _columns(conn, "broker_runs")
        assert "events" not in _tables(conn)
        assert _v1_contents(conn) == (sorted(META_ROWS), RUN_ROWS)
    finally:
        close_database(conn)


def test_open_database_recovers_from_failed_first_creation(tmp_path: Path) -> None:
    """A file left schema-less by a failed first creation is initialised on the next open."""
    path = tmp_path / "pager.db"
    with pytest.raises(MigrationFailed):
        open_database(path, migrations=(Migration(1, "broken step", _broken),))
    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
        assert "half_done" not in _tables(conn)
    finally:
        close_database(conn)
    assert not list(tmp_path.glob("*.bak-*"))  # version 0 held nothing worth a copy


def test_open_database_refuses_newer_schema_untouched(tmp_path: Path) -> None:
    """A database from a newer Pager raises StoreTooNew and its directory stays identical."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(f"PRAGMA user_version = {CURRENT_SCHEMA_VERSION + 1}")
    raw.close()
    before = _snapshot(tmp_path)
    assert list(before) == ["pager.db"]

    with pytest.raises(StoreTooNew) as info:
        open_database(path)

    assert info.value.found == CURRENT_SCHEMA_VERSION + 1
    assert info.value.supported == CURRENT_SCHEMA_VERSION
    assert "newer Pager" in str(info.value)
    assert "upgrade Pager" in str(info.value)
    assert _snapshot(tmp_path) == before


def test_open_database_reads_newer_version_from_the_wal(tmp_path: Path) -> None:
    """A version bump committed only to pager.db-wal is seen, and both files stay unchanged."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute(f"PRAGMA user_version = {CURRENT_SCHEMA_VERSION + 1}")
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        for name in ("pager.db", "pager.db-wal"):
            shutil.copy2(tmp_path / name, crashed / name)
    finally:
        writer.close()
    before = _snapshot(crashed)

    with pytest.raises(StoreTooNew):
        open_database(crashed / "pager.db")

    after = _snapshot(crashed)
    after.pop("pager.db-shm", None)  # SQLite's rebuildable index of an existing WAL
    assert after == before


def _random_bytes(tmp_path: Path) -> bytes:
    return random.Random(1).randbytes(8192)


def _text(tmp_path: Path) -> bytes:
    return b"this is not a database\n" * 50


def _short_header(tmp_path: Path) -> bytes:
    return b"SQLite format 3\x00" + b"\x00" * 20


def _truncated(tmp_path: Path) -> bytes:
    source = tmp_path / "source" / "pager.db"
    source.parent.mkdir()
    _make_current_with_rows(source, rows=400)
    data = source.read_bytes()
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    "make", [_random_bytes, _text, _short_header, _truncated], ids=lambda f: f.__name__[1:]
)
def test_open_database_refuses_corrupt_file_untouched(
    tmp_path: Path, make: Callable[[Path], bytes]
) -> None:
    """A file that is not a healthy SQLite database raises StoreCorrupt and stays identical."""
    data = make(tmp_path)
    directory = tmp_path / "state"
    directory.mkdir()
    path = directory / "pager.db"
    path.write_bytes(data)
    before = _snapshot(directory)

    with pytest.raises(StoreCorrupt) as info:
        open_database(path)

    assert str(path) in str(info.value)
    assert "move it aside" in str(info.value)
    assert "pager.db.bak-N" in str(info.value)
    assert _snapshot(directory) == before  # same bytes, no -wal/-shm


def test_open_database_refuses_foreign_sqlite_database(tmp_path: Path) -> None:
    """A SQLite database without a Pager schema version is refused, not adopted."""
    path = tmp_path / "pager.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE notes (body TEXT)")
    other.commit()
    other.close()
    before = _snapshot(tmp_path)

    with pytest.raises(StoreCorrupt, match="no Pager schema version"):
        open_database(path)

    assert _snapshot(tmp_path) == before


def test_open_database_initialises_empty_file(tmp_path: Path) -> None:
    """A zero-byte file is SQLite's empty database and is initialised in place."""
    path = tmp_path / "pager.db"
    path.touch(mode=0o600)
    conn = open_database(path)
    try:
        assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION
    finally:
        close_database(conn)


def test_open_database_tightens_loose_mode(tmp_path: Path) -> None:
    """An existing database readable by others is made 0600 again."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path)
    path.chmod(0o644)
    close_database(open_database(path))
    assert _mode(path) == 0o600


def test_open_database_parent_is_a_file_raises_unwritable(tmp_path: Path) -> None:
    """A path below a regular file raises StoreUnwritable naming the path."""
    blocker = tmp_path / "state"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnwritable) as info:
        open_database(blocker / "pager.db")
    assert str(blocker / "pager.db") in str(info.value)
    assert "PAGER_HOME" in str(info.value)
    assert blocker.read_text() == "not a directory"


def test_open_database_missing_directory_raises_unwritable(tmp_path: Path) -> None:
    """A missing state directory is reported, not created."""
    path = tmp_path / "absent" / "pager.db"
    with pytest.raises(StoreUnwritable, match="does not exist"):
        open_database(path)
    assert not path.parent.exists()


def test_open_database_path_is_a_directory_raises_unreadable(tmp_path: Path) -> None:
    """A directory where the database should be is refused."""
    path = tmp_path / "pager.db"
    path.mkdir()
    with pytest.raises(StoreUnreadable, match="not a regular file"):
        open_database(path)


@running_as_root
def test_open_database_unwritable_directory_raises_unwritable(tmp_path: Path) -> None:
    """A read-only state directory raises StoreUnwritable for a new and an existing database."""
    existing = tmp_path / "existing"
    existing.mkdir()
    _make_current_with_rows(existing / "pager.db")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    before = _snapshot(existing)
    existing.chmod(0o500)
    fresh.chmod(0o500)
    try:
        with pytest.raises(StoreUnwritable, match="not writable"):
            open_database(fresh / "pager.db")
        with pytest.raises(StoreUnwritable, match="not writable"):
            open_database(existing / "pager.db")
    finally:
        existing.chmod(0o700)
        fresh.chmod(0o700)
    assert _snapshot(existing) == before


@running_as_root
def test_open_database_unreadable_file_raises_unreadable(tmp_path: Path) -> None:
    """A database this user cannot read raises StoreUnreadable."""
    path = tmp_path / "pager.db"
    _make_current_with_rows(path)
    path.chmod(0o000)
    try:
        with pytest.raises(StoreUnreadable, match="chmod 600"):
            open_database(path)
    finally:
        path.chmod(0o600)


def test_open_database_rejects_gapped_migrations(tmp_path: Path) -> None:
    """Migration versions must run 1..N; a gap is a programming error."""
    gapped = (MIGRATIONS[0], Migration(3, "skips 2", _broken))
    with pytest.raises(ValueError, match="without gaps"):
        open_database(tmp_path / "pager.db", migrations=gapped)
    assert not (tmp_path / "pager.db").exists()


def test_open_database_connection_serves_a_worker_thread(tmp_path: Path) -> None:
    """The connection may be handed to one worker thread (as trio.to_thread does)."""
    conn = open_database(tmp_path / "pager.db")
    results: list[int] = []
    try:
        worker = threading.Thread(target=lambda: results.append(read_schema_version(conn)))
        worker.start()
        worker.join()
    finally:
        close_database(conn)
    assert results == [CURRENT_SCHEMA_VERSION]


def test_migrate_to_steps_forward_only(tmp_path: Path) -> None:
    """migrate_to applies missing steps and refuses downgrades and unknown versions."""
    conn = open_database(tmp_path / "pager.db", migrations=MIGRATIONS[:1])
    try:
        migrate_to(conn, 2)
        assert read_schema_version(conn) == 2
        assert "events" in _tables(conn)
        with pytest.raises(ValueError, match="down"):
            migrate_to(conn, 1)
        with pytest.raises(ValueError, match="unknown schema version"):
            migrate_to(conn, CURRENT_SCHEMA_VERSION + 1)
    finally:
        close_database(conn)


def test_schema_11_counts_the_refusals_the_events_recorded(tmp_path: Path) -> None:
    """The upgrade to counted refusals keeps the snapshot's `refused_sends`: each retained
    `send.refused` event of schema 10 becomes a count of its sender, reason and minute."""
    conn = open_database(tmp_path / "pager.db", migrations=MIGRATIONS[:10])
    try:
        refused = [("2026-01-02T03:04:05.000+00:00", "agt_a", "hop_limit")] * 2 + [
            ("2026-01-02T03:05:00.000+00:00", "agt_a", "hop_limit"),
            ("2026-01-02T03:04:06.000+00:00", "mbx_t", "rate_limited"),
        ]
        for at, sender, reason in refused:
            data = json.dumps({"sender_id": sender, "reason": reason})
            conn.execute(
                "INSERT INTO events (at, type, data) VALUES (?, 'send.refused', ?)", (at, data)
            )
        conn.commit()
        migrate_to(conn, 11)
        rows = conn.execute(
            "SELECT sender_id, reason, minute, count FROM refusals ORDER BY 1, 3"
        ).fetchall()
        minute = 1767323045 // 60  # 2026-01-02T03:04:05Z
        assert rows == [
            ("agt_a", "hop_limit", minute, 2),
            ("agt_a", "hop_limit", minute + 1, 1),
            ("mbx_t", "rate_limited", minute, 1),
        ]
    finally:
        close_database(conn)


def test_checkpoint_truncates_the_wal(tmp_path: Path) -> None:
    """checkpoint copies the WAL into the database and truncates it."""
    path = tmp_path / "pager.db"
    conn = open_database(path)
    try:
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [(f"k{i}", "v") for i in range(50)])
        assert Path(f"{path}-wal").stat().st_size > 0
        result = checkpoint(conn)
        assert not result.busy
        assert result.checkpointed_frames == result.wal_frames
        assert Path(f"{path}-wal").stat().st_size == 0
    finally:
        close_database(conn)


def _runs_then_reopen(path: Path, *, stop: bool) -> sqlite3.Connection:
    """A database whose last broker run stopped cleanly (or not), reopened read-only."""
    conn = open_database(path)
    record_broker_start(conn, instance_id="run-1", pid=1, version="0", started_at="t0")
    if stop:
        record_broker_stop(conn, instance_id="run-1", stopped_at="t1", reason="shutdown")
        checkpoint(conn)
    close_database(conn)
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@pytest.mark.parametrize(
    ("stop", "expected"), [(True, False), (False, True)], ids=["clean-stop", "crashed"]
)
def test_integrity_check_only_when_the_last_run_did_not_stop_cleanly(
    tmp_path: Path, stop: bool, expected: bool
) -> None:
    """After a clean stop opening skips the whole-file check; after a crash it runs it."""
    path = tmp_path / "pager.db"
    ro = _runs_then_reopen(path, stop=stop)
    try:
        current = CURRENT_SCHEMA_VERSION
        assert needs_integrity_check(ro, path, current, current) is expected
        # Before a migration it always runs: the backup must be of a sound file.
        assert needs_integrity_check(ro, path, current - 1, current) is True
    finally:
        ro.close()


def test_integrity_check_when_nothing_says_how_the_last_writer_ended(tmp_path: Path) -> None:
    """No broker run recorded, or WAL frames another writer left: the check runs."""
    path = tmp_path / "pager.db"
    close_database(open_database(path))
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        current = CURRENT_SCHEMA_VERSION
        assert needs_integrity_check(ro, path, current, current) is True
    finally:
        ro.close()
    clean = tmp_path / "clean.db"
    ro = _runs_then_reopen(clean, stop=True)
    try:
        Path(f"{clean}-wal").write_bytes(b"\0" * 32)
        assert needs_integrity_check(ro, clean, current, current) is True
    finally:
        ro.close()
