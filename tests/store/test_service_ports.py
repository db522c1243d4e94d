"""The messaging service's store ports (pager/store/service_ports.py): what every backend must
answer, run against each backend unchanged (SQLite today; PostgreSQL adds itself to BACKENDS).

The ports act and observe; only identities, their renames and sends are seeded otherwise,
through `Backend` (the inbox port sends; the directory port is exercised elsewhere).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from pager.domain import ids
from pager.domain.delivery import Via
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.names import alias_key, parse_address
from pager.domain.records import MessageState
from pager.domain.workspace import Workspace
from pager.store import messaging as ms
from pager.store.pg._writer import PgWriter
from pager.store.ports import Inbox, NewMessage
from pager.store.read_views import ReadViews
from pager.store.service_ports import Accounts, Listings, Lookups, Resolved
from pager.store.sql_ports import Writer
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from tests.store import test_ports_contract as contract

NOW, POLICY, LIMITS = contract.NOW, contract.POLICY, contract.LIMITS
HERE = Workspace(key="/service/repo", slug="repo-3f9a1c", path="/service/repo")
THERE = Workspace(key="/service/other", slug="other-a1b2c3", path="/service/other")


@attrs.define
class Backend:
    """The service's ports of one backend, the inbox port to send with, and the seeding the
    ports do not offer."""

    lookups: Lookups
    listings: Listings
    accounts: Accounts
    inbox: Inbox
    checkpoint: Writer

    async def identity(self, alias: str, workspace: Workspace = HERE) -> str:
        agent_id, op = contract.new_identity(alias, workspace)
        await self.checkpoint.write(op)
        return agent_id

    async def rename(self, identity_id: str, alias: str, workspace: Workspace = HERE) -> None:
        await self.checkpoint.write(
            lambda conn: ms.set_alias(
                conn, identity_id, workspace.key, alias, alias_key(alias), durable=True, now=NOW
            )
        )

    async def send(
        self, sender: str, to: str, body: str, *, thread: str | None = None, now: float = NOW
    ) -> str:
        send = NewMessage(sender, body, thread=thread, reply_to=None, idempotency_key=None)
        changed = await self.inbox.enqueue(
            to, send, now=now, idempotent_since=now - 600, limits=LIMITS, policy=POLICY
        )
        return changed.value.message.id

    async def claim(self, who: str) -> None:
        await self.inbox.claim(
            who, session_id=None, limit=10, via=Via.FETCH, now=NOW + 1, policy=POLICY
        )


@contextlib.asynccontextmanager
async def sqlite_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    """The writer as the store ports' contract builds it, and the read side beside it."""
    reads = ReadViews(tmp_path / "pager.db", inline=True)
    async with contract.sqlite_backend(tmp_path) as ports:
        checkpoint = ports.checkpoint
        try:
            yield Backend(
                SqlLookups(checkpoint),
                SqlListings(reads),
                SqlAccounts(checkpoint),
                ports.inbox,
                checkpoint,
            )
        finally:
            with trio.CancelScope(shield=True):
                await reads.aclose()


@contextlib.asynccontextmanager
async def postgresql_backend(tmp_path: Path, dsn: str) -> AsyncIterator[Backend]:
    """The same ports on PostgreSQL, over the store ports' contract's PostgreSQL writer."""
    async with contract.postgresql_backend(tmp_path, dsn) as ports:
        writer = ports.checkpoint
        assert isinstance(writer, PgWriter)
        yield Backend(
            SqlLookups(writer),
            SqlListings(writer),
            SqlAccounts(writer),
            ports.inbox,
            writer,
        )


@pytest.fixture(params=contract.BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with contract.backend_of(request, tmp_path, sqlite_backend, postgresql_backend) as it:
        yield it


def _code(raised: pytest.ExceptionInfo[PagerError]) -> ErrorCode:
    return raised.value.code


# -- Lookups ---------------------------------------------------------------------------------


async def test_whoami_answers_the_identity_its_address_and_workspace(backend: Backend) -> None:
    alice = await backend.identity("alice")
    located = await backend.lookups.whoami(alice)
    assert located.identity.id == alice
    assert located.identity.alias == "alice"
    assert located.address == "alice@repo-3f9a1c"
    assert located.workspace == HERE.path


async def test_whoami_of_an_identity_that_is_gone_is_ended(backend: Backend) -> None:
    with pytest.raises(PagerError) as raised:
        await backend.lookups.whoami(ids.new_agent_id())
    assert _code(raised) is ErrorCode.ENDED
    assert "no longer exists" in raised.value.message


async def test_resolve_finds_a_bare_alias_a_full_address_and_an_agent_id(
    backend: Backend,
) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    carol = await backend.identity("carol", THERE)
    lookups = backend.lookups
    assert await lookups.resolve(alice, parse_address("bob"), "bob") == Resolved(
        bob, "bob@repo-3f9a1c"
    )
    found = await lookups.resolve(alice, parse_address("carol@other-a1b2c3"), "carol@other-a1b2c3")
    assert found == Resolved(carol, "carol@other-a1b2c3")
    assert await lookups.resolve(alice, parse_address(carol), carol) == found


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("nobody", None),
        ("nobody@other-a1b2c3", None),
        ("bob@nowhere-0a0b0c", "no workspace 'nowhere-0a0b0c'"),
    ],
)
async def test_resolve_of_no_one_is_unknown_recipient(
    backend: Backend, text: str, why: str | None
) -> None:
    alice = await backend.identity("alice")
    await backend.identity("bob")
    await backend.identity("carol", THERE)
    with pytest.raises(PagerError) as raised:
        await backend.lookups.resolve(alice, parse_address(text), text)
    assert _code(raised) is ErrorCode.UNKNOWN_RECIPIENT
    assert raised.value.message.startswith(f"no agent {text!r}")
    if why is not None:
        assert why in raised.value.message


async def test_resolve_of_an_unknown_agent_id_is_unknown_recipient(backend: Backend) -> None:
    alice = await backend.identity("alice")
    ghost = ids.new_agent_id()
    with pytest.raises(PagerError) as raised:
        await backend.lookups.resolve(alice, parse_address(ghost), ghost)
    assert _code(raised) is ErrorCode.UNKNOWN_RECIPIENT


async def test_resolve_of_a_renamed_alias_names_the_new_address(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    await backend.rename(bob, "robert")
    with pytest.raises(PagerError) as raised:
        await backend.lookups.resolve(alice, parse_address("bob"), "bob")
    assert _code(raised) is ErrorCode.RECIPIENT_ALIAS_CHANGED
    assert raised.value.details == {"current_address": "robert@repo-3f9a1c", "agent_id": bob}


async def test_resolve_of_a_bare_alias_for_a_caller_gone_is_ended(backend: Backend) -> None:
    await backend.identity("bob")
    with pytest.raises(PagerError) as raised:
        await backend.lookups.resolve(ids.new_agent_id(), parse_address("bob"), "bob")
    assert _code(raised) is ErrorCode.ENDED


async def test_mailbox_target_answers_the_mailbox_and_whom_to_names(backend: Backend) -> None:
    alice = await backend.identity("alice")
    await backend.identity("bob")
    lookups = backend.lookups
    mine = Resolved(alice, "alice@repo-3f9a1c")
    assert (await lookups.mailbox_target(alice, None)).mailbox == mine
    assert (await lookups.mailbox_target(alice, None)).named is None
    assert (await lookups.mailbox_target(alice, "alice")).named == alice
    assert (await lookups.mailbox_target(alice, "alice@repo-3f9a1c")).named == alice
    assert (await lookups.mailbox_target(alice, "bob")).named != alice
    # Whatever `to` says (no one, not an address at all), it names no one: never an error.
    assert (await lookups.mailbox_target(alice, "nobody")).named is None
    assert (await lookups.mailbox_target(alice, "not an address!")).named is None


async def test_mailbox_target_of_an_identity_gone_is_unknown_recipient(backend: Backend) -> None:
    with pytest.raises(PagerError) as raised:
        await backend.lookups.mailbox_target(ids.new_agent_id(), None)
    assert _code(raised) is ErrorCode.UNKNOWN_RECIPIENT


async def test_sent_message_answers_the_callers_own_send_only(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    sent = await backend.send(alice, bob, "hello")
    found = await backend.lookups.sent_message(alice, sent)
    assert found is not None
    assert (found.message.id, found.message.state) == (sent, MessageState.QUEUED)
    assert found.to == "bob@repo-3f9a1c"
    assert await backend.lookups.sent_message(bob, sent) is None  # bob received it: not his send
    assert await backend.lookups.sent_message(alice, ids.new_message_id()) is None


async def test_conversation_is_none_until_bound(backend: Backend) -> None:
    alice = await backend.identity("alice")
    assert await backend.lookups.conversation("claude", "conv-1") is None
    await backend.accounts.bind_conversation("claude", "conv-1", alice)
    assert await backend.lookups.conversation("claude", "conv-1") == alice
    assert await backend.lookups.conversation("codex", "conv-1") is None


# -- Accounts: the person -------------------------------------------------------------------


async def test_person_is_made_on_first_use_and_found_after(backend: Backend) -> None:
    assert await backend.lookups.person(HERE.key) is None
    made = await backend.accounts.person(HERE, "pat", now=NOW)
    assert (made.alias, made.implementation, made.durable) == ("pat", "human", True)
    found = await backend.lookups.person(HERE.key)
    assert found is not None
    assert (found.id, found.alias, found.implementation) == (made.id, "pat", "human")
    assert found.detached_at == NOW  # never attached: its retention window counts from now
    again = await backend.accounts.person(HERE, "someone-else", now=NOW + 60)
    assert again.id == made.id
    assert again.alias == "pat"  # the name it was made with stays
    assert again.last_seen == NOW + 60
    assert await backend.lookups.person(THERE.key) is None


async def test_person_whose_name_an_agent_holds_is_alias_conflict(backend: Backend) -> None:
    agent = await backend.identity("pat")
    with pytest.raises(PagerError) as raised:
        await backend.accounts.person(HERE, "pat", now=NOW)
    assert _code(raised) is ErrorCode.ALIAS_CONFLICT
    assert agent in raised.value.message
    assert await backend.lookups.person(HERE.key) is None


async def test_start_chain_makes_the_next_send_start_a_chain(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    await backend.send(alice, bob, "first")
    await backend.claim(bob)  # bob was handed hop 1: his answer would be hop 2
    await backend.inbox.start_chain(bob, now=NOW + 2, limits=SendLimits())
    answer = await backend.send(bob, alice, "answer")
    found = await backend.lookups.sent_message(bob, answer)
    assert found is not None
    assert found.message.hop == 1


async def test_start_chain_restarts_once_per_delivered_batch_within_its_budget(
    backend: Backend,
) -> None:
    """A report restarts a chain only after mail from an agent was delivered, once per batch,
    at most `chain_resets_per_hour`, refilled evenly over the hour: past it `rate_limited`
    with `retry_after_s`, and the chain stays as it is."""
    limits = SendLimits(chain_resets_per_hour=2)
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    assert not await backend.inbox.start_chain(bob, now=NOW, limits=limits)  # no chain
    for _ in range(2):
        await backend.send(alice, bob, "again")
        await backend.claim(bob)
        assert await backend.inbox.start_chain(bob, now=NOW + 2, limits=limits)
        assert not await backend.inbox.start_chain(bob, now=NOW + 2, limits=limits)
    await backend.send(alice, bob, "once more")
    await backend.claim(bob)
    with pytest.raises(PagerError) as spent:
        await backend.inbox.start_chain(bob, now=NOW + 2, limits=limits)
    assert _code(spent) is ErrorCode.RATE_LIMITED
    assert spent.value.details["retry_after_s"] == 1800  # one restart refills in half an hour
    answer = await backend.send(bob, alice, "on the same chain")
    found = await backend.lookups.sent_message(bob, answer)
    assert found is not None
    assert found.message.hop == 2
    assert await backend.inbox.start_chain(bob, now=NOW + 2 + 1800, limits=limits)


# -- Accounts and Listings: mailbox tokens ---------------------------------------------------


async def _token(backend: Backend, person: str, to: str, label: str = "ci") -> tuple[str, str]:
    token, token_id = ids.new_token(ids.Kind.MAILBOX_TOKEN), ids.new_mailbox_id()
    made = await backend.accounts.create_token(
        person,
        parse_address(to),
        to,
        token_id=token_id,
        token_hash=ids.hash_token(token),
        label=label,
        now=NOW,
        expires_at=NOW + 3600,
    )
    assert made.token.id == token_id
    return token, token_id


async def test_create_token_stores_it_by_its_hash_for_the_identity_named(
    backend: Backend,
) -> None:
    person = (await backend.accounts.person(HERE, "pat", now=NOW)).id
    bob = await backend.identity("bob")
    token, token_id = await _token(backend, person, "bob", label="nightly")
    found = await backend.lookups.mailbox_token(ids.hash_token(token))
    assert found is not None
    assert (found.id, found.identity_id, found.label) == (token_id, bob, "nightly")
    assert (found.created_at, found.expires_at, found.revoked_at) == (NOW, NOW + 3600, None)
    assert await backend.lookups.mailbox_token(ids.hash_token(token + "x")) is None
    [listed] = await backend.listings.tokens(revoked=False)
    assert (listed.token, listed.mailbox) == (found, "bob@repo-3f9a1c")


async def test_create_token_for_no_one_is_unknown_recipient(backend: Backend) -> None:
    person = (await backend.accounts.person(HERE, "pat", now=NOW)).id
    with pytest.raises(PagerError) as raised:
        await _token(backend, person, "nobody")
    assert _code(raised) is ErrorCode.UNKNOWN_RECIPIENT
    assert await backend.listings.tokens(revoked=True) == []


async def test_revoke_token_keeps_it_listed_as_revoked(backend: Backend) -> None:
    person = (await backend.accounts.person(HERE, "pat", now=NOW)).id
    await backend.identity("bob")
    _, kept = await _token(backend, person, "bob", label="kept")
    _, gone = await _token(backend, person, "bob", label="gone")
    revoked = await backend.accounts.revoke_token(gone, now=NOW + 5)
    assert (revoked.token.id, revoked.token.revoked_at) == (gone, NOW + 5)
    assert revoked.mailbox == "bob@repo-3f9a1c"
    again = await backend.accounts.revoke_token(gone, now=NOW + 9)
    assert again.token.revoked_at == NOW + 5  # again is a no-op
    assert [v.token.id for v in await backend.listings.tokens(revoked=False)] == [kept]
    assert {v.token.id for v in await backend.listings.tokens(revoked=True)} == {kept, gone}


async def test_revoke_token_of_an_unknown_id_is_not_found(backend: Backend) -> None:
    with pytest.raises(PagerError) as raised:
        await backend.accounts.revoke_token("mbx_nothing", now=NOW)
    assert _code(raised) is ErrorCode.NOT_FOUND
    assert "'mbx_nothing'" in raised.value.message


# -- Listings --------------------------------------------------------------------------------


async def test_roster_pages_the_callers_workspace_or_every_one(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    carol = await backend.identity("carol", THERE)
    await backend.send(alice, bob, "waiting for bob")
    listings = backend.listings
    page = await listings.roster(alice, everywhere=False, limit=10, after=None)
    assert page.me == alice
    assert [e.agent_id for e in page.entries] == [alice, bob]
    assert [e.waiting for e in page.entries] == [0, 1]
    assert page.entries[1].address == "bob@repo-3f9a1c"
    assert page.last is None
    first = await listings.roster(alice, everywhere=True, limit=2, after=None)
    assert [e.agent_id for e in first.entries] == [carol, alice]  # by workspace slug, then alias
    assert first.last == ("repo-3f9a1c", "alice")
    rest = await listings.roster(alice, everywhere=True, limit=2, after=first.last)
    assert ([e.agent_id for e in rest.entries], rest.last) == ([bob], None)


async def test_roster_for_a_caller_gone_is_ended(backend: Backend) -> None:
    await backend.identity("alice")
    with pytest.raises(PagerError) as raised:
        await backend.listings.roster(ids.new_agent_id(), everywhere=True, limit=10, after=None)
    assert _code(raised) is ErrorCode.ENDED


async def test_history_lists_both_ways_newest_first_with_addresses(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    carol = await backend.identity("carol")
    one = await backend.send(alice, bob, "one", thread="t1")
    two = await backend.send(bob, alice, "two", now=NOW + 1)
    three = await backend.send(carol, alice, "three", thread="t1", now=NOW + 2)
    listings = backend.listings
    listed = await listings.history(alice, with_=None, thread=None, limit=10)
    assert [entry.message.id for entry in listed] == [three, two, one]
    assert [(entry.sender, entry.recipient) for entry in listed] == [
        ("carol@repo-3f9a1c", "alice@repo-3f9a1c"),
        ("bob@repo-3f9a1c", "alice@repo-3f9a1c"),
        ("alice@repo-3f9a1c", "bob@repo-3f9a1c"),
    ]
    with_bob = await listings.history(alice, with_="bob", thread=None, limit=10)
    assert [entry.message.id for entry in with_bob] == [two, one]
    in_t1 = await listings.history(alice, with_=None, thread="t1", limit=10)
    assert [entry.message.id for entry in in_t1] == [three, one]
    assert len(await listings.history(alice, with_=None, thread=None, limit=1)) == 1
    await backend.rename(bob, "robert")
    renamed = await listings.history(alice, with_="bob", thread=None, limit=10)
    assert [entry.message.id for entry in renamed] == [two, one]  # the old alias still finds him
    assert renamed[0].sender == "robert@repo-3f9a1c"


async def test_history_with_no_one_is_unknown_recipient(backend: Backend) -> None:
    alice = await backend.identity("alice")
    with pytest.raises(PagerError) as raised:
        await backend.listings.history(alice, with_="nobody", thread=None, limit=10)
    assert _code(raised) is ErrorCode.UNKNOWN_RECIPIENT


async def test_waiting_counts_all_and_lists_the_oldest(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    first = await backend.send(alice, bob, "first")
    second = await backend.send(alice, bob, "second", now=NOW + 1)
    await backend.send(alice, bob, "third", now=NOW + 2)
    waiting = await backend.listings.waiting(bob, limit=2)
    assert waiting.count == 3
    assert [entry.message.id for entry in waiting.messages] == [first, second]
    assert waiting.messages[0].sender == "alice@repo-3f9a1c"
    assert waiting.messages[0].recipient == "bob@repo-3f9a1c"
    nothing = await backend.listings.waiting(alice, limit=10)
    assert (nothing.count, nothing.messages) == (0, ())


async def test_sent_lists_the_latest_sends_newest_first(backend: Backend) -> None:
    alice = await backend.identity("alice")
    bob = await backend.identity("bob")
    carol = await backend.identity("carol", THERE)
    await backend.send(alice, bob, "first")
    second = await backend.send(alice, carol, "second", now=NOW + 1)
    third = await backend.send(alice, bob, "third", now=NOW + 2)
    await backend.send(bob, alice, "not alice's send", now=NOW + 3)
    listed = await backend.listings.sent(alice, limit=2)
    assert [entry.message.id for entry in listed] == [third, second]
    assert [entry.recipient for entry in listed] == ["bob@repo-3f9a1c", "carol@other-a1b2c3"]
    assert {entry.sender for entry in listed} == {"alice@repo-3f9a1c"}
    assert await backend.listings.sent(carol, limit=10) == []
