"""FAKE MessagingApi, for testing the MCP edge only (pager/web/mcp*.py, pager/web/dispatch.py).

It implements none of Pager's identity or delivery rules: it maps tokens to Callers, records
every call with its arguments, and answers with plausible fixed answers (`pager.domain.results`,
whole, since the tools advertise their schemas).
Scripted failures:
- `authenticate`: "expired-token" raises `expired`, "ended-token" raises `ended`, any other
  unknown token raises `unauthenticated`;
- `send` to "nobody" raises `unknown_recipient` (after recording the call);
- `message_status` of "boom" raises a plain RuntimeError (an internal failure);
- `fetch` with `wait_s` > 0 sets `long_poll_started` and sleeps that long (a long poll with
  nothing waiting).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from pager.domain import reservation_results as rr
from pager.domain import results as r
from pager.domain.api import Caller
from pager.domain.delivery import NotApplied, Wake
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.records import MessageState

ALICE = Caller(session_id="ses_alice", agent_id="agt_alice", epoch=1)
BOB = Caller(session_id="ses_bob", agent_id="agt_bob", epoch=3)

#: A secret the fake's internal failure carries; it must never reach a client.
INTERNAL_SECRET = "db at /secret/path is locked"


@attrs.frozen
class Call:
    """One recorded MessagingApi call (authenticate is recorded separately)."""

    method: str
    caller: Caller
    kwargs: dict[str, Any]


@attrs.define
class FakeMessagingApi:
    tokens: dict[str, Caller] = attrs.field(
        factory=lambda: {"alice-token": ALICE, "bob-token": BOB}
    )
    calls: list[Call] = attrs.field(factory=list)
    authenticated: list[Caller] = attrs.field(factory=list)
    long_poll_started: trio.Event = attrs.field(factory=trio.Event)

    def _record(self, method: str, caller: Caller, **kwargs: Any) -> None:
        self.calls.append(Call(method, caller, kwargs))

    async def authenticate(self, token: str) -> Caller:
        if token == "expired-token":
            raise PagerError(
                ErrorCode.EXPIRED, "the session's lease lapsed; rejoin by conversation key"
            )
        if token == "ended-token":
            raise PagerError(ErrorCode.ENDED, "a newer session of this agent replaced this one")
        caller = self.tokens.get(token)
        if caller is None:
            raise PagerError(ErrorCode.UNAUTHENTICATED, "unknown session token; register again")
        self.authenticated.append(caller)
        return caller

    async def whoami(self, caller: Caller) -> r.Me:
        self._record("whoami", caller)
        session = r.MeSession(id=caller.session_id or "", epoch=caller.epoch, lease_expires_at="t")
        return r.Me(
            agent_id=caller.agent_id,
            alias="alice",
            address="alice@api-3f9a1c",
            workspace="/src/api",
            implementation="claude",
            durable=True,
            host="fakehost",
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
    ) -> r.SendResult:
        self._record(
            "send",
            caller,
            to=to,
            body=body,
            thread=thread,
            reply_to=reply_to,
            idempotency_key=idempotency_key,
        )
        if to == "nobody":
            raise PagerError(ErrorCode.UNKNOWN_RECIPIENT, f"no agent is reachable as {to!r}", to=to)
        return r.SendResult(
            message_id="msg_1",
            state=MessageState.QUEUED,
            duplicate=False,
            recipient=r.Recipient(
                agent_id="agt_bob", address=f"{to}@web-1b2c3d", implementation="claude"
            ),
            wake=Wake.NO_SESSION,
        )

    async def fetch(self, caller: Caller, *, limit: int = 10, wait_s: float = 0.0) -> r.Claims:
        self._record("fetch", caller, limit=limit, wait_s=wait_s)
        if wait_s > 0:
            self.long_poll_started.set()
            await trio.sleep(wait_s)
        return r.Claims(claims=())

    async def ack(self, caller: Caller, *, tokens: list[str]) -> r.AckResult:
        self._record("ack", caller, tokens=tokens)
        return r.AckResult(
            applied=tuple(tokens[:1]),
            not_applied=tuple(
                r.NotAppliedToken(token=t, reason=NotApplied.UNKNOWN_TOKEN) for t in tokens[1:]
            ),
        )

    async def roster(
        self,
        caller: Caller,
        *,
        scope: str = "workspace",
        limit: int = 100,
        cursor: str | None = None,
    ) -> r.RosterPage:
        self._record("roster", caller, scope=scope, limit=limit, cursor=cursor)
        bob = r.RosterEntry(
            agent_id="agt_bob",
            address="bob@web-1b2c3d",
            alias="bob",
            implementation="codex",
            host="fakehost",
            host_alive=True,
            attached=True,
            last_seen=None,
            waiting=0,
            you=False,
        )
        return r.RosterPage(scope="workspace", agents=(bob,), next_cursor=None)

    async def history(
        self,
        caller: Caller,
        *,
        with_: str | None = None,
        thread: str | None = None,
        limit: int = 50,
    ) -> r.HistoryPage:
        self._record("history", caller, with_=with_, thread=thread, limit=limit)
        return r.HistoryPage(messages=())

    async def message_status(self, caller: Caller, *, message_id: str) -> r.MessageStatus:
        self._record("message_status", caller, message_id=message_id)
        if message_id == "boom":
            raise RuntimeError(INTERNAL_SECRET)
        return r.MessageStatus(
            message_id=message_id,
            to="bob@web-1b2c3d",
            state=MessageState.DELIVERED,
            attempts=1,
            dead_reason=None,
            sent_at="2026-12-03T10:00:00.000+00:00",
            settled_at=None,
        )

    async def update_agent_alias(
        self, caller: Caller, *, alias: str, force: bool = False
    ) -> r.AliasResult:
        self._record("update_agent_alias", caller, alias=alias, force=force)
        return r.AliasResult(agent_id=caller.agent_id, alias=alias, address=f"{alias}@api-3f9a1c")

    async def move_to_workspace(self, caller: Caller, *, path: str) -> r.AliasResult:
        self._record("move_to_workspace", caller, path=path)
        return r.AliasResult(
            agent_id=caller.agent_id, alias="alice", address="alice@other-0a1b2c", workspace=path
        )

    # Edit reservations: recorded, and answered as if nothing were held.
    async def reserve(
        self,
        caller: Caller,
        *,
        paths: list[str],
        shared: bool = False,
        ttl_s: float | None = None,
        reason: str | None = None,
    ) -> rr.Reserved:
        self._record("reserve", caller, paths=paths, shared=shared, ttl_s=ttl_s, reason=reason)
        return rr.Reserved(reserved=())

    async def release(self, caller: Caller, *, paths: list[str] | None = None) -> rr.Released:
        self._record("release", caller, paths=paths)
        return rr.Released(released=(), not_held=tuple(paths or ()))

    async def reservations(self, caller: Caller, *, scope: str = "workspace") -> rr.ReservationList:
        self._record("reservations", caller, scope=scope)
        return rr.ReservationList(scope="workspace", reservations=(), truncated=False)
