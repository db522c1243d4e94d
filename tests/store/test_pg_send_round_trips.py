"""What one send costs on PostgreSQL, end to end through the service: the round trips to the
server (each one a wait of the link: 40 ms at 20 ms each way), counted on the wire with
libpq's trace of every connection the store opened (one `ReadyForQuery` answers each message
the client waits on), and the statements, counted as they are sent.

A send reads its recipient by address with everything its decision needs (the sender's chain
and rates, the inbox's deadlines) in one lookup, is decided on the broker, then writes in one
message: BEGIN, the locks, a check that what was decided on still holds, the writes, COMMIT.
The other brokers are told of the mail by a NOTIFY inside that transaction."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
import trio

from actors._runtime import ActorRef, start_actor
from actors.directory import DirectoryMessage
from actors.identities import Identities
from actors.identity_delivery import ProviderMessage
from pager.broker.messaging import run_messaging
from pager.broker.providers import never_shown_mail_at_turns
from pager.config import Config, Limits
from pager.domain.api import Caller
from pager.domain.clock import TrioWallClock
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.workspace import Workspace, resolve_workspace
from pager.requests import RegisterRequest
from pager.service import BrokerService
from pager.store._sql import sql
from pager.store.pg import _writer
from pager.store.pg._database import connect, upgrade
from pager.store.pg._schema import WAKE_CHANNEL
from pager.store.pg._writer import PgWriter
from pager.store.pg.backend import PgReadSide, PgWakeups
from pager.store.sql_messaging import messaging_ports
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from tests.messaging.conftest import WINDOWS, FakeInbox
from tests.store.test_pg_schema import pg_store

#: One send to an identity whose session is bound on this broker: the address with the
#: decision's facts (one lookup), then the write in one message.
ROUND_TRIPS_PER_SEND = 2
#: Of which the write's.
WRITE_ROUND_TRIPS = 1
HOST = "h1"


class Wire:
    """Every connection the store opens, traced by libpq while `counting`."""

    def __init__(self) -> None:
        self.connections: list[psycopg.Connection[Any]] = []

    def connect(self, *args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = connect(*args, **kwargs)
        self.connections.append(conn)
        return conn

    @contextlib.contextmanager
    def counting(self, only_with: tuple[str, ...] = ()) -> Iterator[list[str]]:
        """The protocol messages exchanged on every open connection while in the block
        (`only_with`: on the connections whose messages hold one of these texts — the
        broker's own work, such as its first sweep, runs on other connections meanwhile)."""
        seen: list[str] = []
        flags = psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
        with contextlib.ExitStack() as files:
            traces = []
            for conn in self.connections:
                if conn.closed:
                    continue
                trace = files.enter_context(tempfile.TemporaryFile("w+"))
                conn.pgconn.trace(trace.fileno())
                conn.pgconn.set_trace_flags(flags)
                traces.append((conn, trace))
            try:
                yield seen
            finally:
                for conn, trace in traces:
                    conn.pgconn.untrace()
                    trace.seek(0)
                    lines = trace.read().splitlines()
                    if not only_with or any(text in line for line in lines for text in only_with):
                        seen += lines


def round_trips(trace: list[str]) -> int:
    """The waits on the server in a libpq trace: one `ReadyForQuery` ends each."""
    return sum(1 for line in trace if "\tReadyForQuery" in line)


def queries(trace: list[str]) -> list[str]:
    """The statements sent (simple queries split at their separators, and prepared ones)."""
    sent: list[str] = []
    for line in trace:
        fields = line.split("\t")
        if len(fields) > 3 and fields[0] == "F" and fields[2] == "Query":
            sent += [part.strip() for part in fields[3].strip(' "').split("; ")]
        elif len(fields) > 3 and fields[0] == "F" and fields[2] == "Parse":
            sent.append(fields[3].split('"')[3] if fields[3].count('"') >= 4 else fields[3])
    return sent


@attrs.define
class PgHarness:
    service: BrokerService
    wire: Wire
    workspace: Path
    writer: PgWriter  # to read the rows as stored

    async def register(self, name: str) -> Caller:
        request = RegisterRequest(
            workspace=str(self.workspace), implementation="shell", session_name=name
        )
        registered = await self.service.register(request)
        return await self.service.authenticate(str(registered["token"]))


async def _resolve_inline(path: str) -> Workspace:
    return resolve_workspace(path).on_host(HOST)


@contextlib.asynccontextmanager
async def pg_messaging(
    dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    shared: bool = False,
    limits: Limits | None = None,
) -> AsyncIterator[PgHarness]:
    """The messaging subtree on a PostgreSQL store, as one broker (`shared`: its wakes go
    to other brokers, as PgBackend's do)."""
    store = pg_store(dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    wire = Wire()
    monkeypatch.setattr(_writer, "connect", wire.connect)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    writer = PgWriter(store)
    reads = PgReadSide(store)
    wakeups = PgWakeups(HOST)
    wakeups.writer = writer
    config = Config(windows=WINDOWS, limits=limits or Limits())
    # The database's time, as a broker's clock is (pg/backend.py `DatabaseClock`): the store
    # compares claim deadlines on the database's own clock.
    clock = TrioWallClock(start=time.time())
    try:
        async with trio.open_nursery() as nursery:
            inbox_ref: ActorRef[ProviderMessage] = await start_actor(
                nursery, FakeInbox(), name="fake-inbox"
            )

            async def providers(implementation: str) -> ActorRef[ProviderMessage] | None:
                return inbox_ref

            def service(
                directory: ActorRef[DirectoryMessage], identities: Identities
            ) -> BrokerService:
                return BrokerService(
                    directory,
                    identities,
                    config,
                    clock,
                    lookups=SqlLookups(writer),
                    listings=SqlListings(reads),
                    accounts=SqlAccounts(writer),
                    resolve=_resolve_inline,
                    never_shown_mail=never_shown_mail_at_turns(),
                )

            started: BrokerService = await nursery.start(
                partial(
                    run_messaging,
                    ports=lambda: messaging_ports(
                        writer,
                        reads,
                        host=HOST,
                        wakeups=wakeups if shared else None,
                        wake_in_write=wakeups.in_write if shared else None,
                    ),
                    providers=providers,
                    config=config,
                    clock=clock,
                    service=service,
                )
            )
            yield PgHarness(started, wire, workspace, writer)
            nursery.cancel_scope.cancel()
    finally:
        await reads.aclose()
        writer.close()


async def test_a_send_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")
            # The send's read (its recipient, with the sender's facts) and its write: not the
            # sweep the broker may be running on another connection meanwhile.
            with pg.wire.counting(only_with=("r.agent_oldest", "INSERT INTO messages")) as trace:
                sent = await pg.service.send(alice, to="bob", body="hello")
            assert sent.recipient.agent_id == bob.agent_id
            listing = "\n".join(queries(trace))
            assert round_trips(trace) <= ROUND_TRIPS_PER_SEND, listing
            writes = [line for line in trace if "\tQuery\t" in line]
            assert len(writes) == WRITE_ROUND_TRIPS, listing
            assert "BEGIN" in writes[0], listing
            assert "COMMIT" in writes[-1], listing


async def test_the_other_brokers_are_told_at_the_commit(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mail to an identity with no session bound here: the NOTIFY that tells the other
    brokers goes with the send's COMMIT, not in a write of its own after it."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch, shared=True) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.detach(bob)  # nobody bound here: another broker may be
            listener = psycopg.connect(pg_dsn, autocommit=True)
            try:
                listener.execute(f"LISTEN {WAKE_CHANNEL}")
                with pg.wire.counting() as trace:
                    await pg.service.send(alice, to="bob", body="for whoever holds bob")
                heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
            finally:
                listener.close()
            assert heard == [f"{bob.agent_id} {HOST}"]
            writes = [line for line in trace if "\tQuery\t" in line]
            notifying = [line for line in writes if "pg_notify" in line]
            assert len(notifying) == 1, "\n".join(writes)
            assert "COMMIT" in notifying[0], "\n".join(writes)


#: What an agent may write to try to break out of a statement whose values are bound on this
#: side (pg/_batch.py): quotes, a statement separator, comments, backslashes (escapes in a
#: non-standard string), a dollar quote, a placeholder, and characters outside ASCII.
HOSTILE = (
    "x'); DELETE FROM messages; --\n"
    "\\'; DROP TABLE identities; /* $$ $q$ %s %(id)s ? :name E'\\x41' */ ‮ ünïcødé 🎉"
)


async def test_a_hostile_body_is_stored_as_written(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's text goes into statements bound by psycopg on this side: it comes back as
    written, in a thread and a reply_to too, and nothing else changed."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            first = await pg.service.send(alice, to="bob", body="before")
            sent = await pg.service.send(
                alice, to="bob", body=HOSTILE, thread=HOSTILE[:60], reply_to=first.message_id
            )
            rows = await pg.writer.read(
                lambda conn: conn.execute(
                    sql("SELECT id, body, thread, reply_to FROM messages ORDER BY seq")
                ).fetchall()
            )
            assert rows == [
                (first.message_id, "before", None, None),
                (sent.message_id, HOSTILE, HOSTILE[:60], first.message_id),
            ]
            assert (await pg.service.whoami(bob)).alias == "bob"  # identities intact


async def test_concurrent_sends_at_the_rate_edge_never_pass_the_limit(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that fires its sends at once, each to another recipient (so no inbox lock
    orders them), on as many connections: each send is decided on counts read before its
    write, yet no more are accepted than its hourly limit, and the others are refused."""
    limit, recipients = 3, 8
    limits = Limits(send=SendLimits(agent_sends_per_hour=limit, pair_sends_per_hour=0))
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch, limits=limits) as pg:
        with trio.fail_after(60):
            alice = await pg.register("alice")
            for n in range(recipients):
                await pg.register(f"r{n}")
            accepted: list[str] = []
            refused: list[ErrorCode] = []

            async def send(n: int) -> None:
                try:
                    sent = await pg.service.send(alice, to=f"r{n}", body=f"one of many {n}")
                except PagerError as exc:
                    refused.append(exc.code)
                else:
                    accepted.append(sent.message_id)

            async with trio.open_nursery() as nursery:
                for n in range(recipients):
                    nursery.start_soon(send, n)
            stored = await pg.writer.read(
                lambda conn: conn.execute(
                    sql("SELECT COUNT(*) FROM messages WHERE sender_id = {}"), (alice.agent_id,)
                ).fetchone()[0]
            )
            assert (len(accepted), stored) == (limit, limit)
            assert refused == [ErrorCode.RATE_LIMITED] * (recipients - limit)
