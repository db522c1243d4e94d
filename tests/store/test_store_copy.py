"""`pager store copy --to URL` (issue 14, item 7): a machine's SQLite store moved whole into a
new PostgreSQL store, on real SQLite files and the tests' own PostgreSQL cluster.

End to end: a real SQLite broker gets identities, sessions and mail in every state; it is
stopped, the store is copied by the command, and a broker on the PostgreSQL store with the same
state directory shows every identity at its address, every message in its state and every event
at its seq; the waiting mail is fetched by its recipient, who re-registers with its conversation
key, and a send to an old address still works. Then the copy itself, row by row (the host's
workspace keys, the kept slugs, the sequences), and every refusal, each leaving the target as
it was."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from pager.config import StoreConfig
from pager.launch.paths import StatePaths
from pager.store import MIGRATIONS, close_database, open_database
from pager.store.copy import TABLES, CopyRefused, copy_to_postgresql, host_key
from pager.store.pg._database import connect, upgrade
from pager.store.pg._schema import PG_SCHEMA_VERSION
from tests.e2e.conftest import Broker, mcp_session, postgres_env, start_broker, structured
from tests.launch.conftest import PagerHome
from tests.ports import refused_port
from tests.store.test_pg_schema import pg_store

HOST = "laptop"
#: The ack wait outlasts the test, so mail claimed before the copy is still claimed after it.
WINDOWS = {"PAGER_WINDOW_ACK_WAIT": "1h"}


def _new_home(tmp_path: Path) -> PagerHome:
    home = PagerHome(tmp_path / "home")
    home.root.mkdir(mode=0o700)
    (home.root / "config.toml").write_text(f'[host]\nname = "{HOST}"\n')
    return home


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _state_files(home: PagerHome) -> set[str]:
    return {path.name for path in home.root.iterdir() if path.name.startswith("pager.db")}


def _pg_rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query.encode()).fetchall()


def _has_schema(dsn: str) -> bool:
    [(found,)] = _pg_rows(dsn, "SELECT to_regclass('meta') IS NOT NULL")
    return bool(found)


async def _fill_sqlite_broker(broker: Broker) -> dict[str, Any]:
    """Identities and mail in every state, through a real broker: read and acknowledged,
    waiting, claimed and not acknowledged, dead (its recipient purged)."""
    alice = await broker.register("alice", conversation_key="conv-alice")
    bob = await broker.register("bob", conversation_key="conv-bob")
    carol = await broker.register("carol")
    dave = await broker.register("dave")
    with trio.fail_after(60):
        async with (
            mcp_session(broker.url, alice["token"]) as a,
            mcp_session(broker.url, bob["token"]) as b,
            mcp_session(broker.url, carol["token"]) as c,
        ):
            await a.call_tool("send", {"to": "bob", "body": "read me"})
            [read] = structured(await b.call_tool("fetch", {}))["claims"]
            structured(await b.call_tool("ack", {"tokens": [read["token"]]}))
            waiting = structured(await a.call_tool("send", {"to": "bob", "body": "waiting"}))
            structured(await a.call_tool("send", {"to": "carol", "body": "claimed"}))
            [claimed] = structured(await c.call_tool("fetch", {}))["claims"]
            structured(await a.call_tool("send", {"to": "dave", "body": "never read"}))
    status, _ = await broker.post(f"/v1/agents/{dave['agent_id']}/purge", {}, token=broker.secret)
    assert status == 200
    return {"bob": bob, "carol": carol, "waiting": waiting, "claimed": claimed}


async def test_a_machines_store_moves_to_postgresql_whole(tmp_path: Path, pg_dsn: str) -> None:
    home = _new_home(tmp_path)
    repo = tmp_path / "repo"
    try:
        sqlite_broker = start_broker(home, repo, **WINDOWS)
        made = await _fill_sqlite_broker(sqlite_broker)
        records = await sqlite_broker.export()
        events = await sqlite_broker.events()
        snapshot = await sqlite_broker.snapshot()
        states = {m["state"] for m in records if m["kind"] == "message"}
        assert states == {"acknowledged", "queued", "claimed", "dead"}
        stopped = home.run("exit")
        assert stopped.returncode == 0, stopped.stderr

        database = home.root / "pager.db"
        digest, files = _digest(database), _state_files(home)
        env = postgres_env(pg_dsn, tmp_path)
        home.env["PGPASSFILE"] = env["PGPASSFILE"]
        copied = home.run("store", "copy", "--to", env["PAGER_STORE"], "--json")
        assert copied.returncode == 0, copied.stderr
        report = json.loads(copied.stdout)
        counts = report["copied"]
        assert counts["identities"] == sum(r["kind"] == "identity" for r in records)
        assert counts["messages"] == sum(r["kind"] == "message" for r in records) == 4
        assert counts["events"] == len(events)
        assert (report["host"], report["to"]) == (HOST, env["PAGER_STORE"])
        # The SQLite store was only read: not a byte changed, no WAL file left beside it.
        assert (_digest(database), _state_files(home)) == (digest, files)

        (home.root / "config.toml").write_text(
            f'store = "{env["PAGER_STORE"]}"\n[host]\nname = "{HOST}"\n'
        )
        pg_broker = start_broker(home, repo)
        assert home.status()["store"]["kind"] == "postgresql"  # type: ignore[index]
        # Every identity at its address, every message in its state, every event at its seq.
        assert await pg_broker.export() == records
        assert (await pg_broker.events())[: len(events)] == events
        after = await pg_broker.snapshot()
        addresses = {a["address"]: a for ws in after["workspaces"] for a in ws["agents"]}
        before = {a["address"] for ws in snapshot["workspaces"] for a in ws["agents"]}
        assert set(addresses) == before
        assert {a["host"] for a in addresses.values()} == {HOST}
        assert [ws["slug"] for ws in after["workspaces"]] == [
            ws["slug"] for ws in snapshot["workspaces"]
        ]

        # bob re-registers with his conversation key: the same identity, and its waiting mail.
        bob = await pg_broker.register("bob", conversation_key="conv-bob")
        assert (bob["agent_id"], bob["address"]) == (
            made["bob"]["agent_id"],
            made["bob"]["address"],
        )
        alice = await pg_broker.register("alice", conversation_key="conv-alice")
        with trio.fail_after(60):
            async with (
                mcp_session(pg_broker.url, bob["token"]) as b,
                mcp_session(pg_broker.url, alice["token"]) as a,
            ):
                [claim] = structured(await b.call_tool("fetch", {}))["claims"]
                assert claim["message"]["id"] == made["waiting"]["message_id"]
                structured(await b.call_tool("ack", {"tokens": [claim["token"]]}))
                # A send to an address people already use still reaches its identity.
                sent = structured(
                    await a.call_tool("send", {"to": made["carol"]["address"], "body": "still?"})
                )
                assert sent["recipient"]["agent_id"] == made["carol"]["agent_id"]
        assert (await pg_broker.message(made["waiting"]["message_id"]))["state"] == "acknowledged"
        claimed = await pg_broker.message(made["claimed"]["message"]["id"])
        assert claimed["state"] == "claimed"
    finally:
        home.kill_all()


# -- the copy itself, row by row -----------------------------------------------------------


def _message(
    seq: int, sender: str, recipient: str, state: str, *, cause: str | None, fields: str | None
) -> tuple[Any, ...]:
    """A message row: seq, id, sender, recipient, body, thread, reply_to, sent_at, state,
    attempts, available_at, dead_reason, settled_at, origin, hop, cause_id, fields."""
    sent = 4.0 + seq
    return (seq, f"m{seq}", sender, recipient, f"body {seq}", "t", cause, sent, state, 1, sent,
            None, None, "agent", seq - 1, cause, fields)  # fmt: skip


def _rows(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """A row or two for every table of the SQLite store at schema 11, columns in order."""
    return {
        "meta": [("port", "4711"), ("note", "kept")],
        "broker_runs": [
            (1, "run1", 10, "0.1", "2026-01-01T00:00", "2026-01-01T01:00", "shutdown"),
            (2, "run2", 11, "0.1", "2026-01-02T00:00", "2026-01-02T01:00", "shutdown"),
        ],
        "workspaces": [(path, "repo-abc123", path, 1.5, "")],
        "identities": [
            ("agt_a", path, "alice", "alice", 1, "shell", 2.0, 3.25, *[None] * 3, 1, *[None] * 5),
            (
                "agt_b",
                path,
                "bob",
                "bob",
                0,
                "claude",
                2.5,
                3.5,
                4.0,
                None,
                None,
                0,
                1,
                "m1",
                9.5,
                19.5,
                6.0,
            ),
        ],
        "alias_reservations": [(path, "alice", "agt_a"), (path, "bobby", "agt_b")],
        "conversations": [("claude", "conv-b", "agt_b")],
        "sessions": [
            ("ses_1", "agt_a", 1, "th1", "rh1", "attached", None, None, None, 2.0, 90.0, None, None)
        ],
        "messages": [
            _message(1, "agt_a", "agt_b", "claimed", cause=None, fields=None),
            _message(2, "agt_b", "agt_a", "queued", cause="m1", fields='{"status": "ok"}'),
        ],
        "idempotency": [("agt_a", "k1", "m1", 5.0)],
        "claims": [("ch1", "m1", "agt_b", "ses_1", 1, "fetch", 5.5, 65.5, "open")],
        "purged_sessions": [("th9", "ses_9", "agt_gone", 1.0)],
        "mailbox_tokens": [("tok_1", "mh1", "agt_a", "ci", 2.0, None, None, None)],
        "wake_settings": [("agt_b", '["-p", "{prompt}"]', 4, 600.0, 3.0)],
        "wake_runs": [
            ("run_1", "agt_b", "ses_1", "", 3.0, 4.0, "exited", 0, 1234, "/logs/w.log", 1)
        ],
        "events": [(seq, f"2026-01-0{seq}T00:00:00", "t", "{}") for seq in range(1, 6)],
        "refusals": [
            ("agt_a", "hop_limit", 29_000_000, 3),
            ("mbx_1", "rate_limited", 29_000_001, 1),
        ],
    }


def _seed(database: Path, *, path: str = "/work/repo") -> None:
    """A current SQLite store with a row in every table, written directly; its newest event
    deleted (AUTOINCREMENT's high-water mark outlives it)."""
    database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = open_database(database)
    try:
        conn.execute("BEGIN")
        for table, values in _rows(path).items():
            marks = ", ".join("?" * len(values[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
        conn.execute("DELETE FROM events WHERE seq = 5")
        conn.execute("COMMIT")
    finally:
        close_database(conn)


def _sqlite_rows(database: Path, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = sqlite3.connect(database)
    try:
        cursor = conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
        return [d[0] for d in cursor.description], cursor.fetchall()
    finally:
        conn.close()


def _expected(table: str, columns: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    """A SQLite row as the copy must write it for HOST."""
    found = dict(zip(columns, row, strict=True))
    for column in ("key", "workspace_key"):
        if column in found and table in ("workspaces", "identities", "alias_reservations"):
            found[column] = host_key(found[column], HOST)
    if table in ("workspaces", "sessions", "broker_runs", "wake_runs"):
        found["host"] = HOST
    if table == "meta" and found["key"] == "port":
        found["key"] = f"port@{HOST}"
    return found


def test_every_row_is_copied_for_the_host_and_the_sequences_go_past_it(
    tmp_path: Path, pg_dsn: str
) -> None:
    paths = StatePaths(tmp_path / "home")
    _seed(paths.database)
    digest = _digest(paths.database)
    store = pg_store(pg_dsn, tmp_path)
    told: list[tuple[str, int, int]] = []
    copied = copy_to_postgresql(
        paths, store, HOST, progress=lambda *report: told.append(report), every=2
    )
    assert list(copied) == [table.name for table in TABLES]
    assert (copied["events"], copied["messages"], copied["meta"]) == (4, 2, 2)
    assert [report for report in told if report[0] == "events"] == [
        ("events", 2, 4),
        ("events", 4, 4),
    ]
    assert {table for table, _, _ in told} == {"events", "identities", "alias_reservations",
                                               "broker_runs", "messages", "meta",
                                               "refusals"}  # fmt: skip
    assert _digest(paths.database) == digest

    with psycopg.connect(pg_dsn) as conn:
        for table in TABLES:
            columns, rows = _sqlite_rows(paths.database, table.name)
            cursor = conn.execute(f"SELECT * FROM {table.name}".encode())
            names = [d.name for d in cursor.description or ()]
            got = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            if table.name == "meta":
                assert {"key": "schema_version", "value": str(PG_SCHEMA_VERSION)} in got
                got = [row for row in got if row["key"] != "schema_version"]
            want = [_expected(table.name, columns, row) for row in rows]
            key = names[0]
            assert sorted(got, key=lambda r: str(r[key])) == sorted(
                want, key=lambda r: str(r[key])
            ), table.name
        # The slug is the stored one, not the one a new workspace of the host would get.
        [(slug, host)] = conn.execute("SELECT slug, host FROM workspaces").fetchall()
        assert (slug, host) == ("repo-abc123", HOST)
        # New rows come after every seq SQLite handed out (event 5 was deleted there).
        [(seq,)] = conn.execute(
            "INSERT INTO events (at, type, data) VALUES ('x', 'y', '{}') RETURNING seq"
        ).fetchall()
        [(message_seq,)] = conn.execute(
            "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
            " available_at) VALUES ('m3', 'a', 'b', 'c', 1, 'queued', 1) RETURNING seq"
        ).fetchall()
        [(run_id,)] = conn.execute(
            "INSERT INTO broker_runs (host, instance_id, pid, version, started_at)"
            " VALUES ('h', 'run3', 1, 'v', 'now') RETURNING id"
        ).fetchall()
    assert (seq, message_seq, run_id) == (6, 3, 3)


def test_the_copy_reads_mail_still_in_the_wal(tmp_path: Path, pg_dsn: str) -> None:
    """A broker killed before its checkpoint leaves commits in the WAL: they are copied too."""
    paths = StatePaths(tmp_path / "home")
    _seed(paths.database)
    writer = sqlite3.connect(paths.database, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO events (at, type, data) VALUES ('late', 't', '{}')")
        assert Path(f"{paths.database}-wal").stat().st_size > 0
        copied = copy_to_postgresql(paths, pg_store(pg_dsn, tmp_path), HOST)
    finally:
        writer.close()
    assert copied["events"] == 5
    assert _pg_rows(pg_dsn, "SELECT max(seq) FROM events") == [(6,)]


def test_a_store_of_an_older_schema_is_refused_untouched(tmp_path: Path, pg_dsn: str) -> None:
    paths = StatePaths(tmp_path / "home")
    paths.root.mkdir(mode=0o700)
    close_database(open_database(paths.database, migrations=MIGRATIONS[:8]))
    digest = _digest(paths.database)
    with pytest.raises(CopyRefused, match=r"start the broker once .*pager start, then pager exit"):
        copy_to_postgresql(paths, pg_store(pg_dsn, tmp_path), HOST)
    assert _digest(paths.database) == digest
    assert not _has_schema(pg_dsn)


def test_one_directory_with_two_workspaces_is_copied(tmp_path: Path, pg_dsn: str) -> None:
    """/work/repo before `git init` and its repository after it: one directory, two keys, two
    workspaces on PostgreSQL as on SQLite."""
    paths = StatePaths(tmp_path / "home")
    _seed(paths.database)
    conn = open_database(paths.database)
    conn.execute(
        "INSERT INTO workspaces VALUES ('/work/repo/.git', 'repo-def456', '/work/repo', 1, '')"
    )
    close_database(conn)
    copied = copy_to_postgresql(paths, pg_store(pg_dsn, tmp_path), HOST)
    assert copied["workspaces"] >= 2


def test_no_sqlite_store_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    paths = StatePaths(tmp_path / "home")
    with pytest.raises(CopyRefused, match="there is no SQLite store to copy"):
        copy_to_postgresql(paths, pg_store(pg_dsn, tmp_path), HOST)


# -- the command's refusals: each leaves the target as it was ------------------------------


def _seeded_home(tmp_path: Path) -> PagerHome:
    home = _new_home(tmp_path)
    _seed(home.root / "pager.db")
    return home


def _password_file(dsn: str, tmp_path: Path) -> tuple[StoreConfig, Path]:
    store = pg_store(dsn, tmp_path)
    assert store.password_file is not None
    return store, store.password_file


def test_the_command_says_what_to_put_in_config_toml(tmp_path: Path, pg_dsn: str) -> None:
    home = _seeded_home(tmp_path)
    store, password_file = _password_file(pg_dsn, tmp_path)
    assert store.url is not None
    done = home.run("store", "copy", "--to", store.url, "--password-file", str(password_file))
    assert done.returncode == 0, done.stderr
    assert "2 identities, 2 messages and 4 events" in done.stdout
    assert f"store = {json.dumps(store.url)}" in done.stdout
    assert f"store_password_file = {json.dumps(str(password_file))}" in done.stdout
    assert f"host '{HOST}'" in done.stdout
    assert "pager start" in done.stdout


def test_a_target_that_is_not_empty_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    home = _seeded_home(tmp_path)
    store, password_file = _password_file(pg_dsn, tmp_path)
    assert store.url is not None
    args = ("store", "copy", "--to", store.url, "--password-file", str(password_file))
    assert home.run(*args).returncode == 0
    counts = "SELECT (SELECT count(*) FROM identities), (SELECT count(*) FROM events)"
    before = _pg_rows(pg_dsn, counts)
    again = home.run(*args)
    assert again.returncode == 1
    assert "is not empty (rows held: " in again.stderr
    assert "copy only into a new database" in again.stderr
    assert _pg_rows(pg_dsn, counts) == before == [(2, 4)]


def test_a_copy_while_the_broker_runs_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    home = _new_home(tmp_path)
    try:
        start_broker(home, tmp_path / "repo")
        store, password_file = _password_file(pg_dsn, tmp_path)
        assert store.url is not None
        done = home.run("store", "copy", "--to", store.url, "--password-file", str(password_file))
        assert done.returncode == 1
        assert "stop the broker first: pager exit" in done.stderr
        assert not _has_schema(pg_dsn)
    finally:
        home.kill_all()


def test_a_url_with_a_password_is_refused_without_quoting_it(tmp_path: Path) -> None:
    home = _seeded_home(tmp_path)
    done = home.run("store", "copy", "--to", "postgresql://pager:hunter2@127.0.0.1:5432/pager")
    assert done.returncode == 1
    assert "--to: the store URL holds a password" in done.stderr
    assert "a file named by --password-file" in done.stderr  # this command's option
    assert "hunter2" not in done.stderr + done.stdout
    not_postgres = home.run("store", "copy", "--to", "sqlite")
    assert not_postgres.returncode == 1
    assert "give the postgresql:// URL" in not_postgres.stderr


def test_an_unreachable_target_is_a_clear_error(tmp_path: Path, pg_dsn: str) -> None:
    home = _seeded_home(tmp_path)
    _, password_file = _password_file(pg_dsn, tmp_path)
    with refused_port() as port:
        url = f"postgresql://pager@127.0.0.1:{port}/pager?connect_timeout=5"
        done = home.run("store", "copy", "--to", url, "--password-file", str(password_file))
    assert done.returncode == 1
    assert "nothing was copied: Pager cannot reach its PostgreSQL store" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_target_of_a_newer_pager_is_refused_untouched(tmp_path: Path, pg_dsn: str) -> None:
    home = _seeded_home(tmp_path)
    store, password_file = _password_file(pg_dsn, tmp_path)
    assert store.url is not None
    with connect(store) as conn:
        upgrade(conn, where=store.url)
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    done = home.run("store", "copy", "--to", store.url, "--password-file", str(password_file))
    assert done.returncode == 1
    assert "has schema version 99, written by a newer Pager" in done.stderr
    assert _pg_rows(pg_dsn, "SELECT key, value FROM meta") == [("schema_version", "99")]
    assert _pg_rows(pg_dsn, "SELECT count(*) FROM identities") == [(0,)]
