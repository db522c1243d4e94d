"""A roster page's rows as the store reads them (SPEC §8 `roster`), and the key a page
continues after.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class RosterEntry:
    """One identity of a roster page (SPEC §8 `roster`), as the store knows it."""

    agent_id: str
    alias: str
    address: str
    implementation: str
    last_seen: str
    waiting: int  # queued, claimed and delivered: its mail not yet acknowledged
    host: str  # its workspace's host ('' on a store of one broker)
    attached_host: str | None  # the host its attached session came through; None: detached


#: Where a roster page starts after: the (workspace slug, alias key) of the last one shown.
RosterKey = tuple[str, str]
