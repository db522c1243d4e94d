"""Kilo CLI's checks for scripts/verify_harnesses.py (docs/implementations/kilo.md).

Kilo CLI is an OpenCode fork with OpenCode's configuration, plugin API, `serve` HTTP API and
`run` command, so its checks are OpenCode's under Kilo's names: `KILO_CONFIG_CONTENT`, the
plugin copied as `pager-kilo.js`, `kilo mcp list`, `kilo debug config`, `kilo serve` and
`kilo run`. Kilo runs offline against the script's recorder: its own `kilo` provider is turned
off, the model is an `@ai-sdk/openai-compatible` provider (`options.baseURL` at the recorder, a
dummy key) in `~/.config/kilo/kilo.json`, and `KILO_DISABLE_MODELS_FETCH=1` keeps it from
fetching the models catalogue. One more check: `pager plugin install kilo` for sessions
started without `pager`.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from typing import Any

from verify_harnesses import (
    ACCEPTED,
    PROMPT_BOUND,
    REJECTED,
    UNCHECKED,
    Check,
    Context,
    Launch,
    Process,
    Rejected,
    Unchecked,
    WakeSetup,
    _cause_after_delivery,
    _free_port,
    _grep,
    _json,
    _one_line,
    _opencode_answer,
    _opencode_wait,
    _tail,
    check_wake,
    run,
)

from pager.client import BrokerUnreachable, request_json

PLUGIN = "pager-kilo.js"
MODEL = "recorder/gpt-4o-mini"


def _kilo_home(ctx: Context) -> None:
    """A user whose model is an OpenAI-compatible endpoint at the recorder (Kilo's own provider
    and the models catalogue off)."""
    config = ctx.home / ".config" / "kilo"
    config.mkdir(parents=True, exist_ok=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Recorder",
        "options": {"baseURL": f"{ctx.model.url}/v1", "apiKey": "pager-verify-dummy-key"},
        "models": {"gpt-4o-mini": {"name": "gpt-4o-mini"}},
    }
    settings = {
        "$schema": "https://app.kilo.ai/config.json",
        "provider": {"recorder": provider},
        "model": MODEL,
        "small_model": MODEL,
        "disabled_providers": ["kilo"],
        "autoupdate": False,
        "share": "disabled",
    }
    (config / "kilo.json").write_text(json.dumps(settings))
    ctx.env.update(
        KILO_DISABLE_MODELS_FETCH="1",
        KILO_DISABLE_AUTOUPDATE="1",
        KILO_DISABLE_DEFAULT_PLUGINS="1",  # its indexing and chat plugins: not Pager's concern
    )


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def check_kilo(ctx: Context) -> list[Check]:
    _kilo_home(ctx)
    checks = []
    with ctx.launch(["mcp", "list"]) as launch:

        def mcp_list() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            text = _plain(out)
            lines = [x.strip(" │●") for x in text.splitlines() if "pager" in x or "error" in x]
            if status != 0 or not any("pager" in x and "connected" in x for x in lines):
                raise Rejected(f"exit {status}: {_tail(text)}")
            return "`kilo mcp list`: " + "; ".join(lines)

        checks.append(ctx.check("MCP server from KILO_CONFIG_CONTENT", launch, mcp_list))

    with ctx.launch(["debug", "config"]) as launch:

        def config() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            data = _json(out[out.find("{") :]) if "{" in out else None
            if status != 0 or data is None:
                raise Rejected(f"exit {status}: {_tail(out)}")
            server = (data.get("mcp") or {}).get("pager") or {}
            plugins = [p for p in data.get("plugin", []) if PLUGIN in str(p)]
            origins = [o.get("source") for o in data.get("plugin_origins", []) if PLUGIN in str(o)]
            if server.get("type") != "remote" or server.get("oauth") is not False or not plugins:
                raise Rejected(f"resolved configuration: {json.dumps(data)[:1500]}")
            return (
                f"resolved: mcp.pager type remote, url {server.get('url')}, oauth false;"
                f" plugin {launch.short(str(plugins[0]))} (origin {', '.join(map(str, origins))})"
            )

        checks.append(ctx.check("resolved configuration", launch, config))

    checks += _serve_checks(ctx)

    def session(_launch: Launch, out: str) -> tuple[str, str]:
        events = [_json(line) or {} for line in out.splitlines() if line.startswith("{")]
        keys = [str(event["sessionID"]) for event in events if event.get("sessionID")]
        if not keys:
            raise Unchecked(f"`kilo run --format json` named no session:\n{_tail(out)}")
        return keys[0], "from `run --format json`'s events, kept in Kilo's database"

    setup = WakeSetup(
        ["run", "--format", "json", "{first}"],
        session,
        "Pager's plugin (its headless copy: no long poll) claimed it in `chat.message` and"
        " added it to the run's prompt",
    )
    checks += check_wake(ctx, setup)
    checks.append(_users_kilo_dir(ctx))
    checks.append(_installed_plugin(ctx))
    return checks


def _users_kilo_dir(ctx: Context) -> Check:
    """What the launches left in the user's Kilo configuration: nothing of Pager's (no `pager`
    server, no plugin, no credential)."""
    own = ctx.home / ".config" / "kilo"
    name = "the user's ~/.config/kilo after the launches"
    files = sorted(p for p in own.rglob("*") if p.is_file())
    tokens = {"pager", "prl_", "PAGER_TOKEN"}
    left = [
        str(path.relative_to(own))
        for path in files
        if path.name != "kilo.json" and any(t in path.read_text(errors="replace") for t in tokens)
    ]
    plugins = (
        sorted(p.name for p in (own / "plugins").glob("*")) if (own / "plugins").exists() else []
    )
    if left or plugins:
        return Check(name, REJECTED, f"files naming Pager: {left}; plugins: {plugins}")
    shown = ", ".join(str(p.relative_to(own)) for p in files)
    return Check(
        name,
        ACCEPTED,
        f"after every launch of these checks it holds only {shown} (kilo.json the script's"
        " own; nothing names Pager or holds a credential; no plugins directory)",
    )


def _serve_checks(ctx: Context) -> list[Check]:
    """`kilo serve` (what the TUI runs too), driven over its HTTP API: the plugin's idle wake,
    then a prompt typed as the TUI sends one."""
    checks = []
    port = _free_port()
    args = ["serve", "--port", str(port), "--print-logs", "--log-level", "DEBUG"]
    with ctx.launch(args) as launch:
        url = f"http://127.0.0.1:{port}"
        process = Process(launch.argv, launch.env, ctx.workspace)
        delivered: dict[str, str] = {}
        try:

            def plugin() -> str:
                process.expect(lambda _s, line: "listening on" in line, 90, "the server")
                status, created = request_json(url, "POST", "/session", body={}, timeout=30)
                if status != 200:
                    raise Unchecked(f"POST /session answered {status}: {created}")
                session = created["id"]
                time.sleep(1)  # the plugin sees session.created
                body = "verify: kilo plugin"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                found = _opencode_wait(url, session, message)
                path, _ = ctx.model.wait_for(body, 30)
                state = ctx.broker.wait_state(ctx.workspace, message)
                with contextlib.suppress(Rejected):
                    ctx.model.wait_for("pager_whoami", 20)  # the turn's request, with the tools
                errors = _grep("".join(process.output), r"(?i)plugin.*(error|fail)")
                errors = [line for line in errors if PLUGIN in line or "pager" in line]
                if errors:
                    raise Rejected("\n".join(errors[:5]))
                if state != "acknowledged":
                    raise Rejected(f"the mail was added to the session but is {state}")
                delivered.update(session=session, message=message)
                roles = [m["info"]["role"] for m in found]
                return (
                    "the plugin loaded with `kilo serve`, followed the session created over its"
                    " HTTP API and, when mail arrived, added it as a user message starting"
                    f" 'Pager delivered 1 message(s)' and Kilo started a turn (messages:"
                    f" {', '.join(roles)}) whose model request (POST {path}) carried it;"
                    " acknowledged"
                )

            checks.append(ctx.check("Pager's plugin: mail into an idle session", launch, plugin))

            def typed_prompt() -> str:
                if not delivered:
                    raise Unchecked("the mail check did not get as far as a delivery, so there"
                                    " is no loop-guard cause to clear")  # fmt: skip
                agent, session = str(launch.session["agent_id"]), delivered["session"]
                before = _cause_after_delivery(
                    ctx, agent, delivered["message"], "the plugin's own mail prompt"
                )
                text = "verify: a prompt the person typed"
                answer: dict[str, Any] = {}

                def prompt() -> None:  # answers when the turn has ended (the model refused)
                    try:
                        answer["reply"] = request_json(
                            url, "POST", f"/session/{session}/message",
                            body={"parts": [{"type": "text", "text": text}]}, timeout=120,
                        )  # fmt: skip
                    except BrokerUnreachable as exc:
                        answer["error"] = str(exc)

                sending = threading.Thread(target=prompt, daemon=True)
                sending.start()
                cleared = ctx.broker.wait_cause_cleared(agent)
                sending.join(30)
                _, listed = request_json(url, "GET", f"/session/{session}/message", timeout=10)
                users = [
                    m for m in (listed if isinstance(listed, list) else [])
                    if m["info"]["role"] == "user"
                    and any(part.get("text") == text for part in m.get("parts", []))
                ]  # fmt: skip
                answered = _opencode_answer(answer)
                if not users:
                    raise Unchecked(f"Kilo did not add the prompt to the session ({answered})")
                if cleared is None:
                    hop, cause = ctx.broker.cause(agent)
                    raise Rejected(
                        f"after the plugin's own mail prompt the cause was {before}; then a"
                        f" prompt typed over Kilo's HTTP API (POST /session/{{id}}/message,"
                        f" {answered}) became a user message of the session, but"
                        f" {PROMPT_BOUND:.0f} s later the identity's cause was still cause_hop"
                        f" {hop}, cause_id {cause}: the plugin did not report it"
                    )
                return (
                    f"after the plugin's own mail prompt and its turn the identity's cause was"
                    f" still set ({before}): the delivery did not count as typed; a prompt typed"
                    f" as the TUI sends it (POST /session/{{id}}/message, {answered}) became a"
                    f" user message and the cause was NULL {cleared:.1f} s after it was sent"
                    " (the plugin's chat.message hook reported it)"
                )

            checks.append(
                ctx.check("Pager's plugin: a typed prompt restarts the chain", launch, typed_prompt)
            )
        finally:
            process.stop()
            output = launch.redact("".join(process.output))
            (ctx.workspace / "kilo-serve.log").write_text(output)  # for --keep
    return checks


def _installed_plugin(ctx: Context) -> Check:
    """`pager plugin install kilo` in the throwaway home, then a `kilo` started without `pager`
    (no Pager variables): its resolved configuration and `kilo mcp list` must show the plugin
    and the local server `pager mcp` it adds; `--uninstall` takes it back."""
    name = "`pager plugin install kilo` (sessions started without `pager`)"
    env = dict(ctx.env)
    pager = [sys.executable, "-m", "pager"]
    plugin = ctx.home / ".config" / "kilo" / "plugins" / "pager.js"
    kilo = str(ctx.bin_dir / "kilo")

    def quiet(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env=env, cwd=ctx.workspace, capture_output=True, text=True, timeout=120
        )

    try:
        done = quiet([*pager, "plugin", "install", "kilo"])
        if done.returncode != 0 or not plugin.exists():
            return Check(
                name,
                REJECTED,
                f"exit {done.returncode}; no ~/.config/kilo/plugins/pager.js, where Kilo loads"
                f" plugins from. It said: {_one_line(done.stdout + done.stderr)}",
            )
        try:
            config = quiet([kilo, "debug", "config"])
            data = _json(config.stdout[config.stdout.find("{") :]) or {}
            loaded = [p for p in data.get("plugin", []) if str(p).endswith("/plugins/pager.js")]
            listed = _plain(quiet([kilo, "mcp", "list"]).stdout)
            lines = [x.strip(" │●") for x in listed.splitlines() if "pager" in x]
            if not loaded:
                return Check(name, REJECTED, f"not loaded: {json.dumps(data)[:800]}")
            if not any("connected" in line for line in lines):
                return Check(
                    name,
                    REJECTED,
                    f"the plugin was loaded ({loaded[0]}) but `kilo mcp list` showed no"
                    f" connected `pager` server:\n{_tail(listed)}",
                )
            return Check(
                name,
                ACCEPTED,
                f"wrote ~/.config/kilo/plugins/pager.js; a kilo started without Pager's"
                f" variables loaded it (plugin {loaded[0].replace(str(ctx.home), '~')}) and"
                f" `kilo mcp list` showed: {'; '.join(lines)} (the local `pager mcp` its"
                " config hook adds)",
            )
        finally:
            quiet([*pager, "plugin", "install", "kilo", "--uninstall"])
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(name, UNCHECKED, f"the check failed: {type(exc).__name__}: {exc}")
