"""Mailbox tokens (SPEC §8.2) as the store keeps them: a token pages one identity, its mailbox;
only its digest is stored, so this value never holds the token itself.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class MailboxToken:
    """A mailbox token as stored (never the token: its id, its mailbox and its dates)."""

    id: str
    identity_id: str
    label: str
    created_at: float
    last_used_at: float | None
    expires_at: float | None
    revoked_at: float | None

    def usable(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


#: Why a token is refused; the same words whether it is unknown, revoked or expired.
UNUSABLE = (
    "this mailbox token is unknown, revoked or expired; ask the person for a new one"
    " (`pager token create TO`)"
)
