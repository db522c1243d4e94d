"""What one send costs the disk (SQLite): the pages its commit writes to the WAL, each one
waited for by the commit's fsync. A later change that adds an index (or a row elsewhere) to
every send fails here and names the pages."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.messaging.conftest import open_harness
from tests.wal_pages import commits_on

#: One send to an inbox that holds mail already, in one commit: the message's table page and
#: its six indexes (`id`, `messages_by_recipient`, `messages_by_sender`,
#: `messages_sent_recently`, `messages_inbox`, `messages_age`), the event's table page and the
#: `sqlite_sequence` row of both (one page). A send that moves the recipient's next due time
#: (its first unsettled message) writes its row as well.
PAGES_PER_SEND = 9


async def test_a_send_writes_few_pages_in_one_commit(tmp_path: Path) -> None:
    async with open_harness(tmp_path) as harness:
        with trio.fail_after(30):
            _, alice = await harness.register("alice")
            await harness.register("bob")
            await harness.service.send(alice, to="bob", body="the first one")
            with commits_on(tmp_path / "pager.db") as written:
                await harness.service.send(alice, to="bob", body="hello")
            listing = "\n".join(" ".join(commit.owners) for commit in written.commits)
            assert len(written.commits) == 1, listing
            assert written.pages() == PAGES_PER_SEND, listing
