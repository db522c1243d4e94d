"""The identity rules of SPEC §7 in process, on the mock clock."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from pager.domain.errors import ErrorCode, PagerError
from pager.requests import RegisterRequest
from tests.messaging.conftest import Harness


async def _code(awaitable: object) -> ErrorCode:
    with pytest.raises(PagerError) as caught:
        await awaitable  # type: ignore[misc]
    return caught.value.code


async def test_alias_conflict_names_the_holder(harness: Harness, autojump_clock: MockClock) -> None:
    """A name held by an attached session is refused with alias_conflict naming the holder."""
    with trio.fail_after(30):
        first, _ = await harness.register("api")
        with pytest.raises(PagerError) as caught:
            await harness.register("API")  # case-insensitive
        assert caught.value.code is ErrorCode.ALIAS_CONFLICT
        assert caught.value.details["holder"]["agent_id"] == first["agent_id"]
        assert caught.value.http_status == 409


async def test_rejoin_after_graceful_detach(harness: Harness, autojump_clock: MockClock) -> None:
    """After a graceful detach the same name rejoins the same identity with a new epoch; the
    old token is `ended`."""
    with trio.fail_after(30):
        first, caller = await harness.register("api")
        await harness.service.detach(caller)
        assert await _code(harness.service.authenticate(first["token"])) is ErrorCode.ENDED
        second, _ = await harness.register("api")
        assert second["agent_id"] == first["agent_id"]
        assert second["epoch"] == first["epoch"] + 1


async def test_rejoin_after_lease_lapse(harness: Harness, autojump_clock: MockClock) -> None:
    """A lapsed lease answers `expired`, and the name can be taken again by its owner."""
    with trio.fail_after(300):
        first, _ = await harness.register("api")
        await trio.sleep(91)
        assert await _code(harness.service.authenticate(first["token"])) is ErrorCode.EXPIRED
        second, _ = await harness.register("api")
        assert second["agent_id"] == first["agent_id"]


async def test_requests_keep_the_lease(harness: Harness, autojump_clock: MockClock) -> None:
    """Authenticated requests renew the lease, so an active session never lapses."""
    with trio.fail_after(600):
        first, _ = await harness.register("api")
        for _ in range(6):
            await trio.sleep(60)
            await harness.service.authenticate(first["token"])
        with pytest.raises(PagerError):
            await harness.register("api")


async def test_a_renewed_lease_lapses_on_the_timer_without_further_requests(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The lease timer is not re-armed on each request (a renewal only moves a lease later):
    it fires at the first deadline, finds the renewed lease alive, and ends it at the second,
    with no request in between."""
    with trio.fail_after(600):
        registered, caller = await harness.register("api")
        attached = harness.service.identities.index.attached_ids
        await trio.sleep(60)
        await harness.service.authenticate(registered["token"])  # renewed to 150 s
        await trio.sleep(40)  # past the first deadline (90 s), before the renewed one
        assert caller.agent_id in attached()
        await trio.sleep(60)  # past the renewed deadline
        assert caller.agent_id not in attached()
        assert await _code(harness.service.authenticate(registered["token"])) is ErrorCode.EXPIRED


async def test_rejoin_by_conversation_ends_older_session(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A known conversation key rejoins its identity whatever the name; the older session ends."""
    with trio.fail_after(30):
        first, _ = await harness.register("api", conversation_key="conv-1")
        second, _ = await harness.register("other-name", conversation_key="conv-1")
        assert second["agent_id"] == first["agent_id"]
        assert second["alias"] == "api"
        assert await _code(harness.service.authenticate(first["token"])) is ErrorCode.ENDED


async def test_force_takeover_hands_holder_a_fresh_identity(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """force takes the identity; the old token now runs as a fresh unnamed agent."""
    with trio.fail_after(30):
        first, _ = await harness.register("api")
        second, _ = await harness.register("api", force=True)
        assert second["agent_id"] == first["agent_id"]
        old = await harness.service.authenticate(first["token"])
        assert old.agent_id != first["agent_id"]
        me = await harness.service.whoami(old)
        assert me["durable"] is False


async def test_rename_reserves_prior_alias(harness: Harness, autojump_clock: MockClock) -> None:
    """After a rename, sending to the old alias fails with the current address."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        renamed = await harness.service.update_agent_alias(bob, alias="robert")
        assert renamed["address"].startswith("robert@")
        with pytest.raises(PagerError) as caught:
            await harness.service.send(alice, to="bob", body="hi")
        assert caught.value.code is ErrorCode.RECIPIENT_ALIAS_CHANGED
        assert caught.value.details["current_address"] == renamed["address"]
        with pytest.raises(PagerError) as taken:
            await harness.register("bob")  # reserved for robert
        assert taken.value.code is ErrorCode.ALIAS_CONFLICT


async def test_rename_makes_ephemeral_durable(harness: Harness, autojump_clock: MockClock) -> None:
    """An ephemeral identity gets a pronounceable handle; an alias makes it durable."""
    with trio.fail_after(30):
        info, caller = await harness.register(None)
        assert info["durable"] is False
        assert info["alias"].isalpha()
        await harness.service.update_agent_alias(caller, alias="named")
        assert (await harness.service.whoami(caller))["durable"] is True


async def test_move_keeps_id_and_inbox(
    harness: Harness, autojump_clock: MockClock, tmp_path: Path
) -> None:
    """move_to_workspace keeps the id and the waiting mail; the address changes."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        await harness.service.send(alice, to="bob", body="before the move")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        moved = await harness.service.move_to_workspace(bob, path=str(elsewhere))
        assert moved["agent_id"] == bob_info["agent_id"]
        assert moved["address"] != bob_info["address"]
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "before the move"
        await harness.service.send(alice, to=moved["address"], body="after")


@pytest.fixture
def repo_with_worktree(tmp_path: Path) -> Path:
    """A real Git repository `proj` with a subdirectory and a linked worktree `wt`."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "i"], check=True)
    subprocess.run(
        [*git, "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")], check=True
    )
    (repo / "sub").mkdir()
    return repo


async def test_worktree_and_subdirectory_share_workspace(
    harness: Harness, autojump_clock: MockClock, tmp_path: Path, repo_with_worktree: Path
) -> None:
    """A linked worktree and a subdirectory of one repository are one workspace."""
    repo = repo_with_worktree
    with trio.fail_after(30):
        a, _ = await harness.register("a", workspace=repo / "sub")
        b, _ = await harness.register("b", workspace=tmp_path / "wt")
        assert a["address"].split("@")[1] == b["address"].split("@")[1]
        assert a["address"].split("@")[1].startswith("proj-")
        with pytest.raises(PagerError):
            await harness.register("a", workspace=tmp_path / "wt")  # same workspace: held


async def test_register_bad_input_changes_nothing(
    harness: Harness, autojump_clock: MockClock, tmp_path: Path
) -> None:
    """Bad names, paths and delivery addresses are refused with validation_failed."""
    with trio.fail_after(30):
        bad = [
            RegisterRequest(
                workspace=str(harness.workspace), implementation="shell", session_name="-bad"
            ),
            RegisterRequest(workspace=str(tmp_path / "missing"), implementation="shell"),
            RegisterRequest(workspace="relative/path", implementation="shell"),
            RegisterRequest(workspace=str(harness.workspace), implementation="sh ell"),
        ]
        for request in bad:
            assert await _code(harness.service.register(request)) is ErrorCode.VALIDATION_FAILED
        roster_before = None
        _, caller = await harness.register("probe")
        roster_before = await harness.service.roster(caller, scope="all")
        assert [a["alias"] for a in roster_before["agents"]] == ["probe"]


async def test_rejoin_by_resume_token(harness: Harness, autojump_clock: MockClock) -> None:
    """A resume token rejoins its identity (ending the older session); a forged one is refused."""
    with trio.fail_after(30):
        first, _ = await harness.register(None)
        second, _ = await harness.register(None, resume_token=first["resume_token"])
        assert second["agent_id"] == first["agent_id"]
        assert second["epoch"] == 2
        assert await _code(harness.service.authenticate(first["token"])) is ErrorCode.ENDED
        forged = "prt_" + "A" * 43
        code = await _code(harness.register(None, resume_token=forged))
        assert code is ErrorCode.UNAUTHENTICATED
