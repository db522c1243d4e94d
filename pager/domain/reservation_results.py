"""What the reservation tools and routes answer (docs/reservations.md), one attrs class per
shape, as `pager.domain.results` does for messaging: `pager.wire` makes the JSON, `pager.schema`
the MCP `outputSchema` and the OpenAPI components."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pager.domain.reservations import State

TIME: dict[str, Any] = {"format": "date-time"}


def _time() -> Any:
    return attrs.field(metadata={"schema": TIME})


@attrs.frozen(kw_only=True)
class ReservationView:
    """One reservation: what it holds, who holds it (their address), how, since and until
    when, and its state (`stale`: its holder has had no live session for a while; it is shown
    and blocks nothing)."""

    id: str
    pattern: str
    holder: str
    agent_id: str
    workspace: str
    exclusive: bool
    reason: str
    since: str = _time()
    until: str = _time()
    state: State
    you: bool


@attrs.frozen(kw_only=True)
class Reserved:
    """`reserve`: every pattern taken (renewed where it was held already)."""

    reserved: tuple[ReservationView, ...]


@attrs.frozen(kw_only=True)
class Released:
    """`release`: what ended, and the patterns given that the caller held none of."""

    released: tuple[ReservationView, ...]
    not_held: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ReservationList:
    """`reservations`: those in force, of the caller's workspace or of all; `truncated` when
    the listing's bound left some out."""

    scope: Literal["workspace", "all"]
    reservations: tuple[ReservationView, ...]
    truncated: bool


@attrs.frozen(kw_only=True)
class CheckConflict:
    """A path an edit may not write: the exclusive reservation of another live identity that
    holds it."""

    path: str
    pattern: str
    holder: str
    agent_id: str
    reason: str
    since: str = _time()
    until: str = _time()
    id: str


@attrs.frozen(kw_only=True)
class CheckResult:
    """`POST /v1/me/reservations/check`: the conflicts (none: the edit may go ahead), and the
    paths outside the workspace (nothing here holds them)."""

    conflicts: tuple[CheckConflict, ...]
    outside: tuple[str, ...]
