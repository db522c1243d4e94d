"""Operator actions through the directory, in process (real SQLite, queries inline):
unarchive, purge, and the conflicts and events around them."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors.directory import ArchiveIdentity, DirectoryMessage, PurgeIdentity, UnarchiveIdentity
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.retention import Action, Applied
from tests.messaging.conftest import Harness


async def _events(h: Harness, kind: str) -> list[dict[str, Any]]:
    return h.events_of(kind)


async def _refused(h: Harness, message: DirectoryMessage) -> ErrorCode:
    with pytest.raises(PagerError) as caught:
        await h.service.directory.call(message)
    return caught.value.code


async def test_directory_unarchive_and_conflicts(harness: Harness) -> None:
    """Archive then unarchive an identity; archiving it twice or unarchiving a visible one is
    a conflict, an unknown one is not found; re-registering an archived name records
    `agent.unarchived` with reason `attached`."""
    h = harness
    with trio.fail_after(30):
        api, _ = await h.register("api")
        agent_id = api["agent_id"]
        directory = h.service.directory
        assert await _refused(h, UnarchiveIdentity(agent_id, "operator")) is ErrorCode.CONFLICT
        await directory.call(ArchiveIdentity(agent_id, "operator"))
        assert await _refused(h, ArchiveIdentity(agent_id, "operator")) is ErrorCode.CONFLICT
        done: Applied = await directory.call(UnarchiveIdentity(agent_id, "operator"))
        assert done.action is Action.UNARCHIVE
        agent = await h.agent(agent_id)
        assert agent is not None
        assert not agent.archived
        missing = UnarchiveIdentity("agt_0000000000000000", "operator")
        assert await _refused(h, missing) is ErrorCode.NOT_FOUND
        await directory.call(ArchiveIdentity(agent_id, "operator"))
        again, _ = await h.register("api")
        assert again["agent_id"] == agent_id
        reasons = [event["reason"] for event in await _events(h, "agent.unarchived")]
        assert reasons == ["operator", "attached"]


async def test_directory_purge_ends_the_session_for_good(harness: Harness) -> None:
    """A purged identity's session token answers `ended` (purged), it is no longer attached,
    and its waiting mail is dead-lettered `purged` as its sender sees."""
    h = harness
    with trio.fail_after(30):
        _, alice = await h.register("alice")
        bob, _ = await h.register("bob")
        sent = await h.service.send(alice, to="bob", body="pending")
        directory = h.service.directory
        identities = h.service.identities
        done: Applied = await directory.call(PurgeIdentity(bob["agent_id"], "operator"))
        assert (done.ended_sessions, done.dead_lettered, done.alias) == (1, 1, "bob")
        with pytest.raises(PagerError) as caught:
            await h.service.authenticate(bob["token"])
        assert caught.value.code is ErrorCode.ENDED
        assert caught.value.details["reason"] == "purged"
        assert bob["agent_id"] not in identities.index.attached_ids()
        status = await h.service.message_status(alice, message_id=sent["message_id"])
        assert (status["state"], status["dead_reason"]) == ("dead", "purged")
        again = PurgeIdentity(bob["agent_id"], "operator")
        assert await _refused(h, again) is ErrorCode.NOT_FOUND
