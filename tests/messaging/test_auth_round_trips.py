"""Authenticating a known session token costs no store statement: the token is answered from
the identity actors' in-memory session index (`actors/sessions.py`), kept current by the
actor that owns the binding; only a token the index does not hold goes to the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from pager.domain import ids
from pager.domain.errors import PagerError
from pager.requests import RegisterRequest
from tests.messaging.conftest import Harness, open_harness
from tests.statement_counter import statements_on


def store_connections(harness: Harness) -> list[sqlite3.Connection | None]:
    """The connections a request may reach the store by: the lookups' and the writer's."""
    writer = harness.writer
    return [harness.checkpoint.quick._conn, None if writer is None else writer._conn]


async def test_a_known_token_is_authenticated_without_a_statement(tmp_path: Path) -> None:
    async with open_harness(tmp_path) as harness:
        with trio.fail_after(30):
            registered, caller = await harness.register("alice")
            await harness.checkpoint.lookup(lambda conn: None)  # its lookups' connection open
            with statements_on(*store_connections(harness)) as seen:
                for _ in range(3):
                    again = await harness.service.authenticate(registered["token"])
            assert again == caller
            assert seen == []

            # The counter counts: a token the index does not hold is looked up in the store.
            stranger = ids.new_token(ids.Kind.SESSION_TOKEN)
            with statements_on(*store_connections(harness)) as seen, pytest.raises(PagerError):
                await harness.service.authenticate(stranger)
            assert seen != []


async def test_a_token_just_registered_is_known_at_once(tmp_path: Path) -> None:
    """The registration's identity actor publishes the session before the token is handed
    out: its first use is answered from memory too."""
    async with open_harness(tmp_path) as harness:
        with trio.fail_after(30):
            await harness.register("bob")  # the store's connections open
            request = RegisterRequest(
                workspace=str(harness.workspace), implementation="shell", session_name="alice"
            )
            registered = await harness.service.register(request)
            with statements_on(*store_connections(harness)) as seen:
                caller = await harness.service.authenticate(registered["token"])
            assert caller.agent_id == registered["agent_id"]
            assert seen == []
