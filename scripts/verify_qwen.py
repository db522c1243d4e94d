"""Qwen Code's checks for scripts/verify_harnesses.py (`--only qwen`).

Qwen Code runs with a throwaway `HOME` whose `~/.qwen/settings.json` selects OpenAI-compatible
auth, and `OPENAI_API_KEY` (dummy), `OPENAI_BASE_URL` (the recorder) and `OPENAI_MODEL`, so
its model requests reach the script's recorder and are refused. See
docs/implementations/qwen.md ("Verified against the real harness").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from verify_harnesses import (
    ACCEPTED,
    MAIL_BOUND,
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
    _stop,
    _tail,
    check_wake,
    run,
)

MODEL = "pager-verify-model"


def _qwen_home(ctx: Context) -> None:
    """A user who chose OpenAI-compatible auth at the recorder and sends no statistics."""
    own = ctx.home / ".qwen"
    own.mkdir(exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (own / "settings.json").write_text(json.dumps(settings))
    ctx.env.update(
        OPENAI_API_KEY="pager-verify-dummy-key",
        OPENAI_BASE_URL=f"{ctx.model.url}/v1",
        OPENAI_MODEL=MODEL,
        QWEN_CODE_NO_RELAUNCH="1",
    )


def check_qwen(ctx: Context) -> list[Check]:
    _qwen_home(ctx)
    checks = []
    # `qwen mcp list` refuses the --session-id the wrapper puts first for a new conversation
    # (the manifest's other_subcommands leave it out there; this check names none).
    no_choice = attrs.evolve(ctx.spec, choose_flag=None)
    with ctx.launch(["mcp", "list"], spec=no_choice) as launch:

        def mcp_list() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            line = next((x for x in out.splitlines() if re.search(r"\bpager\b.*: ", x)), None)
            if status != 0 or line is None or "Connected" not in line or "Disconnected" in line:
                raise Rejected(f"exit {status}: {_tail(out)}")
            return f"`qwen mcp list`: {line.strip()}"

        checks.append(ctx.check("MCP server from the per-launch extension", launch, mcp_list))

    with ctx.launch(["-p", "ping"]) as launch:
        body = "verify: qwen hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        out: dict[str, str] = {}

        def headless() -> str:
            status, text = run(launch, None, ctx.workspace, 120)
            out["text"] = text
            (ctx.workspace / "qwen-output.log").write_text(launch.redact(text))  # for --keep
            path, _ = ctx.model.wait_for(body, 10)
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            if state != "acknowledged":
                raise Rejected(f"the model request (POST {path}) carried the mail; it is {state}")
            return (
                f"`qwen {' '.join(launch.plan.args)}` (exit {status}): mail sent before the"
                f" launch was in the model request (POST {path}), added by"
                f" {_delivered_by(ctx, body)} of the per-launch extension; acknowledged"
            )

        checks.append(ctx.check("mail through the hooks, into the model request", launch, headless))

        def state() -> str:
            own = ctx.home / ".qwen"
            chats = sorted(
                str(path.relative_to(own)) for path in (own / "projects").glob("*/chats/*.jsonl")
            )
            settings = json.loads((own / "settings.json").read_text())
            if not chats:
                raise Rejected("no session of the launch reached the user's ~/.qwen/projects")
            if "mcpServers" in settings or "hooks" in settings:
                raise Rejected(f"the user's settings.json changed: {settings}")
            if (own / "extensions" / "pager-launch").exists():
                raise Rejected("the per-launch extension is in the user's ~/.qwen/extensions")
            return (
                f"the launch's session is in the user's own ~/.qwen ({chats[0]}); the user's"
                " settings.json has no Pager entry and no pager-launch extension"
            )

        checks.append(ctx.check("the user's ~/.qwen after the launch", launch, state))

    checks.append(check_typed_prompt(ctx))
    checks.append(check_idle_wake(ctx))

    def session(launch: Launch, _out: str) -> tuple[str, str]:
        key = launch.plan.conversation.key or ""  # the wrapper chose it (--session-id)
        chats = list((ctx.home / ".qwen" / "projects").glob(f"*/chats/{key}.jsonl"))
        if not key or not chats:
            raise Unchecked(f"Qwen Code kept no session {key} in ~/.qwen/projects/*/chats")
        return key, f"chosen with --session-id, kept as ~/{chats[0].relative_to(ctx.home)}"

    setup = WakeSetup(
        ["-p", "{first}"],
        session,
        "Pager's hooks from the per-launch extension (SessionStart, UserPromptSubmit) put it"
        " before the model",
    )
    return checks + check_wake(ctx, setup)


def check_typed_prompt(ctx: Context) -> Check:
    """One session over stream-json: mail delivered by the hooks with a `[pager]` prompt (the
    cause stays set), then a prompt as a person types it (its report clears the cause)."""
    args = ["--input-format", "stream-json", "--output-format", "stream-json"]
    with ctx.launch(args) as launch:
        process: Process | None = None

        def typed() -> str:
            nonlocal process
            agent = str(launch.session["agent_id"])
            body = "verify: qwen typed prompt"
            message = ctx.broker.send(ctx.workspace, launch.address, body)
            process = Process(launch.argv, launch.env, ctx.workspace)
            process.write(_user("[pager] verify: a prompt Pager sent"))
            ctx.model.wait_for(body, MAIL_BOUND)
            process.expect(lambda _s, line: '"type":"result"' in line, 60, "the first turn")
            if ctx.broker.wait_state(ctx.workspace, message, 10) != "acknowledged":
                raise Rejected("the model request carried the mail, but it is not acknowledged")
            before = _cause_after_delivery(ctx, agent, message, "the `[pager]` prompt's turn")
            text = "verify: a prompt the person typed"
            process.write(_user(text))
            cleared = ctx.broker.wait_cause_cleared(agent)
            if cleared is None:
                hop, cause = ctx.broker.cause(agent)
                raise Rejected(
                    f"after the hooks' delivery the cause was {before}, as it should be; then a"
                    f" typed prompt went in, but the cause was still cause_hop {hop}, cause_id"
                    f" {cause}: the UserPromptSubmit hook did not report it\n{process.tail()}"
                )
            carried = ""
            with contextlib.suppress(Rejected):
                carried = f"; its model request (POST {ctx.model.wait_for(text, 20)[0]})"
                carried += " carried the prompt"
            return (
                f"mail sent to the session reached the model (by {_delivered_by(ctx, body)})"
                " with a first prompt `[pager] …`, which the UserPromptSubmit hook did not"
                f" count as typed (the cause stayed {before}); then a typed prompt"
                f" (a stream-json user message) and the cause was NULL {cleared:.1f} s later"
                f" (the UserPromptSubmit hook reported it){carried}"
            )

        try:
            return ctx.check("hooks: a typed prompt restarts the chain", launch, typed)
        finally:
            if process is not None:
                process.stop()
                output = launch.redact("".join(process.output))
                (ctx.workspace / "qwen-stream.log").write_text(output)  # for --keep


#: A user manifest put over the built-in for the idle wake check only (a broken copy of the
#: wiring, to see the check reject it): the path of a TOML file, or unset.
BROKEN_MANIFEST = "VERIFY_QWEN_MANIFEST"
#: Seconds for the interactive TUI to start and run its SessionStart hook.
TUI_BOUND = 60.0


def check_idle_wake(ctx: Context) -> Check:
    """The real `pager qwen` wrapper with an interactive Qwen Code in a pseudo-terminal: once
    it idles, mail is sent; the wrapper's knock on the input file must start a turn whose
    UserPromptSubmit hook puts the mail into the model request (acknowledged) without counting
    the `[pager]` prompt as typed (the identity's cause stays set)."""
    name = "verify-qwen-idle"
    env = {**ctx.env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    broken = os.environ.get(BROKEN_MANIFEST)
    if broken:  # a broken copy over the built-in, in the throwaway home's manifests
        manifests = ctx.home / ".config" / "pager" / "implementations"
        manifests.mkdir(parents=True, exist_ok=True)
        shutil.copy(broken, manifests / "qwen.toml")
    argv = [sys.executable, "-m", "pager", "qwen", "--session-name", name]
    shown = ["pager", "qwen", "--session-name", name]
    terminal = Terminal(argv, env, ctx.workspace)
    try:
        observed = _idle_wake(ctx, terminal, name)
        verdict = ACCEPTED
    except Rejected as exc:
        verdict, observed = REJECTED, str(exc)
    except Unchecked as exc:
        verdict, observed = UNCHECKED, str(exc)
    except Exception as exc:  # the check itself broke: say so, do not guess a verdict
        verdict, observed = UNCHECKED, f"the check failed: {type(exc).__name__}: {exc}"
    finally:
        terminal.stop()
        (ctx.workspace / "qwen-tui.log").write_text(terminal.text())  # for --keep
    return Check("idle wake (input file)", verdict, observed, shown, {})


def _idle_wake(ctx: Context, terminal: Terminal, name: str) -> str:
    agent = _attached(ctx, name, terminal)
    # Idle: the TUI drew its input box and the SessionStart hook ran (nothing was waiting).
    terminal.expect(lambda text: "Type your message" in text, TUI_BOUND, "the TUI's input box")
    time.sleep(3)
    first = _knocked(ctx, terminal, name, "verify: mail for the idle qwen")
    # A second knock, with the first mail's cause set: a prompt reported as typed would reset
    # the chain (the identity's chain_resets counts it); the `[pager]` prompt must not.
    second = _knocked(ctx, terminal, name, "verify: a second knock for qwen")
    hop, cause, resets = _guard(ctx, agent)
    if resets is not None:
        raise Rejected(
            f"both knocks' turns delivered their mail, but the identity's chain was reset"
            f" (chain_resets {resets}): the knock's prompt was reported as typed by a person"
        )
    return (
        f"Qwen Code idle in its TUI (a pseudo-terminal); mail sent to {name}: {first}. Again,"
        f" with that mail's cause set: {second}; the chain was never reset (chain_resets NULL;"
        f" cause_hop {hop}, cause_id {cause}): the `[pager]` prompt was not counted as typed"
    )


#: The prompt the manifest's `[wake.input] line` submits (the wake prompt's start).
KNOCK = "[pager] Mail is waiting for you in Pager"


def _knocked(ctx: Context, terminal: Terminal, name: str, body: str) -> str:
    """Mail sent to the idle session reached a model request through a knock's turn and was
    acknowledged: what was seen."""
    requests = len(ctx.model.requests)
    sent_at = time.monotonic()
    message = ctx.broker.send(ctx.workspace, name, body)
    try:
        path, request = ctx.model.wait_for(body, MAIL_BOUND)
    except Rejected:
        state = ctx.broker.state(ctx.workspace, message)
        raise Rejected(
            f"mail sent to the idle session did not reach a model request within"
            f" {MAIL_BOUND:.0f} s ({len(ctx.model.requests) - requests} new requests; the"
            f" message is {state}); the terminal showed:\n{terminal.tail()}"
        ) from None
    took = time.monotonic() - sent_at
    if KNOCK not in request:
        raise Rejected(
            f"the mail reached a model request (POST {path}), but its turn's prompt was not"
            f" the knock's `{KNOCK} …`: the UserPromptSubmit hook saw another prompt"
        )
    state = ctx.broker.wait_state(ctx.workspace, message, 20)
    if state != "acknowledged":
        raise Rejected(f"the model request (POST {path}) carried the mail; it is {state}")
    return (
        f"{took:.1f} s later a model request (POST {path}) carried it, added by"
        f" {_delivered_by(ctx, body)} at the turn of the knock's `{KNOCK} …` prompt (appended"
        " to the launch's --input-file by the wrapper); acknowledged"
    )


def _guard(ctx: Context, agent: str) -> tuple[Any, Any, Any]:
    """The identity's loop-guard cause and chain resets, read read-only from `pager.db`."""
    uri = ctx.broker.paths.database.as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
        row = conn.execute(
            "SELECT cause_hop, cause_id, chain_resets FROM identities WHERE id = ?", (agent,)
        ).fetchone()
    if row is None:
        raise Unchecked(f"the identity {agent} is not in the broker's pager.db")
    return row[0], row[1], row[2]


def _attached(ctx: Context, name: str, terminal: Terminal) -> str:
    """The agent id of the wrapper's session, once it registered."""
    deadline = time.monotonic() + TUI_BOUND
    while time.monotonic() < deadline:
        token = ctx.broker.sender(ctx.workspace)
        roster = ctx.broker.tool(token, "roster", {})
        for entry in roster.get("agents", []):
            if entry.get("alias") == name and entry.get("attached"):
                return str(entry["agent_id"])
        if terminal.ended():
            break
        time.sleep(0.5)
    raise Unchecked(f"`pager qwen` did not attach {name}; the terminal showed:\n{terminal.tail()}")


class Terminal:
    """A program in a pseudo-terminal of its own (120x40); its output collected as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self._master, self._chunks = master, list[bytes]()
        self.popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,  # its own group and controlling terminal
        )
        os.close(slave)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self._chunks.append(chunk)

    def text(self) -> str:
        raw = b"".join(self._chunks).decode(errors="replace")
        return re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]", "", raw)

    def tail(self, chars: int = 1500) -> str:
        return self.text().strip()[-chars:]

    def ended(self) -> bool:
        return self.popen.poll() is not None

    def expect(self, predicate: Callable[[str], bool], bound: float, what: str) -> None:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if predicate(self.text()):
                return
            if self.ended():
                break
            time.sleep(0.3)
        raise Unchecked(f"{what} did not show ({bound:.0f} s); the terminal showed:\n{self.tail()}")

    def stop(self) -> None:
        _stop(self.popen)
        with contextlib.suppress(OSError):
            os.close(self._master)


def _user(text: str) -> str:
    """A user message of Qwen Code's stream-json input (as Claude Code's)."""
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}})


#: How Qwen Code 0.24.4 marks a hook's additionalContext in the model request.
CONTEXT_TAGS = {
    "SessionStart": "<qwen:session-start-context",
    "UserPromptSubmit": "<qwen:user-prompt-submit-context",
}


def _delivered_by(ctx: Context, body: str) -> str:
    """Which of Pager's hooks put `body` into a recorded model request (by Qwen Code's tag
    around a hook's additionalContext)."""
    for _, request in ctx.model.requests:
        at = request.find(body)
        if at < 0:
            continue
        before = request[:at]
        tag = max(CONTEXT_TAGS, key=lambda event: before.rfind(CONTEXT_TAGS[event]))
        if before.rfind(CONTEXT_TAGS[tag]) >= 0:
            return f"the {tag} hook (inside `{CONTEXT_TAGS[tag]}>`)"
    return "no hook's context tag"
