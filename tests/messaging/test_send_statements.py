"""What one send costs the store, end to end through the service (SQLite): the statements
it runs, counted, and the recipient's row read once. A later change that adds a statement to
every send fails here and says which."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from tests.messaging.conftest import open_harness
from tests.messaging.test_auth_round_trips import store_connections
from tests.statement_counter import statements_on

#: One send, once both identities' actors run and the recipient's inbox holds mail already:
#: the address resolved (BEGIN, one statement, COMMIT), then the write (BEGIN IMMEDIATE, the
#: writer's two busy-timeout pragmas, its savepoint, the sender's chain and rates, the
#: message, its event, `exchanged`, the recipient's row with the inbox's deadlines, RELEASE,
#: COMMIT). SQLite's one writer needs no inbox lock: its dialect takes none.
STATEMENTS_PER_SEND = 14


def recipient_reads(statements: list[str], recipient_id: str, alias: str) -> list[str]:
    """The statements that read the recipient's identities row: by its id (`id = '…'`, not
    `recipient_id = '…'`, a column of messages), by the id the statement joins it on, or by
    its alias."""
    by_row = re.compile(rf"(?<![\w.])(i\.)?id = '{recipient_id}'|CAST\('{recipient_id}'")
    return [
        sql
        for sql in statements
        if sql.lstrip().upper().startswith("SELECT")
        and (by_row.search(sql) or f"alias_key = '{alias}'" in sql)
    ]


async def test_a_send_runs_few_statements_and_reads_its_recipient_once(tmp_path: Path) -> None:
    async with open_harness(tmp_path) as harness:
        with trio.fail_after(30):
            _, alice = await harness.register("alice")
            _, bob = await harness.register("bob")
            await harness.service.send(alice, to="bob", body="the first one")
            with statements_on(*store_connections(harness)) as seen:
                sent = await harness.service.send(alice, to="bob", body="hello")
            assert sent["recipient"]["agent_id"] == bob.agent_id
            listing = "\n".join(seen)
            assert len(seen) == STATEMENTS_PER_SEND, listing
            writes = seen[seen.index("BEGIN IMMEDIATE") :]
            lookups = seen[: seen.index("BEGIN IMMEDIATE")]
            # Once to resolve the address; once in the write, with the inbox's deadlines
            # (the reap of a recipient that committed just before must win).
            assert len(recipient_reads(lookups, bob.agent_id, "bob")) == 1, listing
            assert len(recipient_reads(writes, bob.agent_id, "bob")) == 1, listing
