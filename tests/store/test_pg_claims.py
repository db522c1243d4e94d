"""Claims on a PostgreSQL store that several brokers share (SPEC §13): a claim never waits on a
row another broker's transaction holds (`FOR UPDATE SKIP LOCKED`), and a broker whose clock
runs ahead cannot take another broker's claim before its ack wait is over on the database's
clock (pager/store/pg/_dialect.py `not_after_now`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
import trio

from pager.domain.delivery import ClaimPolicy, Via
from pager.store._sql import sql
from pager.store.sql_ports import SqlInbox
from tests.store.test_pg_send_round_trips import pg_messaging

POLICY = ClaimPolicy(ack_wait=60.0, max_attempts=5, message_expiry=86_400.0)
#: How long the row's holder keeps it at most: past this a claim that waited on it fails its
#: `fail_after` (and would have waited this long); well within it, one that skips it is done.
HELD_AT_MOST = 10.0


async def test_a_claim_skips_a_row_another_transaction_holds(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another broker's transaction holds bob's first message (its sweep dead-lettering it,
    say): a claim from this broker takes the second at once instead of waiting for it."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            first = await pg.service.send(alice, to="bob", body="held by another broker")
            second = await pg.service.send(alice, to="bob", body="free to claim")
        holder = psycopg.connect(pg_dsn)
        released = threading.Event()
        try:
            holder.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (first.message_id,))

            def release() -> None:
                holder.rollback()
                released.set()

            # Bounded either way: the holder lets go after HELD_AT_MOST.
            timer = threading.Timer(HELD_AT_MOST, release)
            timer.start()
            inbox = SqlInbox(pg.writer)
            with trio.fail_after(HELD_AT_MOST / 2):
                claimed = await inbox.claim(
                    bob.agent_id,
                    session_id=None,
                    limit=10,
                    via=Via.FETCH,
                    now=time.time(),
                    policy=POLICY,
                )
            assert not released.is_set()
            assert [view.claim.message.id for view in claimed.value] == [second.message_id]
        finally:
            timer.cancel()
            holder.close()


async def test_a_broker_whose_clock_runs_ahead_does_not_take_a_claim_early(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker claims bob's mail (an ack wait of 60 s on the database's clock); another,
    whose clock runs an hour ahead, lapses bob's claims and claims again: nothing lapsed,
    nothing claimed twice."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            sent = await pg.service.send(alice, to="bob", body="being read elsewhere")
            inbox = SqlInbox(pg.writer)
            now = time.time()
            claimed = await inbox.claim(
                bob.agent_id, session_id=None, limit=10, via=Via.FETCH, now=now, policy=POLICY
            )
            assert [view.claim.message.id for view in claimed.value] == [sent.message_id]
            ahead = now + 3600  # the other broker's clock
            lapsed = await inbox.lapse(bob.agent_id, now=ahead, policy=POLICY)
            again = await inbox.claim(
                bob.agent_id, session_id=None, limit=10, via=Via.FETCH, now=ahead, policy=POLICY
            )
            assert (lapsed.value, again.value) == (0, [])
            state = await pg.writer.read(
                lambda conn: conn.execute(
                    sql("SELECT state, attempts FROM messages WHERE id = {}"), (sent.message_id,)
                ).fetchone()
            )
            assert tuple(state) == ("claimed", 1)
