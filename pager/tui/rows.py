"""The agents table as rows: per workspace a heading, its agents, then its archive section.

Pure (rich `Text` for styling, no widgets), so the layout is testable and the app only diffs
rows against what it already shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from pager.domain.display import for_terminal
from pager.tui.model import Agent, Snapshot, Workspace, ago

#: (key, label, width) of each column, in order; None: as wide as its widest cell. Columns
#: whose cells change in place (counts, ages) have a fixed width, so an update never makes
#: the table re-measure a whole column.
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("mark", " ", 1),
    ("alias", "alias", None),
    ("implementation", "implementation", None),
    ("host", "host", None),
    ("attached", "attached", 8),
    ("waiting", "waiting", 7),
    ("claimed", "claimed", 7),
    ("dead", "dead", 5),
    ("last_seen", "last seen", 9),
    ("address", "address", None),
    ("reserved", "reserved", None),
)
#: The columns sized to their content.
AUTO_WIDTH = frozenset(key for key, _, width in COLUMNS if width is None)
MARK = "●"

Cell = str | Text


@dataclass(frozen=True)
class Row:
    key: str  # the agent id for agent rows; `ws:<slug>` / `archive:<slug>` for headings
    cells: tuple[Cell, ...]
    agent_id: str | None = None


def cursor_key(table: DataTable[Any]) -> str | None:
    """The key of the row under the table's cursor, or None in an empty table."""
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


#: What an empty broker shows instead of a blank table: how to get a first session.
EMPTY_HINT = (
    "  No agents yet. Start a harness as one: `pager claude` (`pager implementations` lists"
    " them), or `pager shell -- CMD`; or send yourself a note: `pager send $USER hello`."
)


def table_rows(snapshot: Snapshot, now: datetime, marked: set[str]) -> list[Row]:
    rows: list[Row] = []
    if not snapshot.workspaces:
        return [Row("empty", _blank(Text(EMPTY_HINT, "dim")))]
    for workspace in snapshot.workspaces:
        rows.append(_heading(workspace))
        rows += [_agent_row(agent, now, agent.agent_id in marked) for agent in workspace.active]
        if not workspace.agents:
            rows.append(Row(f"empty:{workspace.slug}", _blank(Text("  (no agents)", "dim"))))
        archived = workspace.archive
        if archived:
            label = Text(f"  archive ({len(archived)})", "italic dim")
            rows.append(Row(f"archive:{workspace.slug}", _blank(label)))
            rows += [_agent_row(agent, now, agent.agent_id in marked) for agent in archived]
    return rows


def _blank(label: Text) -> tuple[Cell, ...]:
    return ("", label, *("" for _ in COLUMNS[2:]))


def _heading(workspace: Workspace) -> Row:
    active = workspace.active
    attached = sum(1 for agent in active if agent.attached)
    cells: tuple[Cell, ...] = (
        "",
        Text(_line(workspace.slug or "(no workspace)"), "bold"),
        Text(f"{len(active)} agent{'' if len(active) == 1 else 's'}", "bold"),
        "",
        Text(f"{attached} on", "bold"),
        Text(str(sum(agent.inbox.queued for agent in active)), "bold"),
        Text(str(sum(agent.inbox.claimed for agent in active)), "bold"),
        Text(str(sum(agent.inbox.dead for agent in active)), "bold"),
        "",
        Text(_line(workspace.path), "dim"),
        "",
    )
    return Row(f"ws:{workspace.slug}", cells)


def _agent_row(agent: Agent, now: datetime, marked: bool) -> Row:
    dim = "dim" if agent.archived else ""
    alias = agent.alias or agent.agent_id
    if not agent.durable:
        alias += " (ephemeral)"
    if agent.wake:
        alias += " (wake on)"  # launch on mail: mail may start a run (docs/wake.md)
    if agent.waking:
        attached = Text("run", "cyan")  # attached through a wake run
    else:
        attached = Text("yes", "green") if agent.attached else Text("no", "dim")
    dead = Text(str(agent.inbox.dead), "red" if agent.inbox.dead else dim)
    cells: tuple[Cell, ...] = (
        Text(MARK, "bold yellow") if marked else "",
        Text(_line(f"  {alias}"), dim),
        Text(_line(agent.implementation), dim),
        # A host whose broker stopped beating (a shared store): its sessions' mail waits.
        Text(_line(agent.host), dim)
        if agent.host_alive
        else Text(_line(f"{agent.host} (down)"), "red"),
        attached,
        Text(str(agent.inbox.queued), "bold" if agent.inbox.queued else dim),
        Text(str(agent.inbox.claimed), dim),
        dead,
        Text(ago(agent.last_seen, now), dim),
        Text(_line(agent.address), dim),
        _reserved(agent),
    )
    return Row(agent.agent_id, cells, agent.agent_id)


#: Patterns a row names before it counts the rest.
RESERVED_SHOWN = 2


def _reserved(agent: Agent) -> Text:
    """Its edit reservations: the first patterns and how many more (`stale`: its holder has
    no live session, so they block nothing)."""
    if not agent.reservations:
        return Text("")
    shown = ", ".join(pattern for pattern, _ in agent.reservations[:RESERVED_SHOWN])
    more = len(agent.reservations) - RESERVED_SHOWN
    text = shown + (f" +{more}" if more > 0 else "")
    stale = all(stale for _, stale in agent.reservations)
    return Text(_line(text + (" (stale)" if stale else "")), "dim" if stale else "yellow")


def _line(text: str) -> str:
    """A cell from the broker, on one line, control and format characters shown escaped."""
    return for_terminal(text, one_line=True)
