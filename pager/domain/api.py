"""The messaging API that the edges (MCP tools, HTTP routes) call; the broker implements it.

Edges validate shapes and authenticate; everything else (identity rules, delivery) is behind
this protocol. Results are the attrs classes of `pager.domain.results` (the edges turn them
into JSON with the one converter, `pager.wire`). Failures raise `PagerError`.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from pager.domain.reservation_results import Released, ReservationList, Reserved
from pager.domain.results import (
    AckResult,
    AliasResult,
    Claims,
    HistoryPage,
    Me,
    MessageStatus,
    RosterPage,
    SendResult,
)


@attrs.frozen
class Caller:
    """Who a request acts as: the session of its bearer token, or (with the local secret on a
    `/v1/me` route) the person at the terminal, who has no session (SPEC §4.2). Never from
    arguments."""

    session_id: str | None  # None: the person
    agent_id: str
    epoch: int


JSON = dict[str, Any]


class MessagingApi(Protocol):
    async def authenticate(self, token: str) -> Caller:
        """The session of `token`; renews its lease. Raises PagerError with `unauthenticated`
        (unknown token), `expired` (lease lapsed) or `ended` (replaced or archived)."""
        ...

    async def whoami(self, caller: Caller) -> Me: ...

    async def send(
        self,
        caller: Caller,
        *,
        to: str,
        body: str,
        thread: str | None = None,
        reply_to: str | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult: ...

    async def fetch(self, caller: Caller, *, limit: int = 10, wait_s: float = 0.0) -> Claims: ...

    async def ack(self, caller: Caller, *, tokens: list[str]) -> AckResult: ...

    async def roster(
        self,
        caller: Caller,
        *,
        scope: str = "workspace",
        limit: int = 100,
        cursor: str | None = None,
    ) -> RosterPage: ...

    async def history(
        self,
        caller: Caller,
        *,
        with_: str | None = None,
        thread: str | None = None,
        limit: int = 50,
    ) -> HistoryPage: ...

    async def message_status(self, caller: Caller, *, message_id: str) -> MessageStatus: ...

    async def update_agent_alias(
        self, caller: Caller, *, alias: str, force: bool = False
    ) -> AliasResult: ...

    async def move_to_workspace(self, caller: Caller, *, path: str) -> AliasResult: ...

    async def reserve(
        self,
        caller: Caller,
        *,
        paths: list[str],
        shared: bool = False,
        ttl_s: float | None = None,
        reason: str | None = None,
    ) -> Reserved: ...

    async def release(self, caller: Caller, *, paths: list[str] | None = None) -> Released: ...

    async def reservations(
        self, caller: Caller, *, scope: str = "workspace"
    ) -> ReservationList: ...
