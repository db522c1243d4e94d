"""`pager cline`'s idle wake with a FAKE Cline CLI and a FAKE hub daemon against a real broker.

The launch starts its own hub before the TUI (`[launch] before`: the fake's `cline hub start`
starts tests/fakes/fake_cline_hub.py, detached, with the launch's environment); when mail
waits, the wrapper sends the `[pager]` prompt through that hub, and the fake hub runs the turn's
hooks as Cline CLI does (TaskStart, then PostToolUse). Checked against the real Cline CLI by
scripts/verify_harnesses.py --only cline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pager.launch.knock_mark import MARK
from tests.e2e.conftest import Broker
from tests.e2e.test_wrapper_harnesses import (
    environ_of,
    finish,
    hop_of_next_send,
    launch,
    records,
    send,
    send_hop_2,
    state_of,
)
from tests.launch.conftest import wait_for


def hooks(log: Path) -> list[dict[str, Any]]:
    return [r["hook"] for r in records(log) if "hook" in r]


def knocks(log: Path) -> list[dict[str, Any]]:
    return [r["hub_input"] for r in records(log) if "hub_input" in r]


def started(log: Path) -> dict[str, Any]:
    wait_for(lambda: any("argv" in r for r in records(log)), "the fake TUI to start")
    [start] = [r for r in records(log) if "argv" in r]
    return start


async def test_idle_cline_is_knocked_through_the_launchs_own_hub(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """The launch starts its hub (with the launch's environment) before the TUI, so that the
    TUI's session lives there. Mail to the idle x makes the wrapper send the `[pager]` wake
    prompt, queued, to the hub's session, with the hub's token (the fake hub refuses a client
    without it); the turn's TaskStart prints nothing and its PostToolUse delivers and
    acknowledges the mail. The hub is stopped with the launch."""
    go = tmp_path / "go"
    env = {"FAKE_HUB_TURNS": "TaskStart,PostToolUse"}
    wrapper = launch(broker, "cline", f"wait:{go},exit:0", "--session-name", "x", env=env)
    try:
        start = started(fakes)
        order = [key for r in records(fakes) for key in ("hub_start", "argv") if key in r]
        assert order == ["hub_start", "argv"], "the hub did not start before the TUI"
        hub = next(r["hub_start"] for r in records(fakes) if "hub_start" in r)
        assert hub["ready"]
        assert f"PAGER_TOKEN={start['env']['PAGER_TOKEN']}".encode() in environ_of(hub["pid"])
        alice, message_id = await send(broker, "x", "mail for the idle cline")
        wait_for(lambda: len(hooks(fakes)) == 2, "the knocked turn's hooks")
        [knock] = knocks(fakes)
        assert (knock["sessionId"], knock["delivery"]) == ("fake-hub-session", "queue")
        assert knock["prompt"].startswith("[pager] Mail is waiting for you in Pager (you are x@")
        task_start, post_tool_use = hooks(fakes)
        assert (task_start["event"], task_start["status"], task_start["stdout"]) == (
            "TaskStart",
            0,
            "",
        ), task_start["stderr"]
        context = json.loads(post_tool_use["stdout"])["contextModification"]
        assert "mail for the idle cline" in context
        assert await state_of(broker, alice, message_id) == "acknowledged"
    finally:
        go.touch()
        status, err = await finish(wrapper)
    assert status == 0, err
    assert not environ_of(hub["pid"]), "the launch's hub outlived it"
    assert not any("hub_refused" in r for r in records(fakes))


async def test_cline_knocked_turn_is_not_reported_as_typed_but_a_typed_one_is(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """The attacker is an agent mailing x, an idle `pager cline` session, to keep x's chain
    going: a turn the launch's knock starts must not count as typed by x's person (that would
    clear the loop guard's cause), although its first hook (TaskStart) has no prompt to tell
    it by.

    alice's mail (hop 2) to the idle x makes the wrapper knock: the `[pager]` prompt is queued
    in the hub and the knock's mark is left in the launch's private directory. Before the
    queued turn begins, a tool call of x's delivers the mail (PostToolUse): x's next send is
    hop 3. Then the knock's turn begins: its TaskStart takes the mark and reports nothing, and
    x's next send is still hop 3. Then the person types a prompt (TaskStart, no knock
    pending): hop 1."""
    gates = [tmp_path / f"gate-{n}" for n in range(3)]
    hub_gate = tmp_path / "hub-gate"
    steps = (
        f"wait:{gates[0]},hook:PostToolUse,wait:{gates[1]},hook:TaskStart,wait:{gates[2]},exit:0"
    )
    env = {"FAKE_HUB_TURNS": "TaskStart", "FAKE_HUB_GATE": str(hub_gate)}
    wrapper = launch(broker, "cline", steps, "--session-name", "x", env=env)
    try:
        start = started(fakes)
        mark = Path(start["env"]["PAGER_TOKEN_FILE"]).parent / MARK
        alice, message_id = await send_hop_2(broker, "x")
        wait_for(lambda: knocks(fakes), "the knock")
        assert mark.exists()
        gates[0].touch()  # a tool call of x's delivers the mail
        wait_for(lambda: len(hooks(fakes)) == 1, "the PostToolUse hook")
        assert "mail for x" in json.loads(hooks(fakes)[0]["stdout"])["contextModification"]
        assert await state_of(broker, alice, message_id) == "acknowledged"
        assert await hop_of_next_send(broker, start) == 3

        hub_gate.touch()  # the knock's queued turn begins
        wait_for(lambda: len(hooks(fakes)) == 2, "the knocked turn's TaskStart")
        assert (hooks(fakes)[1]["event"], hooks(fakes)[1]["stdout"]) == ("TaskStart", "")
        assert not mark.exists()
        assert await hop_of_next_send(broker, start) == 3, "the knock's turn counted as typed"

        gates[1].touch()  # the person types a prompt
        wait_for(lambda: len(hooks(fakes)) == 3, "the typed prompt's TaskStart")
        assert hooks(fakes)[2]["status"] == 0
        assert await hop_of_next_send(broker, start) == 1
    finally:
        for gate in (*gates, hub_gate):
            gate.touch()
        status, err = await finish(wrapper)
    assert status == 0, err


async def test_a_hub_that_does_not_start_is_said_and_the_launch_goes_on(
    broker: Broker, fakes: Path
) -> None:
    """`cline hub start` failing (the fake exits 1 when no hub turns are set): `pager cline`
    says so on stderr and runs the TUI all the same (without idle wake)."""
    wrapper = launch(broker, "cline", "exit:0", "--session-name", "x")
    status, err = await finish(wrapper)
    assert status == 0, err
    assert "pager: 'cline hub start' exited 1; going on without it" in err
    assert [key for r in records(fakes) for key in ("hub_start", "argv") if key in r] == [
        "hub_start",
        "argv",
    ]
