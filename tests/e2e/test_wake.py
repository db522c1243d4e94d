"""Launch on mail (docs/wake.md) end to end: a real broker, the FAKE `claude` on its PATH
(tests/fakes/fake_harness.py, headless mode as FAKE_WAKE says), the real CLI and HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.e2e.conftest import BOTH, FAST_WINDOWS, Broker, postgres_env, start_broker
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for
from tests.processes import alive, group_alive

ROOT = Path(__file__).parents[2]
#: Wake runs stop fast in these tests; mail comes back fast after a run that left it.
WAKE_WINDOWS = {**FAST_WINDOWS, "PAGER_WINDOW_WAKE_KILL_AFTER": "1s"}
LAUNCH_WITH = "-p --resume {conversation_key} {prompt}"


def _fake_claude(directory: Path) -> Path:
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "claude"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m tests.fakes.fake_harness "$@"\n'
    )
    shim.chmod(0o755)
    return bin_dir


@pytest.fixture
def wake_env(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Starts a broker whose PATH finds the FAKE `claude`, with `env` added (FAKE_WAKE …)."""
    homes: list[PagerHome] = []

    def start(store_env: dict[str, str] | None = None, **env: str) -> Broker:
        home = PagerHome(tmp_path / f"home{len(homes)}")
        homes.append(home)
        path = f"{_fake_claude(tmp_path)}:{os.environ['PATH']}"
        log = str(tmp_path / "harness.log")
        return start_broker(
            home, tmp_path / "repo", PATH=path, FAKE_HARNESS_LOG=log,
            **WAKE_WINDOWS, **(store_env or {}), **env,
        )  # fmt: skip

    yield start
    for home in homes:
        home.kill_all()


def pager(broker: Broker, *args: str, env: dict[str, str] | None = None) -> Any:
    """The CLI as the person in the workspace; its parsed `--json` output (exit 0 asserted)."""
    done = _cli(broker, *args, env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout) if "--json" in args else done.stdout


def _cli(broker: Broker, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "pager", *args],
        env={**broker.home.env, **(env or {})},
        cwd=broker.workspace,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def launch_once(broker: Broker, name: str) -> None:
    """`pager claude --session-name NAME` that ends at once: the identity and its conversation."""
    done = _cli(broker, "claude", "--session-name", name, env={"FAKE_HARNESS_STEPS": "exit:0"})
    assert done.returncode == 0, done.stderr


def harness_log(broker: Broker) -> list[dict[str, Any]]:
    path = Path(broker.home.env["FAKE_HARNESS_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def post(broker: Broker, path: str, body: object, token: str) -> tuple[int, Any]:
    with httpx2.Client(timeout=10) as http:
        answer = http.post(
            broker.url + path, json=body, headers={"Authorization": f"Bearer {token}"}
        )
    return answer.status_code, answer.json()


def register(broker: Broker, name: str, implementation: str = "claude") -> dict[str, Any]:
    body = {"workspace": str(broker.workspace), "implementation": implementation,
            "session_name": name}  # fmt: skip
    status, answer = post(broker, "/v1/register", body, broker.secret)
    assert status == 201, answer
    return dict(answer)


def runs_ended(broker: Broker, count: int) -> Callable[[], list[dict[str, Any]]]:
    def check() -> list[dict[str, Any]]:
        ended = broker.events_sync("wake.ended")
        return ended if len(ended) >= count else []

    return check


@pytest.mark.stores(*BOTH)
def test_wake_mail_to_a_detached_agent_launches_one_run_that_replies(
    wake_env: Callable[..., Broker], store_env: dict[str, str]
) -> None:
    """One run starts in the agent's workspace with Pager's wiring, its hooks deliver the mail
    (acknowledged), its reply reaches the sender, and its start and end are operator events."""
    broker = wake_env(store_env)
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot")  # the manifest's [wake.launch]
    sent = _cli(broker, "send", "bot", "please review the parser")
    assert "no session is running" in sent.stdout, sent.stdout
    (ended,) = wait_for(runs_ended(broker, 1), "the run to end")
    (started,) = broker.events_sync("wake.started")
    assert ended["data"]["outcome"] == "exited"
    assert ended["data"]["exit_code"] == 0
    assert len(ended["data"]["acknowledged"]) == 1
    assert started["data"]["run_id"] == ended["data"]["run_id"]
    run = [r for r in harness_log(broker) if "wake" in r]
    assert len(run) == 1
    assert Path(run[0]["cwd"]).resolve() == broker.workspace.resolve()
    assert run[0]["prompt"].startswith("[pager] ")
    wiring = next(r for r in harness_log(broker) if "-p" in r.get("argv", ()))
    assert wiring["argv"][:4] == [
        "--mcp-config",
        wiring["argv"][1],
        "--settings",
        wiring["argv"][3],
    ]
    assert wiring["env"]["PAGER_AGENT_ID"] == ended["data"]["agent_id"]
    # The reply reached the person who wrote, from bot, in answer.
    inbox = pager(broker, "inbox", "--json")
    assert [(m["from"].split("@")[0], m["body"]) for m in inbox["messages"]] == [
        ("bot", "re: done")
    ]
    log = Path(started["data"]["log"])
    assert log.name.startswith("wake-bot-")
    assert "ended with status 0" in log.read_text()
    listed = pager(broker, "wake", "list", "--json")["agents"]
    assert [run["outcome"] for run in listed[0]["runs"]] == ["exited"]


def test_wake_a_hung_run_is_stopped_at_its_timeout_and_its_mail_offered_again(
    wake_env: Callable[..., Broker],
) -> None:
    """A run that ignores SIGTERM is killed after the grace; the mail it never read waits and
    a second run is launched for it after the redelivery delay."""
    broker = wake_env(FAKE_WAKE="stubborn")
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH, "--timeout", "1s")
    _cli(broker, "send", "bot", "wake up")
    first, second = wait_for(runs_ended(broker, 2), "two runs to end")
    for ended in (first, second):
        assert ended["data"]["outcome"] == "timed_out"
        assert ended["data"]["acknowledged"] == []
        assert ended["data"]["exit_code"] == 128 + signal.SIGKILL
    runs = [r for r in harness_log(broker) if "wake" in r]
    assert not [r["pid"] for r in runs if alive(r["pid"])]
    (message,) = [m for m in broker.export_sync() if m.get("body") == "wake up"]
    assert message["state"] == "queued"


def test_wake_the_hourly_bound_holds(wake_env: Callable[..., Broker]) -> None:
    """Runs that leave the mail unread stop at the agent's bound; the next is put off (a
    `wake.deferred` event naming when) while the mail waits."""
    broker = wake_env(FAKE_WAKE="exit:3")
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH, "--max-runs-per-hour", "2")
    _cli(broker, "send", "bot", "are you there")
    (deferred,) = wait_for(lambda: broker.events_sync("wake.deferred"), "the bound")
    assert 3590 < deferred["data"]["retry_after_s"] <= 3600
    ended = broker.events_sync("wake.ended")
    assert [e["data"]["exit_code"] for e in ended] == [3, 3]
    assert len(broker.events_sync("wake.started")) == 2


def test_wake_two_agents_replying_to_each_other_stop_at_max_hops(
    wake_env: Callable[..., Broker],
) -> None:
    """a → b → a → b: the third reply would pass max_hops (3) and is refused; no run follows."""
    broker = wake_env()
    for name in ("a", "b"):
        launch_once(broker, name)
        pager(broker, "wake", "on", name, "--command", LAUNCH_WITH)
    # b writes first, from a session of its own, then leaves.
    b = register(broker, "b")
    status, sent = post(broker, "/v1/me/send", {"to": "a", "body": "ping"}, b["token"])
    assert status == 200, sent
    status, _ = post(broker, "/v1/sessions/current/detach", {}, b["token"])
    assert status == 200
    (refused,) = wait_for(lambda: broker.events_sync("send.refused"), "the loop guard")
    assert refused["data"]["reason"] == "hop_limit"
    ended = wait_for(runs_ended(broker, 3), "three runs")
    assert all(e["data"]["outcome"] == "exited" for e in ended)
    hops = sorted(m["hop"] for m in broker.export_sync() if m.get("body") in ("ping", "re: done"))
    assert hops == [1, 2, 3]
    assert not [m for m in broker.export_sync() if m.get("state") == "queued"]


def test_wake_launches_nothing_without_wake_on_and_wakes_an_attached_agent(
    wake_env: Callable[..., Broker], tmp_path: Path
) -> None:
    """Mail to an agent without `wake on` starts no run; an attached agent with `wake on` gets
    its mail in its session, no run."""
    broker = wake_env()
    for name in ("plain", "busy", "ready"):
        launch_once(broker, name)
    for name in ("busy", "ready"):
        pager(broker, "wake", "on", name, "--command", LAUNCH_WITH)
    go = tmp_path / "go"
    wrapper = subprocess.Popen(
        [sys.executable, "-m", "pager", "claude", "--session-name", "busy"],
        env={**broker.home.env, "FAKE_HARNESS_STEPS": f"wait:{go},exit:0"},
        cwd=broker.workspace,
    )
    try:
        wait_for(lambda: broker.sessions_sync() and _attached(broker, "busy"), "busy attaches")
        assert "no session is running" in _cli(broker, "send", "plain", "hello").stdout
        assert "no session is running" not in _cli(broker, "send", "busy", "hello").stdout
        _cli(broker, "send", "ready", "hello")
        (ended,) = wait_for(runs_ended(broker, 1), "ready's run")
        assert ended["data"]["alias"] == "ready"
        assert [e["data"]["alias"] for e in broker.events_sync("wake.started")] == ["ready"]
    finally:
        go.touch()
        wrapper.wait(timeout=PROCESS_BOUND)


def _agent(broker: Broker, alias: str) -> dict[str, Any]:
    snapshot = broker.read("/v1/snapshot").json()
    return next(a for ws in snapshot["workspaces"] for a in ws["agents"] if a["alias"] == alias)


def _attached(broker: Broker, alias: str) -> bool:
    return bool(_agent(broker, alias)["attached"])


def test_wake_a_person_attaching_ends_the_run_first(wake_env: Callable[..., Broker]) -> None:
    """`pager claude --session-name bot` during a run: the run is told and ended (its process
    group gone) before the person's harness starts."""
    broker = wake_env(FAKE_WAKE="hang")
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH)
    _cli(broker, "send", "bot", "hello")
    (started,) = wait_for(lambda: broker.events_sync("wake.started"), "the run")
    (run,) = wait_for(lambda: [r for r in harness_log(broker) if "wake" in r], "the harness")
    bot = _agent(broker, "bot")
    assert (bot["wake"], bot["waking"], bot["attached"]) == (True, True, True)
    launch_once(broker, "bot")  # no alias_conflict: a run yields
    assert not alive(run["pid"])
    (ended,) = broker.events_sync("wake.ended")
    assert ended["data"]["outcome"] == "superseded"
    detached = [e for e in broker.events_sync("agent.detached")
                if e["data"]["session_id"] == started["data"]["session_id"]]  # fmt: skip
    assert detached[0]["data"]["reason"] == "wake_yielded"


def test_wake_kill_9_of_the_broker_leaves_no_harness_and_loses_no_mail(
    wake_env: Callable[..., Broker],
) -> None:
    """SIGKILL to the broker during a run: the run's guard ends the harness's whole group; the
    mail is still there after a restart, which records the run as stopped and runs again."""
    broker = wake_env(FAKE_WAKE="hang")
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH)
    _cli(broker, "send", "bot", "do not lose me")
    (run,) = wait_for(lambda: [r for r in harness_log(broker) if "wake" in r], "the harness")
    broker.home.kill_all()
    wait_for(lambda: not group_alive(run["pgid"]), "the run's whole process group to be gone")
    again = start_broker(broker.home, broker.workspace)
    (stopped,) = wait_for(lambda: again.events_sync("wake.ended"), "the cut-short run")
    assert stopped["data"]["outcome"] == "stopped"
    wait_for(lambda: len(again.events_sync("wake.started")) == 2, "a second run")
    bodies = [m.get("body") for m in again.export_sync()]
    assert bodies.count("do not lose me") == 1


def _helper(path: Path) -> int:
    """The pid of the helper a run left outside its process group (FAKE_WAKE_DETACH)."""
    wait_for(path.exists, "the run's detached helper")
    return int(path.read_text())


def test_wake_a_helper_that_left_the_group_ends_at_the_runs_timeout(
    wake_env: Callable[..., Broker], tmp_path: Path
) -> None:
    """A run whose harness started a helper in a session of its own (`setsid`) and hangs is
    stopped at its timeout: by the time its end is recorded the helper is gone too."""
    path = tmp_path / "helper"
    broker = wake_env(FAKE_WAKE="hang", FAKE_WAKE_DETACH=str(path))
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH, "--timeout", "1s")
    _cli(broker, "send", "bot", "wake up")
    helper = _helper(path)
    try:
        (ended,) = wait_for(runs_ended(broker, 1), "the run to end")
        assert ended["data"]["outcome"] == "timed_out"
        assert not alive(helper)
    finally:
        if alive(helper):  # failed: leave nothing behind
            os.kill(helper, signal.SIGKILL)


def test_wake_kill_9_of_the_broker_ends_a_helper_that_left_the_group(
    wake_env: Callable[..., Broker], tmp_path: Path
) -> None:
    """SIGKILL to the broker during a run whose harness started a helper with `setsid`: the
    guard ends the helper as well as the run's group."""
    path = tmp_path / "helper"
    broker = wake_env(FAKE_WAKE="hang", FAKE_WAKE_DETACH=str(path))
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH)
    _cli(broker, "send", "bot", "wake up")
    helper = _helper(path)
    (run,) = wait_for(lambda: [r for r in harness_log(broker) if "wake" in r], "the harness")
    try:
        broker.home.kill_all()
        wait_for(lambda: not alive(helper), "the detached helper to be gone")
        wait_for(lambda: not group_alive(run["pgid"]), "the run's process group to be gone")
    finally:
        if alive(helper):
            os.kill(helper, signal.SIGKILL)


def test_wake_only_the_person_turns_it_on(wake_env: Callable[..., Broker]) -> None:
    """A session token gets 401 from the wake routes and the CLI refuses inside a session;
    bad settings and agents that cannot be woken are refused, naming why, changing nothing."""
    broker = wake_env()
    launch_once(broker, "bot")
    agent = register(broker, "other")
    bot_id = next(
        a["agent_id"]
        for ws in broker.read("/v1/snapshot").json()["workspaces"]
        for a in ws["agents"]
        if a["alias"] == "bot"
    )
    with httpx2.Client(timeout=10) as http:
        as_agent = {"Authorization": f"Bearer {agent['token']}"}
        put = http.put(f"{broker.url}/v1/agents/{bot_id}/wake", json={}, headers=as_agent)
        assert put.status_code == 401
        listing = http.get(f"{broker.url}/v1/wake", headers=as_agent)
        assert listing.status_code == 401
        secret = {"Authorization": f"Bearer {broker.secret}"}
        for body, status in (
            ({"max_runs_per_hour": 0}, 400),
            ({"timeout_s": "1h"}, 400),
            ({"command": []}, 400),
            ({"command": ["-p", "{nope}"]}, 400),
            ({"extra": 1}, 400),
        ):
            answer = http.put(f"{broker.url}/v1/agents/{bot_id}/wake", json=body, headers=secret)
            assert answer.status_code == status, (body, answer.text)
        missing = http.put(f"{broker.url}/v1/agents/agt_0000000000000000/wake", json={},
                                 headers=secret)  # fmt: skip
        assert missing.status_code == 404
        # "other" never named a conversation: nothing to resume.
        other = http.put(f"{broker.url}/v1/agents/{agent['agent_id']}/wake",
                               json={"command": LAUNCH_WITH.split()}, headers=secret)  # fmt: skip
        assert other.status_code == 409
        assert "no conversation to resume" in other.json()["error"]["message"]
    inside = _cli(broker, "wake", "on", "bot", env={"PAGER_TOKEN": agent["token"]})
    assert inside.returncode == 1
    assert "run it from your own terminal" in inside.stderr
    assert pager(broker, "wake", "list", "--json") == {"agents": []}
    assert "already off" in pager(broker, "wake", "off", "bot")


def test_wake_a_graceful_stop_ends_the_run_and_its_session(wake_env: Callable[..., Broker]) -> None:
    """`pager exit` during a run: the run's group is stopped, the run recorded `stopped`, and
    its session ended in the store (not left to lapse), so the next start may run again."""
    broker = wake_env(FAKE_WAKE="hang")
    launch_once(broker, "bot")
    pager(broker, "wake", "on", "bot", "--command", LAUNCH_WITH)
    _cli(broker, "send", "bot", "hello")
    (run,) = wait_for(lambda: [r for r in harness_log(broker) if "wake" in r], "the harness")
    pager(broker, "exit")
    wait_for(lambda: not group_alive(run["pgid"]), "the run's process group to be gone")
    again = start_broker(broker.home, broker.workspace, FAKE_WAKE="exit:0")
    (ended, *_) = again.events_sync("wake.ended")
    assert (ended["data"]["outcome"], ended["data"]["detail"]) == ("stopped", "the broker stopped")
    wait_for(lambda: len(again.events_sync("wake.ended")) == 2, "a run after the restart")


def test_wake_runs_on_the_host_of_the_agents_workspace(tmp_path: Path, pg_dsn: str) -> None:
    """Two brokers on one PostgreSQL store (SPEC §13): mail sent through `alpha` to an agent
    of `beta`'s workspace is run by `beta`, in that workspace."""
    env = {**WAKE_WINDOWS, **postgres_env(pg_dsn, tmp_path)}
    brokers = []
    for name in ("alpha", "beta"):
        home = PagerHome(tmp_path / name)
        home.root.mkdir(mode=0o700, parents=True)
        (home.root / "config.toml").write_text(f'[host]\nname = "{name}"\n')
        fake = {"PATH": f"{_fake_claude(tmp_path)}:{os.environ['PATH']}",
                "FAKE_HARNESS_LOG": str(tmp_path / f"{name}.log")}  # fmt: skip
        brokers.append(start_broker(home, tmp_path / f"repo-{name}", **env, **fake))
    alpha, beta = brokers
    try:
        launch_once(beta, "bot")
        entry = pager(beta, "wake", "on", "bot", "--command", LAUNCH_WITH, "--json")
        _cli(alpha, "send", entry["address"], "hello from alpha")
        wait_for(runs_ended(beta, 1), "the run")
        (listed,) = pager(alpha, "wake", "list", "--json")["agents"]
        assert [(run["host"], run["outcome"]) for run in listed["runs"]] == [("beta", "exited")]
        (run,) = [r for r in harness_log(beta) if "wake" in r]
        assert Path(run["cwd"]).resolve() == beta.workspace.resolve()
        assert not [r for r in harness_log(alpha) if "wake" in r]
    finally:
        for broker in brokers:
            broker.home.kill_all()


def test_wake_a_conversation_named_at_the_first_hook_can_be_resumed(
    wake_env: Callable[..., Broker],
) -> None:
    """A harness that picks its own thread ids (Codex) names the conversation at its first
    hook: from then on the agent has a conversation a wake run (or a knock) resumes."""
    broker = wake_env()
    fresh = register(broker, "fresh", implementation="codex")
    command = ["--command", "exec resume {conversation_key} {prompt}"]
    refused = _cli(broker, "wake", "on", "fresh", *command)
    assert refused.returncode == 1
    assert "no conversation to resume" in refused.stderr
    claim = {"implementation": "codex", "conversation_key": "thread-7", "max_chars": 9000,
             "session_token": fresh["token"]}  # fmt: skip
    status, answer = post(broker, "/v1/hook/claim", claim, broker.secret)
    assert status == 200, answer
    entry = pager(broker, "wake", "on", "fresh", *command, "--json")
    assert entry["launchable"] is True


def test_wake_runs_at_once_stay_within_the_brokers_bound(wake_env: Callable[..., Broker]) -> None:
    """With `wake_runs = 1`, mail to three agents starts their runs one at a time: in the event
    stream no run starts before the one going has ended."""
    broker = wake_env(FAKE_WAKE="hang", PAGER_LIMIT_WAKE_RUNS="1")
    names = ("a", "b", "c")
    for name in names:
        launch_once(broker, name)
        pager(broker, "wake", "on", name, "--command", LAUNCH_WITH, "--timeout", "1s")
    for name in names:
        _cli(broker, "send", name, "hello")

    def all_ran() -> list[dict[str, Any]]:
        events = broker.events_sync("wake.started", "wake.ended")
        ended = {e["data"]["alias"] for e in events if e["type"] == "wake.ended"}
        return events if ended >= set(names) else []

    going = 0
    for event in wait_for(all_ran, "a run of each agent"):
        going += 1 if event["type"] == "wake.started" else -1
        assert going <= 1, event
