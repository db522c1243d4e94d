"""The errors a session's token or a takeover is refused with (SPEC §7), one wording for every
edge."""

from __future__ import annotations

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.records import Session, SessionState


def unknown_token() -> PagerError:
    return PagerError(
        ErrorCode.UNAUTHENTICATED,
        "unknown session token; register with POST /v1/register to get one",
    )


def not_attached(session: Session | None) -> PagerError:
    if session is None:
        return unknown_token()
    if session.state is SessionState.EXPIRED:
        return PagerError(
            ErrorCode.EXPIRED,
            "this session's lease lapsed; register again (with your conversation key to rejoin)",
            session_id=session.id,
        )
    return PagerError(
        ErrorCode.ENDED,
        f"this session has ended ({session.end_reason or session.state.value}); do not retry",
        session_id=session.id,
        reason=session.end_reason or session.state.value,
    )


def takeovers_off(request: str) -> PagerError:
    """`force` while `allow_force = false`: refused before anything changes. `request`: what
    asked for it ("registration", "rename")."""
    return PagerError(
        ErrorCode.CONFLICT,
        f"this {request} with force is refused: forced takeovers are turned off on this broker"
        " (allow_force = false in config.toml)",
        hint=Hint.TAKEOVERS_OFF,
        allow_force=False,
    )
