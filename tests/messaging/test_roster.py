"""`roster` (SPEC §8) at scale (issue 13, item 5): read on the service's read-only connection,
never through the writer; one page at a time with an opaque cursor; waiting counts batched."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors.directory import ArchiveIdentity
from pager.config import Limits
from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.views import encode_cursor
from pager.store import _views
from pager.store import messaging as ms
from tests.messaging.conftest import Harness, open_harness

#: Identities of the paging test: 150 in the caller's workspace (it included), 100 in another.
HERE, THERE = 150, 100


async def _pages(
    harness: Harness, caller: Caller, *, scope: str, limit: int
) -> list[dict[str, Any]]:
    """Every page of the roster, following next_cursor to the end."""
    pages = [await harness.service.roster(caller, scope=scope, limit=limit)]
    while pages[-1]["next_cursor"] is not None:
        cursor = pages[-1]["next_cursor"]
        pages.append(await harness.service.roster(caller, scope=scope, limit=limit, cursor=cursor))
        assert len(pages) < 10, "the cursor never reaches the end"
    return pages


def _slug(agent: dict[str, Any]) -> str:
    return str(agent["address"].split("@")[1])


async def test_a_roster_of_250_pages_in_three_without_gaps_or_duplicates(
    tmp_path: Path, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """250 identities over two workspaces, 100 a page: three pages (the second crosses from
    one workspace to the next), every identity once, in workspace-then-alias order, each with
    its waiting count (queued and claimed mail; acknowledged mail does not wait), counted in
    one batched count per page, never one per identity."""
    no_send_limits = Limits(send=SendLimits(agent_sends_per_hour=0, pair_sends_per_hour=0))
    with trio.fail_after(600):
        async with open_harness(tmp_path, limits=no_send_limits) as harness:
            await _page_through_250(harness, monkeypatch)


async def _page_through_250(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    there = harness.workspace.parent / "zeta"  # its slug sorts after the caller's (`repo-…`)
    there.mkdir()
    me_info, me = await harness.register("a-sender")
    ids = {me_info["agent_id"]: me_info}
    callers = {}
    for n in range(HERE + THERE - 1):
        workspace = harness.workspace if n < HERE - 1 else there
        info, caller = await harness.register(f"agent-{n:03d}", workspace=workspace)
        ids[info["agent_id"]] = info
        callers[info["agent_id"]] = caller
    # n % 4 messages to the n-th identity; one of them claims one, another acks one.
    expected: Counter[str] = Counter()
    for n, agent_id in enumerate(list(callers)):
        for m in range(n % 4):
            await harness.service.send(me, to=ids[agent_id]["address"], body=f"m{m}")
            expected[agent_id] += 1
    claimer, acker = list(callers)[3], list(callers)[7]
    await harness.service.fetch(callers[claimer], limit=1)  # claimed: still waiting
    [claim] = (await harness.service.fetch(callers[acker], limit=1))["claims"]
    await harness.service.ack(callers[acker], tokens=[claim["token"]])
    expected[acker] -= 1

    counted: list[int] = []
    real_counts = _views.inbox_counts

    def inbox_counts(conn: sqlite3.Connection, ids: Sequence[str] | None) -> Any:
        counted.append(len(ids or ()))
        return real_counts(conn, ids)

    monkeypatch.setattr(_views, "inbox_counts", inbox_counts)
    monkeypatch.setattr(ms, "waiting_count", None)  # the count per identity is gone
    pages = await _pages(harness, me, scope="all", limit=100)
    assert [len(page["agents"]) for page in pages] == [100, 100, 50]
    assert counted == [100, 100, 50]  # one batched count per page
    assert pages[-1]["next_cursor"] is None
    agents = [agent for page in pages for agent in page["agents"]]
    assert len({agent["agent_id"] for agent in agents}) == len(agents) == HERE + THERE
    assert {agent["agent_id"] for agent in agents} == set(ids)
    order = [(_slug(agent), agent["alias"].lower()) for agent in agents]
    assert order == sorted(order)
    assert len({_slug(agent) for agent in agents}) == 2
    assert len({_slug(agent) for agent in pages[1]["agents"]}) == 2  # it crosses workspaces
    for agent in agents:
        assert agent["waiting"] == expected[agent["agent_id"]], agent["alias"]
        assert agent["you"] is (agent["agent_id"] == me_info["agent_id"])
        assert agent["attached"] is True  # every one registered a session
        assert agent["host"] == harness.service.host
        assert agent["address"] == ids[agent["agent_id"]]["address"]
    assert expected[claimer] >= 1  # claimed: still waiting

    # The caller's own workspace only: its 150 in two pages, the same entries.
    mine = await _pages(harness, me, scope="workspace", limit=100)
    assert [len(page["agents"]) for page in mine] == [100, 50]
    here = [agent for page in mine for agent in page["agents"]]
    assert here == [agent for agent in agents if _slug(agent) == me_info["address"].split("@")[1]]
    assert all(page["scope"] == "workspace" for page in mine)

    # Without a limit: one page of the default 100; one page when everyone fits.
    first = await harness.service.roster(me, scope="all")
    assert first["agents"] == pages[0]["agents"]
    whole = await harness.service.roster(me, scope="all", limit=500)
    assert whole["agents"] == agents
    assert whole["next_cursor"] is None


async def test_an_identity_archived_between_pages_leaves_no_gap(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The cursor is the last one shown, not a position: an identity that goes away before
    the next page (here the last one shown) shifts nothing."""
    with trio.fail_after(600):
        _, me = await harness.register("me")
        infos = [(await harness.register(f"peer-{n}"))[0] for n in range(5)]
        first = await harness.service.roster(me, limit=3)
        assert [a["alias"] for a in first["agents"]] == ["me", "peer-0", "peer-1"]
        await harness.service.directory.call(ArchiveIdentity(infos[1]["agent_id"], "test"))
        rest = await harness.service.roster(me, limit=3, cursor=first["next_cursor"])
        assert [a["alias"] for a in rest["agents"]] == ["peer-2", "peer-3", "peer-4"]
        assert rest["next_cursor"] is None


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor",
        encode_cursor("agents", "agt_x"),  # another view's
        encode_cursor("roster", 7),  # a key of the wrong type
        encode_cursor("roster", "no-slash"),  # not a key roster hands out
    ],
)
async def test_a_bad_cursor_is_validation_failed(
    harness: Harness, autojump_clock: MockClock, cursor: str
) -> None:
    with trio.fail_after(60):
        _, me = await harness.register("me")
        with pytest.raises(PagerError) as raised:
            await harness.service.roster(me, cursor=cursor)
        assert raised.value.code is ErrorCode.VALIDATION_FAILED
        assert raised.value.details.get("parameter") == "cursor"


async def test_the_roster_and_listings_answer_while_the_writer_is_held(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write and every read through the checkpoint (the writer's connection) is held:
    a send waits, and the roster, inbox, sent and history still answer, without calling the
    checkpoint at all."""
    with trio.fail_after(600):
        bob_info, bob = await harness.register("bob")
        _, alice = await harness.register("alice")
        await harness.service.send(alice, to="bob", body="before")
        checkpoint = harness.checkpoint
        real_read, real_write = checkpoint.read, checkpoint.write
        held = trio.Event()
        calls: list[str] = []

        async def read(fn: Any) -> Any:
            calls.append("read")
            await held.wait()
            return await real_read(fn)

        async def write(fn: Any, *, heavy: bool = False) -> Any:
            calls.append("write")
            await held.wait()
            return await real_write(fn, heavy=heavy)

        monkeypatch.setattr(checkpoint, "read", read)
        monkeypatch.setattr(checkpoint, "write", write)
        async with trio.open_nursery() as nursery:
            sent = trio.Event()

            async def send() -> None:
                await harness.service.send(alice, to="bob", body="held")
                sent.set()

            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            assert "write" in calls  # the send is queued behind the held writer
            assert not sent.is_set()
            with trio.fail_after(5):
                roster = await harness.service.roster(alice, scope="all")
            assert "read" not in calls
            by_alias = {agent["alias"]: agent for agent in roster["agents"]}
            assert by_alias["bob"]["waiting"] == 1  # the held send is not committed yet
            assert by_alias["alice"]["you"] is True
            with trio.fail_after(5):
                waiting = await harness.service.inbox(bob)
                sent_list = await harness.service.sent(alice)
                history = await harness.service.history(alice)
            assert "read" not in calls
            assert waiting["waiting"] == 1  # the held send is not committed yet
            assert [m["body"] for m in sent_list["messages"]] == ["before"]
            assert [m["body"] for m in history["messages"]] == ["before"]
            held.set()
        assert sent.is_set()
        roster = await harness.service.roster(bob, scope="all")
        assert {a["agent_id"]: a["waiting"] for a in roster["agents"]}[bob_info["agent_id"]] == 2
