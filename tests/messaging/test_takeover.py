"""Forced takeovers (SPEC §7) through both edges that offer `force`, in process on the mock
clock: the caller gets the holder's identity, the holder's token runs on as a fresh unnamed
agent, every takeover is an operator event, and `allow_force = false` refuses them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from tests.messaging.conftest import WINDOWS, Harness, open_harness


def _events(harness: Harness, kind: str) -> list[dict[str, Any]]:
    return harness.events_of(kind)


async def _alice_with_mail(harness: Harness) -> tuple[dict[str, Any], Caller]:
    """alice (attached) with one message acknowledged (history) and one waiting (inbox)."""
    alice_info, alice = await harness.register("alice", conversation_key="conv-alice")
    _, bob = await harness.register("bob")
    await harness.service.send(bob, to="alice", body="read already")
    [claim] = (await harness.service.fetch(alice))["claims"]
    await harness.service.ack(alice, tokens=[claim["token"]])
    await harness.service.send(bob, to="alice", body="still waiting")
    return alice_info, alice


async def test_update_agent_alias_force_hands_over_the_holder_identity(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """carol's forced alias takes alice's identity (id, history, inbox, alias); alice's token
    runs on as a fresh unnamed agent; carol's old identity stays as it was, detached."""
    with trio.fail_after(30):
        alice_info, _ = await _alice_with_mail(harness)
        carol_info, carol = await harness.register("carol")
        result = await harness.service.update_agent_alias(carol, alias="alice", force=True)
        assert result["agent_id"] == alice_info["agent_id"]
        assert result["address"] == alice_info["address"]

        now_carol = await harness.service.authenticate(carol_info["token"])
        assert now_carol.agent_id == alice_info["agent_id"]
        me = await harness.service.whoami(now_carol)
        assert (me["alias"], me["durable"]) == ("alice", True)
        history = await harness.service.history(now_carol)
        assert [m["body"] for m in history["messages"]] == ["still waiting", "read already"]
        [claim] = (await harness.service.fetch(now_carol))["claims"]
        assert claim["message"]["body"] == "still waiting"

        old_alice = await harness.service.authenticate(alice_info["token"])
        assert old_alice.agent_id not in (alice_info["agent_id"], carol_info["agent_id"])
        fresh = await harness.service.whoami(old_alice)
        assert fresh["durable"] is False
        assert fresh["alias"] != "alice"
        assert (await harness.service.history(old_alice))["messages"] == []
        assert (await harness.service.fetch(old_alice))["claims"] == []

        roster = await harness.service.roster(now_carol)
        by_alias = {agent["alias"]: agent for agent in roster["agents"]}
        assert by_alias["alice"]["agent_id"] == alice_info["agent_id"]
        assert by_alias["carol"]["agent_id"] == carol_info["agent_id"]
        assert by_alias["carol"]["attached"] is False
        assert _events(harness, "agent.renamed") == []  # nobody got a generated handle


async def test_update_agent_alias_force_records_the_takeover_with_both_sessions(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The takeover is one `agent.taken_over` event naming the identity, the holder's ended
    session, the caller's new session and the identity the caller left."""
    with trio.fail_after(30):
        alice_info, _ = await _alice_with_mail(harness)
        carol_info, carol = await harness.register("carol")
        await harness.service.update_agent_alias(carol, alias="alice", force=True)
        now_carol = await harness.service.authenticate(carol_info["token"])
        old_alice = await harness.service.authenticate(alice_info["token"])
        [event] = _events(harness, "agent.taken_over")
        assert event == {
            "agent_id": alice_info["agent_id"],
            "alias": "alice",
            "address": alice_info["address"],
            "workspace": alice_info["address"].split("@")[1],
            "via": "update_agent_alias",
            "session_id": now_carol.session_id,
            "epoch": now_carol.epoch,
            "ended_session_id": alice_info["session_id"],
            "holder_agent_id": old_alice.agent_id,
            "previous_agent_id": carol_info["agent_id"],
            "previous_session_id": carol_info["session_id"],
        }
        assert now_carol.epoch == alice_info["epoch"] + 1
        ended = {(e["session_id"], e["reason"]) for e in _events(harness, "agent.detached")}
        assert (alice_info["session_id"], "taken_over") in ended
        assert (carol_info["session_id"], "took_over") in ended


async def test_register_force_records_the_takeover_with_both_sessions(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A forced registration is the same takeover: the same event, `via: register`."""
    with trio.fail_after(30):
        first, _ = await harness.register("api")
        second, _ = await harness.register("api", force=True)
        old = await harness.service.authenticate(first["token"])
        [event] = _events(harness, "agent.taken_over")
        assert (event["agent_id"], event["via"]) == (first["agent_id"], "register")
        assert (event["ended_session_id"], event["session_id"]) == (
            first["session_id"],
            second["session_id"],
        )
        assert event["holder_agent_id"] == old.agent_id
        assert event["previous_agent_id"] is None


@pytest.mark.parametrize("via", ["register", "update_agent_alias"])
async def test_takeover_holder_conversation_and_resume_follow_its_fresh_identity(
    harness: Harness, autojump_clock: MockClock, via: str
) -> None:
    """After a takeover (either edge) the holder's hooks (by conversation key) and resume
    token reach its fresh identity, never the identity it lost: its mail is the taker's."""
    with trio.fail_after(30):
        alice_info, _ = await _alice_with_mail(harness)
        if via == "register":
            await harness.register("alice", force=True)
        else:
            _, carol = await harness.register("carol")
            await harness.service.update_agent_alias(carol, alias="alice", force=True)
        old_alice = await harness.service.authenticate(alice_info["token"])
        hook = await harness.service.hook_claim(
            implementation="shell", conversation_key="conv-alice", max_chars=9000
        )
        assert (hook["agent_id"], hook["tokens"]) == (old_alice.agent_id, [])
        resumed, _ = await harness.register(None, resume_token=alice_info["resume_token"])
        assert resumed["agent_id"] == old_alice.agent_id


async def test_update_agent_alias_force_keeps_the_caller_stream_and_lease(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The holder's event stream is told (ended); the caller's stays open and goes on holding
    the lease of its new attachment until it closes, then the lease lapses as usual."""
    with trio.fail_after(600):
        alice_info, alice = await harness.register("alice")
        carol_info, carol = await harness.register("carol")
        alice_stream = await harness.service.stream_opened(alice)
        carol_stream = await harness.service.stream_opened(carol)
        await harness.service.update_agent_alias(carol, alias="alice", force=True)
        assert alice_stream.is_set()
        assert not carol_stream.is_set()
        await trio.sleep(WINDOWS.lease_ttl * 2)  # no request: only the open stream holds it
        attached = harness.service.identities.index.attached_ids()
        assert alice_info["agent_id"] in attached
        await harness.service.stream_closed(carol)  # closed under the id it was opened with
        await trio.sleep(WINDOWS.lease_ttl + WINDOWS.stream_grace + 1)
        with pytest.raises(PagerError) as caught:
            await harness.service.authenticate(carol_info["token"])
        assert caught.value.code is ErrorCode.EXPIRED


async def test_update_agent_alias_force_takes_a_detached_holder_identity(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """With its holder detached, a forced alias still hands over the identity (no session to
    end) instead of renaming it."""
    with trio.fail_after(30):
        alice_info, alice = await harness.register("alice")
        await harness.service.detach(alice)
        carol_info, carol = await harness.register("carol")
        result = await harness.service.update_agent_alias(carol, alias="alice", force=True)
        assert result["agent_id"] == alice_info["agent_id"]
        assert result["taken_over"]["ended_session_id"] is None
        now_carol = await harness.service.authenticate(carol_info["token"])
        assert now_carol.agent_id == alice_info["agent_id"]
        [event] = _events(harness, "agent.taken_over")
        assert (event["ended_session_id"], event["holder_agent_id"]) == (None, None)


async def test_allow_force_false_refuses_force_with_conflict_and_changes_nothing(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """With `allow_force = false`, `force` on a registration or the alias tool is `conflict`
    naming config.toml, and nothing changes (no event, nobody moved)."""
    with trio.fail_after(30):
        async with open_harness(tmp_path, allow_force=False) as harness:
            alice_info, _ = await harness.register("alice")
            carol_info, carol = await harness.register("carol")
            before = harness.event_log.latest_seq()
            refusals = [
                harness.register("alice", force=True),
                harness.register("nobody-holds-this", force=True),
                harness.service.update_agent_alias(carol, alias="alice", force=True),
            ]
            for refused in refusals:
                with pytest.raises(PagerError) as caught:
                    await refused
                assert caught.value.code is ErrorCode.CONFLICT
                assert caught.value.http_status == 409
                assert "allow_force = false" in caught.value.message
                assert "config.toml" in caught.value.message
            assert harness.event_log.latest_seq() == before
            alice = await harness.service.authenticate(alice_info["token"])
            assert alice.agent_id == alice_info["agent_id"]
            carol = await harness.service.authenticate(carol_info["token"])
            assert (await harness.service.whoami(carol))["alias"] == "carol"
            # Without force the rules are unchanged.
            renamed = await harness.service.update_agent_alias(carol, alias="carol2")
            assert renamed["agent_id"] == carol_info["agent_id"]
