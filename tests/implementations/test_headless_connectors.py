"""Connectors for headless runs (`LaunchContext.headless`, a wake run: docs/wake.md).

What a connector leaves out or changes when nobody is at the terminal, and the built-in
`[wake.launch]` commands as `harness_command` builds them. The plugin and the extension are also
run under Node (skipped without `node`) against a stand-in broker, to show what they do with
waiting mail in a headless run. Checked against the real harnesses by
scripts/verify_harnesses.py ("wake run" checks).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pager.implementations import discover
from pager.implementations.connectors import copilot, opencode
from pager.implementations.connectors.pre_tool import with_pre_tool
from pager.implementations.launching import launch_spec
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext, harness_command

PROMPT = (
    "[pager] Mail is waiting for you in Pager (you are api@myrepo). Read it: your hooks may have"
    " shown it above; otherwise call the pager fetch tool or run `pager read`. Act on it as your"
    " instructions allow, and reply with the send tool or `pager send` when a reply is due."
)
KEY = "3f1c7a52-9d0e-4b8e-a2d4-6c1e5b7f9a10"


NO_USER_DIR = Path(__file__).parent / "no-user-manifests"  # the built-ins only


def manifest(ident: str) -> Manifest:
    return discover(entry_points=False, user_dir=NO_USER_DIR).get(ident).manifest


def values(directory: Path) -> dict[str, str]:
    url = "http://127.0.0.1:4555"
    return {
        "url": url,
        "mcp_url": f"{url}/mcp",
        "token": "prl_test",
        "token_file": str(directory / "session-token"),
        "agent_id": "agt_test",
        "address": "api@myrepo",
        "alias": "api",
        "session_id": "ses_test",
        "state_dir": str(directory / "state"),
        "conversation_key": KEY,
        "python": "/usr/bin/python3",
        "hook_command": "/venv/bin/pager hook --implementation test",
        "prompt": PROMPT,
    }


def prepare(ident: str, directory: Path, *, headless: bool) -> dict[str, str]:
    """The connector's values for one launch, its files in `directory` (made fresh)."""
    directory.mkdir(parents=True)
    spec = launch_spec(manifest(ident))
    environ = {"HOME": str(directory / "home"), "PATH": "/usr/bin"}
    context = LaunchContext(str(directory), values(directory), environ, headless=headless)
    filled: dict[str, str] = spec.prepare(context)
    return filled


# ------------------------------------------------------------------------------ Claude Code


def claude_hooks(settings_file: str) -> dict[str, list[dict[str, Any]]]:
    hooks: dict[str, list[dict[str, Any]]] = json.loads(Path(settings_file).read_text())["hooks"]
    return hooks


def test_claude_headless_run_has_no_background_waiters(tmp_path: Path) -> None:
    interactive = claude_hooks(prepare("claude", tmp_path / "a", headless=False)["settings_file"])
    headless = claude_hooks(prepare("claude", tmp_path / "b", headless=True)["settings_file"])
    waiters = [
        hook
        for groups in interactive.values()
        for group in groups
        for hook in group["hooks"]
        if "--wait" in hook["command"]
    ]
    assert {hook["command"].rsplit(" ", 1)[-1] for hook in waiters} == {"SessionStart", "Stop"}
    assert all(hook["asyncRewake"] for hook in waiters)
    # Headless: the same hooks on the manifest's events, and nothing that waits.
    assert sorted(headless) == ["PreToolUse", "SessionStart", "UserPromptSubmit"]
    [[check]] = [group["hooks"] for group in headless.pop("PreToolUse")]  # the reservations check
    assert check["command"].startswith("/venv/bin/pager hook --implementation test --pre-tool ")
    for event, groups in headless.items():
        [group] = groups
        [hook] = group["hooks"]
        assert hook == {
            "type": "command",
            "command": "/venv/bin/pager hook --implementation test --format claude"
            f" --max-chars 9000 {event}",
        }


def test_claude_headless_mcp_config_is_unchanged(tmp_path: Path) -> None:
    interactive = prepare("claude", tmp_path / "a", headless=False)["mcp_config_file"]
    headless = prepare("claude", tmp_path / "b", headless=True)["mcp_config_file"]
    assert Path(interactive).read_text() == Path(headless).read_text()


# ------------------------------------------------------------------------------- Gemini CLI


def gemini_hooks(config_dir: str) -> dict[str, Any]:
    path = Path(config_dir) / ".gemini" / "extensions" / "pager-launch" / "hooks" / "hooks.json"
    hooks: dict[str, Any] = json.loads(path.read_text())["hooks"]
    return hooks


def test_gemini_headless_run_has_no_session_start_hook(tmp_path: Path) -> None:
    """Gemini CLI's non-interactive mode puts a SessionStart hook's context before the prompt,
    where the BeforeAgent hook would take it for a prompt the person typed."""
    interactive = gemini_hooks(prepare("gemini", tmp_path / "a", headless=False)["config_dir"])
    headless = gemini_hooks(prepare("gemini", tmp_path / "b", headless=True)["config_dir"])
    assert sorted(interactive) == ["BeforeAgent", "BeforeTool", "SessionStart"]
    same = json.loads(json.dumps(headless).replace(str(tmp_path / "b"), str(tmp_path / "a")))
    kept = ("BeforeAgent", "BeforeTool")  # BeforeTool: the reservations check
    assert same == {event: interactive[event] for event in kept}


def test_gemini_headless_extension_keeps_the_mcp_server(tmp_path: Path) -> None:
    config_dir = prepare("gemini", tmp_path / "b", headless=True)["config_dir"]
    extension = Path(config_dir) / ".gemini" / "extensions" / "pager-launch"
    config = json.loads((extension / "gemini-extension.json").read_text())
    assert config["mcpServers"]["pager"] == {
        "httpUrl": "http://127.0.0.1:4555/mcp",
        "headers": {"Authorization": "Bearer prl_test"},
    }


# --------------------------------------------------------------------------------- OpenCode


def opencode_plugin(config_content: str) -> str:
    [plugin] = json.loads(config_content)["plugin"]
    assert plugin.startswith("file://")
    return Path(plugin.removeprefix("file://")).read_text()


#: OpenCode and its fork Kilo CLI: the same plugin, copied under each one's name.
PLUGIN_NAMES = {"opencode": "pager-opencode.js", "kilo": "pager-kilo.js"}


@pytest.mark.parametrize("ident", sorted(PLUGIN_NAMES))
def test_opencode_headless_plugin_is_the_asset_switched_to_headless(
    ident: str, tmp_path: Path
) -> None:
    asset = (
        resources.files("pager.implementations.connectors")
        .joinpath(*opencode.PLUGIN_ASSET)
        .read_text()
    )
    interactive = opencode_plugin(prepare(ident, tmp_path / "a", headless=False)["config_content"])
    headless = opencode_plugin(prepare(ident, tmp_path / "b", headless=True)["config_content"])
    # The launch's copy says which command checks reservations before which tools.
    launched = with_pre_tool(asset.encode(), manifest(ident), values(tmp_path)["hook_command"])
    assert "const PRE_TOOL = null;" in asset
    assert "const PRE_TOOL = null;" not in interactive
    assert interactive == launched.decode()
    assert asset.count("const HEADLESS = false;") == 1
    assert headless == interactive.replace("const HEADLESS = false;", "const HEADLESS = true;")


@pytest.mark.parametrize("ident", sorted(PLUGIN_NAMES))
def test_opencode_headless_config_is_otherwise_the_same(ident: str, tmp_path: Path) -> None:
    interactive = json.loads(prepare(ident, tmp_path / "a", headless=False)["config_content"])
    headless = json.loads(prepare(ident, tmp_path / "b", headless=True)["config_content"])
    assert interactive["mcp"] == headless["mcp"]
    assert [Path(p).name for p in interactive["plugin"]] == [PLUGIN_NAMES[ident]]
    assert [Path(p).name for p in headless["plugin"]] == [PLUGIN_NAMES[ident]]


# ------------------------------------------------------------------------------ Codex and Pi


@pytest.mark.parametrize("ident", ["codex", "pi", "cline"])
def test_codex_and_pi_are_wired_the_same_when_headless(ident: str, tmp_path: Path) -> None:
    """Codex's hooks wait for nothing; Pi's extension sees for itself that it has no UI."""
    interactive = prepare(ident, tmp_path / "a", headless=False)
    headless = prepare(ident, tmp_path / "b", headless=True)
    assert sorted(interactive) == sorted(headless)
    for name, value in interactive.items():
        if value.startswith(str(tmp_path / "a")):  # a file in the launch directory
            other = headless[name].replace(str(tmp_path / "b"), str(tmp_path / "a"))
            assert other == value
            if Path(value).is_file():
                assert Path(value).read_bytes() == Path(headless[name]).read_bytes()
            else:  # a directory of files
                files = sorted(p.relative_to(value) for p in Path(value).rglob("*"))
                assert files == sorted(p.relative_to(headless[name]) for p in
                                       Path(headless[name]).rglob("*"))  # fmt: skip
        else:
            assert headless[name].replace(str(tmp_path / "b"), str(tmp_path / "a")) == value


# --------------------------------------------------------------------------- GitHub Copilot CLI


def plugin_tree(directory: str) -> dict[str, bytes]:
    root = Path(directory)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_copilot_headless_plugin_has_the_hooks_without_the_extension(tmp_path: Path) -> None:
    """A wake run's plugin (a fixed path of its own, so that it never races an interactive
    launch's) has the same hooks (the userPromptSubmitted hook sees the wake prompt itself) but
    not the idle-wake extension: nobody waits for a next turn there."""
    interactive = prepare("copilot", tmp_path / "a", headless=False)
    headless = prepare("copilot", tmp_path / "b", headless=True)
    assert Path(interactive["config_dir"]).name == copilot.PLUGIN_DIR
    assert Path(headless["config_dir"]).name == copilot.HEADLESS_PLUGIN_DIR
    shown, hidden = plugin_tree(interactive["config_dir"]), plugin_tree(headless["config_dir"])
    extension = (
        resources.files("pager.implementations.connectors")
        .joinpath(*copilot.EXTENSION_ASSET)
        .read_bytes()
    )
    assert shown.pop(copilot.EXTENSION_FILE) == extension
    # The rest is the same, but for where each launch's state directory is.
    a, b = str(tmp_path / "a").encode(), str(tmp_path / "b").encode()
    assert shown == {name: content.replace(b, a) for name, content in hidden.items()}
    assert interactive["config_content"] == headless["config_content"] == "EXTENSIONS"


@pytest.mark.parametrize(
    ("own", "flags"),
    [
        ("", "EXTENSIONS"),
        ("VOICE", "VOICE,EXTENSIONS"),
        (" VOICE , ,MCP_APPS", "VOICE,MCP_APPS,EXTENSIONS"),
        ("EXTENSIONS,VOICE", "EXTENSIONS,VOICE"),
    ],
)
def test_copilot_feature_flags_keep_the_users_own(own: str, flags: str) -> None:
    """Copilot CLI runs extensions only under its EXTENSIONS feature flag; the launch's
    variable keeps the flags the user enabled in their own environment."""
    assert copilot.feature_flags(own) == flags


# --------------------------------------------------------------------- the wake.launch commands

WAKE_ARGS = {
    "claude": ["-p", "--resume", KEY, PROMPT],
    "codex": ["exec", "resume", KEY, PROMPT],
    "gemini": ["--resume", KEY, "-p", PROMPT],
    "opencode": ["run", "--session", KEY, PROMPT],
    "kilo": ["run", "--session", KEY, PROMPT],
    "pi": ["-p", "--session", KEY, PROMPT],
    "copilot": ["-p", PROMPT, f"--resume={KEY}"],
}


@pytest.mark.parametrize("ident", sorted(WAKE_ARGS))
def test_builtin_wake_launch_follows_the_launch_args(ident: str, tmp_path: Path) -> None:
    found = manifest(ident)
    assert found.wake.launch is not None
    spec = launch_spec(found)
    directory = tmp_path / "launch"
    directory.mkdir()
    command = harness_command(
        spec,
        f"/bin/{ident}",
        (),
        values(directory),
        str(directory),
        {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin"},
        headless=True,
        templates=found.wake.launch.args,
    )
    argv = list(command.argv)
    assert argv[0] == f"/bin/{ident}"
    assert argv[len(argv) - len(WAKE_ARGS[ident]) :] == WAKE_ARGS[ident]
    assert len(argv) == 1 + len(spec.args) + len(WAKE_ARGS[ident])
    assert command.env["PAGER_AGENT_ID"] == "agt_test"


def test_codex_knock_command() -> None:
    found = manifest("codex")
    assert "knock" in found.capabilities
    assert found.wake.command[:5] == (
        "codex",
        "queue",
        "--thread",
        "{conversation_key}",
        "--message",
    )
    [text] = found.wake.command[5:]
    assert text.startswith("[pager] ")  # `pager hook` does not take it for a typed prompt
    assert "{" not in text  # the provider fills the command with str.format_map
    assert [part.format_map({"conversation_key": KEY}) for part in found.wake.command][3] == KEY


def test_only_codex_has_a_knock() -> None:
    registry = discover(entry_points=False, user_dir=NO_USER_DIR)
    assert [impl.manifest.id for impl in registry.with_capability("knock")] == ["codex"]


# ------------------------------------------------------------- the plugin and extension in Node


class Broker:
    """A stand-in for the broker's MCP endpoint: `fetch` hands out the waiting mail once (as
    claims), `ack` and every call are recorded."""

    def __init__(self, waiting: list[str]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.waiting = list(waiting)
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = broker.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if path != "/mcp":
            self.calls.append((path, {}))
            return {}
        params = body.get("params") or {}
        name = params.get("name") or body.get("method")
        arguments = dict(params.get("arguments") or {})
        self.calls.append((str(name), arguments))
        if name == "tools/list":
            tools = [{"name": "fetch", "inputSchema": {"type": "object", "properties": {}}}]
            return {"jsonrpc": "2.0", "id": body["id"], "result": {"tools": tools}}
        result: dict[str, Any] = {"content": [{"type": "text", "text": "ok"}]}
        if name == "fetch":
            claims = [
                {"token": f"clm_{n}", "message": {"id": f"msg_{n}"}}
                for n, _ in enumerate(self.waiting)
            ]
            if not claims and arguments.get("wait_s"):
                time.sleep(0.5)  # a long poll that finds nothing
            text = "\n".join(["1 message", *self.waiting])
            result = {
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"claims": claims},
            }
            self.waiting = []
        return {"jsonrpc": "2.0", "id": body["id"], "result": result}

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def broker() -> Iterator[Broker]:
    found = Broker(["verify: the body of a waiting message"])
    yield found
    found.stop()


def run_node(script: str, module: Path, broker: Broker, tmp_path: Path) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    copy = tmp_path / "module.mjs"  # as an ES module; the Pi extension is plain JavaScript too
    copy.write_bytes(module.read_bytes())
    driver = tmp_path / "driver.mjs"
    driver.write_text(script)
    env = {"PATH": "/usr/bin:/bin", "PAGER_URL": broker.url, "PAGER_TOKEN": "prl_test"}
    done = subprocess.run(
        [node, str(driver), copy.as_uri()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


OPENCODE_DRIVER = r"""
const mod = await import(process.argv[2]);
const prompts = [];
const client = { session: { promptAsync: async (args) => { prompts.push(args); return {}; } } };
const hooks = await mod.PagerPlugin({ client, directory: process.cwd() });
await hooks.event({ event: { type: "session.updated", properties: { info: { id: "ses_1" } } } });
await hooks.event({ event: { type: "session.status",
  properties: { sessionID: "ses_1", status: { type: "busy" } } } });
const parts = [{ id: "prt_1", sessionID: "ses_1", messageID: "msg_1", type: "text",
  text: '"[pager] Mail is waiting for you in Pager."' }];
await hooks["chat.message"]({ sessionID: "ses_1", messageID: "msg_1" },
  { message: { id: "msg_1", sessionID: "ses_1", role: "user" }, parts });
await new Promise((resolve) => setTimeout(resolve, 1500)); // a long poll would have run by now
console.log(JSON.stringify({ parts, prompts }));
process.exit(0);
"""


def test_headless_opencode_plugin_adds_waiting_mail_to_the_prompt(
    broker: Broker, tmp_path: Path
) -> None:
    plugin = tmp_path / "pager-opencode.js"
    plugin.write_bytes(opencode.plugin_source(headless=True))
    result = run_node(OPENCODE_DRIVER, plugin, broker, tmp_path)
    [part] = result["parts"]
    text = part["text"]
    assert text.startswith('"[pager] Mail is waiting for you in Pager."\n\nPager delivered 1 ')
    assert "verify: the body of a waiting message" in text
    assert result["prompts"] == []  # nothing pushed: no long poll in a headless run
    # One fetch that waits for nothing, the acknowledgement, and no report of a typed prompt.
    assert broker.calls == [("fetch", {"limit": 10, "wait_s": 0}), ("ack", {"tokens": ["clm_0"]})]


def test_opencode_plugin_takes_a_quoted_pager_prompt_for_no_typed_prompt(
    broker: Broker, tmp_path: Path
) -> None:
    """`opencode run` quotes its message argument: `"[pager] …"` is still Pager's."""
    broker.waiting = []
    plugin = tmp_path / "pager-opencode.js"
    plugin.write_bytes(opencode.plugin_source(headless=False))
    run_node(OPENCODE_DRIVER, plugin, broker, tmp_path)
    assert "/v1/sessions/current/prompted" not in broker.names()
    assert "fetch" in broker.names()  # the interactive plugin polls


PI_DRIVER = r"""
const mod = await import(process.argv[2]);
const handlers = {};
const sent = [];
const pi = {
  registerTool: () => {},
  on: (event, handler) => { handlers[event] = handler; },
  sendMessage: (message, options) => sent.push({ message, options }),
};
mod.default(pi);
const ctx = { cwd: process.cwd(), hasUI: false }; // print mode
await handlers.session_start({ reason: "startup" }, ctx);
const input = await handlers.input({ type: "input", source: "interactive",
  text: "[pager] Mail is waiting for you in Pager." }, ctx);
const started = await handlers.before_agent_start({ prompt: "[pager] Mail is waiting" }, ctx);
const calls = await (await fetch(process.env.PAGER_URL + "/calls", { method: "POST",
  headers: { "Content-Length": "2" }, body: "{}" })).text();
await handlers.agent_start({}, ctx);
await new Promise((resolve) => setTimeout(resolve, 1500)); // a long poll would have run by now
await handlers.session_shutdown({}, ctx);
console.log(JSON.stringify({ input, started, sent }));
process.exit(0);
"""


def test_pi_extension_without_ui_adds_waiting_mail_before_the_agent_starts(
    broker: Broker, tmp_path: Path
) -> None:
    extension = resources.files("pager.implementations.connectors").joinpath(
        "assets", "pi", "pager.ts"
    )
    path = tmp_path / "pager.ts"
    path.write_bytes(extension.read_bytes())
    result = run_node(PI_DRIVER, path, broker, tmp_path)
    assert result["input"] == {"action": "continue"}
    message = result["started"]["message"]
    assert message["customType"] == "pager"
    assert message["content"].startswith("Pager delivered 1 message(s)")
    assert "verify: the body of a waiting message" in message["content"]
    assert message["details"] == {"messages": ["msg_0"]}
    assert result["sent"] == []  # nothing pushed: no long poll without a UI
    # tools/list, one fetch that waits for nothing, acknowledged only once the agent started.
    assert broker.names() == ["tools/list", "fetch", "/calls", "ack"]
    assert broker.calls[1] == ("fetch", {"limit": 10, "wait_s": 0})
    assert broker.calls[3] == ("ack", {"tokens": ["clm_0"]})
