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
import json
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any, TypeVar

import attrs
import psycopg
import pytest
import trio

from actors._runtime import ActorRef, start_actor
from actors.directory import DirectoryMessage
from actors.identities import Identities
from actors.identity_delivery import ProviderMessage
from actors.sweeper import SweeperActor
from pager.broker.messaging import run_messaging
from pager.broker.providers import never_shown_mail_at_turns
from pager.config import Config, Limits
from pager.domain.api import Caller
from pager.domain.clock import TrioWallClock
from pager.domain.delivery import Via, Wake
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.names import parse_address
from pager.domain.read_ahead import KeyRead, ReadAhead
from pager.domain.results import Claims, SendResult
from pager.domain.workspace import Workspace, resolve_workspace
from pager.requests import RegisterRequest
from pager.service import BrokerService
from pager.store._sql import sql
from pager.store.pg import _writer
from pager.store.pg._database import connect, upgrade
from pager.store.pg._schema import WAKE_CHANNEL
from pager.store.pg._writer import PgWriter
from pager.store.pg.backend import PgReadSide, PgWakeups
from pager.store.ports import ClaimFor, Enqueued, NewMessage
from pager.store.sql_messaging import messaging_ports
from pager.store.sql_ports import SqlInbox
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from tests.messaging.conftest import WINDOWS, FakeInbox
from tests.store.test_pg_schema import pg_store
from tests.store.test_ports_contract import POLICY

#: One send to an identity whose session is bound on this broker: the address with the
#: decision's facts (one lookup), then the write in one message.
ROUND_TRIPS_PER_SEND = 2
#: Of which the write's.
WRITE_ROUND_TRIPS = 1
HOST = "h1"
T = TypeVar("T")


class Wire:
    """Every connection the store opens, traced by libpq while `counting` (one opened
    meanwhile too, from its first statement: a send may find its pool's connection busy with
    the broker's own work and open another)."""

    FLAGS = psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE

    def __init__(self) -> None:
        self.connections: list[psycopg.Connection[Any]] = []
        self._traces: list[tuple[psycopg.Connection[Any], IO[str]]] | None = None
        self._lock = threading.Lock()  # connections are opened in worker threads

    def connect(self, *args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = connect(*args, **kwargs)
        with self._lock:
            self.connections.append(conn)
            if self._traces is not None:
                self._trace(conn, self._traces)
        return conn

    def _trace(
        self, conn: psycopg.Connection[Any], traces: list[tuple[psycopg.Connection[Any], IO[str]]]
    ) -> None:
        trace = tempfile.TemporaryFile("w+")  # noqa: SIM115  # closed by `counting`
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(self.FLAGS)
        traces.append((conn, trace))

    @contextlib.contextmanager
    def counting(self, only_with: tuple[str, ...] = ()) -> Iterator[list[str]]:
        """The protocol messages exchanged on every open connection while in the block
        (`only_with`: on the connections whose messages hold one of these texts — the
        broker's own work, such as its first sweep, runs on other connections meanwhile)."""
        seen: list[str] = []
        traces: list[tuple[psycopg.Connection[Any], IO[str]]] = []
        with self._lock:
            for conn in self.connections:
                if not conn.closed:
                    self._trace(conn, traces)
            self._traces = traces
        try:
            yield seen
        finally:
            with self._lock:
                self._traces = None
            for conn, trace in traces:
                with trace:
                    if not conn.closed:
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
    wakeups: PgWakeups  # what another broker's NOTIFY is handed to (nobody LISTENs here)

    async def register(self, name: str) -> Caller:
        request = RegisterRequest(
            workspace=str(self.workspace), implementation="shell", session_name=name
        )
        registered = await self.service.register(request)
        return await self.service.authenticate(str(registered["token"]))


async def _resolve_inline(path: str, *, host: str = HOST) -> Workspace:
    return resolve_workspace(path).on_host(host)


@contextlib.asynccontextmanager
async def pg_messaging(
    dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    shared: bool = False,
    limits: Limits | None = None,
    host: str = HOST,
    wire: Wire | None = None,
) -> AsyncIterator[PgHarness]:
    """The messaging subtree on a PostgreSQL store, as one broker of `host` (`shared`: its
    wakes go to other brokers, as PgBackend's do)."""
    store = pg_store(dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    wire = Wire() if wire is None else wire
    monkeypatch.setattr(_writer, "connect", wire.connect)
    # No sweep: the broker's first one prunes on a pooled connection a send may use next, so
    # its statements would be counted among the send's (its next is minutes away).
    monkeypatch.setattr(SweeperActor, "on_start", _no_first_sweep)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    writer = PgWriter(store)
    reads = PgReadSide(store)
    wakeups = PgWakeups(host)
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
                    resolve=partial(_resolve_inline, host=host),
                    never_shown_mail=never_shown_mail_at_turns(),
                )

            started: BrokerService = await nursery.start(
                partial(
                    run_messaging,
                    ports=lambda: messaging_ports(
                        writer,
                        reads,
                        host=host,
                        wakeups=wakeups if shared else None,
                        wake_in_write=wakeups.in_write if shared else None,
                    ),
                    providers=providers,
                    config=config,
                    clock=clock,
                    service=service,
                )
            )
            yield PgHarness(started, wire, workspace, writer, wakeups)
            nursery.cancel_scope.cancel()
    finally:
        await reads.aclose()
        writer.close()


async def _no_first_sweep(self: SweeperActor) -> None:
    """`SweeperActor.on_start` without the sweep it schedules."""


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


# -- every shape of send ---------------------------------------------------------------------

#: A repeat of an idempotency key within its window is answered the original, and a reuse of
#: the key for another send refused, on the read alone (each true when read): nothing to write.
REPEAT_ROUND_TRIPS = 1
#: A send refused by a rate: the read (the refusal, true when read), then its count, one
#: write that reads nothing back.
RATE_REFUSED_ROUND_TRIPS = 2
#: A send refused by the loop guard: the read (with the chain the refusal names, read with
#: the address once the sender's next send may pass the limit), then the count.
HOP_REFUSED_ROUND_TRIPS = 2
#: A send to an address that names no one: the read, which says why (the workspace, the
#: alias's former holder) in the same statement; nothing to write.
UNNAMED_ROUND_TRIPS = 1
#: What the send's own connections send: its read, a hop refusal's chain (the in-write
#: path), its write, a refusal's count (not the broker's sweep, on other connections
#: meanwhile).
SEND_TEXTS = ("r.agent_oldest", "WITH RECURSIVE", "pager_expect", "INSERT INTO refusals")


async def _counted(
    pg: PgHarness, send: Callable[[], Awaitable[T]]
) -> tuple[T | PagerError, int, str]:
    """`send()`'s answer (or the PagerError it raised), the round trips it cost, and the
    statements it sent."""
    with pg.wire.counting(only_with=SEND_TEXTS) as trace:
        try:
            answer: T | PagerError = await send()
        except PagerError as exc:
            answer = exc
    return answer, round_trips(trace), "\n".join(queries(trace))


async def test_a_send_with_an_idempotency_key_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new key: read with the address, inserted in the one write. Its repeat is answered
    the original, and its reuse for another body refused, each in one."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")

            def keyed(body: str) -> Callable[[], Awaitable[SendResult]]:
                return lambda: pg.service.send(alice, to="bob", body=body, idempotency_key="k1")

            sent, trips, listing = await _counted(pg, keyed("once"))
            assert isinstance(sent, SendResult)
            assert not sent.duplicate
            assert trips <= ROUND_TRIPS_PER_SEND, listing
            again, trips, listing = await _counted(pg, keyed("once"))
            assert isinstance(again, SendResult)
            assert (again.duplicate, again.message_id) == (True, sent.message_id)
            assert trips <= REPEAT_ROUND_TRIPS, listing
            reused, trips, listing = await _counted(pg, keyed("another body"))
            assert isinstance(reused, PagerError)
            assert (reused.code, reused.details["message_id"]) == (
                ErrorCode.CONFLICT,
                sent.message_id,
            )
            assert trips <= REPEAT_ROUND_TRIPS, listing


async def test_a_reply_in_a_thread_by_agent_id_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            first = await pg.service.send(alice, to="bob", body="a question", thread="t1")
            replied, trips, listing = await _counted(
                pg,
                lambda: pg.service.send(
                    bob, to=alice.agent_id, body="an answer", thread="t1",
                    reply_to=first.message_id,
                ),
            )  # fmt: skip
            assert isinstance(replied, SendResult)
            assert trips <= ROUND_TRIPS_PER_SEND, listing


class _ClaimsWatched:
    """`SqlInbox.claim` wrapped: `done` is set once a claim (a fetch's) has committed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.done = trio.Event()
        real = SqlInbox.claim

        async def claim(inbox: SqlInbox, *args: Any, **kwargs: Any) -> Any:
            try:
                return await real(inbox, *args, **kwargs)
            finally:
                self.done.set()

        monkeypatch.setattr(SqlInbox, "claim", claim)


async def test_a_send_to_a_waiting_reader_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob long-polls an empty inbox; alice's send claims its message for him in its one
    write (the read said no other mail waits; the write checks it still holds)."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")
            await pg.service.fetch(bob)  # taken: the inbox holds no claimable mail
            claims = _ClaimsWatched(monkeypatch)
            polled: list[Claims] = []

            async def long_poll() -> None:
                polled.append(await pg.service.fetch(bob, limit=10, wait_s=20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                await claims.done.wait()  # its first claim found nothing: it waits now
                sent, trips, listing = await _counted(
                    pg, lambda: pg.service.send(alice, to="bob", body="for the reader")
                )
            assert isinstance(sent, SendResult)
            assert sent.wake is Wake.DELIVERED
            assert [claim.message.id for claim in polled[0].claims] == [sent.message_id]
            assert trips <= ROUND_TRIPS_PER_SEND, listing


async def test_a_send_refused_by_a_rate_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = Limits(send=SendLimits(pair_sends_per_hour=1))
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch, limits=limits) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the one allowed")
            refused, trips, listing = await _counted(
                pg, lambda: pg.service.send(alice, to="bob", body="one too many")
            )
            assert isinstance(refused, PagerError)
            assert refused.code is ErrorCode.RATE_LIMITED
            assert trips <= RATE_REFUSED_ROUND_TRIPS, listing
            assert await _refusals_counted(pg) == 1


async def test_a_send_refused_by_the_loop_guard_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = Limits(send=SendLimits(max_hops=1))
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch, limits=limits) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="hop 1")
            await pg.service.fetch(bob)  # bob's next send is hop 2
            refused, trips, listing = await _counted(
                pg, lambda: pg.service.send(bob, to="alice", body="hop 2")
            )
            assert isinstance(refused, PagerError)
            assert refused.code is ErrorCode.HOP_LIMIT
            assert "alice@repo-" in str(refused)
            assert "bob@repo-" in str(refused)
            assert trips <= HOP_REFUSED_ROUND_TRIPS, listing
            assert await _refusals_counted(pg) == 1


async def test_a_longer_chain_refused_is_named_first_to_last_in_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain read with the address names its senders first to last, then the sender
    and the recipient, as the refusal decided inside the write names them."""
    limits = Limits(send=SendLimits(max_hops=2))
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch, limits=limits) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="hop 1")
            await pg.service.fetch(bob)
            await pg.service.send(bob, to="alice", body="hop 2")
            await pg.service.fetch(alice)
            refused, trips, listing = await _counted(
                pg, lambda: pg.service.send(alice, to="bob", body="hop 3")
            )
            assert isinstance(refused, PagerError)
            assert refused.code is ErrorCode.HOP_LIMIT
            chain = refused.details["chain"]
            assert [name.split("@")[0] for name in chain] == ["alice", "bob", "alice", "bob"]
            assert chain[2].endswith(" (you)")
            assert trips <= HOP_REFUSED_ROUND_TRIPS, listing


async def test_a_send_to_an_address_that_names_no_one_costs_one_round_trip(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unknown, renamed, in a workspace nobody knows: each refusal says what it said, read
    with the address in one statement."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")
            await pg.writer.write(
                lambda conn: conn.execute(
                    sql(
                        "UPDATE identities SET alias = 'robert', alias_key = 'robert' WHERE id = {}"
                    ),
                    (bob.agent_id,),
                )
            )
            cases = {
                "nobody": (ErrorCode.UNKNOWN_RECIPIENT, "no agent 'nobody'"),
                "nobody@nowhere-abc123": (
                    ErrorCode.UNKNOWN_RECIPIENT,
                    "no agent 'nobody@nowhere-abc123' (no workspace 'nowhere-abc123' is known)",
                ),
                "agt_edq58ermsq3w3hg3": (ErrorCode.UNKNOWN_RECIPIENT, "no agent 'agt_edq58erm"),
                "bob": (ErrorCode.RECIPIENT_ALIAS_CHANGED, "'bob' is now robert@"),
            }
            for to, (code, said) in cases.items():
                refused, trips, listing = await _counted(
                    pg, partial(pg.service.send, alice, to=to, body="anyone?")
                )
                assert isinstance(refused, PagerError), to
                assert refused.code is code, to
                assert str(refused).startswith(said), (to, str(refused))
                assert trips <= UNNAMED_ROUND_TRIPS, listing


async def _refusals_counted(pg: PgHarness) -> int:
    total: int = await pg.writer.read(
        lambda conn: conn.execute(sql("SELECT COALESCE(SUM(count), 0) FROM refusals")).fetchone()[0]
    )
    return total


# -- the same facts decided on by two brokers at once ----------------------------------------


@contextlib.contextmanager
def other_broker(dsn: str, tmp_path: Path) -> Iterator[tuple[SqlLookups, SqlInbox]]:
    """Another broker's lookups and inbox on the same database: connections of its own."""
    writer = PgWriter(pg_store(dsn, tmp_path))
    try:
        yield SqlLookups(writer), SqlInbox(writer)
    finally:
        writer.close()


@pytest.mark.parametrize(("first", "second"), [("once", "once"), ("once", "another body")])
async def test_two_sends_with_one_key_at_once_make_one_message(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str, second: str
) -> None:
    """An agent sends twice with one key through two brokers at once: both read the key as
    new before either writes. One message is made; the other send is answered it (the same
    body) or refused (another body), never a second message."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with (
            trio.fail_after(30),
            other_broker(pg_dsn, tmp_path) as a,
            other_broker(pg_dsn, tmp_path) as b,
        ):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            now = time.time()
            reads = [
                await lookups.resolve_to_send(
                    alice.agent_id, parse_address("bob"), "bob", now=now, idempotency_key="k"
                )
                for lookups, _ in (a, b)
            ]
            assert [ahead is not None and ahead.key for _, ahead in reads] == [
                KeyRead("", None, None, None)
            ] * 2
            answers: list[Enqueued | PagerError] = []

            async def send(inbox: SqlInbox, body: str, ahead: ReadAhead | None) -> None:
                message = NewMessage(alice.agent_id, body, None, None, "k", ahead=ahead)
                try:
                    changed = await inbox.enqueue(
                        bob.agent_id, message, now=now, idempotent_since=now - 600,
                        limits=SendLimits(), policy=POLICY,
                    )  # fmt: skip
                except PagerError as exc:
                    answers.append(exc)
                else:
                    answers.append(changed.value)

            async with trio.open_nursery() as nursery:
                for (_, inbox), body, (_, ahead) in zip(
                    (a, b), (first, second), reads, strict=True
                ):
                    nursery.start_soon(send, inbox, body, ahead)
            stored = await _rows(pg, "SELECT id FROM messages WHERE sender_id = {}", alice)
            assert len(stored) == 1
            made = [x for x in answers if isinstance(x, Enqueued) and not x.duplicate]
            assert [x.message.id for x in made] == [stored[0][0]]
            [other] = [x for x in answers if x not in made]
            if first == second:
                assert isinstance(other, Enqueued)
                assert (other.duplicate, other.message.id) == (True, stored[0][0])
            else:
                assert isinstance(other, PagerError)
                assert other.code is ErrorCode.CONFLICT


async def test_mail_another_broker_queues_between_the_read_and_the_write_is_claimed_first(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's send read bob's inbox empty, so its write would claim its own message alone
    for bob's waiting reader; carol's message, queued through another broker since, is older:
    the write sees that under the inbox lock and claims both, in send order, each once."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with (
            trio.fail_after(30),
            other_broker(pg_dsn, tmp_path) as a,
            other_broker(pg_dsn, tmp_path) as b,
        ):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            carol = await pg.register("carol")
            now = time.time()
            lookups, inbox = a
            _, ahead = await lookups.resolve_to_send(
                alice.agent_id, parse_address("bob"), "bob", now=now
            )
            assert ahead is not None
            assert not ahead.mail_waiting
            await b[1].enqueue(
                bob.agent_id, NewMessage(carol.agent_id, "from carol", None, None, None),
                now=now, idempotent_since=now - 600, limits=SendLimits(), policy=POLICY,
            )  # fmt: skip
            changed = await inbox.enqueue(
                bob.agent_id, NewMessage(alice.agent_id, "from alice", None, None, None,
                                         ahead=ahead),
                now=now + 0.001, idempotent_since=now - 600, limits=SendLimits(),
                policy=POLICY, claim_for=ClaimFor(None, 10, Via.FETCH),
            )  # fmt: skip
            claimed = [view.claim.message.body for view in changed.value.claims]
            assert claimed == ["from carol", "from alice"]
            assert await _claims_per_message(pg, bob) == [1, 1]


async def test_a_send_claimed_for_a_reader_while_another_broker_claims_is_claimed_once(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round after round, one broker's send claims for bob's waiting reader while another
    broker sends bob mail and claims his inbox, at once: every message is claimed exactly
    once."""
    rounds = 6
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with (
            trio.fail_after(60),
            other_broker(pg_dsn, tmp_path) as a,
            other_broker(pg_dsn, tmp_path) as b,
        ):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            carol = await pg.register("carol")
            taken: list[str] = []

            async def send_for_reader(n: int) -> None:
                now = time.time()
                _, ahead = await a[0].resolve_to_send(
                    alice.agent_id, parse_address("bob"), "bob", now=now
                )
                changed = await a[1].enqueue(
                    bob.agent_id, NewMessage(alice.agent_id, f"a{n}", None, None, None,
                                             ahead=ahead),
                    now=now, idempotent_since=now - 600, limits=SendLimits(), policy=POLICY,
                    claim_for=ClaimFor(None, 10, Via.FETCH),
                )  # fmt: skip
                taken.extend(view.claim.message.id for view in changed.value.claims)

            async def send_and_claim(n: int) -> None:
                now = time.time()
                await b[1].enqueue(
                    bob.agent_id, NewMessage(carol.agent_id, f"c{n}", None, None, None),
                    now=now, idempotent_since=now - 600, limits=SendLimits(), policy=POLICY,
                )  # fmt: skip
                changed = await b[1].claim(
                    bob.agent_id, session_id=None, limit=10, via=Via.FETCH, now=time.time(),
                    policy=POLICY,
                )  # fmt: skip
                taken.extend(view.claim.message.id for view in changed.value)

            for n in range(rounds):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send_for_reader, n)
                    nursery.start_soon(send_and_claim, n)
            sent = await _rows(pg, "SELECT id FROM messages WHERE recipient_id = {}", bob)
            assert len(sent) == 2 * rounds
            assert sorted(taken) == sorted(row[0] for row in sent)  # each once, by someone
            assert await _claims_per_message(pg, bob) == [1] * (2 * rounds)


async def _rows(pg: PgHarness, template: str, who: Caller) -> list[Any]:
    rows: list[Any] = await pg.writer.read(
        lambda conn: conn.execute(sql(template), (who.agent_id,)).fetchall()
    )
    return rows


async def _claims_per_message(pg: PgHarness, who: Caller) -> list[int]:
    rows = await _rows(
        pg,
        "SELECT COUNT(*) FROM claims WHERE identity_id = {} GROUP BY message_id ORDER BY 1",
        who,
    )
    return [int(row[0]) for row in rows]


#: The first send to the person in a workspace: the read (which finds no identity for their
#: name there), then one write that makes their identity and queues the message.
FIRST_TO_PERSON_ROUND_TRIPS = 2


async def test_the_first_send_to_the_person_in_a_workspace_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")
            person = pg.service._person_alias()
            with pg.wire.counting() as trace:
                sent = await pg.service.send(alice, to=person, body="for the person")
            listing = "\n".join(queries(trace))
            assert sent.recipient.address.startswith(f"{person}@")
            rows = await _rows(
                pg, "SELECT id FROM identities WHERE implementation = 'human'"
                " AND workspace_key = (SELECT workspace_key FROM identities WHERE id = {})",
                bob,
            )  # fmt: skip
            assert [row[0] for row in rows] == [sent.recipient.agent_id]
            assert round_trips(trace) <= FIRST_TO_PERSON_ROUND_TRIPS, listing


async def test_two_brokers_making_the_persons_first_sends_at_once_make_one_identity(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice sends to the person through two brokers at once, each read finding no identity
    of theirs in the workspace before either write: one write makes it; the other finds it
    made (its write fails, nothing of it stays) and its send goes to that identity. One
    identity, both messages in its inbox."""
    both_read = trio.Event()
    read: list[str] = []
    real = SqlLookups.resolve_to_send

    async def resolve_to_send(lookups: SqlLookups, *args: Any, **kwargs: Any) -> Any:
        found = await real(lookups, *args, **kwargs)
        read.append("made" if found[1] is not None and found[1].makes is not None else "found")
        if len(read) == 2:
            both_read.set()
        await both_read.wait()  # neither writes before both have read
        return found

    monkeypatch.setattr(SqlLookups, "resolve_to_send", resolve_to_send)
    other_home = tmp_path / "other"
    other_home.mkdir()
    async with (
        pg_messaging(pg_dsn, tmp_path, monkeypatch) as a,
        pg_messaging(pg_dsn, other_home, monkeypatch) as b,
    ):
        with trio.fail_after(30):
            alice = await a.register("alice")
            person = a.service._person_alias()
            sent: list[SendResult] = []

            async def send(pg: PgHarness, body: str) -> None:
                sent.append(await pg.service.send(alice, to=person, body=body))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, a, "through a")
                nursery.start_soon(send, b, "through b")
            assert read[:2] == ["made", "made"]  # both read before either wrote
            people = await _rows(
                a, "SELECT id FROM identities WHERE implementation = 'human'"
                " AND workspace_key = (SELECT workspace_key FROM identities WHERE id = {})",
                alice,
            )  # fmt: skip
            assert len(people) == 1
            assert {result.recipient.agent_id for result in sent} == {people[0][0]}
            me = await a.service.person(str(a.workspace))
            assert me.agent_id == people[0][0]
            mail = await a.service.fetch(me, limit=10)
            assert sorted(claim.message.body for claim in mail.claims) == [
                "through a", "through b"
            ]  # fmt: skip
            created = await _rows(
                a, "SELECT COUNT(*) FROM events WHERE type = 'agent.created'"
                " AND data LIKE '%' || {} || '%'",
                me,
            )  # fmt: skip
            assert created == [(1,)]


# -- a recipient whose actor is not running on this broker -----------------------------------


async def test_a_send_to_a_recipient_whose_actor_is_not_running_here_costs_two_round_trips(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send is handled by its recipient's actor, started by the send where it is not
    running (idle and passivated, or attached through another broker): it starts from what
    the send's read found (its session, its next due time, its launch settings), and with
    nothing due, nothing lapsed to catch up on. Every statement on every connection counted."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            await pg.service.send(alice, to="bob", body="the first one")
            await pg.service.identities.stop(bob.agent_id)
            with pg.wire.counting() as trace:
                sent = await pg.service.send(alice, to="bob", body="to an actor not running")
            listing = "\n".join(queries(trace))
            assert sent.recipient.agent_id == bob.agent_id
            assert round_trips(trace) <= ROUND_TRIPS_PER_SEND, listing
            # Started from the facts read: bob's session, attached here, is bound again.
            assert pg.service.identities.index.by_session(bob.session_id or "") is not None
            claims = await pg.service.fetch(bob, limit=10)
            assert [claim.message.body for claim in claims.claims] == [
                "the first one", "to an actor not running"
            ]  # fmt: skip


async def test_a_send_to_a_recipient_attached_through_another_broker_reaches_it_there(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob is attached through h2's broker; alice sends to him through h1's, where his actor
    is not running. It starts from the send's read, which found bob's session attached
    through h2: h1 neither binds it nor lets its token in, the send costs two round trips,
    is answered `queued` (a session will see it), and h2, told at the commit, hands the mail
    to bob's long poll there."""
    wire = Wire()  # both brokers' connections, traced together
    other_home = tmp_path / "h2"
    other_home.mkdir()
    async with (
        pg_messaging(pg_dsn, tmp_path, monkeypatch, shared=True, wire=wire) as here,
        pg_messaging(pg_dsn, other_home, monkeypatch, shared=True, host="h2", wire=wire) as there,
    ):
        with trio.fail_after(30):
            alice = await here.register("alice")
            registered = await there.service.register(
                RegisterRequest(workspace=str(there.workspace), implementation="shell",
                                session_name="bob")
            )  # fmt: skip
            token = str(registered["token"])
            bob = await there.service.authenticate(token)
            assert here.service.identities.get(bob.agent_id) is None
            claims = _ClaimsWatched(monkeypatch)
            polled: list[Claims] = []

            async def long_poll() -> None:
                polled.append(await there.service.fetch(bob, limit=10, wait_s=20))

            listener = psycopg.connect(pg_dsn, autocommit=True)
            try:
                listener.execute(f"LISTEN {WAKE_CHANNEL}")
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(long_poll)
                    await claims.done.wait()  # its first claim found nothing: it waits now
                    sent, trips, listing = await _counted(
                        here, lambda: here.service.send(alice, to=bob.agent_id, body="across")
                    )
                    heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
                    assert heard == [f"{bob.agent_id} {HOST}"]
                    there.wakeups.heard(heard[0])  # as h2's listener hands it on
            finally:
                listener.close()
            assert isinstance(sent, SendResult)
            assert trips <= ROUND_TRIPS_PER_SEND, listing
            assert sent.wake is Wake.QUEUED
            assert [claim.message.id for claim in polled[0].claims] == [sent.message_id]
            # h1 started bob's actor for the send, but his session is h2's to bind and lease.
            assert here.service.identities.get(bob.agent_id) is not None
            assert here.service.identities.index.of_identity(bob.agent_id) is None
            with pytest.raises(PagerError) as refused:
                await here.service.authenticate(token)
            assert refused.value.code is ErrorCode.UNAUTHENTICATED


async def test_a_claim_whose_ack_wait_passed_while_no_actor_ran_is_requeued_when_a_send_starts_it(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob claimed a message and his actor stopped; its ack wait passed while none ran (the
    claim's deadline, and the next due time the store recorded for it, moved into the past).
    The send that starts his actor again catches up first: the claim lapses and its message
    is offered again, before his next fetch, with the new one."""
    async with pg_messaging(pg_dsn, tmp_path, monkeypatch) as pg:
        with trio.fail_after(30):
            alice = await pg.register("alice")
            bob = await pg.register("bob")
            first = await pg.service.send(alice, to="bob", body="claimed, never acked")
            [claim] = (await pg.service.fetch(bob)).claims
            await pg.service.identities.stop(bob.agent_id)
            await pg.writer.write(
                lambda conn: (
                    conn.execute(
                        sql("UPDATE claims SET expires_at = expires_at - 3600"
                            " WHERE identity_id = {}"),
                        (bob.agent_id,),
                    ),
                    conn.execute(
                        sql("UPDATE identities SET next_due = next_due - 3600 WHERE id = {}"),
                        (bob.agent_id,),
                    ),
                )
            )  # fmt: skip
            second = await pg.service.send(alice, to="bob", body="after the lapse")
            # Caught up as the actor started, before the send that started it was written.
            events = await pg.writer.read(
                lambda conn: conn.execute(
                    sql("SELECT type, data FROM events WHERE type IN ('message.queued',"
                        " 'message.requeued') ORDER BY seq")
                ).fetchall()
            )  # fmt: skip
            assert [(kind, json.loads(data)["message_id"]) for kind, data in events] == [
                ("message.queued", first.message_id),
                ("message.requeued", first.message_id),
                ("message.queued", second.message_id),
            ]
            requeued = await _rows(
                pg, "SELECT m.state, c.state FROM messages m JOIN claims c ON c.message_id = m.id"
                " WHERE m.recipient_id = {}",
                bob,
            )  # fmt: skip
            assert requeued == [("queued", "expired")]
            again = await pg.service.fetch(bob, limit=10)
            oldest = again.claims[0].message
            assert (oldest.id, oldest.attempt) == (first.message_id, 2)
            assert [c.message.body for c in again.claims] == [
                "claimed, never acked", "after the lapse"
            ]  # fmt: skip
            acked = await pg.service.ack(bob, tokens=[claim.token])  # the lapsed claim's
            assert [n.reason for n in acked.not_applied] == ["superseded"]
