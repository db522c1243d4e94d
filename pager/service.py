"""The broker's messaging service: what the MCP tools and `/v1` routes call (SPEC §6-§8).

It validates what the edges cannot (sizes, addresses), reads the store through its ports
(`pager/store/service_ports.py`: it never sees a connection), and sends every state change
but its own few writes (`Accounts`) to the actor that owns it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar

import trio

from actors._runtime import ActorRef, Call
from actors.directory import DirectoryMessage, Move, RegisterCommand, Rename
from actors.identities import Identities
from actors.identity_protocol import (
    Ack,
    EndSession,
    Enqueue,
    Fetch,
    Release,
    StartChain,
    Unrenderable,
)
from actors.sessions import MailBell
from pager.config import Config
from pager.domain import addressing
from pager.domain.api import JSON, Caller
from pager.domain.body_limit import body_size, oversized_body
from pager.domain.clock import WallClock, iso
from pager.domain.delivery import AckResult as Acknowledged
from pager.domain.delivery import NotApplied, Via, Wake
from pager.domain.envelope import ShownMessage, render_batch
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.harness_process import check_harness
from pager.domain.hints import Hint
from pager.domain.hosts import HostBoard
from pager.domain.ids import Kind, hash_token, looks_like, new_mailbox_id, new_token
from pager.domain.mailbox_tokens import UNUSABLE, MailboxToken
from pager.domain.names import alias_of_login, format_address, parse_address
from pager.domain.pages import Page
from pager.domain.read_ahead import ReadAhead
from pager.domain.records import Delivery, DeliveryKind, SessionState
from pager.domain.reservation_results import (
    CheckResult,
    Released,
    ReservationList,
    ReservationView,
    Reserved,
)
from pager.domain.results import (
    AckResult,
    AliasResult,
    Claim,
    Claims,
    HistoryMessage,
    HistoryPage,
    ListedMessage,
    MailMessage,
    Me,
    MeSession,
    MessageStatus,
    NotAppliedToken,
    Recipient,
    RosterEntry,
    RosterPage,
    SendResult,
    SentMessage,
    SentPage,
    Waiting,
    mail_fields,
    mail_message,
    placeholder_fields,
)
from pager.domain.roster import RosterEntry as StoreRosterEntry
from pager.domain.roster import RosterKey
from pager.domain.views import decode_cursor, encode_cursor
from pager.domain.workspace import Workspace, resolve_workspace
from pager.rendering import RENDER_ERRORS, cause, render_each
from pager.requests import MAX_WAIT_S, HttpDelivery, RegisterRequest
from pager.reservations_service import ReservationService
from pager.store.ports import ClaimView
from pager.store.reservation_ports import ReservationStore
from pager.store.service_ports import Accounts, Addressed, Listings, Lookups, Resolved, TokenView

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M", bound=MailMessage)

log = logging.getLogger("pager.service")

#: Identity refs the service keeps before it forgets those of stopped actors.
#: Messages one hook run claims at most (what does not fit its size limit is handed back).
HOOK_BATCH = 10
#: Roster page sizes (SPEC §8 `roster`: `limit`), and the view its cursors name.
ROSTER_LIMIT = 100
ROSTER_MAX = 500
ROSTER_VIEW = "roster"


class BrokerService:
    def __init__(
        self,
        directory: ActorRef[DirectoryMessage],
        identities: Identities,
        config: Config,
        clock: WallClock,
        *,
        lookups: Lookups,
        listings: Listings,
        accounts: Accounts,
        resolve: Callable[[str], Awaitable[Workspace]] | None = None,
        hosts: HostBoard | None = None,
        never_shown_mail: frozenset[str],
        reservation_store: ReservationStore | None = None,
    ) -> None:
        self.directory = directory
        # The identity actors, found by id without a mailbox hop (started when not running).
        self.identities = identities
        # The store: quick reads made on every request, reads that scan or page (the roster
        # never waits for a write, nor delays one), and the few writes the service makes.
        self.lookups = lookups
        self.listings = listings
        self.accounts = accounts
        self.config = config
        self.clock = clock
        self._harnesses: dict[str, str] = {}  # harness process -> identity (see _bind_harness)
        # The implementations whose sessions are never shown waiting mail at their turns (a
        # shell program): a send queued for one says it waits to be read.
        self.never_shown_mail = never_shown_mail
        # This broker's host (SPEC §4.1 `who`, `whoami`, §13): with a store of its own, every
        # identity's; with a shared store, that of the identities of this machine's workspaces.
        self.host = config.host_name
        self.hosts = hosts or HostBoard(self.host)
        self.shared_store = config.store.kind == "postgresql"
        # Reading .git files is I/O: off the event loop, except in mock-clock tests.
        self.resolve = resolve or _resolve_in_thread
        # Edit reservations (docs/reservations.md): their own service, on the store's writer.
        self._reservations = (
            None
            if reservation_store is None
            else ReservationService(reservation_store, clock, grace=config.windows.lease_ttl)
        )

    async def _workspace(self, path: str) -> Workspace:
        """The workspace of a directory of this machine (on this host, in a shared store)."""
        workspace = await self.resolve(path)
        return workspace.on_host(self.host) if self.shared_store else workspace

    # -- sessions --------------------------------------------------------------------------

    async def register(self, request: RegisterRequest) -> JSON:
        workspace = await self._workspace(request.workspace)
        registered = await self.directory.call(
            RegisterCommand(
                workspace=workspace,
                implementation=_implementation(request.implementation),
                session_name=request.session_name,
                conversation_key=_optional_text(request.conversation_key, "conversation_key"),
                delivery=_delivery(request),
                force=request.force,
                resume_token=request.resume_token,
            )
        )
        identity, session = registered.identity, registered.session
        return {
            "agent_id": identity.id,
            "alias": identity.alias,
            "address": format_address(identity.alias, registered.slug),
            "durable": identity.durable,
            "session_id": session.id,
            "epoch": session.epoch,
            "token": registered.token,
            "resume_token": registered.resume_token,
            "lease_ttl_s": self.config.windows.lease_ttl,
        }

    async def authenticate(self, token: str) -> Caller:
        return await self.identities.authenticate(token)

    async def stream_opened(self, caller: Caller, stream: Hashable = None) -> trio.Event:
        """`stream` (the caller's, if it has one) holds the lease while open: said again
        now and then; the event is set when the session ends."""
        return self.identities.stream_opened(_session_of(caller), stream)

    def mail_bell(self, caller: Caller) -> MailBell:
        """Rung when mail waits for the caller's session and nobody waits for it (no long
        poll, no delivery address): its event stream says `mail`."""
        return self.identities.mail_bell(_session_of(caller))

    async def stream_closed(self, caller: Caller, stream: Hashable = None) -> None:
        self.identities.stream_closed(_session_of(caller), stream)

    async def prompted(self, caller: Caller) -> JSON:
        """The person typed a prompt into the caller's harness (a plugin or extension says
        so; hooks say it in `hook_claim`): its next send starts a new chain (SPEC §8.1).
        PagerError `rate_limited` when the identity's resets are spent."""
        await self._start_chain(caller.agent_id)
        return {"prompted": True, "agent_id": caller.agent_id}

    async def _start_chain(self, agent_id: str) -> bool:
        """The one way a typed prompt restarts a chain: through the identity's actor, which
        owns its loop-guard cause (`messaging.start_chain`'s budget)."""
        return await self._call_identity(agent_id, StartChain())

    async def detach(self, caller: Caller) -> JSON:
        end = EndSession(_session_of(caller), SessionState.DETACHED, "detached")
        await self._call_identity(caller.agent_id, end)
        return {"detached": True, "session_id": caller.session_id}

    async def person(self, workspace: str) -> Caller:
        """The person at the terminal in `workspace` (SPEC §4.2): their durable identity, made
        on first use; a caller without a session."""
        ws = await self._workspace(workspace)
        now = self.clock.now()
        known = await self.lookups.person(ws.key)
        # Most commands find the person as they left them: a read, no commit. `last_seen` is
        # written at most every lease_ttl / 2, as for a session's requests.
        if (
            known is not None
            and known.archived_at is None
            and now - known.last_seen < self.config.windows.lease_ttl / 2
        ):
            return Caller(session_id=None, agent_id=known.id, epoch=0)
        identity = await self.accounts.person(ws, self._person_alias(), now=now)
        return Caller(session_id=None, agent_id=identity.id, epoch=0)

    def _person_alias(self) -> str:
        """The alias the person's identity gets in each workspace (docs/cli.md)."""
        return self.config.person_name or alias_of_login(_login_name())

    async def _recipient(
        self, caller: Caller, to: str, idempotency_key: str | None = None
    ) -> tuple[Resolved, ReadAhead | None]:
        """The identity `to` names for a send or a page from `caller`, with the facts the
        send's decision needs where the store reads them with the address (`ReadAhead`). The
        person is reachable from every workspace by their name: a bare alias that names no
        one in the caller's workspace but is the person's name reaches the person's identity
        there, made as the person's own first command there would make it."""
        address = parse_address(to)
        person = self._person_alias()
        try:
            return await self.lookups.resolve_to_send(
                caller.agent_id, address, to, now=self.clock.now(),
                idempotency_key=idempotency_key, limits=self.config.limits.send, person=person,
            )  # fmt: skip
        except PagerError as error:
            if not addressing.reaches_person(address, error, person):
                raise
        made = await self.accounts.person_beside(caller.agent_id, person, now=self.clock.now())
        return made, None

    # -- tools -----------------------------------------------------------------------------

    async def whoami(self, caller: Caller) -> Me:
        lease_expires_at = iso(self.clock.now() + self.config.windows.lease_ttl) or ""
        found = await self.lookups.whoami(caller.agent_id)
        me = found.identity
        session = (
            None  # the person at the terminal has none
            if caller.session_id is None
            else MeSession(
                id=caller.session_id, epoch=caller.epoch, lease_expires_at=lease_expires_at
            )
        )
        return Me(
            agent_id=me.id,
            alias=me.alias,
            address=found.address,
            workspace=found.workspace,
            implementation=me.implementation,
            durable=me.durable,
            host=self.host,
            session=session,
        )

    async def send(
        self,
        caller: Caller,
        *,
        to: str,
        body: str,
        thread: str | None = None,
        reply_to: str | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult:
        self._check_body(body)
        for again in (False, True):
            recipient, ahead = await self._recipient(caller, to, idempotency_key)
            request = Enqueue(caller.agent_id, body, thread, reply_to, idempotency_key, ahead=ahead)
            try:
                return await self._enqueue(recipient, request)
            except PagerError as error:
                if again or not error.details.get("made_meanwhile"):
                    raise
        raise AssertionError("unreachable")

    async def notify(self, caller: Caller, *, to: str | None, page: Page, run: bool) -> SendResult:
        """A page (SPEC §8.2) from the caller to `to` (None: to itself). `run`: it reports a
        job (`pager run`), so it has script origin and hop 0; otherwise it is the caller's
        send like any other (SPEC §8.1)."""
        body = page.body
        self._check_body(body)
        recipient, ahead = await self._recipient(caller, to if to is not None else caller.agent_id)
        request = Enqueue(
            caller.agent_id, body, page.job_id, None, None, fields=page.fields_json, script=run,
            ahead=ahead,
        )  # fmt: skip
        return await self._enqueue(recipient, request)

    async def notify_with_token(
        self, mailbox: MailboxToken, page: Page, *, to: str | None = None
    ) -> SendResult:
        """A page with a mailbox token (SPEC §8.2): to the token's identity only, from the
        token (shown as its label), script origin. `to`, when given, must name that identity
        (a bare alias in its workspace). The token is checked again inside the page's own
        transaction (`unauthenticated` if it was revoked since `mailbox`)."""
        body = page.body
        self._check_body(body)
        target = await self.lookups.mailbox_target(mailbox.identity_id, to)
        recipient = target.mailbox
        if to is not None and target.named != recipient.id:
            # The same answer whether `to` exists or not: a token learns of no one else.
            raise PagerError(
                ErrorCode.UNKNOWN_RECIPIENT,
                f"this token pages {recipient.address} only, not {to[:200]!r}; nothing was sent",
                mailbox=recipient.address,
            )
        request = Enqueue(mailbox.id, body, page.job_id, None, None, fields=page.fields_json)
        return await self._enqueue(recipient, request)

    async def mailbox(self, token: str) -> MailboxToken:
        """The mailbox token `token` if it is usable now, else PagerError `unauthenticated`
        (the same words for unknown, revoked and expired)."""
        if not looks_like(Kind.MAILBOX_TOKEN, token):
            raise PagerError(ErrorCode.UNAUTHENTICATED, UNUSABLE)
        mailbox = await self.lookups.mailbox_token(hash_token(token))
        if mailbox is None or not mailbox.usable(self.clock.now()):
            raise PagerError(ErrorCode.UNAUTHENTICATED, UNUSABLE)
        return mailbox

    def _check_body(self, body: str) -> None:
        if not body.strip():
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                "the body is empty; write what the message should say",
            )
        size = body_size(body)
        cap = self.config.limits.body_cap
        if size > cap:
            raise PagerError(
                ErrorCode.OVERSIZED_CONTENT,
                oversized_body(size, cap),
                limit=cap,
                size=size,
            )

    async def _enqueue(self, recipient: Resolved, request: Enqueue) -> SendResult:
        # Read with the address on a backend that reads ahead: an actor not running here
        # starts from what was read, instead of reading it again.
        start = None if request.ahead is None else request.ahead.recipient
        sent = await self.identities.call(recipient.id, request, start=start)
        waits = sent.wake == Wake.QUEUED and recipient.implementation in self.never_shown_mail
        return SendResult(
            message_id=sent.message.id,
            state=sent.message.state,
            duplicate=sent.duplicate,
            recipient=Recipient(
                agent_id=recipient.id,
                address=recipient.address,
                implementation=recipient.implementation,
                waits_to_be_read=waits,
            ),
            wake=sent.wake,
        )

    # -- mailbox tokens (SPEC §8.2; the person's, through the local secret) ---------------

    async def create_token(
        self, *, to: str, workspace: str, label: str | None, expires_s: float | None
    ) -> JSON:
        """A new mailbox token for the identity `to` names (a bare alias: in `workspace`, the
        person's): the token itself is in this answer only."""
        address = parse_address(to)
        person = await self.person(workspace)
        now = self.clock.now()
        token, token_id = new_token(Kind.MAILBOX_TOKEN), new_mailbox_id()
        made = await self.accounts.create_token(
            person.agent_id,
            address,
            to,
            token_id=token_id,
            token_hash=hash_token(token),
            label=label or token_id,
            now=now,
            expires_at=None if expires_s is None else now + expires_s,
        )
        return {**_token_json(made), "token": token}

    async def list_tokens(self, *, revoked: bool = False) -> JSON:
        listed = await self.listings.tokens(revoked=revoked)
        return {"tokens": [_token_json(view) for view in listed]}

    async def revoke_token(self, token_id: str) -> JSON:
        return _token_json(await self.accounts.revoke_token(token_id, now=self.clock.now()))

    async def fetch(self, caller: Caller, *, limit: int = 10, wait_s: float = 0.0) -> Claims:
        wait_s = min(max(wait_s, 0.0), MAX_WAIT_S)
        request = Fetch(caller.session_id, limit, wait_s)
        views = await self._call_identity(caller.agent_id, request, timeout=wait_s + 30.0)
        claims = await self._render_claims(caller.agent_id, views, self._claim)
        return Claims(claims=tuple(claim for _, claim in claims))

    async def ack(self, caller: Caller, *, tokens: list[str]) -> AckResult:
        return _ack_result(await self._call_identity(caller.agent_id, Ack(tuple(tokens))))

    async def roster(
        self,
        caller: Caller,
        *,
        scope: str = "workspace",
        limit: int = ROSTER_LIMIT,
        cursor: str | None = None,
    ) -> RosterPage:
        """One page of who the caller can reach (SPEC §8 `roster`), by workspace then alias,
        with `next_cursor` to the next page (None at the end).

        Read on the service's own read-only connection, so it never queues behind a write
        (nor a write behind it), with the page's waiting counts in one batched count."""
        after = None if cursor is None else _roster_key(cursor)
        limit = min(max(limit, 1), ROSTER_MAX)
        attached = await self._attached_ids()
        page = await self.listings.roster(
            caller.agent_id, everywhere=scope == "all", limit=limit, after=after
        )
        agents = tuple(
            RosterEntry(
                agent_id=entry.agent_id,
                address=entry.address,
                alias=entry.alias,
                implementation=entry.implementation,
                host=entry.host or self.host,
                host_alive=self.hosts.alive(entry.host),
                attached=self._attached(entry, attached),
                last_seen=entry.last_seen,
                waiting=entry.waiting,
                you=entry.agent_id == page.me,
            )
            for entry in page.entries
        )
        last = page.last
        next_cursor = None if last is None else encode_cursor(ROSTER_VIEW, "/".join(last))
        return RosterPage(
            scope="all" if scope == "all" else "workspace", agents=agents, next_cursor=next_cursor
        )

    async def history(
        self,
        caller: Caller,
        *,
        with_: str | None = None,
        thread: str | None = None,
        limit: int = 50,
    ) -> HistoryPage:
        listed = await self.listings.history(
            caller.agent_id, with_=with_, thread=thread, limit=limit
        )
        me = caller.agent_id
        return HistoryPage(
            messages=tuple(
                self._listed(
                    entry,
                    _with(
                        HistoryMessage,
                        direction="sent" if entry.message.sender_id == me else "received",
                        state=entry.message.state,
                    ),
                )
                for entry in listed
            )
        )

    async def message_status(self, caller: Caller, *, message_id: str) -> MessageStatus:
        found = await self.lookups.sent_message(caller.agent_id, message_id)
        if found is None:
            raise PagerError(
                ErrorCode.NOT_FOUND,
                f"you sent no message {message_id!r}",
                hint=Hint.OWN_SENDS,
            )
        message = found.message
        return MessageStatus(
            message_id=message.id,
            to=found.to,
            state=message.state,
            attempts=message.attempts,
            dead_reason=message.dead_reason,
            sent_at=iso(message.sent_at) or "",
            settled_at=iso(message.settled_at),
        )

    async def inbox(self, caller: Caller, *, limit: int = 50) -> Waiting:
        """The caller's waiting mail, oldest first, without claiming it (SPEC §4.1)."""
        waiting = await self.listings.waiting(caller.agent_id, limit=limit)
        listed = tuple(
            self._listed(entry, _with(ListedMessage, state=entry.message.state))
            for entry in waiting.messages
        )
        return Waiting(waiting=waiting.count, messages=listed)

    async def sent(self, caller: Caller, *, limit: int = 20) -> SentPage:
        """The caller's latest sends with their delivery state, newest first (SPEC §4.1)."""
        listed = await self.listings.sent(caller.agent_id, limit=limit)
        return SentPage(
            messages=tuple(
                self._listed(
                    entry,
                    _with(
                        SentMessage,
                        state=entry.message.state,
                        dead_reason=entry.message.dead_reason,
                        settled_at=iso(entry.message.settled_at),
                    ),
                )
                for entry in listed
            )
        )

    async def update_agent_alias(
        self, caller: Caller, *, alias: str, force: bool = False
    ) -> AliasResult:
        return await self.directory.call(Rename(caller, alias, force))

    async def claim_identity(
        self, caller: Caller, *, name: str, force: bool = False
    ) -> AliasResult:
        """`pager claim` (SPEC §4.1): become the identity named `name` in the caller's
        workspace (its id, inbox, history), when its holder is not attached, or with `force`."""
        return await self.directory.call(Rename(caller, name, force, claim=True))

    async def move_to_workspace(self, caller: Caller, *, path: str) -> AliasResult:
        workspace = await self._workspace(path)
        return await self.directory.call(Move(caller, workspace))

    # -- edit reservations (docs/reservations.md; the rules are ReservationService's) -------

    @property
    def reservations_service(self) -> ReservationService:
        if self._reservations is None:
            raise PagerError(ErrorCode.UNAVAILABLE, "this broker keeps no reservations")
        return self._reservations

    async def reserve(
        self,
        caller: Caller,
        *,
        paths: list[str],
        shared: bool = False,
        ttl_s: float | None = None,
        reason: str | None = None,
    ) -> Reserved:
        return await self.reservations_service.reserve(
            caller, paths=paths, shared=shared, ttl_s=ttl_s, reason=reason
        )

    async def release(self, caller: Caller, *, paths: list[str] | None = None) -> Released:
        return await self.reservations_service.release(caller, paths=paths)

    async def reservations(self, caller: Caller, *, scope: str = "workspace") -> ReservationList:
        return await self.reservations_service.reservations(caller, scope=scope)

    async def check_reservations(self, caller: Caller, *, paths: list[str]) -> CheckResult:
        return await self.reservations_service.check(caller, paths=paths)

    async def every_reservation(self) -> ReservationList:
        return await self.reservations_service.every()

    async def break_reservation(self, reservation_id: str) -> ReservationView:
        return await self.reservations_service.break_one(reservation_id)

    # -- hooks -----------------------------------------------------------------------------

    async def hook_claim(
        self,
        *,
        implementation: str,
        conversation_key: str,
        max_chars: int,
        wait_s: float = 0.0,
        session_token: str | None = None,
        prompted: bool = False,
        harness: str | None = None,
    ) -> JSON:
        """Claim waiting mail for the session of a conversation and render what fits in
        `max_chars` inside the envelope; claims that do not fit are handed back unclaimed."""
        if not 200 <= max_chars <= 1_000_000:
            raise PagerError(ErrorCode.VALIDATION_FAILED, "max_chars must be 200-1000000")
        if not 0 <= wait_s <= MAX_WAIT_S:
            raise PagerError(ErrorCode.VALIDATION_FAILED, f"wait_s must be 0-{MAX_WAIT_S:g}")
        if harness is not None:
            check_harness(harness)
        agent_id = await self.lookups.conversation(implementation, conversation_key)
        if agent_id is None and session_token is not None:
            caller = await self.authenticate(session_token)
            agent_id = caller.agent_id
            await self.accounts.bind_conversation(
                implementation, conversation_key, agent_id, session_id=caller.session_id
            )
        if agent_id is None:
            return {"agent_id": None, "text": "", "tokens": []}
        if harness is not None:
            self._bind_harness(harness, agent_id)
        if prompted:  # before the claim: mail handed over with this prompt is the new cause
            try:
                await self._start_chain(agent_id)
            except PagerError as exc:  # resets spent: the mail is still handed over
                if exc.code is not ErrorCode.RATE_LIMITED:
                    raise
        views = await self._call_identity(
            agent_id, Fetch(None, HOOK_BATCH, wait_s, via=Via.HOOK), timeout=wait_s + 30.0
        )
        claims = await self._render_claims(agent_id, views, self._shown)
        if not claims:
            return {"agent_id": agent_id, "text": "", "tokens": []}
        shown = [item for _, item in claims]
        batch = render_batch(shown, display_cap=self.config.limits.display_cap, total_cap=max_chars)
        tokens = [view.claim.token for view, _ in claims]
        if batch.shown < len(tokens):
            await self._call_identity(agent_id, Release(tuple(tokens[batch.shown :])))
        return {"agent_id": agent_id, "text": batch.text, "tokens": tokens[: batch.shown]}

    def _bind_harness(self, harness: str, agent_id: str) -> None:
        """Remember which identity a harness process's hook bound (SPEC §4.2, rule 2): the
        latest per process, at most HARNESSES of them (a restarted broker learns them again
        at each harness's next hook)."""
        self._harnesses.pop(harness, None)
        self._harnesses[harness] = agent_id
        while len(self._harnesses) > HARNESSES:
            self._harnesses.pop(next(iter(self._harnesses)))

    def harness_caller(self, harness: str) -> Caller | None:
        """The identity the hook of harness process `harness` (`pid:start`) bound, if any."""
        agent_id = self._harnesses.get(harness)
        return None if agent_id is None else Caller(session_id=None, agent_id=agent_id, epoch=0)

    async def hook_ack(self, *, agent_id: str, tokens: list[str]) -> AckResult:
        return _ack_result(await self._call_identity(agent_id, Ack(tuple(tokens))))

    # -- rendering (pager/rendering.py: one message at a time) ------------------------------

    async def _render_claims(
        self, agent_id: str, views: Sequence[ClaimView], render: Callable[[ClaimView], R]
    ) -> list[tuple[ClaimView, R]]:
        """Each claim rendered alone; a message that cannot be rendered dies at once
        (`unrenderable`, one line in the log) and the rest of the batch goes on."""
        rendered = render_each(views, render)
        if rendered.failed:
            for view, exc in rendered.failed:
                log.warning(
                    "message %s to %s cannot be rendered (%s); dead-lettered as unrenderable",
                    view.claim.message.id,
                    agent_id,
                    cause(exc),
                )
            tokens = tuple(view.claim.token for view, _ in rendered.failed)
            await self._call_identity(agent_id, Unrenderable(tokens))
        return rendered.shown

    def _claim(self, view: ClaimView) -> Claim:
        """A claim as `fetch` answers it."""
        message = _mail(view)
        return Claim(
            token=view.claim.token, expires_at=iso(view.claim.expires_at) or "", message=message
        )

    def _shown(self, view: ClaimView) -> ShownMessage:
        """A claim as the hook shows it: by the same rule as `fetch`, so a message the one
        cannot render, the other does not show either."""
        message = _mail(view)
        return ShownMessage(
            sender_address=message.sender,
            message_id=message.id,
            body=message.body,
            sent_at=message.sent_at,
            thread=message.thread,
            attempt=view.claim.attempt,
        )

    def _listed(self, entry: Addressed, build: Callable[[dict[str, Any]], M]) -> M:
        """A listed message as `build` makes it of its reader fields; a placeholder when it
        cannot be rendered (a listing is read-only: the message stays as it is)."""
        try:
            return build(_fields(entry))
        except RENDER_ERRORS:
            return build(
                placeholder_fields(entry.message, sender=entry.sender, recipient=entry.recipient)
            )

    # -- helpers ---------------------------------------------------------------------------

    async def _call_identity(
        self,
        agent_id: str,
        message: Call[R],
        *,
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> R:
        return await self.identities.call(agent_id, message, timeout=timeout)

    def _attached(self, entry: StoreRosterEntry, here: frozenset[str]) -> bool:
        """Attached here (this broker's own sessions), or through another broker that is
        alive (a dead one's sessions only wait for their leases to lapse)."""
        if entry.agent_id in here:
            return True
        other = entry.attached_host
        return other is not None and other not in ("", self.host) and self.hosts.alive(other)

    async def _attached_ids(self) -> frozenset[str]:
        return self.identities.index.attached_ids()


async def _resolve_in_thread(path: str) -> Workspace:
    return await trio.to_thread.run_sync(resolve_workspace, path)


#: Harness processes remembered (a few bytes each; far more than one machine runs at once).
HARNESSES = 10_000


def _fields(entry: Addressed) -> dict[str, Any]:
    """A listed message's reader fields, with both addresses."""
    return mail_fields(entry.message, sender=entry.sender, recipient=entry.recipient)


def _with(cls: type[M], **extra: Any) -> Callable[[dict[str, Any]], M]:
    """Builds a `cls` of a message's reader fields and `extra`."""
    return lambda fields: cls(**fields, **extra)


def _ack_result(result: Acknowledged) -> AckResult:
    return AckResult(
        applied=tuple(result.applied),
        not_applied=tuple(
            NotAppliedToken(token=token, reason=NotApplied(reason))
            for token, reason in result.not_applied
        ),
    )


def _token_json(view: TokenView) -> JSON:
    """A mailbox token as listings show it: never the token itself."""
    token = view.token
    return {
        "id": token.id,
        "label": token.label,
        "mailbox": view.mailbox,
        "agent_id": token.identity_id,
        "created_at": iso(token.created_at),
        "last_used_at": iso(token.last_used_at),
        "expires_at": iso(token.expires_at),
        "revoked_at": iso(token.revoked_at),
    }


@functools.cache
def _login_name() -> str:
    """The account's name, whatever LOGNAME or USER say: read once (a send asks for it, and
    each read parses the password database)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _session_of(caller: Caller) -> str:
    if caller.session_id is None:  # the routes give these a session token's caller only
        raise PagerError(ErrorCode.VALIDATION_FAILED, "the person at the terminal has no session")
    return caller.session_id


def _roster_key(cursor: str) -> RosterKey:
    """Where the page of a roster cursor starts after; `validation_failed` naming `cursor`
    for anything `roster` did not hand out."""
    slug, slash, alias = decode_cursor(ROSTER_VIEW, cursor, str).partition("/")
    if not slash:  # slugs never hold a slash: the first one ends the slug
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            "cursor is not a cursor roster handed out; pass next_cursor from the previous page"
            " unchanged, or leave it out to start from the first page",
            parameter="cursor",
        )
    return slug, alias


def _mail(view: ClaimView) -> MailMessage:
    return mail_message(
        view.claim.message, sender=view.sender_address, recipient=view.recipient_address
    )


def _implementation(value: str) -> str:
    # ASCII only (`isalnum` alone takes any script's letters), as the OpenAPI document says.
    if (
        not value
        or len(value) > 64
        or not value.isascii()
        or not value.replace("-", "").replace("_", "").isalnum()
    ):
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"implementation {value[:64]!r} is not an implementation id (e.g. claude, shell)",
        )
    return value


def _optional_text(value: str | None, name: str) -> str | None:
    if value is not None and not 1 <= len(value) <= 256:
        raise PagerError(ErrorCode.VALIDATION_FAILED, f"{name} must be 1-256 characters")
    return value


def _delivery(request: RegisterRequest) -> Delivery | None:
    delivery = request.delivery  # its shape is the request's (`pager.requests`)
    if delivery is None:
        return None
    if isinstance(delivery, HttpDelivery):
        if not delivery.url.startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:")):
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                "delivery.url must be a loopback http:// address (127.0.0.1, localhost or [::1])",
            )
        return Delivery(DeliveryKind.HTTP, delivery.url)
    if not delivery.path.startswith("/"):
        raise PagerError(ErrorCode.VALIDATION_FAILED, "delivery.path must be absolute")
    return Delivery(DeliveryKind.UNIX, delivery.path)
