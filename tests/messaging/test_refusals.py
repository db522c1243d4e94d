"""Refused sends are counted, not written one by one (SPEC §12): an agent that keeps sending
past its rate costs the store a row a minute, whatever the number of its refusals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from pager.config import Limits
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from tests.messaging.conftest import open_harness

REFUSALS = 2000


def stored_bytes(database: Path) -> int:
    """`pager.db` and its WAL, once the WAL is checkpointed into the file and truncated (the
    WAL is reused after each checkpoint: what stays is what the file keeps)."""
    with sqlite3.connect(database) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0
    wal = database.with_name(database.name + "-wal")
    return database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def test_2000_refusals_grow_the_store_by_under_100_kb(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """An agent past its pair rate sends on 2,000 times over two minutes: every send is
    refused `rate_limited`, the snapshot counts all 2,000, the operator stream has one
    `send.refused` per minute, and the store grows by under 100 KB (before: an event row each,
    ~450 KB)."""
    limits = Limits(send=SendLimits(pair_sends_per_hour=1, agent_sends_per_hour=0))
    with trio.fail_after(600):
        async with open_harness(tmp_path, limits=limits) as harness:
            _, mallory = await harness.register("mallory")
            await harness.register("bob")
            await harness.service.send(mallory, to="bob", body="the one allowed")
            before = stored_bytes(tmp_path / "pager.db")
            for n in range(REFUSALS):
                if n % 100 == 0:
                    await trio.sleep(6)  # 2,000 refusals over two minutes
                with pytest.raises(PagerError) as refused:
                    await harness.service.send(mallory, to="bob", body=f"again {n}")
                assert refused.value.code is ErrorCode.RATE_LIMITED
            grown = stored_bytes(tmp_path / "pager.db") - before
            assert grown < 100_000, f"{REFUSALS} refusals grew the store by {grown} bytes"
            snapshot = await harness.views.snapshot({}, agents=False)
            assert snapshot.totals.refused_sends == REFUSALS
            events = harness.events_of("send.refused")
            assert 2 <= len(events) <= 3  # one per minute begun
            assert {event["reason"] for event in events} == {"rate_limited"}
            assert {event["sender_id"] for event in events} == {mallory.agent_id}
