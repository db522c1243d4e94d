"""What a send with an idempotency key its sender already used means: an unchanged repeat
is answered the original message; a reuse of the key for another send is refused, because
answering it with the original would report a message it did not describe and drop its own."""

from __future__ import annotations

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.records import Message


def differences(
    original: Message,
    *,
    recipient_id: str,
    body: str,
    thread: str | None,
    reply_to: str | None,
) -> list[str]:
    """What this send changes of `original` (none: it repeats it)."""
    return [
        name
        for name, was, given in (
            ("recipient", original.recipient_id, recipient_id),
            ("body", original.body, body),
            ("thread", original.thread, thread),
            ("reply_to", original.reply_to, reply_to),
        )
        if was != given
    ]


def conflict(
    original: Message,
    differs: list[str],
    *,
    key: str,
    recipient_id: str,
    original_to: str,
    asked_to: str,
) -> PagerError:
    """The refusal of a send that reuses `key` of `original` and `differs` from it.
    `original_to` and `asked_to`: the addresses of the original's recipient and of this
    send's (their ids when they are gone)."""
    what = " and ".join(differs)
    if "recipient" in differs:
        # The same address may name another identity now (the first one was reaped).
        what += f" (this one is to {asked_to if asked_to != original_to else recipient_id})"
    return PagerError(
        ErrorCode.CONFLICT,
        f"idempotency_key {key!r} was already used for message {original.id} to {original_to};"
        f" this send differs in {what}, so nothing was sent. Use a new idempotency_key for a"
        " new message (only an unchanged repeat returns the original).",
        message_id=original.id,
        idempotency_key=key,
        differs=differs,
    )
