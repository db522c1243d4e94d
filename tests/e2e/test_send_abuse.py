"""A malicious agent holding only its own session token, against the loop guard and the send
rates (SPEC §8.1), over real HTTP on a real broker, on both stores: `pager run`'s pages spend
the agent's and the pair's budgets, and a typed-prompt report it forges cannot keep two agents
answering each other without bound."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.conftest import BOTH, FAST_WINDOWS, Broker, start_broker
from tests.launch.conftest import PagerHome

STORES = BOTH


@pytest.fixture
def limits() -> dict[str, str]:
    """The broker's `PAGER_LIMIT_*`, set by each test (small, so that it stays fast)."""
    return {}


@pytest.fixture
def limited(tmp_path: Path, store_env: dict[str, str], limits: dict[str, str]) -> Iterator[Broker]:
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **store_env, **limits)
    home.kill_all()


async def agent(broker: Broker, name: str) -> str:
    """A new agent's session token."""
    return str((await broker.register(name))["token"])


async def run_page(broker: Broker, token: str, to: str, n: int) -> tuple[int, dict[str, Any]]:
    """What `pager run` sends when its command ends (`POST /v1/me/notify`, `run`)."""
    page = {"message": f"job {n} done", "exit_code": 0}
    return await broker.post("/v1/me/notify", {"to": to, "run": True, "page": page}, token=token)


@pytest.mark.parametrize(
    "limits", [{"PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "5", "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "3"}]
)
async def test_run_pages_spend_the_agents_and_the_pairs_send_budgets(limited: Broker) -> None:
    """An agent that spent its pair's budget and then its own cannot page on with `run`:
    `rate_limited` with `retry_after_s`, as for its sends (before: 600 an hour of their own)."""
    with trio.fail_after(60):
        mallory = await agent(limited, "mallory")
        await agent(limited, "bob")
        await agent(limited, "carol")
        for n in range(3):
            status, sent = await limited.post(
                "/v1/me/send", {"to": "bob", "body": f"m{n}"}, token=mallory
            )
            assert status == 200, sent
        # The pair mallory → bob is spent: a run-page to bob is refused too.
        status, refused = await run_page(limited, mallory, "bob", 0)
        assert (status, refused["error"]["code"]) == (429, "rate_limited"), refused
        assert refused["error"]["retry_after_s"] >= 1
        # Run-pages to carol count against mallory's own budget (5): two more, then refused,
        # and so is a plain send.
        for n in range(2):
            status, paged = await run_page(limited, mallory, "carol", n)
            assert status == 200, paged
        status, refused = await run_page(limited, mallory, "carol", 2)
        assert (status, refused["error"]["code"]) == (429, "rate_limited"), refused
        assert refused["error"]["retry_after_s"] >= 1
        status, refused = await limited.post(
            "/v1/me/send", {"to": "carol", "body": "and a send"}, token=mallory
        )
        assert (status, refused["error"]["code"]) == (429, "rate_limited"), refused
        messages = await limited.messages()
        assert Counter(m["origin"] for m in messages) == {"agent": 3, "script": 2}


PAIR = 8
RESETS = 2
ROUNDS = 40


@pytest.mark.parametrize(
    "limits",
    [{"PAGER_LIMIT_MAX_HOPS": "3", "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": str(PAIR),
      "PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "0",
      "PAGER_LIMIT_CHAIN_RESETS_PER_HOUR": str(RESETS)}],
)  # fmt: skip
async def test_a_forged_prompt_report_cannot_keep_two_agents_looping(limited: Broker) -> None:
    """Two agents answer each other, each reporting a typed prompt before every send (the
    report any plugin may make with the session's token). The reports restart the chain
    only within their budget; then the loop guard refuses the answers with `hop_limit`, and
    what one agent sends on regardless is stopped by the pair rate (before: every report
    restarted the chain, no `hop_limit`)."""
    with trio.fail_after(120):
        tokens = {"ann": await agent(limited, "ann"), "ben": await agent(limited, "ben")}
        await limited.post("/v1/me/send", {"to": "ben", "body": "start"}, token=tokens["ann"])
        outcomes: Counter[str] = Counter()
        reports: Counter[int] = Counter()
        for n in range(ROUNDS):
            me, other = ("ben", "ann") if n % 2 == 0 else ("ann", "ben")
            token = tokens[me]
            status, claimed = await limited.post("/v1/me/claim", {}, token=token)
            assert status == 200, claimed
            handed = [claim["token"] for claim in claimed["claims"]]
            if handed:
                await limited.post("/v1/me/ack", {"tokens": handed}, token=token)
            status, reported = await limited.post("/v1/sessions/current/prompted", {}, token=token)
            reports[status] += 1
            if status == 429:
                assert reported["error"]["code"] == "rate_limited"
                assert reported["error"]["retry_after_s"] >= 1
            status, sent = await limited.post(
                "/v1/me/send", {"to": other, "body": f"round {n}"}, token=token
            )
            outcomes["sent" if status == 200 else sent["error"]["code"]] += 1
        assert outcomes["hop_limit"] > 0, outcomes
        assert reports[429] > 0, reports
        agents_sent = [m for m in await limited.messages() if m["origin"] == "agent"]
        between = Counter((m["from_address"], m["to_address"]) for m in agents_sent)
        assert max(between.values()) <= PAIR, between
        # A chain starts again only at the first send and at each report within the budget.
        restarts = Counter(m["from_address"].split("@")[0] for m in agents_sent if m["hop"] == 1)
        assert restarts["ann"] <= RESETS + 1, restarts
        assert restarts["ben"] <= RESETS, restarts
        refused = sum(n for outcome, n in outcomes.items() if outcome != "sent")
        assert (await limited.snapshot())["totals"]["refused_sends"] == refused
