"""One agent's messages, newest first, a page at a time, with their delivery states."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from pager.domain.display import for_terminal
from pager.tui.errors import ApiError, Unreachable
from pager.tui.keyhelp import KeyHelp
from pager.tui.model import Agent, Message, MessagePage, ago, local_time
from pager.tui.rows import cursor_key
from pager.tui.source import OperatorSource

PAGE_SIZE = 50
DIRECTIONS = ("both", "in", "out")
STATES = ("", "queued", "claimed", "delivered", "acknowledged", "dead")  # "" is every state
STATE_STYLES = {
    "queued": "yellow",
    "claimed": "cyan",
    "delivered": "cyan",
    "acknowledged": "green",
    "dead": "red",
}
COLUMNS = (
    ("sent", "sent"),
    ("dir", "dir"),
    ("peer", "from / to"),
    ("state", "state"),
    ("attempts", "tries"),
    ("thread", "thread"),
    ("body", "body"),
)
PREVIEW = 70


class MessagesScreen(Screen[None]):
    """Pushed over the agents table by Enter; escape goes back."""

    DEFAULT_CSS = """
    MessagesScreen #title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    MessagesScreen #messages { height: 2fr; }
    MessagesScreen #detail-box { height: 1fr; border-top: solid $primary; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("n", "older", "older page"),
        Binding("b", "newer", "newer page"),
        Binding("d", "direction", "in/out/both"),
        Binding("s", "state", "state filter"),
        Binding("r", "reload", "refresh"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, source: OperatorSource, agent: Agent, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__()
        self.source = source
        self.agent = agent
        self.page_size = page_size
        self.direction = "both"
        self.state = ""
        self.cursors: list[str | None] = [None]  # the cursor of each page up to this one
        self.page: MessagePage | None = None
        self.error: str | None = None
        self.loads = 0  # pages applied (tests wait on it)
        self._requested = 0
        self._applied = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="title", markup=False)
        yield DataTable(id="messages", cursor_type="row")
        with VerticalScroll(id="detail-box"):
            yield Static(id="detail", markup=False)
        yield KeyHelp(self.BINDINGS, id="keys")

    def on_mount(self) -> None:
        table = self.query_one("#messages", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self._show_title()
        self.reload()

    @property
    def page_number(self) -> int:
        return len(self.cursors)

    def reload(self) -> None:
        """Fetch the current page again (also called by the app when the broker changed)."""
        self._requested += 1
        self.run_worker(self._load(self._requested), group="messages", exclusive=True)

    async def _load(self, request: int) -> None:
        try:
            page = await asyncio.to_thread(
                self.source.messages,
                self.agent.agent_id,
                direction=self.direction,
                state=self.state,
                limit=self.page_size,
                cursor=self.cursors[-1],
            )
        except (Unreachable, ApiError) as exc:
            if request > self._applied:
                self.error = str(exc)
                self._show_title()
            return
        if request <= self._applied:
            return  # a later request already answered
        self._applied = request
        self.error = None
        self._show(page)

    def _show(self, page: MessagePage) -> None:
        self.page = page
        table = self.query_one("#messages", DataTable)
        selected = self._selected_id()
        table.clear()
        now = datetime.now(UTC)
        for message in page.messages:
            table.add_row(*_cells(message, now), key=message.message_id)
        if selected is not None and selected in {m.message_id for m in page.messages}:
            table.move_cursor(row=table.get_row_index(selected))
        self.loads += 1
        self._show_title()
        self._show_detail()

    def _selected_id(self) -> str | None:
        return cursor_key(self.query_one("#messages", DataTable))

    def selected(self) -> Message | None:
        if self.page is None:
            return None
        wanted = self._selected_id()
        return next((m for m in self.page.messages if m.message_id == wanted), None)

    def _show_title(self) -> None:
        state = self.state or "all states"
        more = ", more (n)" if self.page is not None and self.page.next_cursor else ""
        back = ", newer (b)" if len(self.cursors) > 1 else ""
        shown = len(self.page.messages) if self.page else 0
        title = (
            f"{self.agent.label} ({self.agent.implementation}) · messages {self.direction}, "
            f"{state} · page {self.page_number}: {shown}{more}{back}"
        )
        if self.error:
            title += f" · error: {self.error}"
        self.query_one("#title", Static).update(_line(title))

    def _show_detail(self) -> None:
        message = self.selected()
        detail = self.query_one("#detail", Static)
        if message is None:
            detail.update("(no messages)" if self.page is not None else "loading…")
            return
        lines = [
            f"message   {message.message_id}",
            f"from      {message.sender.label}",
            f"to        {message.recipient.label}",
            f"sent      {local_time(message.sent_at)}",
            f"state     {message.state}"
            + (f" ({message.dead_reason})" if message.dead_reason else "")
            + f", {message.attempts} attempt{'' if message.attempts == 1 else 's'}",
        ]
        if message.settled_at:
            lines.append(f"settled   {local_time(message.settled_at)}")
        if message.thread:
            lines.append(f"thread    {message.thread}")
        if message.reply_to:
            lines.append(f"reply to  {message.reply_to}")
        # Others chose these: each line, and the body's characters, shown escaped.
        shown = "\n".join(_line(line) for line in lines) + "\n\n" + for_terminal(message.body)
        detail.update(Text(shown))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_older(self) -> None:
        if self.page is None or not self.page.next_cursor:
            self.notify("No older messages.")
            return
        self.cursors.append(self.page.next_cursor)
        self.reload()

    def action_newer(self) -> None:
        if len(self.cursors) == 1:
            self.notify("This is the newest page.")
            return
        self.cursors.pop()
        self.reload()

    def action_direction(self) -> None:
        self.direction = DIRECTIONS[(DIRECTIONS.index(self.direction) + 1) % len(DIRECTIONS)]
        self._restart()

    def action_state(self) -> None:
        self.state = STATES[(STATES.index(self.state) + 1) % len(STATES)]
        self._restart()

    def action_reload(self) -> None:
        self.reload()

    def _restart(self) -> None:
        self.cursors = [None]
        self.page = None
        self._show_title()
        self.reload()


def _line(text: str) -> str:
    """One line of what others sent, control and format characters shown escaped."""
    return for_terminal(text, one_line=True)


def _cells(message: Message, now: datetime) -> tuple[str | Text, ...]:
    first_line = message.body.splitlines()[0] if message.body else ""
    preview = first_line if len(first_line) <= PREVIEW else first_line[: PREVIEW - 1] + "…"
    if "\n" in message.body.strip() and len(preview) < PREVIEW:
        preview += " …"
    state = message.state + (f" ({message.dead_reason})" if message.dead_reason else "")
    return (
        ago(message.sent_at, now),
        "← in" if message.direction == "in" else "→ out",
        Text(_line(message.peer.label)),
        Text(_line(state), STATE_STYLES.get(message.state, "")),
        str(message.attempts),
        Text(_line(message.thread or "")),
        Text(_line(preview)),
    )
