"""Turning stored messages into what their reader gets, one message at a time (SPEC §12: one
message never costs another).

Rendering reads content a sender chose (a page's fields, a body) that was checked at the edge
when it was sent, but a row may still hold what today's edge refuses (an older broker's, a
restored backup's), and encoders on the way out have limits of their own. So each message is
rendered alone, all the way to the JSON and the envelope its reader gets: what fails is
reported with its cause, never raised, and the messages around it are rendered as usual. What
becomes of a failed one is the caller's rule: a claim dead-letters it (`unrenderable`), a
read-only listing shows a placeholder (`pager.domain.results.placeholder_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs

from pager.domain.envelope import render_message
from pager.domain.results import MailMessage
from pager.wire import unstructure

T = TypeVar("T")
R = TypeVar("R")

#: What rendering raises for content it cannot render: JSON that is not JSON or nests too deep
#: (ValueError, RecursionError), a value of the wrong type (TypeError); UnicodeError is a
#: ValueError. Anything else is a bug of Pager's and propagates (and never `Cancelled`).
RENDER_ERRORS: tuple[type[Exception], ...] = (RecursionError, ValueError, TypeError)


@attrs.frozen
class Rendered(Generic[T, R]):
    """The items that rendered, each with what it rendered to, and those that failed, each
    with the error, both in the order given."""

    shown: list[tuple[T, R]]
    failed: list[tuple[T, Exception]]


def render_each(items: Iterable[T], render: Callable[[T], R]) -> Rendered[T, R]:
    """`render` applied to each item alone: a failure costs only its own item."""
    shown: list[tuple[T, R]] = []
    failed: list[tuple[T, Exception]] = []
    for item in items:
        try:
            shown.append((item, render(item)))
        except RENDER_ERRORS as exc:
            failed.append((item, exc))
    return Rendered(shown, failed)


def proved(answer: T, message: MailMessage, display_cap: int) -> T:
    """`answer` (the reader's form of `message`) once it is shown to turn into JSON and
    `message` into its envelope: what an edge does with it next cannot fail on its content."""
    encoded(answer)
    render_message(
        sender_address=message.sender,
        message_id=message.id,
        body=message.body,
        sent_at=message.sent_at,
        thread=message.thread,
        display_cap=display_cap,
        attempt=message.attempt,
    )
    return answer


def encoded(answer: object) -> Any:
    """`answer` as JSON-ready data, once it is shown to encode as JSON."""
    data = unstructure(answer)
    json.dumps(data)
    return data


def cause(exc: Exception) -> str:
    """An error as one short line for the log (never a traceback: a message is data)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"
