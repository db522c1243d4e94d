"""Edit reservations in the store (pager/store/_reservations.py through its port), on SQLite and
on PostgreSQL: all or nothing, one winner of a race, the TTL by the clock given, stale holders
blocking nothing, and archive or purge ending an identity's reservations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.reservations import Pattern, State, normalise
from pager.domain.windows import Windows
from pager.store import _sweep
from pager.store.pg._writer import PgWriter
from pager.store.sql_reservations import StoreReservations
from tests.store.test_ports_contract import (
    BACKENDS,
    NOW,
    Backend,
    backend_of,
    new_identity,
    postgresql_backend,
    postgresql_parts,
    sqlite_backend,
)

GRACE = 90.0


@pytest.fixture(params=BACKENDS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with backend_of(request, tmp_path, sqlite_backend, postgresql_backend) as opened:
        yield opened


HOUR = 3600.0


def _p(*texts: str) -> tuple[Pattern, ...]:
    return tuple(normalise(t) for t in texts)


async def _reserve(
    store: StoreReservations,
    who: str,
    *patterns: str,
    shared: bool = False,
    now: float = NOW,
    ttl: float = HOUR,
) -> list[str]:
    made = await store.reserve(
        who, _p(*patterns), exclusive=not shared, reason="r", ttl=ttl, now=now, grace=GRACE
    )
    return [r.pattern for r in made]


async def _events(db: Backend, kind: str) -> list[dict[str, object]]:
    rows = await db.events.rows_after(0, 1000)
    return [json.loads(row[3]) for row in rows if row[2] == kind]


async def test_reservations_all_or_nothing_names_the_holder(db: Backend) -> None:
    """A conflicting request takes nothing, and says who holds what, since and until when."""
    store = StoreReservations(db.checkpoint)
    alice, bob = await db.identity("alice"), await db.identity("bob")
    await db.attach(alice)
    await db.attach(bob)
    assert await _reserve(store, alice, "src/*.py") == ["src/*.py"]
    with pytest.raises(PagerError) as refused:
        await _reserve(store, bob, "docs/y.md", "src/x.py")
    assert refused.value.code is ErrorCode.CONFLICT
    (conflict,) = refused.value.details["conflicts"]
    assert conflict["holder"].startswith("alice@")
    assert (conflict["wanted"], conflict["pattern"]) == ("src/x.py", "src/*.py")
    assert conflict["since"]
    assert conflict["until"]
    assert "nothing was reserved" in refused.value.message
    listed, _ = await store.listed(bob, everywhere=False, now=NOW)
    assert [r.pattern for r in listed] == ["src/*.py"]  # docs/y.md was not taken
    assert await _reserve(store, bob, "docs/y.md") == ["docs/y.md"]


async def test_reservations_shared_rules(db: Backend) -> None:
    """Shared allows shared, refuses exclusive; an exclusive refuses a shared."""
    store = StoreReservations(db.checkpoint)
    a, b, c = [await db.identity(n) for n in ("a", "b", "c")]
    for who in (a, b, c):
        await db.attach(who)
    await _reserve(store, a, "lib/**", shared=True)
    await _reserve(store, b, "lib/x.py", shared=True)
    with pytest.raises(PagerError):
        await _reserve(store, c, "lib/y.py")
    await _reserve(store, c, "app/**")
    with pytest.raises(PagerError):
        await _reserve(store, a, "app/main.py", shared=True)


async def test_reservations_renew_and_release(db: Backend) -> None:
    """Reserving what one holds renews it (same id); release by pattern or all."""
    store = StoreReservations(db.checkpoint)
    alice = await db.identity("alice")
    first = await store.reserve(
        alice, _p("a", "b"), exclusive=True, reason="", ttl=60, now=NOW, grace=GRACE
    )
    again = await store.reserve(
        alice, _p("a"), exclusive=True, reason="more", ttl=HOUR, now=NOW + 30, grace=GRACE
    )
    assert again[0].id == first[0].id
    assert again[0].expires_at == NOW + 30 + HOUR
    ended, missing = await store.release(alice, _p("a", "zzz"), now=NOW + 31)
    assert [r.pattern for r in ended] == ["a"]
    assert missing == ["zzz"]
    ended, _ = await store.release(alice, None, now=NOW + 32)
    assert [r.pattern for r in ended] == ["b"]
    assert [e["pattern"] for e in await _events(db, "reservation.released")] == ["a", "b"]


async def test_reservations_ttl_ends_by_the_clock_and_the_sweep_records_it(
    db: Backend,
) -> None:
    """Past its TTL a reservation blocks nothing at once (filtered by time); the sweep then
    records its end and `reservation.expired`."""
    store = StoreReservations(db.checkpoint)
    alice, bob = await db.identity("alice"), await db.identity("bob")
    await _reserve(store, alice, "src/**", ttl=60)
    with pytest.raises(PagerError):
        await _reserve(store, bob, "src/x.py", now=NOW + 59)
    assert await _reserve(store, bob, "src/x.py", now=NOW + 60) == ["src/x.py"]
    await db.checkpoint.write(lambda conn: _sweep.prune(conn, NOW + 61, Windows()))
    expired = await _events(db, "reservation.expired")
    assert [e["pattern"] for e in expired] == ["src/**"]


async def test_reservations_stale_holder_blocks_nothing(db: Backend) -> None:
    """A holder with no live session for longer than the grace is shown stale and does not
    block; while its lease holds, it does."""
    store = StoreReservations(db.checkpoint)
    alice, bob = await db.identity("alice"), await db.identity("bob")
    await db.attach(alice)  # leased until NOW + 90
    await _reserve(store, alice, "src/**")
    with pytest.raises(PagerError):
        await _reserve(store, bob, "src/x.py", now=NOW + 90 + GRACE - 1)
    later = NOW + 90 + GRACE + 1
    listed, _ = await store.listed(bob, everywhere=False, now=later)
    assert [r.state(later, GRACE) for r in listed] == [State.STALE]
    assert await _reserve(store, bob, "src/x.py", now=later) == ["src/x.py"]


async def test_reservations_end_when_archived_or_purged(db: Backend) -> None:
    """Archiving or purging an identity ends its reservations in the same transaction."""
    store = StoreReservations(db.checkpoint)
    alice, bob, carol = [await db.identity(n) for n in ("alice", "bob", "carol")]
    await _reserve(store, alice, "a/**")
    await _reserve(store, bob, "b/**")
    await db.checkpoint.write(
        lambda conn: _sweep.archive_identity(conn, alice, now=NOW, at=NOW, reason="operator")
    )
    await db.checkpoint.write(
        lambda conn: _sweep.purge_identity(conn, bob, now=NOW, reason="operator")
    )
    listed, _ = await store.listed(carol, everywhere=True, now=NOW)
    assert listed == []
    whys = sorted(str(e["why"]) for e in await _events(db, "reservation.released"))
    assert whys == ["archived", "purged"]
    assert await _reserve(store, carol, "a/x", "b/y") == ["a/x", "b/y"]


async def test_reservations_break_is_by_id(db: Backend) -> None:
    """Breaking ends one reservation whoever holds it; an unknown or ended id is not found."""
    store = StoreReservations(db.checkpoint)
    alice = await db.identity("alice")
    (made,) = await store.reserve(
        alice, _p("x"), exclusive=True, reason="", ttl=HOUR, now=NOW, grace=GRACE
    )
    broken = await store.break_one(made.id, now=NOW)
    assert broken.end_reason == "broken"
    with pytest.raises(PagerError) as again:
        await store.break_one(made.id, now=NOW)
    assert again.value.code is ErrorCode.NOT_FOUND
    assert [e["id"] for e in await _events(db, "reservation.broken")] == [made.id]


async def test_reservations_race_exactly_one_wins(db: Backend) -> None:
    """Agents racing to reserve overlapping paths: exactly one wins each round."""
    store = StoreReservations(db.checkpoint)
    racers = [await db.identity(f"r{n}") for n in range(4)]
    await _race_rounds(store, store, racers)


async def test_reservations_race_on_two_postgresql_connections(pg_dsn: str, tmp_path: Path) -> None:
    """Two brokers' writers on one database (their own connections, in threads): exactly one
    of the racing reserves wins, every round (the scope's advisory lock)."""
    with postgresql_parts(tmp_path, pg_dsn, inline=True) as (store, seeding, _):
        racers = []
        for n in range(4):
            agent_id, op = new_identity(f"r{n}")
            await seeding.write(op)
            racers.append(agent_id)
        first, second = PgWriter(store), PgWriter(store)
        try:
            await _race_rounds(StoreReservations(first), StoreReservations(second), racers)
        finally:
            first.close()
            second.close()


async def _race_rounds(one: StoreReservations, other: StoreReservations, racers: list[str]) -> None:
    with trio.fail_after(60):
        for round_ in range(8):
            outcomes: list[tuple[str, ErrorCode | None]] = []

            async def race(
                store: StoreReservations,
                who: str,
                pattern: str,
                outcomes: list[tuple[str, ErrorCode | None]] = outcomes,
            ) -> None:
                try:
                    await _reserve(store, who, pattern)
                except PagerError as exc:
                    outcomes.append((who, exc.code))
                else:
                    outcomes.append((who, None))

            async with trio.open_nursery() as nursery:
                for index, who in enumerate(racers):
                    store = one if index % 2 else other
                    # Overlapping, not equal: src/N/** against src/N/x.py.
                    pattern = f"src/{round_}/**" if index % 2 else f"src/{round_}/x.py"
                    nursery.start_soon(race, store, who, pattern)
            won = [who for who, code in outcomes if code is None]
            assert len(won) == 1, outcomes
            assert [code for _, code in outcomes if code is not None] == [ErrorCode.CONFLICT] * (
                len(racers) - 1
            )


async def test_reservations_globs_at_the_top_meet_everything(db: Backend) -> None:
    """A pattern that starts with a glob (no literal prefix) is weighed against every other,
    either way round, and the check finds it."""
    store = StoreReservations(db.checkpoint)
    alice, bob = await db.identity("alice"), await db.identity("bob")
    await _reserve(store, alice, "src/deep/x.py")
    with pytest.raises(PagerError):
        await _reserve(store, bob, "**/x.py")
    await store.release(alice, None, now=NOW)
    await _reserve(store, alice, "**")
    with pytest.raises(PagerError):
        await _reserve(store, bob, "src/deep/y.py")
    held = await store.check(bob, ["docs/a.md"], now=NOW)
    assert [r.pattern for r in held] == ["**"]
