"""Paging from scripts (SPEC §8.2) end to end: mailbox tokens through the real CLI, the very
`curl` command of docs/paging.md, `pager notify`, what a token cannot do, bad input, and a page
that survives `kill -9` of the broker between its 202 and its delivery."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import PAGER, answer, pager, start_shell
from tests.e2e.test_wrapper_harnesses import finish, launch, needs_node, record, records
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for

ROOT = Path(__file__).parents[2]
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl on PATH")


def documented_curl() -> str:
    """The `curl` command docs/paging.md gives, exactly as written there."""
    text = (ROOT / "docs" / "paging.md").read_text()
    found = re.search(r"<!-- tested: [^>]*-->\n```sh\n(curl .*?)\n```", text, re.S)
    assert found, "docs/paging.md lost its tested curl command"
    return found[1]


def token_for(broker: Broker, cwd: Path, to: str, *args: str) -> str:
    made = pager(broker, cwd, "token", "create", to, *args)
    assert made.returncode == 0, made.stderr
    [token] = made.stdout.split()  # alone on stdout
    assert token.startswith("pmt_")
    return token


def run(
    argv: list[str], *, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=PROCESS_BOUND,
        check=False,
    )  # fmt: skip


async def raw(
    broker: Broker, method: str, path: str, token: str, body: bytes = b""
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.request(method, broker.url + path, content=body, headers=headers)
    return response.status_code, response.json() if response.content else None


@needs_curl
async def test_the_documented_curl_pages_a_wrapped_session_that_reads_it(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    """A token for `ci` in api; the docs' curl command (run by bash, real curl) pages it;
    `ci`, a wrapped `pager shell` session, reads it with `pager read`."""
    got = tmp_path / "got.json"
    session = start_shell(broker, places["api"], "ci", f"pager read --wait 60 --json > {got}")
    try:
        wait_for(
            lambda: any(a["alias"] == "ci" and a["attached"] for a in answer(
                pager(broker, places["api"], "who", "--json"))["agents"]),
            "ci to attach",
        )  # fmt: skip
        token = token_for(broker, places["api"], "ci", "--label", "nightly")
        env = {**broker.home.env, "PAGER_URL": broker.url, "PAGER_NOTIFY_TOKEN": token}
        done = run(["bash", "-c", documented_curl()], env=env)
        assert done.returncode == 0, done.stderr
        accepted = json.loads(done.stdout)
        _, err = await trio.to_thread.run_sync(session.communicate, None, PROCESS_BOUND)
        assert session.returncode == 0, err
    finally:
        if session.poll() is None:
            session.kill()
    message = json.loads(got.read_text().splitlines()[0])["message"]
    assert message["id"] == accepted["message_id"]
    assert (message["from"], message["origin"], message["hop"]) == ("nightly (script)", "script", 0)
    assert message["thread"] == "build-42"
    assert message["fields"] == {"job_id": "build-42", "status": "success", "exit_code": 0}
    assert message["body"] == "build done\n\nstatus: success\nexit_code: 0"
    # Like any message: in history, in the export, in the operator's events.
    history = answer(pager(broker, places["api"], "history", "--json", "-n", "5"))
    assert history["messages"] == []  # the person's history, not ci's
    records = [
        json.loads(line)
        for line in pager(broker, places["api"], "export").stdout.split("\n")
        if line
    ]
    [page] = [r for r in records if r["kind"] == "message"]
    assert (page["from_address"], page["origin"], page["state"]) == (
        "nightly (script)", "script", "acknowledged"
    )  # fmt: skip
    assert page["fields"]["status"] == "success"
    events = await broker.events("message.queued")
    assert events[0]["data"]["origin"] == "script"
    listed = pager(broker, places["api"], "token", "list", "--json")
    assert token not in listed.stdout  # never shown again
    [row] = answer(listed)
    assert (row["label"], row["last_used_at"] is not None) == ("nightly", True)
    # Stored hashed: the token is in nothing the broker shows, nor in any file it keeps.
    assert token not in (await broker.get("/v1/tokens?revoked=true")).text
    assert token not in json.dumps([await broker.export(), await broker.events()])
    files = [path for path in broker.home.root.rglob("*") if path.is_file()]
    assert [path for path in files if token.encode() in path.read_bytes()] == []


async def test_a_token_pages_only_and_only_its_identity(
    broker: Broker, places: dict[str, Path]
) -> None:
    """A token cannot read, cannot call /mcp or any route but /v1/notify, cannot page anyone
    else; revoked, it gets 401; none of this changes anything."""
    ci = await broker.register("ci")
    other = await broker.register("other")
    token = token_for(broker, broker.workspace, "ci")
    page = json.dumps({"message": "hello"}).encode()
    status, _ = await raw(broker, "POST", "/v1/notify", token, page)
    assert status == 202
    before = await broker.counts()
    refused = [
        ("GET", "/v1/me"),
        ("GET", "/v1/me/inbox"),
        ("POST", "/v1/me/send"),
        ("POST", "/v1/me/claim"),
        ("GET", "/v1/snapshot"),
        ("GET", "/v1/export"),
        ("GET", "/v1/tokens"),
        ("POST", "/v1/register"),
        ("POST", "/v1/sessions/current/detach"),
        ("GET", f"/v1/agents/{ci['agent_id']}/messages"),
    ]
    for method, path in refused:
        body = json.dumps({"to": "other", "body": "x", "workspace": str(broker.workspace),
                           "implementation": "shell"}).encode()  # fmt: skip
        status, answered = await raw(broker, method, path, token, body)
        assert status == 401, (path, answered)
    status, answered = await raw(broker, "POST", "/mcp", token, b"{}")
    assert status == 401, answered
    for to in ("other", other["address"], other["agent_id"], "nobody"):
        status, answered = await raw(broker, "POST", f"/v1/notify?to={to}", token, page)
        assert (status, answered["error"]["code"]) == (404, "unknown_recipient"), answered
    assert await broker.counts() == before
    [row] = answer(pager(broker, broker.workspace, "token", "list", "--json"))
    revoked = pager(broker, broker.workspace, "token", "revoke", row["id"])
    assert revoked.returncode == 0, revoked.stderr
    for bad in (token, "pmt_" + "A" * 43, "pmt_short", ci["token"], broker.secret):
        status, answered = await raw(broker, "POST", "/v1/notify", bad, page)
        assert (status, answered["error"]["code"]) == (401, "unauthenticated"), (bad, answered)
    status, _ = await raw(broker, "POST", "/v1/notify", "", page)
    assert status == 401
    assert await broker.counts() == before
    assert answer(pager(broker, broker.workspace, "token", "list", "--json")) == []
    assert len(answer(pager(broker, broker.workspace, "token", "list", "--all", "--json"))) == 1


async def test_bad_pages_are_refused_and_change_nothing(broker: Broker) -> None:
    await broker.register("ci")
    token = token_for(broker, broker.workspace, "ci")
    cases: list[tuple[bytes, int, str]] = [
        (b"{not json", 400, "validation_failed"),
        (b'"build done"', 400, "validation_failed"),
        (b"{}", 400, "validation_failed"),
        (b'{"message": "a", "body": "b"}', 400, "validation_failed"),
        (b'{"message": "m", "exit_code": "seven"}', 400, "validation_failed"),
        (b'{"message": "m", "a b": 1}', 400, "validation_failed"),
        (b'{"message": "\\ud800"}', 400, "validation_failed"),
        (json.dumps({"message": "m", "logs": "x" * 40_000}).encode(), 413, "oversized_content"),
        (json.dumps({"message": "x" * 2_000_000}).encode(), 413, "oversized_content"),
    ]
    for body, status, code in cases:
        got, answered = await raw(broker, "POST", "/v1/notify", token, body)
        assert (got, answered["error"]["code"]) == (status, code), (body[:40], answered)
    assert await broker.messages() == []
    # A bad token is refused before the body is looked at.
    got, answered = await raw(broker, "POST", "/v1/notify", "pmt_" + "B" * 43, b"{not json")
    assert (got, answered["error"]["code"]) == (401, "unauthenticated")


async def test_the_per_token_rate_limit(tmp_path: Path) -> None:
    from tests.e2e.conftest import FAST_WINDOWS, start_broker

    home = PagerHome(tmp_path / "home")
    broker = start_broker(home, tmp_path / "repo", **FAST_WINDOWS,
                          PAGER_LIMIT_TOKEN_SENDS_PER_HOUR="2")  # fmt: skip
    try:
        await broker.register("ci")
        token = token_for(broker, broker.workspace, "ci")
        page = b'{"message": "tick"}'
        assert [(await raw(broker, "POST", "/v1/notify", token, page))[0] for _ in range(2)] == [
            202, 202
        ]  # fmt: skip
        status, answered = await raw(broker, "POST", "/v1/notify", token, page)
        assert (status, answered["error"]["code"]) == (429, "rate_limited")
        assert answered["error"]["retry_after_s"] >= 1
        refused = await broker.events("send.refused")
        assert refused[0]["data"]["reason"] == "rate_limited"
    finally:
        home.kill_all()


async def test_the_page_survives_kill_9_between_its_202_and_its_delivery(
    broker: Broker, places: dict[str, Path]
) -> None:
    me = answer(pager(broker, places["desk"], "whoami", "--json"))
    token = token_for(broker, places["desk"], me["alias"], "--label", "deploy")
    status, accepted = await raw(
        broker, "POST", "/v1/notify", token, b'{"message": "deployed", "job_id": "d-1"}'
    )
    assert status == 202
    pid = json.loads(broker.home.run("status", "--json").stdout)["pid"]
    os.kill(pid, signal.SIGKILL)
    restarted = await trio.to_thread.run_sync(broker.home.run, "start", "--json")
    assert restarted.returncode == 0, restarted.stderr
    read = pager(broker, places["desk"], "read", "--json")
    assert read.returncode == 0, read.stderr
    [line] = read.stdout.splitlines()
    message = json.loads(line)["message"]
    assert (message["id"], message["from"], message["thread"]) == (
        accepted["message_id"], "deploy (script)", "d-1"
    )  # fmt: skip


async def test_pager_notify_as_a_session_as_the_person_and_with_a_token(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    """From a wrapped session it pages as that session; from the terminal as the person; with
    `--token` and `--url` it needs no Pager state at all, and TO must be the token's."""
    sent = tmp_path / "sent.json"
    script = (
        "pager notify {to} 'tests passed' --job-id t-1 --status success --exit-code 0"
        f" --field sha=abc --json > {sent}"
    )
    me = answer(pager(broker, places["desk"], "whoami", "--json"))
    session = start_shell(broker, places["api"], "builder", script.format(to=me["address"]))
    _, err = await trio.to_thread.run_sync(session.communicate, None, PROCESS_BOUND)
    assert session.returncode == 0, err
    read = pager(broker, places["desk"], "read", "--json")
    message = json.loads(read.stdout.splitlines()[0])["message"]
    assert message["from"].startswith("builder@")
    assert (message["origin"], message["hop"]) == ("agent", 1)  # an agent's send
    assert message["fields"] == {"job_id": "t-1", "status": "success", "exit_code": 0,
                                 "sha": "abc"}  # fmt: skip
    assert "sha: abc" in message["body"]
    mine = pager(broker, places["desk"], "notify", me["alias"], "a note to self")
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.startswith(f"paged {me['address']}: msg_")
    token = token_for(broker, places["desk"], me["alias"], "--label", "ci")
    stateless = {**broker.home.env, "PAGER_HOME": str(tmp_path / "empty")}
    ci = run(
        [*PAGER, "notify", me["alias"], "nightly failed", "--url", broker.url, "--status",
         "failure"], env={**stateless, "PAGER_NOTIFY_TOKEN": token}, cwd=tmp_path,
    )  # fmt: skip
    assert ci.returncode == 0, ci.stderr
    assert not (tmp_path / "empty").exists()  # no broker started, nothing written
    wrong = run(
        [*PAGER, "notify", "builder", "x", "--url", broker.url, "--token", token],
        env=stateless, cwd=tmp_path,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "this token pages" in wrong.stderr
    inbox = answer(pager(broker, places["desk"], "inbox", "--json"))["messages"]
    assert [(m["from"], m["body"].splitlines()[0]) for m in inbox] == [
        (me["address"], "a note to self"), ("ci (script)", "nightly failed")
    ]  # fmt: skip


async def test_bad_notify_and_token_commands_say_what_to_do(
    broker: Broker, places: dict[str, Path]
) -> None:
    desk = places["desk"]
    cases = [
        (("notify", "nobody", "hi"), 1, "no agent 'nobody'"),
        (("notify", "x"), 2, "MESSAGE"),
        (("notify", "x", "hi", "--field", "novalue"), 1, "write KEY=VALUE"),
        (("notify", "x", "hi", "--exit-code", "seven"), 2, "invalid int"),
        (("token", "create", "nobody"), 1, "no agent 'nobody'"),
        (("token", "create", "x", "--expires", "forever"), 1, "not a positive duration"),
        (("token", "revoke", "mbx_0000000000000000"), 1, "no mailbox token"),
        (("token",), 2, "ACTION"),
    ]
    for args, status, says in cases:
        done = pager(broker, desk, *args)
        assert done.returncode == status, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
    for command in (("notify", "--help"), ("token", "--help"), ("token", "create", "--help")):
        helped = pager(broker, desk, *command)
        assert helped.returncode == 0, command
        assert "example" in helped.stdout, command


@needs_node
@pytest.mark.parametrize("kind", ["opencode", "pi"])
async def test_a_page_wakes_an_idle_wrapped_harness(
    broker: Broker, fakes: Path, tmp_path: Path, kind: str
) -> None:
    """A page to an idle wrapped session wakes it the way any message does: the OpenCode
    plugin prompts the idle session with it, the Pi extension starts a turn with it."""
    go = tmp_path / "go"
    wrapper = launch(broker, kind, f"wait:{go},plugin,exit:0", "--session-name", "x", "--")
    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        token = token_for(broker, broker.workspace, "x", "--label", "ci")
        page = json.dumps({"message": "tests failed", "job_id": "ci-9", "status": "failure"})
        status, accepted = await raw(broker, "POST", "/v1/notify", token, page.encode())
        assert status == 202
        go.touch()
    finally:
        code, err = await finish(wrapper)
    assert code == 0, err
    plugin = record(fakes, "plugin")
    if kind == "opencode":
        [prompt] = plugin["prompts"]
        assert "noReply" not in prompt["body"]  # idle: a wake, not a note for later
        text = prompt["body"]["parts"][0]["text"]
    else:
        [sent] = plugin["sent"]
        assert sent["options"] == {"deliverAs": "followUp", "triggerTurn": True}
        text = sent["message"]["content"]
    assert "tests failed" in text
    assert "status: failure" in text
    assert "ci (script)" in text
    assert (await broker.message(accepted["message_id"]))["state"] == "acknowledged"


async def test_a_page_wakes_claude_through_its_async_rewake_hook(broker: Broker) -> None:
    """Claude Code's waiting `Stop` hook (`pager hook --wait`, asyncRewake) ends with the page
    on stderr and exit 2, which wakes the idle session; the page is then acknowledged."""
    from tests.e2e.test_hook import _hook, _payload

    await broker.register("bob", implementation="claude", conversation_key="conv-bob")
    token = token_for(broker, broker.workspace, "bob", "--label", "deploy")
    args = ("--implementation", "claude", "--wait", "--wait-max", "30")
    results: list[subprocess.CompletedProcess[bytes]] = []
    with trio.fail_after(60):

        async def wait() -> None:
            payload = _payload("conv-bob", "Stop")
            results.append(await trio.to_thread.run_sync(_hook, broker, payload, *args))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            page = b'{"message": "deploy failed", "job_id": "d-9", "status": "failure"}'
            status, accepted = await raw(broker, "POST", "/v1/notify", token, page)
            assert status == 202
    [woken] = results
    assert woken.returncode == 2
    assert b"deploy failed" in woken.stderr
    assert b"status: failure" in woken.stderr
    assert b"deploy (script)" in woken.stderr
    assert (await broker.message(accepted["message_id"]))["state"] == "acknowledged"
