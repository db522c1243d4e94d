"""Cline CLI's checks for scripts/verify_harnesses.py (docs/implementations/cline.md).

Cline CLI runs against the script's recorder as an OpenAI-compatible provider, set up as a user
would (`cline auth -p openai -k KEY -m MODEL -b URL`, which writes the user's
`~/.cline/data/settings/providers.json`). Its hooks only add context after a tool call
(PostToolUse), so the recorder answers a run's first model request once with a `read_files`
call: Cline CLI reads the file, runs the hook, and its next model request is the one that must
carry the mail.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from verify_harnesses import (
    ACCEPTED,
    MAIL_BOUND,
    REJECTED,
    UNCHECKED,
    Canned,
    Check,
    Context,
    Rejected,
    Unchecked,
    _one_line,
    _tail,
    run,
)

from pager.launch.leftovers import stop_holders

FIRST = "verify: read the readme"
TYPED = ("verify: typed in the TUI, read the readme", "verify: typed again")


def _cline_home(ctx: Context) -> None:
    """A user whose Cline provider is the recorder (`cline auth`), in local mode for this one
    command so that no hub daemon outlives the script."""
    program = ctx.bin_dir / "cline"
    env = {**ctx.env, "CLINE_SESSION_BACKEND_MODE": "local"}
    key, url = "pager-verify-dummy-key", f"{ctx.model.url}/v1"
    done = subprocess.run(
        [str(program), "auth", "-p", "openai", "-k", key, "-m", "gpt-4o", "-b", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ctx.workspace,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cline auth failed: {_tail(done.stdout + done.stderr)}")
    (ctx.workspace / "README.md").write_text("pager verify\n")


def _tool_call(path: Path, needle: str = FIRST) -> Canned:
    """The recorder's one answer: a streamed OpenAI chat completion calling `read_files`."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "verify", "object": "chat.completion.chunk", "created": 0}
        return "data: " + json.dumps({**body, "model": "gpt-4o", "choices": [choice]}) + "\n\n"

    arguments = json.dumps({"files": [{"path": str(path)}]})
    call = {"index": 0, "id": "call_verify", "type": "function"}
    call["function"] = {"name": "read_files", "arguments": arguments}
    text = chunk({"role": "assistant", "content": None, "tool_calls": [call]})
    text += chunk({}, "tool_calls") + "data: [DONE]\n\n"
    return Canned("/chat/completions", needle, "text/event-stream", text.encode())


def _text(needle: str, text: str) -> Canned:
    """The recorder's one answer: a streamed OpenAI chat completion saying `text`, ending the
    turn."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "verify", "object": "chat.completion.chunk", "created": 0}
        return "data: " + json.dumps({**body, "model": "gpt-4o", "choices": [choice]}) + "\n\n"

    answer = chunk({"role": "assistant", "content": text}) + chunk({}, "stop")
    answer += "data: [DONE]\n\n"
    return Canned("/chat/completions", needle, "text/event-stream", answer.encode())


def check_cline(ctx: Context) -> list[Check]:
    _cline_home(ctx)
    checks: list[Check] = []
    ctx.model.answer_once(_tool_call(ctx.workspace / "README.md"))
    with ctx.launch(["--json", FIRST]) as launch:
        body = "verify: cline hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        outcome: dict[str, str] = {}

        def headless() -> str:
            before = len(ctx.model.requests)
            status, out = run(launch, None, ctx.workspace, 120)
            outcome.update(out=out)
            (ctx.workspace / "cline-headless.log").write_text(launch.redact(out))  # for --keep
            if len(ctx.model.requests) == before:
                raise Unchecked(f"cline made no model request (exit {status}): {_tail(out)}")
            tools = re.findall(r'"toolName":"([a-z_]+)"', out)
            return (
                f"`cline --json '{FIRST}'` ran to its end (exit {status}), its tool calls:"
                f" {sorted(set(tools)) or 'none'}; {len(ctx.model.requests) - before} model"
                " requests"
            )

        checks.append(ctx.check("headless launch: CLINE_DIR and MCP settings", launch, headless))
        if "out" not in outcome:
            return checks

        def mcp() -> str:
            # Cline CLI offers an MCP server's tools as `<server>__<tool>` once its tools/list
            # (which needs the session's credential) answered.
            offered: set[str] = set()
            for _, request in ctx.model.requests:
                offered |= set(re.findall(r'"name":\s*"(pager__[a-z_]+)"', request))
            log = _cline_log(ctx)
            failed = [line for line in log if re.search(r"(?i)mcp", line) and '"level":50' in line]
            if not offered:
                shown = failed or ["no `pager__` tool among the tools offered"]
                raise Rejected("\n".join(line[:400] for line in shown[-6:]))
            return (
                "the server `pager` from CLINE_MCP_SETTINGS_PATH (streamableHttp, with its"
                f" Authorization header) was connected; the model was offered {len(offered)}"
                f" tools: {', '.join(sorted(offered))}"
            )

        checks.append(ctx.check("MCP server from CLINE_MCP_SETTINGS_PATH", launch, mcp))

        def delivery() -> str:
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            path, request = ctx.model.wait_for(body, 10)
            if 'source=\\"PostToolUse\\"' not in request and 'source="PostToolUse"' not in request:
                raise Rejected("the mail reached the model, but not as PostToolUse's context")
            if state != "acknowledged":
                raise Rejected(f"the model request carried the mail, but it is {state}")
            return (
                "mail sent before the launch: after the `read_files` call Cline CLI ran the"
                " PostToolUse hook of the launch's CLINE_DIR/hooks, which printed it as"
                ' {"contextModification": …}; the next model request (POST'
                f' {path}) carried it in <hook_context source="PostToolUse">; acknowledged'
            )

        checks.append(ctx.check("mail through the PostToolUse hook, into the model request",
                                launch, delivery))  # fmt: skip
    checks.append(_typed_in_tui(ctx))
    checks.append(_own_hub(ctx))
    checks.append(_idle_wake(ctx))
    checks.append(_resume_by_id(ctx))
    checks.append(_users_cline_dir(ctx))
    return checks


class Terminal:
    """A harness under a pseudo-terminal (Cline CLI's TUI needs one), its output collected."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        env = {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        self.popen = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.master, self.output = master, b""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def text(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", self.output.decode(errors="replace"))

    def wait_for(self, needle: str, bound: float, after: int = 0) -> int:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            found = self.text().find(needle, after)
            if found >= 0:
                return found
            time.sleep(0.2)
        raise Rejected(f"the TUI never showed {needle!r}:\n{_tail(self.text(), 600)}")

    def ready(self, bound: float) -> None:
        """Until the prompt box takes input ("Ask anything…", or "What can I do for you?"
        once Cline CLI has kept a session): a first start shows a ClinePass offer instead
        ("Press Enter to open, any other key to close"), closed here with Escape."""
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            text = self.text()
            if "any other key to close" in text:
                time.sleep(1)
                os.write(self.master, b"\x1b")
                time.sleep(3)
                return
            if "Ask anything" in text or "What can I do for you?" in text:
                time.sleep(3)  # the box takes input a little after it is drawn
                if "any other key to close" not in self.text():
                    return
            time.sleep(0.5)
        raise Rejected(f"the TUI never showed its prompt box:\n{_tail(self.text(), 600)}")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())
        time.sleep(1.0)  # the TUI takes the text before the Enter
        os.write(self.master, b"\r")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        os.close(self.master)


def _typed_in_tui(ctx: Context) -> Check:
    """In Cline CLI's TUI, mail delivered by PostToolUse sets the identity's loop-guard cause;
    the next prompt typed there starts a run, whose TaskStart hook (`--prompt-only`) must
    report it: the cause is NULL after it."""
    ctx.model.answer_once(_tool_call(ctx.workspace / "README.md", TYPED[0]))
    with ctx.launch([]) as launch:
        body = "verify: cline mail before a typed prompt"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        agent = str(launch.session["agent_id"])

        def typed() -> str:
            hubs: list[str] = []
            terminal = Terminal(launch.argv, launch.env, ctx.workspace)
            try:
                terminal.ready(60)
                terminal.type(TYPED[0])
                if ctx.broker.wait_state(ctx.workspace, message, 60) != "acknowledged":
                    raise Unchecked(f"no delivery in the TUI:\n{_tail(terminal.text(), 600)}")
                try:  # the hook acknowledges once printed, before Cline CLI's next request
                    ctx.model.wait_for(body, 30)
                except Rejected:
                    raise Unchecked(
                        "the mail was acknowledged but reached no model request"
                    ) from None
                hop, cause = ctx.broker.cause(agent)
                if cause is None:
                    raise Unchecked("the delivery set no loop-guard cause")
                shown = terminal.wait_for("no model here", 30)
                terminal.type(TYPED[1])
                terminal.wait_for(TYPED[1], 30, shown)
                cleared = ctx.broker.wait_cause_cleared(agent, 30)
                if cleared is None:
                    raise Rejected(
                        f"after the typed prompt the identity's cause was still cause_hop {hop},"
                        f" cause_id {cause}: the TaskStart hook did not report it"
                    )
            finally:
                terminal.stop()
                hubs += _stop_hub_daemons(ctx)
            return (
                "in the TUI (a pseudo-terminal), the first typed prompt's run got a `read_files`"
                " call, the PostToolUse hook delivered the mail (acknowledged) and set the"
                f" identity's cause (cause_hop {hop}); the second typed prompt started a run"
                " whose TaskStart hook (`pager hook --prompt-only`) reported it: the cause was"
                f" NULL after it. The TUI started {len(hubs)} hub daemon(s), stopped here"
                f" ({'; '.join(hubs)})"
            )

        return ctx.check("typed prompt reported (TaskStart, in the TUI)", launch, typed)


def _hub_daemons(ctx: Context, token: str | None = None) -> dict[int, str]:
    """The hub daemons started with this script's throwaway HOME (pid -> their
    CLINE_HUB_PORT, or "default"): with `token`, those whose environment holds
    PAGER_TOKEN=token; with "", those of a plain `cline` (no PAGER_TOKEN)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--cline-hub-daemon" not in cmdline or f"HOME={ctx.home}".encode() not in environ:
            continue
        held = [v for v in environ if v.startswith(b"PAGER_TOKEN=")]
        if token is not None and held != ([f"PAGER_TOKEN={token}".encode()] if token else []):
            continue
        ports = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"CLINE_HUB_PORT=")]
        found[int(proc.name)] = ports[0].decode() if ports else "default"
    return found


def _wait_hubs(ctx: Context, token: str | None, bound: float) -> dict[int, str]:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if found := _hub_daemons(ctx, token):
            return found
        time.sleep(0.5)
    return {}


def _own_hub(ctx: Context) -> Check:
    """Cline CLI's TUI runs its session in the hub daemon its discovery file names, whatever
    environment that daemon has, and otherwise starts one in the background that outlives it.
    A user's plain `cline` has started one (the decoy). The launch runs its `[launch] before`
    (`cline hub start`, as the wrapper does) and then the TUI: the TUI must run its session
    in the launch's hub (the launch's environment, its host and port), not in the decoy, and
    the launch's hub must be gone once the launch stopped what holds its credential
    (`stop_holders`, as the wrapper does when the harness exits)."""
    decoy_tui = Terminal([str(ctx.bin_dir / "cline")], ctx.env, ctx.workspace)
    try:
        decoys = _wait_hubs(ctx, "", 60)
    finally:
        decoy_tui.stop()
    with ctx.launch([]) as launch:
        token = launch.env["PAGER_TOKEN"]
        env = launch.env
        mine = f"ws://127.0.0.1:{env['CLINE_HUB_PORT']}/hub"

        def own_hub() -> str:
            if not decoys:
                raise Unchecked("the plain TUI started no hub daemon (the decoy)")
            if launch.command.before:
                subprocess.run(
                    launch.command.before, env=env, cwd=ctx.workspace, timeout=60,
                    capture_output=True, check=False,
                )  # fmt: skip
            started = _hub_daemons(ctx, token)
            terminal = Terminal(launch.argv, env, ctx.workspace)
            try:
                terminal.ready(60)
                own = _wait_hubs(ctx, token, 30)
                pid = terminal.popen.pid
            finally:
                terminal.stop()
            host = [
                json.loads(line)
                for line in _cline_log(ctx)
                if f'"pid":{pid},' in line and "runtime host" in line
            ]
            used = [entry.get("url") or entry.get("reason") for entry in host]
            if any(entry.get("url") not in (None, mine) for entry in host):
                raise Rejected(
                    f"the launch's TUI ran its session in a hub daemon not the launch's ({used},"
                    f" the launch's: {mine}); the user's own hub daemon(s): {decoys}"
                )
            if not own:
                raise Rejected("no hub daemon of the launch's ran")
            # What the wrapper does when the harness exits, with the manifest's stop_leftovers.
            stopped = stop_holders(token) if launch.command.stop_leftovers else []
            left = _hub_daemons(ctx, token)
            if left:
                raise Rejected(
                    f"hub daemons holding the launch's credential were left: {left}"
                    f" (stop_leftovers: {launch.command.stop_leftovers})"
                )
            decoys_left = _hub_daemons(ctx, "")
            return (
                f"with a user's hub daemon running ({decoys}), `cline hub start` (the"
                f" launch's `before`) started the launch's hub ({started}, {mine}, the"
                f" launch's environment); the TUI ran its session there ({used}); after the"
                f" TUI exited `stop_holders` stopped {stopped} and no process held the"
                f" credential; the user's hub daemon was untouched ({decoys_left})"
            )

        try:
            return ctx.check("hub daemon: the launch's own, stopped with it", launch, own_hub)
        finally:
            _stop_hub_daemons(ctx)


#: A user manifest put over the built-in for the idle wake check only (a broken copy of the
#: wiring, to see the check reject it): the path of a TOML file, or unset.
BROKEN_MANIFEST = "VERIFY_CLINE_MANIFEST"
#: The prompt the launch's knock sends through the hub (the wake prompt's start).
KNOCK = "[pager] Mail is waiting for you in Pager"
#: Seconds for the wrapper to start the launch's hub and the TUI to draw its prompt box.
TUI_BOUND = 90.0


def _idle_wake(ctx: Context) -> Check:
    """The real `pager cline` wrapper with Cline CLI's TUI in a pseudo-terminal: the launch
    starts its own hub first (`[launch] before`), so the TUI's session runs there. After one
    typed prompt the session idles; mail is sent, and the wrapper's knock through the hub must
    start a turn (the recorder answers its first request with a `read_files` call) whose
    PostToolUse hook puts the mail into the next model request (acknowledged). Twice: the
    second knock's turn, with the first mail's cause set, must not be reported as typed by its
    TaskStart hook (the identity's chain is never reset)."""
    name = "verify-cline-idle"
    broken = os.environ.get(BROKEN_MANIFEST)
    if broken:  # a broken copy over the built-in, in the throwaway home's manifests
        manifests = ctx.home / ".config" / "pager" / "implementations"
        manifests.mkdir(parents=True, exist_ok=True)
        shutil.copy(broken, manifests / "cline.toml")
    argv = [sys.executable, "-m", "pager", "cline", "--session-name", name]
    shown = ["pager", "cline", "--session-name", name]
    terminal = Terminal(argv, ctx.env, ctx.workspace)
    try:
        observed = _woken(ctx, terminal, name)
        verdict = ACCEPTED
    except Rejected as exc:
        verdict, observed = REJECTED, str(exc)
    except Unchecked as exc:
        verdict, observed = UNCHECKED, str(exc)
    except Exception as exc:  # the check itself broke: say so, do not guess a verdict
        verdict, observed = UNCHECKED, f"the check failed: {type(exc).__name__}: {exc}"
    finally:
        terminal.stop()
        (ctx.workspace / "cline-idle-tui.log").write_text(terminal.text())  # for --keep
        if broken:
            (ctx.home / ".config" / "pager" / "implementations" / "cline.toml").unlink()
        left = _stop_hub_daemons(ctx)
    if left and verdict == ACCEPTED:
        verdict, observed = REJECTED, f"{observed}; but hub daemons were left: {left}"
    return Check("idle wake (through the launch's hub)", verdict, observed, shown, {})


def _woken(ctx: Context, terminal: Terminal, name: str) -> str:
    terminal.ready(TUI_BOUND)
    hubs = _hub_daemons(ctx)
    # Cline CLI 3.0.65's TUI shows a session's turns once it ran one itself: a knock before
    # the first typed prompt runs (the mail is delivered) without being shown.
    terminal.type("verify: a first typed prompt")
    terminal.wait_for("no model here", 60)
    time.sleep(3)  # the refused run has ended: the session idles
    agent = _agent_id(ctx, name)
    first = _knocked(ctx, terminal, name, "verify: mail for the idle cline")
    second = _knocked(ctx, terminal, name, "verify: a second knock for cline")
    hop, cause, resets = _guard(ctx, agent)
    # Cline CLI's own: its hub lets in a client without the token whose Origin names a
    # loopback host (docs/security.md); said here, so that a change is seen.
    stranger = _tokenless(ctx)
    if resets is not None or cause is None:
        raise Rejected(
            f"both knocks' turns delivered their mail, but the identity's chain was reset"
            f" (chain_resets {resets}, cause_id {cause}): the knock's turn was reported as"
            " typed by a person (its TaskStart hook did not take the knock's mark)"
        )
    return (
        f"the wrapper started the launch's hub before the TUI ({hubs}); after one typed"
        f" prompt the TUI idled; mail sent to {name}: {first}. Again, with that mail's cause"
        f" set: {second}; the chain was never reset (chain_resets NULL; cause_hop {hop}):"
        " the knock's TaskStart was not reported as typed. Cline CLI's hub answered a client"
        f" without its token (Origin: http://localhost): {stranger}"
    )


def _tokenless(ctx: Context) -> str:
    """What the launch's hub answers a WebSocket upgrade without its token, with an Origin
    header naming localhost (any local process can send one): its status line."""
    for pid in _hub_daemons(ctx):
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        named = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"CLINE_HUB_DISCOVERY_PATH=")]
        if not named:
            continue
        url = json.loads(Path(named[0].decode()).read_text())["url"]
        host, _, port = url.removeprefix("ws://").partition("/")[0].rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(
                f"GET /hub HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\nOrigin: http://localhost\r\n\r\n".encode()
            )
            return conn.recv(4096).decode(errors="replace").split("\r\n")[0] or "closed"
    raise Unchecked("no hub daemon of the launch's was found to try")


def _knocked(ctx: Context, terminal: Terminal, name: str, body: str) -> str:
    """Mail sent to the idle session reached a model request through a knock's turn and was
    acknowledged: what was seen."""
    ctx.model.answer_once(_tool_call(ctx.workspace / "README.md", KNOCK))
    done = f"verify-turn-{len(ctx.model.requests)}-ended"  # no spaces: the TUI may drop them
    ctx.model.answer_once(_text(body, done))  # the turn ends: the session idles again
    shown = len(terminal.text())
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
            f" message is {state}); the terminal showed:\n{_tail(terminal.text(), 600)}"
        ) from None
    took = time.monotonic() - sent_at
    if KNOCK not in request:
        raise Rejected(f"the mail reached a model request (POST {path}) without the knock's prompt")
    if 'source=\\"PostToolUse\\"' not in request and 'source="PostToolUse"' not in request:
        raise Rejected("the mail reached the model, but not as PostToolUse's context")
    state = ctx.broker.wait_state(ctx.workspace, message, 20)
    if state != "acknowledged":
        raise Rejected(f"the model request (POST {path}) carried the mail; it is {state}")
    terminal.wait_for(done, 30, shown)
    time.sleep(2)  # the hub marks the session idle once the turn ended
    return (
        f"{took:.1f} s later a model request (POST {path}) carried it, in <hook_context"
        f' source="PostToolUse">, in the turn of the knock\'s `{KNOCK} …` prompt (sent'
        " through the launch's hub); acknowledged"
    )


def _agent_id(ctx: Context, name: str) -> str:
    uri = ctx.broker.paths.database.as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
        row = conn.execute("SELECT id FROM identities WHERE alias = ?", (name,)).fetchone()
    if row is None:
        raise Unchecked(f"no identity {name} in the broker's pager.db")
    return str(row[0])


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


def _stop_hub_daemons(ctx: Context) -> list[str]:
    """Cline CLI's TUI starts its hub daemon (`cline --cline-hub-daemon`), which outlives it:
    stop the ones started with this script's throwaway HOME, by their pid."""
    stopped = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--cline-hub-daemon" in cmdline and f"HOME={ctx.home}".encode() in environ:
            names = sorted({v.split(b"=")[0].decode() for v in environ if v.startswith(b"PAGER_")})
            cline_dir = any(v.startswith(b"CLINE_DIR=") for v in environ)
            stopped.append(f"pid {proc.name}, its environment: {names}, CLINE_DIR: {cline_dir}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _hub_daemons(ctx) and time.monotonic() < deadline:  # gone before the next check
        time.sleep(0.2)
    return stopped


def _cline_log(ctx: Context) -> list[str]:
    path = ctx.home / ".cline" / "data" / "logs" / "cline.log"
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def _resume_by_id(ctx: Context) -> Check:
    """Why there is no [wake.launch]: `cline --id ID PROMPT` resumes interactively only."""
    sessions = sorted((ctx.home / ".cline" / "data" / "sessions").glob("*"))
    name = "wake run: headless resume"
    if not sessions:
        return Check(name, UNCHECKED, "Cline CLI kept no session in ~/.cline/data/sessions")
    key = sessions[-1].name
    with ctx.launch(["--json", "--id", key, "verify: resumed"]) as launch:

        def resume() -> str:
            status, out = run(launch, None, ctx.workspace, 60)
            said = _one_line(out, 200)
            if status == 0:
                raise Rejected(f"`cline --json --id {key} PROMPT` ran (exit 0): add [wake.launch]")
            raise Unchecked(
                f"no headless resume in Cline CLI: `cline --json --id {key} PROMPT` exits"
                f" {status}: {said}; without --json: `interactive mode requires a TTY`. The"
                " manifest has no [wake.launch]"
            )

        return ctx.check(name, launch, resume)


def _users_cline_dir(ctx: Context) -> Check:
    """What the launches left in the user's `~/.cline`: no server or hook of Pager's, and the
    sessions kept in the user's data directory (through the launch's link)."""
    own = ctx.home / ".cline"
    name = "the user's ~/.cline after the launches"
    left = []
    settings = own / "data" / "settings" / "cline_mcp_settings.json"
    if settings.exists() and "pager" in settings.read_text():
        left.append(f"a `pager` server in {settings.relative_to(ctx.home)}")
    if any((own / "hooks").glob("*")):
        left.append(f"hooks: {sorted(p.name for p in (own / 'hooks').iterdir())}")
    sessions = sorted((own / "data" / "sessions").glob("*"))
    if not sessions:
        left.append("no session kept in ~/.cline/data/sessions (the data link failed?)")
    if left:
        return Check(name, REJECTED, "; ".join(left))
    entries = sorted(p.name for p in own.iterdir())
    return Check(
        name,
        ACCEPTED,
        f"no `pager` server in its MCP settings, no hooks; its entries {entries}; the launches'"
        f" sessions kept in ~/.cline/data/sessions ({len(sessions)})",
    )
