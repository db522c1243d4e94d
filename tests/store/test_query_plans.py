"""The hot statements on `messages` and `events` stay index walks however much mail piles up
(SQLite): a send's reads, a claim, the inbox and its deadlines, and retention's pruning. Each
is run for real on a traced connection and its plan read with EXPLAIN QUERY PLAN, so a change
of the SQL or of the indexes that makes one scan a table (or sort a whole inbox) fails here
and shows the plan."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pager.domain import ids
from pager.domain.clock import iso
from pager.domain.delivery import ClaimPolicy, Via
from pager.domain.limits import SendLimits
from pager.domain.records import Identity
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace
from pager.store import close_database, open_database
from pager.store import messaging as ms
from tests.statement_counter import statements_on

NOW = 1_800_000_000.0
#: What a flooding sender leaves in its victim's inbox, and the history beside it.
BACKLOG = 300
EARLIER = NOW - 3 * BACKLOG  # before the flood
#: Rates on (the guard counts the hour's sends), high enough for the flood.
RATES = SendLimits(agent_sends_per_hour=10_000, pair_sends_per_hour=10_000)
POLICY = ClaimPolicy(ack_wait=60.0, max_attempts=5, message_expiry=7 * 86400.0)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def _identity(conn: sqlite3.Connection, alias: str) -> str:
    key = "/src/repo"
    ms.ensure_workspace(conn, Workspace(key, "repo-0a1b2c", key), EARLIER)
    agent_id = ids.new_agent_id()
    ms.insert_identity(conn, Identity(agent_id, key, alias, True, "shell", EARLIER, EARLIER), alias)
    return agent_id


@pytest.fixture
def flooded(conn: sqlite3.Connection) -> tuple[str, str]:
    """alice has sent bob BACKLOG messages he has not read, after as many he acknowledged."""
    alice, bob = _identity(conn, "alice"), _identity(conn, "bob")
    for n in range(2 * BACKLOG):
        ms.insert_message(
            conn,
            message_id=ids.new_message_id(),
            sender_id=alice,
            recipient_id=bob,
            body=f"mail {n}",
            thread=None,
            reply_to=None,
            now=NOW - 2 * BACKLOG + n,
        )
    conn.execute(
        "UPDATE messages SET state = 'acknowledged', settled_at = ? WHERE seq <= ?",
        (NOW, BACKLOG),
    )
    return alice, bob


def _plans(conn: sqlite3.Connection, run: Callable[[], object]) -> dict[str, str]:
    """Each statement `run` ran on `messages` or `events`, with its plan."""
    with statements_on(conn) as seen:
        run()
    touching = [
        sql
        for sql in seen
        if sql.lstrip().split()[0].upper() in {"SELECT", "UPDATE", "DELETE"}
        and (" messages " in f"{sql} " or " events " in f"{sql} ")
    ]
    assert touching, seen
    return {
        sql: " | ".join(str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        for sql in touching
    }


def _indexed(plans: dict[str, str]) -> None:
    for sql, plan in plans.items():
        assert "SCAN messages" not in plan, f"{sql}\n{plan}"
        assert "SCAN events" not in plan, f"{sql}\n{plan}"


def test_a_sends_reads_are_index_probes(conn: sqlite3.Connection, flooded: tuple[str, str]) -> None:
    alice, bob = flooded
    plans = _plans(
        conn,
        lambda: (
            ms.origin_and_hop(conn, alice, bob, NOW, RATES),
            ms.inbox_due(conn, bob, NOW, POLICY.message_expiry),
        ),
    )
    _indexed(plans)
    deadlines = next(plan for sql, plan in plans.items() if "MIN(available_at)" in sql)
    # The next retry and the oldest unsettled message: one probe each, not a walk of the inbox.
    assert "INDEX messages_delayed (recipient_id=? AND available_at>?)" in deadlines, deadlines
    assert "INDEX messages_age (recipient_id=?)" in deadlines, deadlines


def test_a_claim_from_a_flooded_inbox_walks_only_its_batch(
    conn: sqlite3.Connection, flooded: tuple[str, str]
) -> None:
    """A sender that floods an inbox makes no claim of it sort the whole backlog: the claim
    walks the queued mail in send order and stops at its batch."""
    _, bob = flooded
    claimed: list[object] = []
    plans = _plans(
        conn,
        lambda: claimed.extend(
            ms.claim_waiting(
                conn,
                recipient_id=bob,
                session_id=None,
                limit=5,
                now=NOW,
                policy=POLICY,
                via=Via.FETCH,
                new_token=lambda: ids.new_token(ids.Kind.CLAIM_TOKEN),
                hash_token=ids.hash_token,
            )
        ),
    )
    assert len(claimed) == 5
    _indexed(plans)
    walk = next(plan for sql, plan in plans.items() if "ORDER BY seq LIMIT" in sql)
    assert "USING INDEX messages_inbox (recipient_id=? AND state=?" in walk, walk
    assert "TEMP B-TREE" not in walk, walk


def test_the_inbox_reads_stay_off_its_history(
    conn: sqlite3.Connection, flooded: tuple[str, str]
) -> None:
    _, bob = flooded
    plans = _plans(
        conn,
        lambda: (
            ms.waiting(conn, bob, limit=20),
            ms.waiting_count(conn, bob),
            ms.inbox_counts(conn, bob),
        ),
    )
    _indexed(plans)
    for sql, plan in plans.items():
        if "COUNT(*)" in sql:  # the counts read the index alone
            assert "COVERING INDEX messages_inbox" in plan, f"{sql}\n{plan}"


def test_pruning_the_event_log_walks_only_what_it_deletes(
    conn: sqlite3.Connection, flooded: tuple[str, str]
) -> None:
    """No index on the events' time (every event would write it): the prune walks the log
    from its oldest event in seq order and stops at the first one it keeps."""
    windows = Windows()
    cutoff = NOW - BACKLOG - 0.5  # the flood's first half is older
    (kept,) = conn.execute("SELECT COUNT(*) FROM events WHERE at > ?", (iso(cutoff),)).fetchone()
    plans = _plans(conn, lambda: ms.prune(conn, cutoff + windows.event_retention, windows))
    prune = next(plan for sql, plan in plans.items() if sql.startswith("DELETE FROM events"))
    assert "SEARCH events USING INTEGER PRIMARY KEY (rowid<?)" in prune, prune
    (old,) = conn.execute("SELECT COUNT(*) FROM events WHERE at <= ?", (iso(cutoff),)).fetchone()
    (left,) = conn.execute("SELECT COUNT(*) FROM events").fetchone()
    assert (old, left) == (0, kept)
