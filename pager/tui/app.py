"""The operator TUI's main screen: every workspace with its agents and its archive section.

Data flow: one long-lived worker (`_follow`) reads the snapshot, then follows `/v1/events`
from the snapshot's `seq`. Every event marks the view stale; `RefreshGate` paces the snapshot
re-reads (at most 5 per second). `event: reset` re-reads the snapshot at once; a dropped
stream or `event: closing` shows "reconnecting…" and retries with backoff, looking the broker
up again each time. JSON calls are blocking and run in threads (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Header, Static

from pager.domain.addressing import PERSON
from pager.domain.display import for_terminal
from pager.tui.confirm import ConfirmScreen
from pager.tui.errors import ApiError, Unreachable
from pager.tui.help import HelpScreen
from pager.tui.install_menu import InstallMenu, Runner
from pager.tui.keyhelp import KeyHelp
from pager.tui.live import Backoff, RefreshGate
from pager.tui.messages import MessagesScreen
from pager.tui.model import Agent, Snapshot, wake_notice
from pager.tui.rows import AUTO_WIDTH, COLUMNS, Row, cursor_key, table_rows
from pager.tui.source import BREAK_RESERVATIONS, OperatorSource

AGE_REFRESH = 15.0  # re-render "3m ago" this often, without asking the broker
#: Stream frames that change nothing shown.
CONTROL_FRAMES = frozenset({"ready"})
#: Frames after which the snapshot is read again and the stream reopened from its seq: `reset`
#: (events were pruned or the log is not the one we read) and `overflow` (we fell behind).
RESYNC_FRAMES = frozenset({"reset", "overflow"})


class BrokerClosing(Exception):
    """The broker said `event: closing`: it is shutting down."""


@dataclass
class ActionReport:
    action: str
    done: list[Agent] = field(default_factory=list)
    failed: list[tuple[Agent, str]] = field(default_factory=list)


@dataclass(frozen=True)
class ActionSpec:
    verb: str
    applies: Callable[[Agent], bool]
    not_applicable: str
    warning: str = ""
    done: str = ""  # what a notice says was done ("archived"); default: the verb + "d"

    @property
    def past(self) -> str:
        return self.done or f"{self.verb.lower()}d"


ACTIONS = {
    "archive": ActionSpec(
        "Archive",
        lambda agent: not agent.archived,
        "already archived",
        "Archived agents keep their mail and can be unarchived (u).",
    ),
    "unarchive": ActionSpec("Unarchive", lambda agent: agent.archived, "not archived"),
    "purge": ActionSpec(
        "Purge",
        lambda agent: True,
        "",
        "Purging deletes the identity for good: its alias is freed and mail still waiting "
        "for it becomes dead letters. This cannot be undone.",
    ),
    # Launch on mail (docs/wake.md): `pager wake on|off` from the TUI.
    "wake_on": ActionSpec(
        "Wake on",
        lambda agent: not agent.wake and not agent.archived and agent.implementation != PERSON,
        "already on, archived, or the person",
        "Mail to it will launch its harness headless when no session of it runs, with its "
        "own permission settings (at most 4 runs an hour, 10 minutes each; `pager wake on` "
        "sets other bounds). docs/wake.md says what that risks.",
        done="launch on mail on",
    ),
    "wake_off": ActionSpec(
        "Wake off", lambda agent: agent.wake, "launch on mail is not on", done="launch on mail off"
    ),
    # Edit reservations (docs/reservations.md): `pager reservations break ID` from the TUI.
    BREAK_RESERVATIONS: ActionSpec(
        "Break reservations",
        lambda agent: bool(agent.reservation_ids),
        "it holds no reservations",
        "Its edit reservations end now: other agents may edit those files. The agent is "
        "not told; it can reserve again.",
        done="reservations broken",
    ),
}


class AgentsTable(DataTable[str | Text]):
    """The agents table; Enter (open the message view) is shown in the footer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "messages"),
    ]


class PagerApp(App[None]):
    TITLE = "Pager"
    CSS = """
    #agents { height: 1fr; }
    #status { height: auto; padding: 0 1; background: $boost; }
    """
    # `q` and `?` first: the help line ends with an ellipsis when the terminal is narrow,
    # and these two must show at 80 columns.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("space", "toggle_mark", "mark"),
        Binding("a", "act('archive')", "archive"),
        Binding("u", "act('unarchive')", "unarchive"),
        Binding("p", "act('purge')", "purge"),
        Binding("w", "act('wake_on')", "wake on"),
        Binding("W", "act('wake_off')", "wake off", key_display="W"),
        Binding("b", f"act('{BREAK_RESERVATIONS}')", "break reservations"),
        Binding("m", "menu", "install skill/plugin"),
        Binding("r", "refresh", "refresh"),
        Binding("escape", "clear_marks", "clear marks", show=False),
    ]

    def __init__(
        self,
        source: OperatorSource,
        *,
        install_runner: Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.install_runner = install_runner
        self.clock = clock
        self.backoff = backoff or Backoff()
        self.gate = RefreshGate()
        self.snapshot: Snapshot | None = None
        self.connection = "connecting"  # connecting | live | reconnecting
        self.connection_detail = ""
        self.marked: set[str] = set()
        self.last_action: ActionReport | None = None
        self.snapshots_applied = 0
        self.events_seen = 0
        self.reconnects = 0
        self.resyncs = 0
        self._requested = 0
        self._applied = 0
        self._shown_keys: list[str] = []
        self._shown: dict[str, tuple[tuple[str, str], ...]] = {}

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield AgentsTable(id="agents", cursor_type="row")
        yield Static(id="status", markup=False)
        yield KeyHelp([*self.BINDINGS, *AgentsTable.BINDINGS], id="keys")

    def on_mount(self) -> None:
        table = self.table
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        table.focus()
        self._show_status()
        self.run_worker(self._follow(), group="follow", exclusive=True)
        self.set_interval(AGE_REFRESH, self._rerender)

    @property
    def table(self) -> AgentsTable:
        return self.query_one("#agents", AgentsTable)

    # -- live updates ---------------------------------------------------------------------

    async def _follow(self) -> None:
        """Snapshot, then the event stream from its seq; forever, reconnecting as needed."""
        first = True
        while True:
            received = 0
            try:
                if not first:
                    await asyncio.to_thread(self.source.relocate)
                first = False
                snapshot = await self._read_snapshot()
                self.backoff.reset()
                self._set_connection("live", "")
                async for event in self.source.events(snapshot.seq):
                    if event.event in CONTROL_FRAMES:
                        continue
                    if event.event in RESYNC_FRAMES:
                        break
                    if event.event == "closing":
                        raise BrokerClosing("the broker is shutting down")
                    received += 1
                    self.events_seen += 1
                    self._changed()
                    if event.event.startswith("wake."):
                        self._tell_wake(event.event, event.json())
                else:
                    raise Unreachable("the event stream ended")
                self.resyncs += 1
                if received:  # reset or overflow: read the snapshot again at once
                    continue
                delay = self.backoff.next_delay()  # straight after connecting: do not spin
            except (Unreachable, ApiError, BrokerClosing) as exc:
                delay = self.backoff.next_delay()
                self.reconnects += 1
                self._set_connection("reconnecting", f"{exc}; retrying in {delay:.1f}s")
            await asyncio.sleep(delay)

    async def _read_snapshot(self) -> Snapshot:
        self._requested += 1
        request = self._requested
        snapshot = await asyncio.to_thread(self.source.snapshot)
        if request > self._applied:  # an older read finishing late is dropped
            self._applied = request
            self._apply(snapshot)
        return snapshot

    def _tell_wake(self, kind: str, payload: Any) -> None:
        """A wake run started, ended or was put off: told in a notice (docs/wake.md)."""
        data = payload.get("data") if isinstance(payload, dict) else None
        text = wake_notice(kind, data)
        if text is not None:  # a reason, an address: shown escaped
            self.notify(for_terminal(text, one_line=True), markup=False)

    def _changed(self) -> None:
        self._refresh_after(self.gate.changed(self.clock()))

    def _refresh_after(self, delay: float | None) -> None:
        if delay is None:
            return
        if delay <= 0:  # Textual's timers refuse a zero delay
            self.call_later(self._start_refresh)
        else:
            self.set_timer(delay, self._start_refresh)

    def _start_refresh(self) -> None:
        self.gate.begin(self.clock())
        self.run_worker(self._refresh_once(), group="refresh")

    async def _refresh_once(self) -> None:
        try:
            await self._read_snapshot()
        except (Unreachable, ApiError) as exc:
            self.connection_detail = f"refresh failed: {exc}"
            self._show_status()  # the follower notices a dead broker and reconnects
        self._refresh_after(self.gate.end(self.clock()))

    def _set_connection(self, state: str, detail: str) -> None:
        self.connection, self.connection_detail = state, detail
        self._show_status()

    # -- rendering ------------------------------------------------------------------------

    def _apply(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.marked &= set(snapshot.agents())
        self.snapshots_applied += 1
        self._render()
        if self.snapshots_applied == 1:
            self.call_after_refresh(_settle_heap)
        if isinstance(self.screen, MessagesScreen):
            self.screen.reload()

    def _rerender(self) -> None:
        """The age refresh; its timer can fire once more while the app closes, after its
        widgets are gone: nothing is left to render then."""
        if self.snapshot is None or not self.query("#agents"):
            return
        self._render()

    def _render(self) -> None:
        assert self.snapshot is not None
        rows = table_rows(self.snapshot, datetime.now(UTC), self.marked)
        keys = [row.key for row in rows]
        table = self.table
        if keys == self._shown_keys:
            self._update_cells(table, rows)
        elif _only_removed(self._shown_keys, keys):  # purges and reaps: no rebuild
            for key in set(self._shown_keys) - set(keys):
                table.remove_row(key)
                del self._shown[key]
            self._shown_keys = keys
            self._update_cells(table, rows)
        else:
            self._rebuild(table, rows, keys)
        self._show_status()

    def _update_cells(self, table: DataTable[str | Text], rows: list[Row]) -> None:
        for row in rows:
            signature = _signature(row)
            before = self._shown.get(row.key)
            if before == signature:
                continue
            for (column, _, _), cell, old, new in zip(
                COLUMNS, row.cells, before or (), signature, strict=False
            ):
                if old != new:
                    table.update_cell(row.key, column, cell, update_width=column in AUTO_WIDTH)
            self._shown[row.key] = signature

    def _rebuild(self, table: DataTable[str | Text], rows: list[Row], keys: list[str]) -> None:
        current = self.current_key()
        index = table.cursor_row
        table.clear()
        for row in rows:
            table.add_row(*row.cells, key=row.key)
        self._shown_keys = keys
        self._shown = {row.key: _signature(row) for row in rows}
        if current in keys:
            table.move_cursor(row=keys.index(current), animate=False)
        elif keys:
            table.move_cursor(row=min(index, len(keys) - 1), animate=False)

    def action_help(self) -> None:
        self.push_screen(HelpScreen([*self.BINDINGS, *AgentsTable.BINDINGS]))

    def _show_status(self) -> None:
        parts = []
        if self.connection == "live":
            parts.append("● live")
        elif self.connection == "reconnecting":
            parts.append("reconnecting…")
        else:
            parts.append("connecting…")
        parts.append(self.source.where)
        snapshot = self.snapshot
        if snapshot is not None:
            totals = snapshot.totals
            parts.append(
                f"broker {snapshot.broker.version} pid {snapshot.broker.pid} · "
                f"{totals.get('workspaces', len(snapshot.workspaces))} workspaces, "
                f"{totals.get('agents', len(snapshot.agents()))} agents "
                f"({totals.get('attached', 0)} attached, {totals.get('archived', 0)} archived) · "
                f"waiting {totals.get('queued', 0)}, claimed {totals.get('claimed', 0)}, "
                f"dead {totals.get('dead', 0)}"
            )
        if self.marked:
            parts.append(f"{len(self.marked)} marked")
        if self.connection_detail:
            parts.append(self.connection_detail)
        self.sub_title = {"live": "live", "reconnecting": "reconnecting…"}.get(
            self.connection, "connecting…"
        )
        self.query_one("#status", Static).update(" · ".join(parts))

    # -- selection ------------------------------------------------------------------------

    def current_key(self) -> str | None:
        return cursor_key(self.table)

    def current_agent(self) -> Agent | None:
        if self.snapshot is None:
            return None
        key = self.current_key()
        return self.snapshot.agents().get(key) if key else None

    def targets(self) -> list[Agent]:
        """The marked agents in table order, or else the agent under the cursor."""
        if self.snapshot is None:
            return []
        agents = self.snapshot.agents()
        if self.marked:
            return [agents[key] for key in self._shown_keys if key in self.marked]
        agent = self.current_agent()
        return [agent] if agent else []

    def action_toggle_mark(self) -> None:
        agent = self.current_agent()
        if agent is None:
            return
        self.marked.symmetric_difference_update({agent.agent_id})
        self._render()
        self.table.action_cursor_down()

    def action_clear_marks(self) -> None:
        if self.marked:
            self.marked.clear()
            self._render()

    # -- actions --------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self._changed()

    def action_open_messages(self) -> None:
        agent = self.current_agent()
        if agent is not None:
            self.push_screen(MessagesScreen(self.source, agent))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table is self.table:
            self.action_open_messages()

    def action_menu(self) -> None:
        self.push_screen(InstallMenu(self.install_runner))

    def action_act(self, action: str) -> None:
        spec = ACTIONS[action]
        chosen = self.targets()
        if not chosen:
            self.notify(f"{spec.verb}: move to an agent, or mark several with space.")
            return
        targets = [agent for agent in chosen if spec.applies(agent)]
        skipped = len(chosen) - len(targets)
        if not targets:
            self.notify(f"{spec.verb}: nothing to do ({spec.not_applicable}).")
            return
        noun = "agent" if len(targets) == 1 else f"{len(targets)} agents"
        question = f"{spec.verb} {noun}?"
        if skipped:
            question += f" ({skipped} marked {'is' if skipped == 1 else 'are'} skipped: "
            question += f"{spec.not_applicable})"
        names = [f"{agent.label}  ({agent.implementation}, {agent.agent_id})" for agent in targets]

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.run_worker(self._perform(action, targets), group="actions")

        self.push_screen(
            ConfirmScreen(question, names, verb=spec.verb, warning=spec.warning), confirmed
        )

    async def _perform(self, action: str, targets: list[Agent]) -> None:
        report = ActionReport(action)
        for agent in targets:
            try:
                if action == BREAK_RESERVATIONS:
                    await asyncio.to_thread(self.source.break_reservations, agent.reservation_ids)
                else:
                    await asyncio.to_thread(self.source.act, agent.agent_id, action)
            except (Unreachable, ApiError) as exc:
                report.failed.append((agent, str(exc)))
            else:
                report.done.append(agent)
        self.last_action = report
        self.marked -= {agent.agent_id for agent in report.done}
        spec = ACTIONS[action]
        if report.done:
            self.notify(f"{spec.past}: {', '.join(a.label for a in report.done)}", markup=False)
        for agent, reason in report.failed:
            said = for_terminal(f"{spec.verb} {agent.label}: {reason}", one_line=True)
            self.notify(said, severity="error", markup=False)
        self._changed()


def _only_removed(before: list[str], after: list[str]) -> bool:
    """Whether `after` is `before` with some rows taken out (order otherwise kept)."""
    if len(after) >= len(before):
        return False
    remaining = iter(before)
    return all(key in remaining for key in after)


def _settle_heap() -> None:
    """Once the first snapshot is on screen: collect, then freeze what is alive (the widget
    tree, Textual's caches) out of the garbage collector's later full collections, which
    otherwise scan it all each time. At 1,000 agents, full collections were seen to pause the
    app for 70-300 ms (mostly freeing Textual's cyclic cache garbage); with the freeze their
    total time over a bench run was about a quarter lower, within a noisy machine's spread
    (scripts/bench_tui.py, docs/tui.md)."""
    gc.collect()
    gc.freeze()


def _signature(row: Row) -> tuple[tuple[str, str], ...]:
    return tuple(
        (cell.plain, str(cell.style)) if isinstance(cell, Text) else (cell, "")
        for cell in row.cells
    )
