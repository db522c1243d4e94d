"""The agents table's `reserved` column: each agent's edit reservations from
`GET /v1/reservations`, joined to the snapshot by agent id."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text

from pager.tui.model import parse_snapshot
from pager.tui.rows import COLUMNS, table_rows

AGENT = {"agent_id": "agt_a", "alias": "alice", "address": "alice@api-1", "attached": True}
IDLE = {"agent_id": "agt_b", "alias": "bob", "address": "bob@api-1"}


def _reserved_cells(reservations: object) -> dict[str, str]:
    snapshot = parse_snapshot(
        {"workspaces": [{"slug": "api-1", "path": "/a", "agents": [AGENT, IDLE]}]}, reservations
    )
    column = [key for key, _, _ in COLUMNS].index("reserved")
    rows = table_rows(snapshot, datetime.now(UTC), set())
    cells = {}
    for row in rows:
        cell = row.cells[column]
        if row.agent_id is not None:
            cells[row.agent_id] = cell.plain if isinstance(cell, Text) else cell
    return cells


def test_reserved_column_names_the_first_patterns_and_counts_the_rest() -> None:
    """Two patterns shown, then `+N`; stale ones said so; an agent with none shows nothing."""
    held = [
        {"agent_id": "agt_a", "pattern": p, "state": "active"}
        for p in ("src/*.py", "docs/**", "README.md")
    ]
    held.append({"agent_id": "agt_b", "pattern": "lib/**", "state": "stale"})
    cells = _reserved_cells(held)
    assert cells == {"agt_a": "src/*.py, docs/** +1", "agt_b": "lib/** (stale)"}


def test_reserved_column_without_the_listing() -> None:
    """A broker that answers no listing (an older one): the table as before, nothing reserved."""
    assert _reserved_cells(None) == {"agt_a": "", "agt_b": ""}
