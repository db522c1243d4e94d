"""FAKE `codex`, `gemini`, `opencode`, `kilo`, `pi`, `copilot` and `cline` for wrapper tests:
`python -m tests.fakes.fake_harness_generic KIND [harness args…]` (the tests put a shim of
each name on PATH).

It records how it was launched — argv, the Pager-relevant environment, and every file the
launch pointed it at (content and mode, read while it runs) — and then acts like the harness,
step by step, as FAKE_HARNESS_STEPS says (comma-separated):

- `mcp`: calls the MCP tool `whoami` the way the harness would, from its wiring: Codex from the
  `-c mcp_servers.pager.*` overrides (token from the variable they name), Gemini from the
  `mcpServers.pager` of its home (`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`): the user
  settings, else an extension under `extensions/` (as Gemini CLI 0.61 does; a system settings
  file is read only when root owns it and every directory above it), OpenCode from
  `OPENCODE_CONFIG_CONTENT`'s `mcp.pager` (with `{env:…}` substitution; Kilo, an OpenCode fork,
  the same from `KILO_CONFIG_CONTENT`), Pi as Pager's extension
  does (`PAGER_URL`, `PAGER_TOKEN`), Copilot from the `--additional-mcp-config @FILE`, Cline
  from the file `CLINE_MCP_SETTINGS_PATH` names;
- `mcp-reuse`: as `mcp`, twice on one connection, the second sent whatever the first answer's
  `Connection` header said (as Bun's `fetch`, OpenCode's and Kilo CLI's, may do);
- `hook:EVENT`: runs the hook command configured for EVENT with a realistic payload (Gemini:
  from the settings and extensions of its home, with the sanitized environment Gemini CLI's
  redaction leaves; Codex: from the `-c hooks=…` override; Cline: the executable named after
  EVENT in `$CLINE_DIR/hooks`, with Cline CLI 3.0.65's payload), recording its exit status and
  output;
- `plugin`: starts Pager's OpenCode plugin or Pi extension under Node with a fake host (needs
  `node`; it runs until the fake exits) and, once mail was delivered, records what it did:
  tools registered, messages pushed into the session (OpenCode: each also passed to the
  plugin's `chat.message`, as OpenCode does), reports of typed prompts;
- after `plugin` (Copilot: Pager's extension in the `--plugin-dir` plugin, with a stand-in
  `@github/copilot-sdk`; it records the prompts the extension sent with `session.send`),
  `knocked`: runs the userPromptSubmitted hook with the last of those prompts, as Copilot CLI
  does for a sent prompt;
- after `plugin`, `typed:TEXT`: the person types TEXT (OpenCode: a user message in the root
  session through `chat.message`; Pi: an `input` event with source "interactive");
  `subtask:TEXT` (OpenCode): a user message in the child session, as the task tool makes;
  `extension:TEXT` (Pi): an `input` event with source "extension". Each records what the hook
  returned and the plugin's reports of typed prompts meanwhile (their HTTP statuses);
- `daemon:PATH`: starts a daemon as Cline CLI's TUI starts its hub: detached (a session of
  its own), with the fake's whole environment, outliving the fake (at most DAEMON_BOUND
  seconds); it writes its pid to PATH once it runs;
- `wait:PATH`, `exit:N`, `signal:NAME` as in tests/fakes/fake_harness.py.

`cline hub start` runs no step: with FAKE_HUB_TURNS set it starts the fake hub daemon
(tests/fakes/fake_cline_hub.py) and exits once it is ready, as Cline CLI 3.0.65 does; without,
it exits 1 (no hub, no knock).

Everything goes to FAKE_HARNESS_LOG as JSON lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

#: OpenCode and its fork Kilo CLI: the variable holding the inline configuration.
INLINE_CONFIG = {"opencode": "OPENCODE_CONFIG_CONTENT", "kilo": "KILO_CONFIG_CONTENT"}
#: The longest a `daemon:` step's daemon lives (a test that finds it running stops it).
DAEMON_BOUND = 60
ENV_KEYS = (
    *INLINE_CONFIG.values(),
    "CLINE_DIR",
    "CLINE_MCP_SETTINGS_PATH",
    "CLINE_SESSION_BACKEND_MODE",
    "CLINE_HUB_DISCOVERY_PATH",
    "CLINE_HUB_PORT",
    "GEMINI_CLI_HOME",
    "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "COPILOT_CLI_ENABLED_FEATURE_FLAGS",
)


def log(record: dict[str, Any]) -> None:
    with open(os.environ["FAKE_HARNESS_LOG"], "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def option(argv: list[str], name: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def file_record(path: str) -> dict[str, Any]:
    try:
        return {
            "exists": True,
            "mode": os.stat(path).st_mode & 0o777,
            "content": Path(path).read_text(encoding="utf-8"),
        }
    except OSError:
        return {"exists": False}


# -- each harness's wiring ---------------------------------------------------------------------


def codex_overrides(argv: list[str]) -> dict[str, Any]:
    """The `-c key=value` overrides as one nested table; values parse as TOML, as in Codex."""
    table: dict[str, Any] = {}
    for index, arg in enumerate(argv):
        if arg not in ("-c", "--config") or index + 1 >= len(argv):
            continue
        key, _, raw = argv[index + 1].partition("=")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = table
        *parents, last = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part.strip('"'), {})
        node[last.strip('"')] = value
    return table


def opencode_config(kind: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(os.environ.get(INLINE_CONFIG[kind]) or "{}")
    return config


def gemini_dir() -> Path:
    """Gemini CLI's directory: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")) / ".gemini"


def root_owned(path: Path) -> bool:
    """Gemini CLI's check before it reads a system settings file: the file and every directory
    above it belong to root and are writable by nobody else (gemini-cli PR #29115)."""
    for part in (path, *path.parents):
        info = part.stat()
        if info.st_uid != 0 or info.st_mode & 0o022:
            return False
    return True


def gemini_extensions() -> list[Path]:
    """The extension directories Gemini CLI loads: each under `extensions/` whose
    `gemini-extension.json` names it (links followed)."""
    found = []
    root = gemini_dir() / "extensions"
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        config = directory / "gemini-extension.json"
        if config.is_file():
            assert json.loads(config.read_text())["name"] == directory.name, directory
            found.append(directory)
    return found


def gemini_settings() -> dict[str, Any]:
    """What Gemini CLI would use of Pager's: `mcpServers` (system settings over user settings
    over extensions) and `hooks` (from all of them)."""
    layers: list[dict[str, Any]] = []
    for directory in gemini_extensions():
        layer = json.loads((directory / "gemini-extension.json").read_text())
        hooks = directory / "hooks" / "hooks.json"
        if hooks.is_file():
            layer["hooks"] = json.loads(hooks.read_text())["hooks"]
        layers.append(layer)
    user = gemini_dir() / "settings.json"
    if user.is_file():
        layers.append(loads_jsonc(user.read_text()))
    system = os.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
    if system and os.path.isfile(system) and root_owned(Path(system)):
        layers.append(json.loads(Path(system).read_text()))
    merged: dict[str, Any] = {"mcpServers": {}, "hooks": {}}
    for layer in layers:
        merged["mcpServers"].update(layer.get("mcpServers", {}))
        for event, groups in layer.get("hooks", {}).items():
            merged["hooks"].setdefault(event, []).extend(groups)
    return merged


def loads_jsonc(text: str) -> Any:
    """JSON with `//` and `/* */` comments, as Gemini CLI reads its settings files."""
    pattern = r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/'
    return json.loads(re.sub(pattern, lambda m: m.group(1) or "", text, flags=re.S))


def gemini_home() -> dict[str, str]:
    """The per-launch Gemini home as the harness sees it: each entry of `.gemini` and of its
    `extensions/` (and the home's own entries) → `link:TARGET`, `dir` or `file`."""
    home = gemini_dir().parent
    entries: dict[str, str] = {}
    for path in [
        *home.iterdir(),
        *gemini_dir().iterdir(),
        *(gemini_dir() / "extensions").iterdir(),
    ]:
        key = str(path.relative_to(home))
        if path.is_symlink():
            entries[key] = f"link:{os.readlink(path)}"
        else:
            entries[key] = "dir" if path.is_dir() else "file"
    return entries


def cline_dir() -> dict[str, Any]:
    """The per-launch Cline directory as Cline CLI sees it: each entry, and each entry of its
    `hooks/`, → `link:TARGET`, or `{mode, content}` for Pager's own files."""
    root = Path(os.environ["CLINE_DIR"])
    entries: dict[str, Any] = {}
    for path in [*root.iterdir(), *(root / "hooks").iterdir()]:
        key = str(path.relative_to(root))
        if path.is_symlink():
            entries[key] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            entries[key] = "dir"
        else:
            entries[key] = file_record(str(path))
    return entries


def pointed_files(kind: str, argv: list[str]) -> list[str]:
    """The files this launch named for the harness to read."""
    if kind == "gemini":
        if not os.environ.get("GEMINI_CLI_HOME"):
            return []
        return [
            str(path)
            for directory in gemini_extensions()
            if not directory.is_symlink()  # the launch's own extension, not the user's
            for path in (directory / "gemini-extension.json", directory / "hooks" / "hooks.json")
            if path.exists()
        ]
    if kind in INLINE_CONFIG:
        plugins = opencode_config(kind).get("plugin", [])
        return [url2pathname(urlparse(p).path) for p in plugins if p.startswith("file://")]
    if kind == "pi":
        extension = option(argv, "-e")
        return [extension] if extension else []
    if kind == "copilot":
        config = option(argv, "--additional-mcp-config") or ""
        return [config[1:]] if config.startswith("@") else []
    if kind == "cline":
        settings = os.environ.get("CLINE_MCP_SETTINGS_PATH")
        return [settings] if settings else []
    return []


def mcp_endpoint(kind: str, argv: list[str]) -> tuple[str, dict[str, str]]:
    """The MCP URL and headers the harness would use."""
    if kind == "codex":
        server = codex_overrides(argv)["mcp_servers"]["pager"]
        token = os.environ[server["bearer_token_env_var"]]
        return server["url"], {"Authorization": f"Bearer {token}"}
    if kind == "gemini":
        server = gemini_settings()["mcpServers"]["pager"]
        headers = {key: expand_dollar(value) for key, value in server["headers"].items()}
        return server["httpUrl"], headers
    if kind in INLINE_CONFIG:
        server = opencode_config(kind)["mcp"]["pager"]
        assert server["type"] == "remote"
        headers = {key: expand_braces(value) for key, value in server["headers"].items()}
        return server["url"], headers
    if kind == "copilot":
        path = (option(argv, "--additional-mcp-config") or "@")[1:]
        server = json.loads(Path(path).read_text())["mcpServers"]["pager"]
        assert server["type"] == "http"
        return server["url"], server["headers"]
    if kind == "cline":
        path = os.environ["CLINE_MCP_SETTINGS_PATH"]
        server = json.loads(Path(path).read_text())["mcpServers"]["pager"]
        assert server["type"] == "streamableHttp"
        return server["url"], server["headers"]
    token = os.environ["PAGER_TOKEN"]
    return os.environ["PAGER_URL"] + "/mcp", {"Authorization": f"Bearer {token}"}


def expand_dollar(text: str) -> str:
    """Gemini CLI's `$VAR` / `${VAR}` expansion in settings strings."""
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)", lambda m: os.environ.get(m.group(1) or m.group(2), ""), text
    )


def expand_braces(text: str) -> str:
    """OpenCode's `{env:VAR}` substitution."""
    return re.sub(r"\{env:(\w+)\}", lambda m: os.environ.get(m.group(1), ""), text)


def call_tool(url: str, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name,
            "arguments": arguments}}  # fmt: skip
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            **headers,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    return answer["result"]["structuredContent"]


def calls_on_one_connection(url: str, headers: dict[str, str], count: int) -> list[Any]:
    """`whoami` `count` times on one connection: each answer (its structured content), or the
    error that ended the connection instead."""
    parsed = urlparse(url)
    call = {"name": "whoami", "arguments": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    fields = {
        "Host": parsed.netloc,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
        **headers,
    }
    head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
    request = f"POST {parsed.path} HTTP/1.1\r\n{head}\r\n{body}".encode()
    answers: list[Any] = []
    with socket.create_connection((parsed.hostname, parsed.port or 80), timeout=30) as sock:
        for _ in range(count):
            try:
                sock.sendall(request)
                answers.append(json.loads(_answer_body(sock))["result"]["structuredContent"])
            except OSError as exc:
                answers.append({"error": f"{type(exc).__name__}: {exc}"})
                break
    return answers


def _answer_body(sock: socket.socket) -> bytes:
    """The body of the next answer on `sock` (one with a Content-Length)."""
    data = b""
    while True:
        head, found, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head)
        if found and length is not None and len(body) >= int(length[1]):
            return body[: int(length[1])]
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the connection was closed before the answer")
        data += chunk


# -- hooks -------------------------------------------------------------------------------------


def hook_command(kind: str, argv: list[str], event: str) -> str:
    if kind == "gemini":
        groups = gemini_settings()["hooks"][event]
    elif kind == "codex":
        groups = codex_overrides(argv)["hooks"][event]
    elif kind == "copilot":  # the plugin's hooks/hooks.json: {"hooks": {event: [{"bash": …}]}}
        plugin = Path(option(argv, "--plugin-dir") or "", "hooks", "hooks.json")
        entries = json.loads(plugin.read_text())["hooks"][event]
        return str([e["bash"] for e in entries if "pager" in e["bash"]][-1])
    elif kind == "cline":  # Cline CLI runs `<Event>` or `<Event>.<ext>` from its hooks dir
        hooks = Path(os.environ["CLINE_DIR"], "hooks")
        found = [p for p in sorted(hooks.iterdir()) if p.name.split(".")[0] == event]
        return str([p for p in found if not p.is_symlink()][-1])
    else:
        raise AssertionError(f"{kind} has no hooks")
    commands = [h["command"] for g in groups for h in g["hooks"] if "pager" in h["command"]]
    return str(commands[-1])


def run_hook(
    kind: str, argv: list[str], event: str, session: str, prompt: str = "hello"
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": f"/tmp/fake-{kind}/{session}.json",
        "cwd": os.getcwd(),
        "hook_event_name": event,
        "timestamp": datetime.now(UTC).isoformat(),
    }
    if event in ("BeforeAgent", "UserPromptSubmit"):
        payload["prompt"] = prompt
    if event == "SessionStart":
        payload["source"] = "startup"
    if kind == "copilot":  # Copilot CLI 1.0.102's payloads: camelCase, no event name
        payload = {"sessionId": session, "timestamp": int(time.time() * 1000), "cwd": os.getcwd()}
        payload |= {
            "sessionStart": {"source": "new"},
            "userPromptSubmitted": {"prompt": prompt},
        }.get(event, {})
    if kind == "cline":  # Cline CLI 3.0.65's payloads: a per-run taskId, the session's id
        names = {"PostToolUse": "tool_result", "TaskStart": "agent_start"}
        payload = {
            "clineVersion": "",
            "timestamp": datetime.now(UTC).isoformat(),
            "taskId": "conv_fake",
            "sessionContext": {"rootSessionId": session},
            "workspaceRoots": [os.getcwd()],
            "hookName": names.get(event, event),
        }
    env = dict(os.environ)
    if kind == "gemini":
        # Gemini CLI's strict environment redaction keeps little more than PATH and HOME.
        env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
        env |= {"GEMINI_SESSION_ID": session, "GEMINI_PROJECT_DIR": os.getcwd()}
    command = hook_command(kind, argv, event)
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return {"event": event, "command": command, "status": done.returncode,
            "stdout": done.stdout, "stderr": done.stderr, "session_id": session}  # fmt: skip


# -- plugins under Node ------------------------------------------------------------------------

# Shared by both drivers: the plugin's reports of typed prompts (its POSTs to
# /v1/sessions/current/prompted) are recorded with the answer's status; once the plugin has
# delivered mail (or timeoutMs passed) the driver prints what the plugin did as one JSON line,
# then serves steps, one JSON command a line on stdin, each answered by a JSON line, until
# `{"end": true}`.
DRIVER_PRELUDE = r"""
import { createInterface } from "node:readline";
const [plugin, timeoutMs] = [process.argv[2], Number(process.argv[3])];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errors = []; // what the plugin's hooks threw at the host
const reports = []; // the status of each report of a typed prompt, in order
const pending = new Set();
const realFetch = globalThis.fetch;
globalThis.fetch = (url, init) => {
  const answer = realFetch(url, init);
  if (String(url).endsWith("/v1/sessions/current/prompted")) {
    const tracked = answer.then((r) => reports.push(r.status), (e) => reports.push(String(e)))
      .finally(() => pending.delete(tracked));
    pending.add(tracked);
  }
  return answer;
};
const caught = async (call) => {
  try { return await call(); } catch (error) { errors.push(String(error?.stack ?? error)); }
};
const delivered = async (count) => {
  const deadline = Date.now() + timeoutMs;
  while (count() === 0 && Date.now() < deadline) await sleep(50);
  await sleep(500); // let the acknowledgement go out
};
async function serve(step) {
  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line);
    if (command.end) return;
    const [reported, threw] = [reports.length, errors.length];
    const returned = await caught(() => step(command));
    await Promise.race([Promise.allSettled([...pending]), sleep(10_000)]);
    console.log(JSON.stringify({ ...command, returned: returned ?? null,
      reports: reports.slice(reported), errors: errors.slice(threw) }));
  }
}
"""

# OpenCode calls the plugin's `chat.message` for every new user message, the plugin's own
# prompts included (so the fake client does too, before promptAsync answers).
OPENCODE_DRIVER = r"""
const prompts = [];
let hooks = {};
let messages = 0;
const message = (sessionID, parts) => caught(() => hooks["chat.message"]?.(
  { sessionID, agent: "build", messageID: `msg_${++messages}` },
  { message: { id: `msg_${messages}`, sessionID, role: "user", time: { created: Date.now() },
               agent: "build", model: { providerID: "p", modelID: "m" } },
    parts: parts.map((part, n) => ({ id: `prt_${messages}_${n}`, sessionID,
                                     messageID: `msg_${messages}`, ...part })) }));
const client = { session: { promptAsync: async (args) => {
  prompts.push(args);
  await message(args.path.id, args.body.parts);
  return {};
} } };
const mod = await import(plugin);
const exported = Object.entries(mod).map(([name, value]) => [name, typeof value]);
hooks = await mod.PagerPlugin({ client, directory: process.cwd() });
await hooks.event({ event: { type: "session.created", properties: { info: { id: "ses_root" } } } });
await hooks.event({ event: { type: "session.created",
  properties: { info: { id: "ses_child", parentID: "ses_root" } } } });
await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_child" } } });
await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_root" } } });
await delivered(() => prompts.length);
console.log(JSON.stringify({ exported, hooks: Object.keys(hooks), prompts,
  reports: [...reports], errors: [...errors] }));
await serve(({ step, text }) => {
  // typed: the person's prompt in the root session; subtask: a prompt the task tool gives a
  // child session.
  if (step === "typed") return message("ses_root", [{ type: "text", text }]);
  if (step === "subtask") return message("ses_child", [{ type: "text", text }]);
  throw new Error(`no step ${step} for OpenCode`);
});
process.exit(0);
"""

PI_DRIVER = r"""
const tools = new Map();
const handlers = {};
const sent = [];
const pi = {
  registerTool: (tool) => tools.set(tool.name, tool),
  on: (event, handler) => { handlers[event] = handler; },
  sendMessage: (message, options) => sent.push({ message, options }),
};
const mod = await import(plugin);
mod.default(pi);
const ctx = { cwd: process.cwd() };
await handlers.session_start({ reason: "startup" }, ctx);
const whoami = await tools.get("pager_whoami").execute("call-1", {}, undefined, undefined, ctx);
await delivered(() => sent.length);
const schemas = Object.fromEntries([...tools].map(([name, tool]) => [name, tool.parameters]));
console.log(JSON.stringify({ tools: [...tools.keys()], schemas, whoami, sent,
  events: Object.keys(handlers), reports: [...reports], errors: [...errors] }));
await serve(({ step, text }) => {
  // typed: input the person typed; extension: input another extension sent.
  const source = { typed: "interactive", extension: "extension" }[step];
  if (!source) throw new Error(`no step ${step} for Pi`);
  return handlers.input?.({ type: "input", text, source }, ctx);
});
await caught(() => handlers.session_shutdown({}, ctx));
process.exit(0);
"""

# Copilot CLI forks the extension and gives it `@github/copilot-sdk/extension`: here a stand-in
# module (written next to the extension) whose `joinSession` returns this fake session. The
# session is idle (waiting for its first prompt); `session.send` records the prompt.
COPILOT_DRIVER = r"""
const listeners = [];
const sent = [];
globalThis.fakeCopilotSession = {
  sessionId: "fake-session",
  on: (type, handler) => {
    listeners.push(typeof type === "function" ? type : (e) => e.type === type && handler(e));
    return () => {};
  },
  send: async (options) => { sent.push(options); return "msg-1"; },
};
await import(plugin);
await delivered(() => sent.length);
console.log(JSON.stringify({ joined: globalThis.fakeCopilotJoined ?? null, sent,
  listeners: listeners.length, errors: [...errors] }));
await serve(({ step }) => { throw new Error(`no step ${step} for Copilot`); });
process.exit(0);
"""

COPILOT_SDK = """
export const joinSession = async (config) => {
  globalThis.fakeCopilotJoined = config ?? {};
  return globalThis.fakeCopilotSession;
};
"""

DRIVERS = {
    "opencode": OPENCODE_DRIVER,
    "kilo": OPENCODE_DRIVER,
    "pi": PI_DRIVER,
    "copilot": COPILOT_DRIVER,
}


def plugin_module(kind: str, argv: list[str]) -> str:
    """The file of Pager's code the host loads: OpenCode's plugin, Pi's extension, or the
    extension inside Copilot CLI's `--plugin-dir` plugin."""
    if kind == "copilot":
        return str(Path(option(argv, "--plugin-dir") or "", "extensions", "pager", "extension.mjs"))
    return pointed_files(kind, argv)[0]


class PluginHost:
    """Pager's OpenCode plugin or Pi extension under Node with a fake host, from the `plugin`
    step until the fake exits (or its steps end)."""

    def __init__(self, kind: str, argv: list[str]) -> None:
        self.scratch = tempfile.mkdtemp()
        # As an .mjs copy: Node runs it as an ES module (Bun and Pi's jiti need no hint), and
        # the Pi extension as plain JavaScript (it has no type annotations).
        module = os.path.join(self.scratch, "module.mjs")
        Path(module).write_bytes(Path(plugin_module(kind, argv)).read_bytes())
        sdk = Path(self.scratch, "node_modules", "@github", "copilot-sdk")
        sdk.mkdir(parents=True)
        package = {"name": "@github/copilot-sdk", "type": "module"}
        (sdk / "package.json").write_text(
            json.dumps({**package, "exports": {"./extension": "./extension.js"}})
        )
        (sdk / "extension.js").write_text(COPILOT_SDK)
        script = os.path.join(self.scratch, "driver.mjs")
        Path(script).write_text(DRIVER_PRELUDE + DRIVERS[kind], encoding="utf-8")
        self.stderr = open(os.path.join(self.scratch, "stderr"), "w+", encoding="utf-8")  # noqa: SIM115
        self.node = subprocess.Popen(
            ["node", script, Path(module).as_uri(), os.environ.get("FAKE_PLUGIN_WAIT_MS", "20000")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )

    def started(self) -> dict[str, Any]:
        """What the plugin did until mail was delivered once (or the driver gave up)."""
        return self._answer()

    def step(self, name: str, text: str) -> dict[str, Any]:
        """The host acts (`typed`, `subtask`, `extension`: see the drivers) and waits for the
        plugin's hook; the answer lists the plugin's reports of typed prompts meanwhile."""
        try:
            assert self.node.stdin is not None
            self.node.stdin.write(json.dumps({"step": name, "text": text}) + "\n")
            self.node.stdin.flush()
        except OSError:
            pass  # Node is gone: _answer says why
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.node.stdout is not None
        for line in self.node.stdout:
            try:
                answer: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            return answer
        self.node.wait(timeout=10)
        self.stderr.seek(0)
        return {"error": self.stderr.read() or f"node exited {self.node.returncode}"}

    def close(self) -> None:
        try:
            if self.node.poll() is None and self.node.stdin is not None:
                self.node.stdin.write(json.dumps({"end": True}) + "\n")
                self.node.stdin.close()
            self.node.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.node.kill()
            self.node.wait()
        self.stderr.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


# -- main --------------------------------------------------------------------------------------


def start_daemon(pid_file: str) -> None:
    """A detached child with this process's environment that outlives it; returns once it
    wrote its pid."""
    code = (
        "import os, sys, time; from pathlib import Path;"
        " Path(sys.argv[1] + '.part').write_text(str(os.getpid()));"
        " os.replace(sys.argv[1] + '.part', sys.argv[1]); time.sleep(float(sys.argv[2]))"
    )
    subprocess.Popen(
        [sys.executable, "-c", code, pid_file, str(DAEMON_BOUND)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while not os.path.exists(pid_file):
        time.sleep(0.01)


def start_hub() -> int:
    """`cline hub start`: the fake hub daemon (tests/fakes/fake_cline_hub.py), detached with
    this process's environment; returns once its discovery file is written. Only when the test
    says what the hub's turns run (FAKE_HUB_TURNS): otherwise it fails, as when a hub cannot
    start (the launch goes on without its idle wake), so that tests of the TUI's own hooks get
    no knock."""
    if "FAKE_HUB_TURNS" not in os.environ:
        log({"hub_start": {"pid": None, "ready": False}})
        return 1
    discovery = Path(os.environ["CLINE_HUB_DISCOVERY_PATH"])
    hub = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_cline_hub"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not discovery.exists() and hub.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    log({"hub_start": {"pid": hub.pid, "ready": discovery.exists()}})
    return 0


def main() -> int:
    kind, argv = sys.argv[1], sys.argv[2:]
    if kind == "cline" and argv[:2] == ["hub", "start"]:  # the launch's `[launch] before`
        return start_hub()
    log(
        {
            "kind": kind,
            "argv": argv,
            "cwd": os.getcwd(),
            "env": {
                key: value
                for key, value in os.environ.items()
                if key.startswith("PAGER_") or key in ENV_KEYS
            },
            "files": {path: file_record(path) for path in pointed_files(kind, argv)},
            **(
                {"gemini_home": gemini_home()}
                if kind == "gemini" and "GEMINI_CLI_HOME" in os.environ
                else {}
            ),
            **({"cline_dir": cline_dir()} if kind == "cline" and "CLINE_DIR" in os.environ else {}),
        }
    )
    session = (
        option(argv, "--session-id")
        or option(argv, "--resume")
        or option(argv, "--id")
        or "thread-unknown"
    )
    host: PluginHost | None = None
    knocks: list[str] = []
    try:
        for step in filter(None, os.environ.get("FAKE_HARNESS_STEPS", "").split(",")):
            name, _, arg = step.partition(":")
            if name == "mcp":
                url, headers = mcp_endpoint(kind, argv)
                log({"mcp": call_tool(url, headers, "whoami", {})})
            elif name == "mcp-reuse":
                url, headers = mcp_endpoint(kind, argv)
                log({"mcp-reuse": calls_on_one_connection(url, headers, 2)})
            elif name == "hook":
                log({"hook": run_hook(kind, argv, arg, session)})
            elif name == "plugin":
                host = PluginHost(kind, argv)
                started = host.started()
                log({"plugin": started})
                if kind == "copilot":  # the prompts the extension sent
                    knocks = [str(sent["prompt"]) for sent in started.get("sent", [])]
            elif name == "knocked":  # Copilot CLI runs the extension's prompt through the hook
                assert knocks, "knocked needs a prompt the extension sent"
                log({"hook": run_hook(kind, argv, "userPromptSubmitted", session, knocks[-1])})
            elif name in ("typed", "subtask", "extension"):
                assert host is not None, f"{name} needs the plugin step first"
                log({"prompt": host.step(name, arg)})
            elif name == "daemon":
                start_daemon(arg)
            elif name == "wait":
                while not os.path.exists(arg):
                    time.sleep(0.02)
            elif name == "exit":
                return int(arg)
            elif name == "signal":
                os.kill(os.getpid(), getattr(signal, arg))
                time.sleep(5)
        return 0
    finally:
        if host is not None:
            host.close()


if __name__ == "__main__":
    sys.exit(main())
