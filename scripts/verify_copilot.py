"""GitHub Copilot CLI's checks for scripts/verify_harnesses.py (docs/implementations/copilot.md).

Copilot CLI runs offline against the script's recorder: `COPILOT_OFFLINE=true` (no GitHub
login, no telemetry, no GitHub MCP server) with an OpenAI-compatible provider at the recorder
(`COPILOT_PROVIDER_BASE_URL`, a dummy `COPILOT_PROVIDER_API_KEY`, `COPILOT_MODEL`). Each run
writes its debug log (`--log-level debug --log-dir`) into the workspace, where the checks read
what Copilot CLI did with Pager's wiring: the `pager` MCP server connected, the plugin's hooks
run and their output taken.

Two checks run an interactive Copilot CLI on a pseudo-terminal, its workspace trusted in the
throwaway `~/.copilot/config.json`: idle wake (mail sent to a session idle at its prompt must
start a turn through Pager's extension) and a plain `copilot` with the wiring `pager setup`
writes for sessions started without `pager`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from verify_harnesses import (
    ACCEPTED,
    REJECTED,
    UNCHECKED,
    Check,
    Context,
    Launch,
    Rejected,
    Unchecked,
    WakeSetup,
    _grep,
    _one_line,
    _tail,
    check_wake,
    run,
)

from pager.install.command import pager_argv
from pager.install.plugin import PluginContext
from pager.install.plugins.copilot import plugin_files


def _copilot_home(ctx: Context) -> None:
    """A user with no GitHub login whose model is an OpenAI-compatible endpoint (the
    recorder)."""
    ctx.env.update(
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=f"{ctx.model.url}/v1",
        COPILOT_PROVIDER_API_KEY="pager-verify-dummy-key",
        COPILOT_MODEL="gpt-4o",
        COPILOT_AUTO_UPDATE="false",
    )


def _log_args(ctx: Context, name: str) -> tuple[list[str], Path]:
    directory = ctx.workspace / f"copilot-logs-{name}"
    return ["--log-level", "debug", "--log-dir", str(directory)], directory


def _read_logs(directory: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in sorted(directory.glob("*.log")))


def check_copilot(ctx: Context) -> list[Check]:
    _copilot_home(ctx)
    checks: list[Check] = []
    logs, log_dir = _log_args(ctx, "headless")
    with ctx.launch([*logs, "-p", "ping"]) as launch:
        body = "verify: copilot hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        outcome: dict[str, str] = {}

        def headless() -> str:
            status, out = run(launch, None, ctx.workspace, 120)
            text = _read_logs(log_dir)
            outcome.update(text=text, out=out)
            if not text:
                raise Unchecked(f"copilot wrote no log (exit {status}): {_tail(out)}")
            return f"`copilot -p ping` ran to its end (exit {status}: {_one_line(out, 120)})"

        checks.append(ctx.check("headless launch: plugin and MCP file", launch, headless))
        if "text" not in outcome:
            return checks
        text = outcome["text"]

        def mcp() -> str:
            # Copilot CLI logs the server's tools as `pager-<tool>:<hash>` once its tools/list
            # (which needs the session's credential) answered.
            tools = sorted(set(re.findall(r'"(pager-[a-z_]+):[0-9a-f]+"', text)))
            started = _grep(text, r"mcp discover_and_start_root .*pager")
            failed = _grep(text, r"\[(?:ERROR|WARNING)\].*(?i:mcp)")
            if failed or not tools:
                shown = failed or started or ["no log line about the server `pager`"]
                raise Rejected("\n".join(line[:400] for line in shown[-6:]))
            return (
                f"the server `pager` from the file was started (http, with its Authorization"
                f" header) and listed {len(tools)} tools: {', '.join(tools)}"
            )

        checks.append(ctx.check("MCP server from --additional-mcp-config", launch, mcp))

        def hooks() -> str:
            outputs = _grep(text, r"\[hook stdout\] \{\"additionalContext\"")
            errors = _grep(text, r"(?i)hook.*(fail|error|invalid|timed out)")
            errors = [
                line
                for line in errors
                # Not about hooks: the session's settings an extension joins with, logged whole.
                if "managed hooks" not in line and "session.resume request" not in line
            ]
            if errors:
                raise Rejected("\n".join(errors[:6]))
            if not outputs:
                hook_lines = _grep(text, r"(?i)\bhook")[-10:]
                raise Rejected("no Pager hook printed additionalContext:\n" + "\n".join(hook_lines))
            return (
                f"the plugin's hooks ran; {len(outputs)} printed additionalContext JSON, which"
                f" Copilot CLI logged as hook stdout ({_one_line(outputs[0].split('] ')[-1], 120)})"
            )

        checks.append(ctx.check("hooks from the --plugin-dir plugin", launch, hooks))

        def delivery() -> str:
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            if state != "acknowledged":
                raise Rejected(f"the message is {state}")
            path, _ = ctx.model.wait_for(body, 10)
            return (
                "mail sent before the launch: the sessionStart hook printed it as"
                f' {{"additionalContext": …}}, and the model request (POST {path}) carried it;'
                " acknowledged"
            )

        checks.append(ctx.check("mail through the hooks, into the model request", launch, delivery))

        def typed() -> str:
            # The delivery set the identity's cause (SPEC §8.1); the typed `ping` then went
            # through the userPromptSubmitted hook, whose report must have cleared it.
            agent = str(launch.session["agent_id"])
            if ctx.broker.wait_state(ctx.workspace, message, 1) != "acknowledged":
                raise Unchecked("no delivery set the identity's cause")
            if ctx.broker.wait_cause_cleared(agent, 5) is None:
                hop, cause = ctx.broker.cause(agent)
                raise Rejected(
                    f"after the typed prompt `ping` the identity's cause was still cause_hop"
                    f" {hop}, cause_id {cause}: the userPromptSubmitted hook did not report it"
                )
            return (
                "the sessionStart delivery set the identity's loop-guard cause; the typed prompt"
                " `ping` went through the userPromptSubmitted hook, which reported it: the cause"
                " was NULL after the run"
            )

        checks.append(ctx.check("typed prompt reported (userPromptSubmitted)", launch, typed))

    def session(launch: Launch, _out: str) -> tuple[str, str]:
        key = launch.plan.conversation.key or ""  # the wrapper chose it (--session-id)
        kept = ctx.home / ".copilot" / "session-state" / key
        if not key or not kept.exists():
            raise Unchecked(f"Copilot CLI kept no session {key} in ~/.copilot/session-state")
        return key, f"chosen with --session-id, kept as ~/{kept.relative_to(ctx.home)}"

    setup = WakeSetup(
        ["-p", "{first}"],
        session,
        "the plugin's sessionStart hook put it before the model (the userPromptSubmitted hook saw"
        " the `[pager]` wake prompt and did not report it as typed)",
        evidence=None,
    )
    checks += check_wake(ctx, setup)
    checks.append(_idle_wake(ctx))
    checks.append(_without_pager(ctx))
    checks.append(_users_copilot_dir(ctx))
    return checks


#: How long an interactive Copilot CLI may take to start and load the plugin's extension.
START_BOUND = 60.0


class Terminal:
    """An interactive Copilot CLI on a pseudo-terminal; what it draws is drained and kept."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        primary, secondary = pty.openpty()
        self.primary, self.screen = primary, bytearray()
        self.popen = subprocess.Popen(
            argv,
            env={**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"},
            cwd=cwd,
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            start_new_session=True,  # its own group: stopping it stops its extension too
        )
        os.close(secondary)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.primary, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.screen += chunk

    def text(self) -> str:
        plain = re.sub(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]", b"", self.screen)
        return plain.decode(errors="replace")

    def stop(self) -> None:
        from verify_harnesses import _stop

        _stop(self.popen)
        os.close(self.primary)


def _trust(ctx: Context, folder: Path) -> None:
    """The user trusted the workspace (an interactive Copilot CLI asks first otherwise)."""
    path = ctx.home / ".copilot" / "config.json"
    text = path.read_text() if path.exists() else "{}"
    config = json.loads("\n".join(line for line in text.splitlines() if not line.startswith("//")))
    config["trustedFolders"] = sorted({*config.get("trustedFolders", []), str(folder)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")


def _wait_log(directory: Path, pattern: str, bound: float) -> str | None:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        found = _grep(_read_logs(directory), pattern)
        if found:
            return found[-1]
        time.sleep(0.5)
    return None


def _idle_wake(ctx: Context) -> Check:
    """An interactive session, idle at its prompt: mail sent to it must start a turn (the
    extension's `[pager]` knock) whose model request carries the mail, acknowledged, and the
    knock must not count as typed (the identity's cause stays set)."""
    logs, log_dir = _log_args(ctx, "idle")
    _trust(ctx, ctx.workspace)
    with ctx.launch(logs) as launch:

        def idle() -> str:
            terminal = Terminal(launch.argv, launch.env, ctx.workspace)
            try:
                ready = _wait_log(log_dir, r"extension_bootstrap", START_BOUND)
                mcp = _wait_log(log_dir, r"Service initialized as client", START_BOUND)
                if terminal.popen.poll() is not None or mcp is None:
                    raise Unchecked(
                        f"copilot did not start (exit {terminal.popen.poll()}):"
                        f" {_tail(terminal.text())}"
                    )
                time.sleep(3)  # idle: no prompt typed, the startup over
                before = len(ctx.model.requests)
                body = "verify: copilot idle wake"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                try:
                    path, request = ctx.model.wait_for(body, 60)
                except Rejected:
                    lines = _grep(_read_logs(log_dir), r"(?i)extension")[-8:]
                    after = len(ctx.model.requests) - before
                    raise Rejected(
                        f"the idle session took no turn with the mail ({after} model requests"
                        " after the send); extension log lines:\n"
                        + "\n".join(line[:300] for line in lines)
                        + f"\nscreen: {_one_line(terminal.text()[-3000:], 1500)}"
                    ) from None
                if "[pager] Mail is waiting" not in request:
                    raise Rejected("the request that carried the mail had no `[pager]` knock")
                state = ctx.broker.wait_state(ctx.workspace, message, 10)
                if state != "acknowledged":
                    raise Rejected(f"the mail reached the model but is {state}")
                hop, cause = ctx.broker.cause(str(launch.session["agent_id"]))
                if cause is None:
                    raise Rejected("the knock was counted as a typed prompt: the cause is NULL")
                return (
                    f"an interactive copilot on a pty, idle with no prompt typed; mail sent: the"
                    f" extension's `[pager]` prompt started a turn, the userPromptSubmitted hook"
                    f" added the mail (POST {path} carried the knock and the mail),"
                    f" acknowledged; the identity's cause stayed set (cause_hop {hop}: the"
                    f" knock is not typed). Extension: {_one_line(ready or '', 160)}"
                )
            finally:
                terminal.stop()

        return ctx.check("idle wake: the extension's knock on a pty", launch, idle)


def _conversations(ctx: Context) -> dict[str, tuple[str, str]]:
    """The broker's Copilot conversations: key -> (identity id, alias)."""
    uri = ctx.broker.paths.database.as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
        rows = conn.execute(
            "SELECT c.key, i.id, i.alias FROM conversations c JOIN identities i"
            " ON i.id = c.identity_id WHERE c.implementation = 'copilot'"
        ).fetchall()
    return {key: (agent, alias) for key, agent, alias in rows}


def _without_pager(ctx: Context) -> Check:
    """`pager setup`'s wiring (the hooks file and the `pager` stdio server, as
    pager/install/plugins/copilot.py plans them) in a throwaway home of its own, and a plain
    interactive `copilot` on a pty: its `pager mcp` registers and binds the session, mail sent
    to that identity reaches the model request of the next typed prompt, acknowledged."""
    name = "started without pager: setup's hooks file and MCP server"
    home = ctx.home.parent / "home-copilot-setup"
    env = {**ctx.env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    context = PluginContext(home=home, pager=pager_argv(os.environ), environ=env)
    plan = plugin_files(ctx.manifest, context)
    for planned in plan.files:
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        planned.path.write_bytes(planned.content)
    for entry in plan.entries:  # into a fresh mcp-config.json, as `pager setup` adds it
        data: dict[str, Any] = {}
        node = data
        for key in entry.keys[:-1]:
            node = node.setdefault(key, {})
        node[entry.keys[-1]] = entry.value
        entry.path.write_text(json.dumps(data, indent=2) + "\n")
    (home / ".copilot").mkdir(exist_ok=True)
    (home / ".copilot" / "config.json").write_text(
        json.dumps({"trustedFolders": [str(ctx.workspace)]}) + "\n"
    )
    log_dir = ctx.workspace / "copilot-logs-without-pager"
    program = shutil.which("copilot", path=ctx.env["PATH"])
    if program is None:
        return Check(name, UNCHECKED, "copilot is not installed")
    argv = [program, "--log-level", "debug", "--log-dir", str(log_dir)]
    known = set(_conversations(ctx))
    terminal = Terminal(argv, env, ctx.workspace)
    try:
        deadline = time.monotonic() + START_BOUND
        while not (fresh := set(_conversations(ctx)) - known):
            if time.monotonic() > deadline or terminal.popen.poll() is not None:
                servers = _grep(_read_logs(log_dir), r"(?i)mcp.*(pager|error|fail)")[-6:]
                return Check(
                    name,
                    REJECTED,
                    "no Copilot conversation was bound (pager mcp with"
                    " --conversation-key-env COPILOT_AGENT_SESSION_ID):\n"
                    + "\n".join(line[:300] for line in servers),
                )
            time.sleep(0.5)
        [key] = fresh
        _agent, alias = _conversations(ctx)[key]
        body = "verify: copilot without pager"
        message = ctx.broker.send(ctx.workspace, alias, body)
        time.sleep(2)  # the session idle at its prompt
        os.write(terminal.primary, b"ping")
        time.sleep(0.5)
        os.write(terminal.primary, b"\r")
        try:
            path, _ = ctx.model.wait_for(body, 60)
        except Rejected as exc:
            hooks = _grep(_read_logs(log_dir), r"(?i)hook")[-6:]
            screen = _one_line(terminal.text()[-2000:], 800)
            raise_text = f"{exc}; hook lines:\n" + "\n".join(h[:300] for h in hooks)
            return Check(name, REJECTED, f"{raise_text}\nscreen: {screen}")
        state = ctx.broker.wait_state(ctx.workspace, message, 10)
        if state != "acknowledged":
            return Check(name, REJECTED, f"the mail reached the model but is {state}")
        return Check(
            name,
            ACCEPTED,
            f"a plain interactive `copilot` (no wrapper) with ~/.copilot/hooks/pager.json and"
            f" mcpServers.pager in ~/.copilot/mcp-config.json: `pager mcp` registered {alias}"
            f" and bound the session {key} (COPILOT_AGENT_SESSION_ID); mail sent to {alias},"
            f" then a typed `ping`: the userPromptSubmitted hook added it (POST {path} carried"
            " it), acknowledged",
        )
    finally:
        terminal.stop()


def _users_copilot_dir(ctx: Context) -> Check:
    """What the launches left in the user's `~/.copilot`: no server, hook or plugin of Pager's,
    and the one data directory Copilot CLI keeps for the plugin's fixed path."""
    own = ctx.home / ".copilot"
    name = "the user's ~/.copilot after the launches"
    left = []
    config = own / "mcp-config.json"
    if config.exists() and "pager" in config.read_text():
        left.append("a `pager` server in mcp-config.json")
    if any((own / "hooks").glob("*")):
        left.append(f"hooks: {sorted(p.name for p in (own / 'hooks').iterdir())}")
    settings = own / "settings.json"
    if settings.exists() and re.search(r'"experimental"|EXTENSIONS', settings.read_text()):
        left.append("an experimental or EXTENSIONS setting in settings.json")
    if any((own / "extensions").glob("*")):
        left.append(f"extensions: {sorted(p.name for p in (own / 'extensions').iterdir())}")
    if any((own / "installed-plugins").glob("*")):
        left.append(f"plugins: {sorted(p.name for p in (own / 'installed-plugins').iterdir())}")
    data = sorted((own / "plugin-data" / "_direct").glob("*"))
    if len(data) > 2:  # the interactive plugin's fixed path and the wake run's
        left.append(f"{len(data)} plugin data directories (one per launch?)")
    if left:
        return Check(name, REJECTED, "; ".join(left))
    return Check(
        name,
        ACCEPTED,
        "no `pager` server in mcp-config.json, no hooks, no extension, no installed plugin, no"
        " experimental setting; Copilot CLI's data directories for --plugin-dir plugins:"
        f" {len(data)} (the plugins' two fixed paths), after every launch of these checks",
    )
