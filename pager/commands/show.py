"""Text for a person: what the broker said (others chose much of it) shown escaped, in
aligned columns, with times as ages."""

from __future__ import annotations

import sys
import time

from pager.domain.display import for_terminal, json_for_terminal

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any


def print_json(data: Any) -> None:
    sys.stdout.write(json_text(data, indent=2) + "\n")


def json_text(data: Any, indent: int | None = None) -> str:
    """Exact JSON, readable (not ASCII-only), with what would drive a terminal as `\\uXXXX`."""
    import json  # here: most commands print no JSON, and `json` imports `re`

    return json_for_terminal(json.dumps(data, indent=indent, ensure_ascii=False))


def one_line(value: object) -> str:
    """A value from the broker (others chose it) on one line of what we print for a person:
    control and format characters shown escaped (`pager.domain.display`)."""
    return for_terminal(str(value), one_line=True)


def ago(stamp: str | None, now: float | None = None) -> str:
    """`3m ago` from an ISO time (the broker's UTC), `-` when none."""
    if not stamp:
        return "-"
    from datetime import datetime

    try:
        then = datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return stamp
    seconds = max(0, int((now or time.time()) - then))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def counted(count: int, one: str, many: str) -> str:
    """`1 message`, `2 messages`: a count with its noun in the right number."""
    return f"{count} {one if count == 1 else many}"


def first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def table(header: list[str], rows: list[list[str]]) -> str:
    """Aligned columns; the last one is not padded. Cells are shown one line each, escaped."""
    rows = [[one_line(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def person_view(message: dict[str, Any], *, token: str | None = None) -> str:
    """One message for a person at a terminal (docs/cli.md): a header, a field a line (who
    sent it, when, its thread and what it answers when it has them, its id), then the body
    indented by two spaces. Every value is shown escaped and on one line, and every body line
    is indented, so nothing a sender wrote can pass for a header line or for the next
    message; the body keeps its line breaks and tabs."""
    fields = [("From", message["from"])]
    if message.get("direction") == "sent":  # in `history`: one of the person's own
        fields.append(("To", message["to"]))
    fields.append(("When", _when(message["sent_at"])))
    if message.get("thread"):
        fields.append(("Thread", message["thread"]))
    if message.get("reply_to"):
        fields.append(("Reply to", message["reply_to"]))
    attempt = int(message.get("attempt") or 1)
    again = f" (shown {attempt} times: it was not acknowledged before)" if attempt > 1 else ""
    fields.append(("Message", f"{message['id']}{again}"))
    if token is not None:
        fields.append(("Token", token))
    header = [f"{name + ':':<10}{one_line(value)}" for name, value in fields]
    body = [f"  {line}" if line else "" for line in for_terminal(message["body"]).split("\n")]
    return "\n".join([*header, "", *body])


def _when(stamp: str) -> str:
    """`2026-12-03 17:02:11 (2m ago)`, in this machine's time zone."""
    from datetime import datetime

    try:
        then = datetime.fromisoformat(stamp).astimezone()
    except ValueError:
        return stamp
    return f"{then:%Y-%m-%d %H:%M:%S} ({ago(stamp)})"
