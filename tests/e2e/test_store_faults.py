"""A real broker while its store fails under load: on SQLite a full disk and `database is
locked`, on PostgreSQL the server stopped with two brokers on it (tests/fault_load.py makes
the faults, and the load: 4 senders on `/v1/me/send`, 4 receivers long-polling
`/v1/me/claim`, `/health` probed every 50 ms).

The promise, for either fault: the broker process is the same throughout; `/health` answers
every probe (and says `degraded` while the store cannot write); every send is answered 2xx or
`503 unavailable`, never a 500 and never left unanswered; every session keeps its token and
session (no new registration); every send answered 2xx reaches its receiver; and sends succeed
again by themselves once the fault is gone. The faults are held briefly here (a few seconds,
until some sends were refused); scripts/bench_faults.py holds them as long as an operator's
run would and prints the figures."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.e2e.conftest import NO_SEND_LIMITS, postgres_env, start_broker
from tests.fault_load import (
    PROMISED,
    DatabaseLocked,
    Fault,
    FaultRun,
    FullDisk,
    Hold,
    Record,
    StoppedDatabase,
    Unavailable,
    tmpfs,
)
from tests.launch.conftest import PagerHome
from tests.pg_cluster import PgCluster

#: Heavy (8 busy clients and a broker on a 2-core machine): one worker runs them one by one.
pytestmark = pytest.mark.xdist_group("store_faults")

#: A hang guard for the whole run, not a timing check (a passing run takes 10-20 s).
RUN_BOUND_S = 150
#: Sends must succeed again by themselves within this of the fault's end (measured, recorded).
RECOVERY_BOUND_S = 30.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs of this test's own, for the state directory; the test is skipped, saying
    why, where one cannot be mounted (not root, no mount in this sandbox)."""
    try:
        with tmpfs(tmp_path / f"disk-{secrets.token_hex(4)}", "16m") as directory:
            yield directory
    except Unavailable as exc:
        pytest.skip(f"a full disk needs a tmpfs of its own: {exc}")


async def run_under(home: PagerHome, workspace: Path, fault: Fault, hold: Hold) -> Record:
    broker = start_broker(home, workspace, **NO_SEND_LIMITS)
    try:
        run = FaultRun(broker.url, broker.secret, workspace, recovery_bound_s=RECOVERY_BOUND_S)
        with trio.fail_after(RUN_BOUND_S):
            return await run.run(fault, hold)
    finally:
        home.kill_all()


def assert_promises_kept(record: Record) -> None:
    figures = json.dumps(record.summary(), indent=1)  # the whole run, when one fails
    # The fault bit: some sends were refused while it held.
    assert record.sends["503 unavailable"] > 0, figures
    assert record.same_pid, figures  # no exit, no restart
    assert record.probes_unanswered == Counter(), figures  # /health answered every probe
    assert record.health_answered == record.probes, figures
    assert record.degraded_during_fault, figures
    assert set(record.sends) <= PROMISED, figures  # no 500, nothing unanswered
    assert not record.sessions_lost, figures  # the same tokens, the same sessions
    assert not any(
        outcome.endswith(("401 unauthenticated", "403 forbidden"))
        for outcome in record.receiver_answers
    ), figures
    assert record.recovery_s is not None, figures  # sends succeed again by themselves
    assert record.sent, figures
    assert not record.undelivered, figures  # every 2xx reached its receiver


async def test_a_full_disk_answers_unavailable_and_the_broker_carries_on(
    small_disk: Path,
) -> None:
    """The disk under the state directory full for a few seconds (until 20 sends were refused)
    while 4 agents send and 4 long-poll, then freed."""
    home = PagerHome(small_disk / "home")
    record = await run_under(
        home, small_disk.parent / "repo", FullDisk(small_disk), Hold(2.0, 10.0, refusals=20)
    )
    assert_promises_kept(record)


async def test_a_locked_database_answers_unavailable_and_the_broker_carries_on(
    tmp_path: Path,
) -> None:
    """Another process holds `BEGIN IMMEDIATE` on pager.db (a backup, a person's `sqlite3`
    shell) past the broker's busy timeout (until a send was refused), while 4 agents send and
    4 long-poll. A send refused is a promise, not luck: the writes met first wait the busy
    timeout (5 s) and are refused, and from then on, the lock still held, every write is
    refused within a moment, sends too (no write waits the busy timeout again behind another)."""
    home = PagerHome(tmp_path / "home")
    fault = DatabaseLocked(home.root / "pager.db")
    record = await run_under(home, tmp_path / "repo", fault, Hold(1.0, 12.0, refusals=1))
    assert_promises_kept(record)


async def test_a_stopped_postgresql_answers_unavailable_and_both_brokers_carry_on(
    tmp_path: Path, pg_dsn: str, pg_cluster: PgCluster
) -> None:
    """Two brokers (two hosts) on one PostgreSQL database; the server stopped while 4 agents
    send and 4 long-poll on the first (until 20 sends were refused, at most 12 s), then
    started again: the first keeps the promises, and the second stays up and serves again by
    itself."""
    env = {**NO_SEND_LIMITS, **postgres_env(pg_dsn, tmp_path)}
    brokers = []
    for name in ("alpha", "beta"):
        home = PagerHome(tmp_path / name)
        home.root.mkdir(mode=0o700)
        (home.root / "config.toml").write_text(f'[host]\nname = "{name}"\n')
        brokers.append(start_broker(home, tmp_path / f"repo-{name}", **env))
    alpha, beta = brokers
    try:
        beta_pid = beta.home.broker_pids()
        run = FaultRun(alpha.url, alpha.secret, alpha.workspace, recovery_bound_s=RECOVERY_BOUND_S)
        with trio.fail_after(RUN_BOUND_S):
            record = await run.run(StoppedDatabase(pg_cluster), Hold(2.0, 12.0, refusals=20))
            assert_promises_kept(record)
            assert beta.home.broker_pids() == beta_pid
            await beta.register("after")  # the other broker recovered by itself too
    finally:
        for broker in brokers:
            broker.home.kill_all()
