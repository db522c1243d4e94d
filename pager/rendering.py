"""Turning stored messages into what their reader gets, one message at a time (SPEC §12: one
message never costs another).

Rendering reads content a sender chose (a page's fields, a body) that was checked at the edge
when it was sent, but a row may still hold what today's edge refuses (an older broker's, a
restored backup's). Reading it into the reader's form is where such content fails: a page's
stored fields are parsed and bounded there (`pager.domain.results.page_fields`: JSON, nested
no deeper than the encoders on the way out take), so what comes out of it is plain text and
plain JSON data, which the answer's encoders and the envelope (string work only) take as it
is. So each message is read alone: what fails is reported with its cause, never raised, and
the messages around it are read as usual. What becomes of a failed one is the caller's rule:
a claim dead-letters it (`unrenderable`), a read-only listing shows a placeholder
(`pager.domain.results.placeholder_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs

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


def encoded(answer: object) -> Any:
    """`answer` as JSON-ready data, once it is shown to encode as JSON."""
    data = unstructure(answer)
    json.dumps(data)
    return data


def cause(exc: Exception) -> str:
    """An error as one short line for the log (never a traceback: a message is data)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"
