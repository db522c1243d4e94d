"""`pager codex|gemini|opencode|pi|copilot|kilo|cline` with FAKE harnesses on PATH against a real
broker.

The fakes (tests/fakes/fake_harness_generic.py) record their argv, environment and the files
they were pointed at, and act like the harness: call the MCP endpoint the way it would, run
its configured hook, or run Pager's OpenCode plugin / Pi extension under Node with a fake host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.conftest import KINDS, Broker, mcp_session, structured
from tests.launch.conftest import PROCESS_BOUND, wait_for

ROOT = Path(__file__).parents[2]
ASSETS = ROOT / "pager" / "implementations" / "connectors" / "assets"
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")


def records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def record(log: Path, key: str) -> Any:
    found = [r[key] for r in records(log) if key in r]
    assert found, f"the fake logged no {key!r}: {records(log)}"
    return found[-1]


def launch(
    broker: Broker, kind: str, steps: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pager", kind, *args],
        env={**broker.home.env, "FAKE_HARNESS_STEPS": steps, **(env or {})},
        cwd=broker.workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def finish(wrapper: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = await trio.to_thread.run_sync(wrapper.communicate, None, PROCESS_BOUND)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    return wrapper.returncode, err


async def send(broker: Broker, to: str, body: str) -> tuple[dict[str, Any], str]:
    """Sends `body` from a new agent `alice`; returns alice's registration and the message id."""
    alice = await broker.register("alice")
    async with mcp_session(broker.url, alice["token"]) as a:
        sent = structured(await a.call_tool("send", {"to": to, "body": body}))
    return alice, str(sent["message_id"])


async def launch_with_mail(
    broker: Broker,
    fakes: Path,
    tmp_path: Path,
    kind: str,
    step: str,
    body: str,
    harness_args: tuple[str, ...] = (),
) -> tuple[dict[str, Any], str]:
    """Launch the fake `kind` as `x`; once it runs, `alice` sends `body` to x, then the fake
    runs `step` and exits 0. Returns alice's registration and the message id."""
    go = tmp_path / "go"
    args = ("--session-name", "x", "--", *harness_args)
    wrapper = launch(broker, kind, f"wait:{go},{step},exit:0", *args)
    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        alice, message_id = await send(broker, "x", body)
        go.touch()
    finally:
        status, err = await finish(wrapper)
    assert status == 0, err
    return alice, message_id


async def state_of(broker: Broker, alice: dict[str, Any], message_id: str) -> str:
    async with mcp_session(broker.url, alice["token"]) as a:
        status = structured(await a.call_tool("message_status", {"message_id": message_id}))
    return str(status["state"])


# -- per-launch wiring, exit status, detach ---------------------------------------------------

USER_ARGS = {
    "codex": ("--model", "o4"),
    "gemini": ("--model", "flash"),
    "opencode": ("--model", "m"),
    "pi": ("--model", "m"),
    "copilot": ("--model", "gpt-5"),
    "kilo": ("--model", "m"),
    "cline": ("--model", "m"),
}
STATUS = {"codex": 3, "gemini": 0, "opencode": 5, "pi": 7, "copilot": 4, "kilo": 6, "cline": 8}


@pytest.mark.parametrize("kind", KINDS)
async def test_wrapped_launch_wires_the_harness_per_launch(
    broker: Broker, fakes: Path, kind: str
) -> None:
    """`pager <kind> --session-name x -- ARGS` starts the fake with the manifest's per-launch
    wiring (token only in the environment or a private 0600 file), the fake's MCP call
    authenticates as `x`, the wrapper exits with the fake's status, and `x` is detached."""
    wrapper = launch(broker, kind, f"mcp,exit:{STATUS[kind]}", "--session-name", "x", "--",
                     *USER_ARGS[kind])  # fmt: skip
    status, err = await finish(wrapper)
    assert status == STATUS[kind], err
    [start] = [r for r in records(fakes) if "argv" in r]
    token = start["env"]["PAGER_TOKEN"]
    assert token
    assert not any(token in arg for arg in start["argv"]), "the token is on the command line"
    # The launch relay's address and credential, never the broker's or a session token.
    relay = start["env"]["PAGER_URL"]
    assert relay.startswith("http://127.0.0.1:")
    assert relay != broker.url
    assert token.startswith("prl_")
    assert start["argv"][-2:] == list(USER_ARGS[kind])
    assert Path(start["cwd"]) == broker.workspace
    for path, file in start["files"].items():
        assert file["exists"], f"{path} was missing while the harness ran"
        assert file["mode"] == 0o600, f"{path} mode {file['mode']:o}"
        assert not Path(path).exists(), f"{path} outlived the launch"  # noqa: ASYNC240
    who = record(fakes, "mcp")
    assert (who["alias"], who["implementation"]) == ("x", kind)
    CHECKS[kind](start, broker)
    again = await broker.register("x")  # detached: the name is free to rejoin
    assert again["epoch"] == 2


def check_codex(start: dict[str, Any], broker: Broker) -> None:
    argv = start["argv"]
    assert argv[:4] == [
        "-c",
        f'mcp_servers.pager.url="{start["env"]["PAGER_URL"]}/mcp"',
        "-c",
        'mcp_servers.pager.bearer_token_env_var="PAGER_TOKEN"',
    ]
    assert argv[4] == "-c"
    assert argv[5].startswith("hooks={SessionStart=[{hooks=[{type=")
    assert start["files"] == {}


def check_gemini(start: dict[str, Any], broker: Broker) -> None:
    # Not a system settings file: Gemini CLI ignores one that root does not own.
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in start["env"]
    extension = Path(start["env"]["GEMINI_CLI_HOME"], ".gemini", "extensions", "pager-launch")
    config = json.loads(start["files"][str(extension / "gemini-extension.json")]["content"])
    assert config["name"] == "pager-launch"  # Gemini CLI wants the directory's name
    server = config["mcpServers"]["pager"]
    assert server["httpUrl"] == f"{start['env']['PAGER_URL']}/mcp"
    assert server["headers"] == {"Authorization": f"Bearer {start['env']['PAGER_TOKEN']}"}
    assert "trust" not in server  # Pager never pre-approves its tools (SPEC §10)
    hooks = json.loads(start["files"][str(extension / "hooks" / "hooks.json")]["content"])
    for event in ("SessionStart", "BeforeAgent"):
        [group] = hooks["hooks"][event]
        command = group["hooks"][0]["command"]
        assert f"hook --implementation gemini --format gemini --max-chars 9000 {event}" in command
    # A new session: the wrapper chose its id, so hooks can find it by the payload's session_id.
    assert start["argv"][0] == "--session-id"
    uuid.UUID(start["argv"][1])


def check_opencode(start: dict[str, Any], broker: Broker, variable: str = "OPENCODE_CONFIG_CONTENT",
                   plugin_name: str = "pager-opencode.js") -> None:  # fmt: skip
    config = json.loads(start["env"][variable])
    assert config["mcp"]["pager"] == {
        "type": "remote",
        "url": f"{start['env']['PAGER_URL']}/mcp",
        "headers": {"Authorization": "Bearer {env:PAGER_TOKEN}"},
        "oauth": False,
        "enabled": True,
    }
    [plugin] = config["plugin"]
    assert plugin.startswith("file:///")
    [(path, file)] = start["files"].items()
    assert plugin.endswith(path)
    assert Path(path).name == plugin_name
    assert file["content"] == (ASSETS / "opencode" / "pager.js").read_text()


def check_kilo(start: dict[str, Any], broker: Broker) -> None:
    """Kilo CLI, an OpenCode fork: OpenCode's configuration and plugin, in its own variable."""
    assert "OPENCODE_CONFIG_CONTENT" not in start["env"]
    check_opencode(start, broker, "KILO_CONFIG_CONTENT", "pager-kilo.js")
    assert json.loads(start["env"]["KILO_CONFIG_CONTENT"])["$schema"] == (
        "https://app.kilo.ai/config.json"
    )


def check_pi(start: dict[str, Any], broker: Broker) -> None:
    assert start["argv"][0] == "-e"
    path = start["argv"][1]
    assert path.endswith(".ts")
    assert start["files"][path]["content"] == (ASSETS / "pi" / "pager.ts").read_text()


def check_copilot(start: dict[str, Any], broker: Broker) -> None:
    argv = start["argv"]
    assert argv[0] == "--additional-mcp-config"
    path = argv[1].removeprefix("@")
    config = json.loads(start["files"][path]["content"])
    server = config["mcpServers"]["pager"]
    assert server["type"] == "http"
    assert server["url"] == f"{start['env']['PAGER_URL']}/mcp"
    assert server["headers"] == {"Authorization": f"Bearer {start['env']['PAGER_TOKEN']}"}
    assert argv[2] == "--plugin-dir"
    # The plugin holds no secret and lives in Pager's state directory, not the user's ~/.copilot.
    plugin = Path(argv[3])
    assert plugin == broker.home.root / "copilot-plugin"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    for event in ("sessionStart", "userPromptSubmitted"):
        [entry] = hooks[event]
        assert f"--format copilot --max-chars 9000 {event}" in entry["bash"]
        assert start["env"]["PAGER_TOKEN"] not in entry["bash"]
    # A new session: the wrapper chose its id, so hooks can find it by the payload's sessionId.
    assert argv[4] == "--session-id"
    uuid.UUID(argv[5])


def check_cline(start: dict[str, Any], broker: Broker) -> None:
    env = start["env"]
    assert start["argv"] == list(USER_ARGS["cline"])  # all wiring is in the environment
    config = json.loads(start["files"][env["CLINE_MCP_SETTINGS_PATH"]]["content"])
    assert config["mcpServers"]["pager"] == {
        "type": "streamableHttp",
        "url": f"{env['PAGER_URL']}/mcp",
        "headers": {"Authorization": f"Bearer {env['PAGER_TOKEN']}"},
    }
    # Headless runs stay in this process; the TUI's hub is the launch's own (its discovery file
    # in the launch's directory, a port of its own), never one another launch started.
    assert env["CLINE_SESSION_BACKEND_MODE"] == "local"
    assert env["CLINE_HUB_DISCOVERY_PATH"] == f"{env['CLINE_DIR']}/pager-hub/discovery.json"
    assert 0 < int(env["CLINE_HUB_PORT"]) < 65536
    entries = start["cline_dir"]
    home = Path(broker.home.env["HOME"])
    assert entries["data"] == f"link:{home / '.cline' / 'data'}"
    delivery, prompted = entries["hooks/PostToolUse"], entries["hooks/TaskStart"]
    assert "--format cline --max-chars 9000 PostToolUse" in delivery["content"]
    assert "--prompt-only TaskStart" in prompted["content"]
    for script in (delivery, prompted):
        assert script["mode"] == 0o700
        assert env["PAGER_TOKEN"] not in script["content"]
    assert not Path(env["CLINE_DIR"]).exists(), "the launch's Cline directory outlived it"


CHECKS = {
    "codex": check_codex,
    "gemini": check_gemini,
    "opencode": check_opencode,
    "pi": check_pi,
    "copilot": check_copilot,
    "kilo": check_kilo,
    "cline": check_cline,
}


# -- Cline: the per-launch directory, hooks ----------------------------------------------------


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


async def test_cline_launch_keeps_the_users_hooks_and_servers_and_writes_none_of_its_own(
    broker: Broker, fakes: Path
) -> None:
    """The user's own Cline hooks (one for PostToolUse too) and MCP servers are kept in the
    launch (linked; merged with `pager`); the user's `~/.cline` gets no file of Pager's."""
    users = Path(broker.home.env["HOME"], ".cline")
    (users / "hooks").mkdir(parents=True)
    for name in ("PostToolUse", "TaskComplete.py"):
        (users / "hooks" / name).write_text("#!/bin/sh\n")
    settings = users / "data" / "settings" / "cline_mcp_settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"type": "stdio", "command": "my-server"}
    settings.write_text(json.dumps({"mcpServers": {"mine": mine}}))
    before = tree(users)
    wrapper = launch(broker, "cline", "mcp,exit:0", "--session-name", "x")
    status, err = await finish(wrapper)
    assert status == 0, err
    [start] = [r for r in records(fakes) if "argv" in r]
    entries = start["cline_dir"]
    assert entries["hooks/PostToolUse"] == f"link:{users / 'hooks' / 'PostToolUse'}"
    assert entries["hooks/TaskComplete.py"] == f"link:{users / 'hooks' / 'TaskComplete.py'}"
    assert "--format cline" in entries["hooks/PostToolUse.sh"]["content"]  # both run
    servers = json.loads(start["files"][start["env"]["CLINE_MCP_SETTINGS_PATH"]]["content"])
    assert servers["mcpServers"]["mine"] == mine
    assert record(fakes, "mcp")["alias"] == "x"
    assert tree(users) == before
    assert json.loads(settings.read_text()) == {"mcpServers": {"mine": mine}}


def environ_of(pid: int) -> list[bytes]:
    """A process's environment, as another process of the user's reads it (empty: gone)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


def post_mcp(url: str, token: str) -> str:
    """What the relay at `url` answers a bearer of `token`: its HTTP status, or why none."""
    request = urllib.request.Request(
        f"{url}/mcp", data=b"{}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return f"HTTP {answer.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except urllib.error.URLError as exc:
        return f"no answer: {exc.reason}"


async def test_cline_hub_daemon_left_by_the_launch_is_stopped_with_its_credential(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """The attacker is any process of the user's after `pager cline` ended: Cline CLI's TUI
    starts its hub daemon detached, with the launch's environment, and it outlives the TUI.
    When the launch ends the daemon is stopped, so no process is left whose environment
    (/proc/PID/environ) holds the launch's credential, and the credential itself opens nothing
    (the relay is closed). Without `stop_leftovers` the daemon runs on, holding PAGER_TOKEN."""
    pid_file = tmp_path / "hub.pid"
    wrapper = launch(broker, "cline", f"daemon:{pid_file},exit:0", "--session-name", "x")
    status, err = await finish(wrapper)
    pid = int(pid_file.read_text())
    try:
        assert status == 0, err
        env = record(fakes, "env")
        token = env["PAGER_TOKEN"]
        assert f"PAGER_TOKEN={token}".encode() not in environ_of(pid), (
            "the hub daemon the launch left holds its credential"
        )
        answer = await trio.to_thread.run_sync(post_mcp, env["PAGER_URL"], token)
        assert "refused" in answer, f"the relay answered the credential after the launch: {answer}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the daemon this test's fake started, if left


async def test_cline_post_tool_use_hook_injects_mail_as_context_modification(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """Pager's PostToolUse hook, run by the fake with Cline CLI's payload (the session in
    `sessionContext.rootSessionId`), prints the waiting message as `{"contextModification": …}`
    inside the envelope; the message is acknowledged after that."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, "cline", "hook:PostToolUse", "mail for cline"
    )
    hook = record(fakes, "hook")
    assert hook["status"] == 0, hook["stderr"]
    output = json.loads(hook["stdout"])
    assert list(output) == ["contextModification"]
    assert "mail for cline" in output["contextModification"]
    assert alice["address"] in output["contextModification"]
    assert await state_of(broker, alice, message_id) == "acknowledged"


async def test_cline_task_start_reports_the_typed_prompt_and_claims_no_mail(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """x (`pager cline`) is delivered a message of hop 2 by its PostToolUse hook: its next send
    has hop 3. A second message waits; the person types a prompt and Cline CLI runs TaskStart,
    whose output it throws away: the hook prints nothing and leaves that message unclaimed
    (printed there, it would be acknowledged without reaching the model), and x's next send
    has hop 1 again."""
    gates = [tmp_path / f"gate-{n}" for n in range(3)]
    steps = [f"wait:{gates[0]}", "hook:PostToolUse", f"wait:{gates[1]}", "hook:TaskStart",
             f"wait:{gates[2]}", "exit:0"]  # fmt: skip
    wrapper = launch(broker, "cline", ",".join(steps), "--session-name", "x")

    def hooks() -> list[dict[str, Any]]:
        return [r["hook"] for r in records(fakes) if "hook" in r]

    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        [start] = [r for r in records(fakes) if "argv" in r]
        alice, message_id = await send_hop_2(broker, "x")
        gates[0].touch()
        wait_for(lambda: len(hooks()) == 1, "the PostToolUse hook")
        assert "mail for x" in json.loads(hooks()[0]["stdout"])["contextModification"]
        assert await state_of(broker, alice, message_id) == "acknowledged"
        assert await hop_of_next_send(broker, start) == 3

        async with mcp_session(broker.url, alice["token"]) as a:
            waiting = structured(await a.call_tool("send", {"to": "x", "body": "still waiting"}))
        gates[1].touch()
        wait_for(lambda: len(hooks()) == 2, "the TaskStart hook")
        assert (hooks()[1]["status"], hooks()[1]["stdout"]) == (0, ""), hooks()[1]["stderr"]
        assert await state_of(broker, alice, str(waiting["message_id"])) == "queued"
        assert await hop_of_next_send(broker, start) == 1
    finally:
        for gate in gates:
            gate.touch()
        status, err = await finish(wrapper)
    assert status == 0, err


# -- Copilot: hooks ----------------------------------------------------------------------------


@pytest.mark.parametrize("event", ["sessionStart", "userPromptSubmitted"])
async def test_copilot_hook_injects_mail_as_additional_context(
    broker: Broker, fakes: Path, tmp_path: Path, event: str
) -> None:
    """The plugin's hook, run by the fake with Copilot CLI's camelCase payload (`sessionId`),
    prints the waiting message as top-level `{"additionalContext": …}` JSON inside the envelope;
    the message is acknowledged after that."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, "copilot", f"hook:{event}", "mail for copilot"
    )
    hook = record(fakes, "hook")
    assert hook["status"] == 0, hook["stderr"]
    output = json.loads(hook["stdout"])
    assert list(output) == ["additionalContext"]
    assert "mail for copilot" in output["additionalContext"]
    assert alice["address"] in output["additionalContext"]
    assert await state_of(broker, alice, message_id) == "acknowledged"


# -- Gemini: hooks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "event"),
    [((), "BeforeAgent"), (("--resume", "0c8a6e2e-7c53-4a45-9a0b-5f1a1c5c2d11"), "SessionStart")],
    ids=["new-session", "resumed-session"],
)
async def test_gemini_hook_injects_mail_as_additional_context(
    broker: Broker, fakes: Path, tmp_path: Path, args: tuple[str, ...], event: str
) -> None:
    """The configured hook, run by the fake with a realistic payload and a stripped environment,
    prints the waiting message as `hookSpecificOutput.additionalContext` JSON (and nothing else)
    inside the envelope; the message is acknowledged after that."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, "gemini", f"hook:{event}", "mail for gemini", args
    )
    hook = record(fakes, "hook")
    assert hook["status"] == 0, hook["stderr"]
    output = json.loads(hook["stdout"])  # stdout is JSON only, as Gemini CLI requires
    assert output["hookSpecificOutput"]["hookEventName"] == event
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "mail for gemini" in context
    assert alice["address"] in context
    assert await state_of(broker, alice, message_id) == "acknowledged"
    [start] = [r for r in records(fakes) if "argv" in r]
    if args:
        assert "--session-id" not in start["argv"]  # resuming: the wrapper chooses nothing


async def test_gemini_home_links_the_users_own_gemini_directory(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """The per-launch GEMINI_CLI_HOME links every entry of the user's ~/.gemini (settings,
    credentials, sessions) and extensions, links the files Gemini CLI writes in place even
    before they exist, creates the session directories in the user's own, and replaces Pager's
    installed extension by the launch's; the user's files are untouched."""
    own = tmp_path / "user-home" / ".gemini"
    (own / "extensions" / "other").mkdir(parents=True)
    (own / "extensions" / "other" / "gemini-extension.json").write_text('{"name": "other"}')
    (own / "extensions" / "pager").mkdir()  # `pager plugin install gemini`
    (own / "extensions" / "pager" / "gemini-extension.json").write_text(
        '{"name": "pager", "mcpServers": {"pager": {"command": "pager", "args": ["mcp"]}}}'
    )
    settings = '{\n  // the user\'s own\n  "ui": {"theme": "mine"}\n}\n'
    (own / "settings.json").write_text(settings)
    (own / "oauth_creds.json").write_text("{}")
    (tmp_path / "user-home" / ".agents").mkdir()
    wrapper = launch(broker, "gemini", "mcp,exit:0", "--session-name", "x")
    status, err = await finish(wrapper)
    assert status == 0, err
    [start] = [r for r in records(fakes) if "argv" in r]
    home = start["gemini_home"]
    assert home[".gemini/settings.json"] == f"link:{own / 'settings.json'}"
    assert home[".gemini/oauth_creds.json"] == f"link:{own / 'oauth_creds.json'}"
    assert home[".gemini/google_accounts.json"] == f"link:{own / 'google_accounts.json'}"
    assert home[".gemini/tmp"] == f"link:{own / 'tmp'}"
    assert (own / "tmp").is_dir()
    assert (own / "history").is_dir()
    assert home[".gemini/extensions/other"] == f"link:{own / 'extensions' / 'other'}"
    assert home[".gemini/extensions/pager-launch"] == "dir"
    assert ".gemini/extensions/pager" not in home  # the launch's extension replaces it
    assert home[".agents"] == f"link:{tmp_path / 'user-home' / '.agents'}"
    assert (own / "settings.json").read_text() == settings
    assert sorted(os.listdir(own / "extensions")) == ["other", "pager"]
    who = record(fakes, "mcp")  # through the launch's extension, not the installed one
    assert (who["alias"], who["implementation"]) == ("x", "gemini")


# -- Codex: hooks through a `-c` override -----------------------------------------------------


async def test_codex_hooks_deliver_mail_to_the_wrapped_session(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """The built-in manifest gives Codex Pager's hooks as one TOML override; a prompt hook
    with a thread id Pager has never seen finds the session through PAGER_TOKEN and prints
    the waiting mail as `additionalContext`, then acknowledges it."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, "codex", "hook:UserPromptSubmit", "mail for codex"
    )
    hook = record(fakes, "hook")
    assert hook["command"].endswith(" --format codex --max-chars 9000 UserPromptSubmit")
    assert " hook --implementation codex " in hook["command"]
    assert hook["status"] == 0
    output = json.loads(hook["stdout"])["hookSpecificOutput"]
    assert output["hookEventName"] == "UserPromptSubmit"
    assert "mail for codex" in output["additionalContext"]
    assert await state_of(broker, alice, message_id) == "acknowledged"


# -- OpenCode plugin and Pi extension, run under Node with a fake host -----------------------


@needs_node
@pytest.mark.parametrize("kind", ["opencode", "kilo"])
async def test_opencode_plugin_wakes_the_idle_session_with_mail(
    broker: Broker, fakes: Path, tmp_path: Path, kind: str
) -> None:
    """Pager's OpenCode plugin (the file the launch names; Kilo CLI, an OpenCode fork, loads the
    same) long-polls the broker with the session's token and prompts the idle root session with
    the mail (no `noReply`: a wake), then acknowledges it."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, kind, "plugin", f"mail for {kind}"
    )
    plugin = record(fakes, "plugin")
    assert "error" not in plugin, plugin
    assert plugin["exported"] == [["PagerPlugin", "function"]]  # OpenCode calls every export
    assert plugin["hooks"] == ["event", "chat.message"]
    assert plugin["errors"] == []
    [prompt] = plugin["prompts"]
    assert prompt["path"] == {"id": "ses_root"}  # the root session, not the child
    assert "noReply" not in prompt["body"]
    text = prompt["body"]["parts"][0]["text"]
    assert f"mail for {kind}" in text
    assert alice["address"] in text
    assert "token:" not in text
    assert await state_of(broker, alice, message_id) == "acknowledged"


@needs_node
async def test_pi_extension_registers_tools_and_delivers_mail(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """Pager's Pi extension (the file passed with `-e`) registers the broker's tools as
    `pager_*` (calls go to the MCP endpoint as this session) and hands mail to the session with
    `sendMessage(…, {deliverAs: "followUp", triggerTurn: true})`, then acknowledges it."""
    alice, message_id = await launch_with_mail(
        broker, fakes, tmp_path, "pi", "plugin", "mail for pi"
    )
    plugin = record(fakes, "plugin")
    assert "error" not in plugin, plugin
    assert {"pager_whoami", "pager_send", "pager_fetch", "pager_ack"} <= set(plugin["tools"])
    assert plugin["schemas"]["pager_send"]["required"] == ["to", "body"]
    assert plugin["whoami"]["details"]["alias"] == "x"
    assert {"session_start", "session_shutdown", "input"} <= set(plugin["events"])
    [sent] = plugin["sent"]
    assert sent["options"] == {"deliverAs": "followUp", "triggerTurn": True}
    assert sent["message"]["customType"] == "pager"
    assert "mail for pi" in sent["message"]["content"]
    assert alice["address"] in sent["message"]["content"]
    assert await state_of(broker, alice, message_id) == "acknowledged"


# -- OpenCode plugin and Pi extension: typed prompts restart the chain (SPEC §8.1) ------------


async def send_hop_2(broker: Broker, to: str) -> tuple[dict[str, Any], str]:
    """carol → alice (hop 1); alice takes it and sends `to` a message of hop 2, so that `to`'s
    next send, once this message is delivered to it, has hop 3. Returns alice's registration
    and the message id."""
    carol = await broker.register("carol")
    alice = await broker.register("alice")
    async with mcp_session(broker.url, carol["token"]) as c:
        structured(await c.call_tool("send", {"to": "alice", "body": "ask x"}))
    async with mcp_session(broker.url, alice["token"]) as a:
        claims = structured(await a.call_tool("fetch", {}))["claims"]
        structured(await a.call_tool("ack", {"tokens": [claim["token"] for claim in claims]}))
        sent = structured(await a.call_tool("send", {"to": to, "body": "mail for x"}))
    message_id = str(sent["message_id"])
    assert (await broker.message(message_id))["hop"] == 2
    return alice, message_id


async def hop_of_next_send(broker: Broker, start: dict[str, Any]) -> int:
    """The hop of a send by the wrapped session, over MCP with its token (the launch relay's)."""
    env = start["env"]
    async with mcp_session(env["PAGER_URL"], env["PAGER_TOKEN"]) as x:
        sent = structured(await x.call_tool("send", {"to": "alice", "body": "x answers"}))
    message = await broker.message(sent["message_id"])
    assert message["origin"] == "agent"
    return int(message["hop"])


async def typed_prompt_chain(
    broker: Broker, fakes: Path, tmp_path: Path, kind: str, not_typed: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Launch the fake `kind` as `x` and, against the real broker: x is delivered a message of
    hop 2 by the plugin (x's next send: hop 3); the fake runs the `not_typed` steps (x's next
    send: still hop 3); then the person types a prompt (`typed:yes go on`; x's next send: hop
    1). Returns the fake's `prompt` records, the typed prompt's last."""
    gates = [tmp_path / f"gate-{n}" for n in range(4)]
    steps = [f"wait:{gates[0]}", "plugin", f"wait:{gates[1]}", *not_typed,
             f"wait:{gates[2]}", "typed:yes go on", f"wait:{gates[3]}", "exit:0"]  # fmt: skip
    wrapper = launch(broker, kind, ",".join(steps), "--session-name", "x")

    def prompts() -> list[dict[str, Any]]:
        return [r["prompt"] for r in records(fakes) if "prompt" in r]

    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        [start] = [r for r in records(fakes) if "argv" in r]
        alice, message_id = await send_hop_2(broker, "x")
        gates[0].touch()
        wait_for(lambda: any("plugin" in r for r in records(fakes)), "the plugin to deliver")
        plugin = record(fakes, "plugin")
        assert "error" not in plugin, plugin
        assert plugin["errors"] == []
        assert plugin["reports"] == []  # delivering mail is no typed prompt
        assert await state_of(broker, alice, message_id) == "acknowledged"
        assert await hop_of_next_send(broker, start) == 3

        gates[1].touch()
        wait_for(lambda: len(prompts()) == len(not_typed), "the steps that are not typed")
        for prompt in prompts():
            assert (prompt["reports"], prompt["errors"]) == ([], []), prompt
        assert await hop_of_next_send(broker, start) == 3

        gates[2].touch()
        wait_for(lambda: len(prompts()) == len(not_typed) + 1, "the typed prompt")
        typed = prompts()[-1]
        assert (typed["text"], typed["reports"], typed["errors"]) == ("yes go on", [200], [])
        assert await hop_of_next_send(broker, start) == 1
    finally:
        for gate in gates:
            gate.touch()
        status, err = await finish(wrapper)
    assert status == 0, err
    return prompts()


@needs_node
@pytest.mark.parametrize("kind", ["opencode", "kilo"])
async def test_opencode_plugin_reports_typed_prompts_but_not_its_own(
    broker: Broker, fakes: Path, tmp_path: Path, kind: str
) -> None:
    """x (OpenCode) is delivered a hop-2 message by its plugin, whose own prompt with the mail
    reaches `chat.message` (as in OpenCode) and is not reported: x's next send has hop 3. Nor
    are Pager's `[pager]` wake text, an empty prompt, or a prompt in a child session (what the
    task tool gives a subagent): still hop 3. A prompt the person types in the root session is
    reported to /v1/sessions/current/prompted (answered 200): x's next send has hop 1."""
    not_typed = ("typed:[pager] 1 message waiting", "typed: ", "subtask:look into the test")
    prompts = await typed_prompt_chain(broker, fakes, tmp_path, kind, not_typed)
    assert [p["step"] for p in prompts] == ["typed", "typed", "subtask", "typed"]


@needs_node
async def test_pi_extension_reports_typed_prompts_but_not_an_extensions(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """x (Pi) is delivered a hop-2 message by its extension: x's next send has hop 3. Input
    with Pager's `[pager]` wake text, empty input, and input another extension sent (source
    "extension") are not reported: still hop 3. Input the person typed (source "interactive")
    is reported to /v1/sessions/current/prompted (answered 200): x's next send has hop 1. The
    extension lets every input go on (`{action: "continue"}`)."""
    not_typed = ("typed:[pager] 1 message waiting", "typed: ", "extension:look into the test")
    prompts = await typed_prompt_chain(broker, fakes, tmp_path, "pi", not_typed)
    assert [p["step"] for p in prompts] == ["typed", "typed", "extension", "typed"]
    assert all(p["returned"] == {"action": "continue"} for p in prompts)


# -- Copilot: the userPromptSubmitted hook reports typed prompts (SPEC §8.1) --------------------


async def test_copilot_typed_prompt_restarts_the_chain_and_its_delivery_does_not(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """x (`pager copilot`) is delivered a message of hop 2 by its sessionStart hook: its next
    send has hop 3 (mail delivered at session start is no prompt a person typed). Then the
    person types a prompt and Copilot CLI runs userPromptSubmitted with it: x's next send has
    hop 1 again."""
    gates = [tmp_path / f"gate-{n}" for n in range(3)]
    steps = [f"wait:{gates[0]}", "hook:sessionStart", f"wait:{gates[1]}",
             "hook:userPromptSubmitted", f"wait:{gates[2]}", "exit:0"]  # fmt: skip
    wrapper = launch(broker, "copilot", ",".join(steps), "--session-name", "x")

    def hooks() -> list[dict[str, Any]]:
        return [r["hook"] for r in records(fakes) if "hook" in r]

    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        [start] = [r for r in records(fakes) if "argv" in r]
        alice, message_id = await send_hop_2(broker, "x")
        gates[0].touch()
        wait_for(lambda: len(hooks()) == 1, "the sessionStart hook")
        assert "mail for x" in json.loads(hooks()[0]["stdout"])["additionalContext"]
        assert await state_of(broker, alice, message_id) == "acknowledged"
        assert await hop_of_next_send(broker, start) == 3

        gates[1].touch()
        wait_for(lambda: len(hooks()) == 2, "the userPromptSubmitted hook")
        assert hooks()[1]["status"] == 0, hooks()[1]["stderr"]
        assert await hop_of_next_send(broker, start) == 1
    finally:
        for gate in gates:
            gate.touch()
        status, err = await finish(wrapper)
    assert status == 0, err


# -- Copilot: the extension's idle wake --------------------------------------------------------


@needs_node
async def test_copilot_extension_knocks_an_idle_session_without_claiming_the_mail(
    broker: Broker, fakes: Path, tmp_path: Path
) -> None:
    """Mail (hop 2) waits for x (`pager copilot`), idle at its prompt. Pager's extension, in
    the launch's plugin, asks the broker with the session's relay credential what waits,
    leaves it unclaimed, and sends the session one `[pager]` prompt. Copilot CLI runs that
    prompt through the userPromptSubmitted hook, which adds the mail to the turn and
    acknowledges it; the knock is not a typed prompt, so x's next send has hop 3."""
    gates = [tmp_path / f"gate-{n}" for n in range(3)]
    steps = [f"wait:{gates[0]}", "plugin", f"wait:{gates[1]}", "knocked", f"wait:{gates[2]}",
             "exit:0"]  # fmt: skip
    wrapper = launch(broker, "copilot", ",".join(steps), "--session-name", "x")
    try:
        wait_for(lambda: any("argv" in r for r in records(fakes)), "the fake to start")
        [start] = [r for r in records(fakes) if "argv" in r]
        assert start["env"]["COPILOT_CLI_ENABLED_FEATURE_FLAGS"] == "EXTENSIONS"
        alice, message_id = await send_hop_2(broker, "x")
        gates[0].touch()
        wait_for(lambda: any("plugin" in r for r in records(fakes)), "the extension", 30)
        plugin = record(fakes, "plugin")
        assert "error" not in plugin, plugin
        assert plugin["errors"] == []
        [knock] = plugin["sent"]  # one knock for the message
        assert knock["prompt"].startswith("[pager] Mail is waiting for you in Pager")
        assert "mail for x" not in knock["prompt"]  # the hook, not the knock, carries the mail
        assert await state_of(broker, alice, message_id) == "queued"  # nothing claimed

        gates[1].touch()
        wait_for(lambda: any("hook" in r for r in records(fakes)), "the userPromptSubmitted hook")
        hook = record(fakes, "hook")
        assert hook["status"] == 0, hook["stderr"]
        assert "mail for x" in json.loads(hook["stdout"])["additionalContext"]
        assert await state_of(broker, alice, message_id) == "acknowledged"
        assert await hop_of_next_send(broker, start) == 3
    finally:
        for gate in gates:
            gate.touch()
        status, err = await finish(wrapper)
    assert status == 0, err
