"""Verify Pager's per-launch wiring against the REAL harness binaries (a developer tool).

    .venv/bin/python scripts/verify_harnesses.py [--json] [--only ID …] [--upgrade]
                                                 [--version ID=X.Y.Z …] [--keep]

Installs each harness's npm package into `.cache/harnesses/<id>/` (the version found the first
time is pinned in `.cache/harnesses/versions.json`; `--upgrade` takes the registry's latest
again, `--version` names one), starts a real broker (`pager serve`) in a temporary PAGER_HOME,
and for each harness builds the command `pager <id> -- ARGS…` would run, with the wrapper's own
functions (`pager.launch.wrapper.plan_launch` / `harness_command`, the connector writing its
files into a private launch directory), where ARGS are the harness's own inspection commands
(`codex mcp get`, `opencode mcp list`, a headless `claude -p`, …). Each check reports:

- accepted: the harness parsed the wiring and did with it what Pager needs (connected to the
  MCP endpoint with the session's token, ran Pager's hooks and took their output, loaded the
  plugin or extension and let it deliver mail);
- rejected: the harness refused or misread it (its message is reported);
- could not check: why not.

No model is reached: every harness runs with a throwaway HOME (no credentials of yours) and a
dummy key aimed at a local *recorder*, a loopback HTTP server that records each model request
and refuses it (HTTP 400). So a check can see what would have reached the model: the mail a hook
or plugin added, and Pager's tools among the tools offered. Mail is sent to each launch's
session by a second session and followed to `acknowledged`. For OpenCode and Pi, a prompt is
then typed into the same session (OpenCode's HTTP API, Pi's RPC `prompt`), and the broker's
`pager.db` (read-only) must show the identity's loop-guard cause set by the delivery and cleared
by the typed prompt's report (SPEC §8.1).

Wake runs (docs/wake.md), each harness: a first headless run leaves a conversation (Gemini CLI
keeps none whose only model request failed: the recorder answers that one request, once); the
identity's session ends and mail is sent to it; then the command the broker would run for it
(the executable, the `[launch]` args and the manifest's `[wake.launch]` args, the connector
told it is headless, `{prompt}` the wake prompt) must resume that conversation, put the mail
into the model request (acknowledged), leave the identity's loop-guard cause set and end by
itself within WAKE_BOUND. For Codex, the manifest's `[wake] command` (the knock) is also run
against a thread idle in `codex app-server`, which must take a turn carrying the mail.

With --keep, the run directory (`.cache/harnesses/run-*`) stays: the broker's log, each
harness's home and workspace, Claude Code's debug logs, the output of Gemini CLI, of
`opencode serve` and of Pi's RPC mode, the last wake run's output (`workspace-<id>/wake-run.log`),
and the recorded model requests (`workspace-<id>/model-requests.jsonl`).

Not part of `./scripts/test`: it needs npm, several hundred MB of packages and a few minutes.
Exit status: 0 when nothing was rejected, 1 when something was, 2 on a usage error.
See docs/implementations/README.md ("Checking the wiring against the real harnesses").
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import attrs
import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pager.client import BrokerUnreachable, request_json  # noqa: E402
from pager.implementations import discover as discover_implementations  # noqa: E402
from pager.implementations.launching import launch_spec  # noqa: E402
from pager.implementations.templates import render  # noqa: E402
from pager.launch.discovery import BrokerLocator  # noqa: E402
from pager.launch.discovery import discover as discover_broker  # noqa: E402
from pager.launch.paths import StatePaths  # noqa: E402
from pager.launch.relay import Relay  # noqa: E402
from pager.launch.wake_prompt import wake_prompt  # noqa: E402
from pager.launch.wrapper import (  # noqa: E402
    HarnessCommand,
    LaunchPlan,
    LaunchSpec,
    TerminalNotices,
    harness_command,
    launch_values,
    plan_launch,
    private_directory,
    register,
    registration,
)
from pager.launch.wrapper_args import Conversation, parse_wrapper_args  # noqa: E402
from pager.session_client import SessionClient  # noqa: E402
from pager.versions import VERSION as PAGER_VERSION  # noqa: E402

CACHE = ROOT / ".cache" / "harnesses"
PINS = CACHE / "versions.json"
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "opencode": "opencode-ai",
    "pi": "@mariozechner/pi-coding-agent",
    "copilot": "@github/copilot",  # checks: scripts/verify_copilot.py
    "qwen": "@qwen-code/qwen-code",
    "kilo": "@kilocode/cli",  # checks: scripts/verify_kilo.py
    "cline": "cline",  # checks: scripts/verify_cline.py
}
#: The version taken when `.cache/harnesses/versions.json` pins none (instead of the registry's
#: latest): @kilocode/cli 7.8.1's linux-x64 platform package is missing from the registry.
PINNED = {"kilo": "7.7.7"}
ACCEPTED, REJECTED, UNCHECKED = "accepted", "rejected", "could not check"
MAIL_BOUND = 45.0  # seconds for mail to reach `acknowledged` through a harness
PROMPT_BOUND = 30.0  # seconds for a typed prompt's report to clear the loop-guard cause
WAKE_BOUND = 60.0  # seconds a wake run may take to end by itself once the model refused
BROKER_BOUND = 30.0  # seconds for one of the script's own requests to the broker


# ---------------------------------------------------------------------------------- recorder


@dataclass
class Canned:
    """A fixed answer the recorder gives once, instead of its refusal, to the first request
    whose path contains `path` and whose body contains `needle` (see `Recorder.answer_once`)."""

    path: str
    needle: str
    content_type: str
    body: bytes


class Recorder:
    """A stand-in model endpoint on a loopback port: it records each request a harness makes
    to its model and refuses it (HTTP 400), so a check can see what would have reached the
    model (the mail a hook or plugin added) without any model. A check may have it give one
    fixed answer instead (`answer_once`): no model either."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []  # (path, body)
        self.canned: list[Canned] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                recorder.requests.append((self.path, body))
                canned = recorder.take_canned(self.path, body)
                if canned is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", canned.content_type)
                    self.send_header("Content-Length", str(len(canned.body)))
                    self.end_headers()
                    self.wfile.write(canned.body)
                    return
                error = {"code": 400, "type": "invalid_request_error"}
                error |= {"status": "INVALID_ARGUMENT", "message": "pager-verify: no model here"}
                answer = json.dumps({"error": error}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer_once(self, canned: Canned) -> None:
        with self.lock:
            self.canned.append(canned)

    def take_canned(self, path: str, body: str) -> Canned | None:
        with self.lock:
            for canned in self.canned:
                if canned.path in path and canned.needle in body:
                    self.canned.remove(canned)
                    return canned
        return None

    def wait_for(self, needle: str, bound: float) -> tuple[str, str]:
        """The first recorded request whose body contains `needle`; Rejected after `bound`."""
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            for path, body in list(self.requests):
                if needle in body:
                    return path, body
            time.sleep(0.2)
        paths = ", ".join(path for path, _ in self.requests) or "none"
        raise Rejected(f"no model request carried {needle!r} (requests seen: {paths})")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------------ results


@dataclass
class Check:
    name: str
    verdict: str
    observed: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # the variables Pager's wiring sets


@dataclass
class Report:
    id: str
    package: str
    version: str | None
    verdict: str = UNCHECKED
    checks: list[Check] = field(default_factory=list)

    def conclude(self) -> None:
        verdicts = {check.verdict for check in self.checks}
        self.verdict = (
            REJECTED if REJECTED in verdicts else ACCEPTED if ACCEPTED in verdicts else UNCHECKED
        )


class Unchecked(Exception):
    """This check cannot be made here; the message says why."""


class Rejected(Exception):
    """The harness refused or misread the wiring; the message is what it said."""


# ---------------------------------------------------------------------------------- install


def npm_install(ids: Sequence[str], upgrade: bool, wanted: dict[str, str]) -> dict[str, Any]:
    """{id: (version, bin dir) | error text}; installs what is missing or not the pinned one."""
    npm = shutil.which("npm")
    if npm is None:
        return {i: "npm is not on PATH (install Node.js 20 or later)" for i in ids}
    pins: dict[str, str] = json.loads(PINS.read_text()) if PINS.exists() else {}
    result: dict[str, Any] = {}
    for ident in ids:
        package = PACKAGES[ident]
        version = wanted.get(ident) or (None if upgrade else pins.get(ident, PINNED.get(ident)))
        if version is None:
            done = _quiet([npm, "view", package, "version"], timeout=120)
            if done.returncode != 0 or not done.stdout.strip():
                result[ident] = f"`npm view {package} version` failed: {_tail(done.stderr)}"
                continue
            version = done.stdout.strip().splitlines()[-1]
        prefix = CACHE / ident
        if _installed_version(prefix, package) != version:
            progress(f"npm install {package}@{version}")
            prefix.mkdir(parents=True, exist_ok=True)
            done = _quiet(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--save-exact",
                    f"{package}@{version}",
                ],
                timeout=900,
            )
            if done.returncode != 0:
                result[ident] = f"npm install {package}@{version} failed: {_tail(done.stderr)}"
                continue
        pins[ident] = version
        result[ident] = (version, prefix / "node_modules" / ".bin")
    CACHE.mkdir(parents=True, exist_ok=True)
    PINS.write_text(json.dumps(pins, indent=2, sort_keys=True) + "\n")
    return result


def _installed_version(prefix: Path, package: str) -> str | None:
    try:
        data = json.loads((prefix / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


# ----------------------------------------------------------------------------------- broker


class Broker:
    """A real `pager serve` in a temporary PAGER_HOME, and a second session that sends mail."""

    def __init__(self, home: Path, log: Path) -> None:
        self.paths = StatePaths(home)
        home.mkdir(mode=0o700, parents=True)
        env = {**os.environ, "PAGER_HOME": str(home)}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pager", "serve", "--log-level", "debug"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while (found := discover_broker(self.paths).broker) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"`pager serve` did not start; see {log}")
            time.sleep(0.2)
        self.url, self.mcp_url = found.url, found.mcp_url
        self.secret = self.paths.secret.read_text().strip()
        self._senders: dict[str, str] = {}

    def stop(self) -> None:
        _stop(self.process)

    def tool(self, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": name, "arguments": arguments}
        # A loaded machine (other harnesses, other checks) can take longer than the client's 2 s.
        status, answer = request_json(
            self.url, "POST", "/mcp", token=token, body=body, timeout=BROKER_BOUND
        )
        result = answer.get("result") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(result, dict) or result.get("isError"):
            raise RuntimeError(f"{name} failed ({status}): {answer}")
        return dict(result.get("structuredContent") or {})

    def tool_names(self, token: str) -> list[str]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        _, answer = request_json(self.url, "POST", "/mcp", token=token, body=body)
        return sorted(tool["name"] for tool in answer["result"]["tools"])

    def sender(self, workspace: Path) -> str:
        """The token of a session in `workspace` that sends the checks' mail."""
        if str(workspace) not in self._senders:
            body = {"workspace": str(workspace), "implementation": "shell"}
            body["session_name"] = f"verify-sender-{len(self._senders)}"
            self._senders[str(workspace)] = registered(self, body).token
        return self._senders[str(workspace)]

    def send(self, workspace: Path, to: str, body: str) -> str:
        sent = self._as_sender(workspace, "send", {"to": to, "body": body})
        return str(sent["message_id"])

    def state(self, workspace: Path, message_id: str) -> str:
        status = self._as_sender(workspace, "message_status", {"message_id": message_id})
        return str(status.get("state"))

    def _as_sender(self, workspace: Path, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call as the sender, which rejoins once when its lease lapsed (it sends no
        heartbeats, and slow checks can outlast the lease)."""
        try:
            return self.tool(self.sender(workspace), name, arguments)
        except RuntimeError as exc:
            if "'expired'" not in str(exc):
                raise
        self._senders.pop(str(workspace), None)
        return self.tool(self.sender(workspace), name, arguments)

    def wait_state(self, workspace: Path, message_id: str, bound: float = MAIL_BOUND) -> str:
        deadline = time.monotonic() + bound
        state = self.state(workspace, message_id)
        while state != "acknowledged" and time.monotonic() < deadline:
            time.sleep(0.5)
            state = self.state(workspace, message_id)
        return state

    def cause(self, agent_id: str) -> tuple[Any, Any]:
        """The identity's loop-guard cause (`cause_hop`, `cause_id`) as the broker's `pager.db`
        holds it (SPEC §8.1), read read-only: (None, None) once a typed prompt has cleared it."""
        uri = self.paths.database.as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
            row = conn.execute(
                "SELECT cause_hop, cause_id FROM identities WHERE id = ?", (agent_id,)
            ).fetchone()
        if row is None:
            raise Unchecked(f"the identity {agent_id} is not in the broker's pager.db")
        return row[0], row[1]

    def wait_cause_cleared(self, agent_id: str, bound: float = PROMPT_BOUND) -> float | None:
        """Seconds until the identity's cause was NULL, or None if it still was not after
        `bound`."""
        start = time.monotonic()
        while True:
            if self.cause(agent_id) == (None, None):
                return time.monotonic() - start
            if time.monotonic() - start > bound:
                return None
            time.sleep(0.5)


# ----------------------------------------------------------------------------------- launch


@attrs.frozen
class Launch:
    """One `pager <id> -- ARGS…` as the wrapper would run it (not started)."""

    id: str
    plan: LaunchPlan
    session: dict[str, Any]
    command: HarnessCommand
    directory: str  # the private launch directory (the connector's files)
    relay: Relay  # the launch relay the harness is wired to, as in a real launch

    @property
    def argv(self) -> list[str]:
        return list(self.command.argv)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.command.env)

    @property
    def address(self) -> str:
        return str(self.session["address"])

    def shown(self, argv: Sequence[str] | None = None) -> list[str]:
        """The command line for the report (the program's name only, the launch directory
        shortened)."""
        program, *args = argv if argv is not None else self.argv
        return [os.path.basename(program), *(self.short(arg) for arg in args)]

    def wiring_env(self) -> dict[str, str]:
        """What the wrapper added to the harness's environment, the token hidden."""
        added = {
            key: value
            for key, value in self.command.env.items()
            if key.startswith(("PAGER_", "GEMINI_CLI_", "OPENCODE_CONFIG", "KILO_CONFIG"))
            and key != "PAGER_HOME"
        }
        return {key: self.short(value) for key, value in added.items()}

    def short(self, text: str) -> str:
        return self.redact(text.replace(self.directory, "<launch-dir>"))

    def redact(self, text: str) -> str:
        text = text.replace(str(self.session["token"]), "<token>")
        return text.replace(self.relay.credential, "<relay-credential>")


class Context:
    """What every check needs: the broker, the throwaway home, the harness's program."""

    def __init__(self, broker: Broker, run_dir: Path, ident: str, bin_dir: Path) -> None:
        self.broker, self.id, self.bin_dir = broker, ident, bin_dir
        self.registry = discover_implementations(entry_points=False, user_dir=run_dir / "none")
        self.manifest = self.registry.get(ident).manifest
        self.spec = launch_spec(self.manifest)
        self.home = run_dir / f"home-{ident}"
        self.workspace = run_dir / f"workspace-{ident}"
        for directory in (self.home, self.workspace, self.home / ".config"):
            directory.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{_node_path()}",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "PAGER_HOME": str(broker.paths.root),  # where the hooks find this broker
        }
        self._launches = 0
        self.model = Recorder()  # where the harness's model requests go

    def close(self) -> None:
        self.model.stop()
        with (self.workspace / "model-requests.jsonl").open("w") as file:  # for --keep
            for path, body in self.model.requests:
                file.write(json.dumps({"path": path, "body": body}) + "\n")

    @contextlib.contextmanager
    def launch(
        self, args: Sequence[str], spec: LaunchSpec | None = None, *, headless: bool = False
    ) -> Iterator[Launch]:
        """`pager <id> --session-name … -- ARGS…`: registered, connector run, not started.
        `headless`: the connector leaves out what waits for a person, as for a wake run."""
        spec = spec or self.spec
        self._launches += 1
        name = f"verify-{self.id}-{self._launches}"
        plan = plan_launch(spec, ["--session-name", name, "--", *args])
        with self._launched(spec, plan, headless=headless) as launch:
            yield launch

    @contextlib.contextmanager
    def wake_launch(self, conversation_key: str, session_name: str) -> Iterator[Launch]:
        """A wake run of the identity named `session_name` (docs/wake.md), as the broker starts
        it: registered with the conversation it resumes, the connector told it is headless, the
        command the executable, the `[launch]` args and the manifest's `[wake.launch]` args,
        with `{prompt}` the wake prompt."""
        wake = self.manifest.wake.launch
        if wake is None:
            raise Unchecked(f"{self.manifest.name}'s manifest has no [wake.launch]")
        executable = self.spec.executable
        if executable is None:
            raise Unchecked("the manifest takes its program from the arguments")
        plan = LaunchPlan(
            parse_wrapper_args(["--session-name", session_name]),
            Conversation(conversation_key, (), chosen=False),
            executable,
            (),
        )
        with self._launched(self.spec, plan, headless=True, templates=wake.args) as launch:
            yield launch

    @contextlib.contextmanager
    def _launched(
        self,
        spec: LaunchSpec,
        plan: LaunchPlan,
        *,
        headless: bool,
        templates: Sequence[str] = (),
    ) -> Iterator[Launch]:
        program = shutil.which(plan.executable, path=self.env["PATH"])
        if program is None:
            raise Unchecked(f"{plan.executable} is not installed in {self.bin_dir}")
        broker = self.broker
        body = registration(spec, plan, str(self.workspace))
        client = registered(broker, body)
        assert client.answer is not None
        session = client.answer
        try:
            with (
                private_directory() as directory,
                serving_relay(client, Path(directory)) as relay,
            ):
                token_file = Path(directory) / "session-token"
                values = launch_values(
                    relay.url, relay.credential, session, broker.paths, plan, spec, token_file
                )
                if templates:  # a wake run: `{prompt}` as the broker fills it
                    values["prompt"] = wake_prompt(str(session["address"]))
                command = harness_command(
                    spec,
                    program,
                    plan.args,
                    values,
                    directory,
                    self.env,
                    headless=headless,
                    templates=templates,
                )
                yield Launch(self.id, plan, session, command, directory, relay)
        finally:
            trio.run(client.detach)

    def check(
        self, name: str, launch: Launch, body: Callable[[], str], argv: Sequence[str] | None = None
    ) -> Check:
        """Run one check's body: its return value is what was observed (accepted)."""
        try:
            verdict, observed = ACCEPTED, body()
        except Rejected as exc:
            verdict, observed = REJECTED, str(exc)
        except Unchecked as exc:
            verdict, observed = UNCHECKED, str(exc)
        except Exception as exc:  # the check itself broke: say so, do not guess a verdict
            verdict, observed = UNCHECKED, f"the check failed: {type(exc).__name__}: {exc}"
        return Check(
            name, verdict, launch.redact(observed), launch.shown(argv), launch.wiring_env()
        )


def registered(broker: Broker, body: dict[str, Any]) -> SessionClient:
    """A session registered as `pager <implementation>` registers it (LaunchError if refused)."""
    found = discover_broker(broker.paths).broker
    if found is None:
        raise Unchecked("the broker stopped proving itself")
    client = SessionClient(BrokerLocator(broker.paths, found), body, notices=TerminalNotices())
    trio.run(register, client)
    return client


@contextlib.contextmanager
def serving_relay(wrapped: SessionClient, directory: Path) -> Iterator[Relay]:
    """The launch relay of one launch, served by a thread of its own while the block runs,
    and the launch's token file in `directory`, as `pager <implementation>` has them."""
    relay = Relay.bind()
    wrapped.token_file = directory / "session-token"
    wrapped.write_token_file()
    started = threading.Event()
    stop: list[Callable[[], None]] = []

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            token = trio.lowlevel.current_trio_token()
            stop.append(
                lambda: trio.from_thread.run_sync(nursery.cancel_scope.cancel, trio_token=token)
            )
            await nursery.start(relay.serve, wrapped)
            started.set()

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield relay
    finally:
        if stop:
            stop[0]()
        thread.join(10)


# --------------------------------------------------------------------------------- processes


class Process:
    """A harness process of one check; its output lines are collected as they come."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.output: list[str] = []
        self.popen = subprocess.Popen(
            list(argv),
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its own group: stopping it stops its children too
        )
        for name, stream in (("out", self.popen.stdout), ("err", self.popen.stderr)):
            threading.Thread(target=self._read, args=(name, stream), daemon=True).start()

    def _read(self, name: str, stream: Any) -> None:
        for line in stream:
            self.output.append(line)
            self.lines.put((name, line.rstrip("\n")))

    def write(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def expect(self, predicate: Callable[[str, str], bool], bound: float, what: str) -> str:
        """The first line (stream, text) for which `predicate` holds; Rejected after `bound`."""
        deadline = time.monotonic() + bound
        while (left := deadline - time.monotonic()) > 0:
            try:
                stream, line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.popen.poll() is not None and self.lines.empty():
                    break
                continue
            if predicate(stream, line):
                return line
        ended = self.popen.poll()
        state = f"it exited with status {ended}" if ended is not None else f"after {bound:.0f} s"
        raise Rejected(f"{what} did not happen ({state}); last output:\n{self.tail()}")

    def tail(self, lines: int = 12) -> str:
        return "".join(self.output[-lines:]).strip()[-3000:]

    def stop(self) -> None:
        _stop(self.popen)


def _stop(process: subprocess.Popen[Any]) -> None:
    """Stop a process this script started, and its group (it was started in a new session)."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait)
            return


def run(launch: Launch, argv: Sequence[str] | None, cwd: Path, bound: float) -> tuple[int, str]:
    """Run a harness command to its end; (status, stdout + stderr)."""
    process = Process(argv if argv is not None else launch.argv, launch.env, cwd)
    assert process.popen.stdin is not None
    process.popen.stdin.close()
    try:
        status = process.popen.wait(bound)
    except subprocess.TimeoutExpired:
        process.stop()
        raise Rejected(f"still running after {bound:.0f} s:\n{process.tail()}") from None
    time.sleep(0.1)  # the reader threads drain the pipes
    return status, "".join(process.output)


class JsonRpc:
    """Codex's app-server protocol: JSON-RPC lines over the process's stdio."""

    def __init__(self, process: Process) -> None:
        self.process, self.next_id = process, 0
        self.notes: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any], bound: float = 60) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.process.write(json.dumps({"id": ident, "method": method, "params": params}))
        line = self.process.expect(
            lambda stream, text: stream == "out" and self._answer(text, ident), bound, method
        )
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise Rejected(f"{method}: {answer['error']}")
        return dict(answer["result"])

    def notify(self, method: str) -> None:
        self.process.write(json.dumps({"method": method}))

    def wait_note(
        self, predicate: Callable[[dict[str, Any]], bool], bound: float, what: str
    ) -> dict[str, Any]:
        for note in self.notes:
            if predicate(note):
                return note
        line = self.process.expect(
            lambda stream, text: stream == "out" and self._note(text, predicate), bound, what
        )
        return dict(json.loads(line))

    def _answer(self, text: str, ident: int) -> bool:
        message = _json(text)
        if message is None:
            return False
        if "id" not in message:
            self.notes.append(message)
        return message.get("id") == ident

    def _note(self, text: str, predicate: Callable[[dict[str, Any]], bool]) -> bool:
        message = _json(text)
        if message is None or "id" in message:
            return False
        self.notes.append(message)
        return predicate(message)


# ---------------------------------------------------------------------------------- helpers


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _quiet(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"timed out after {timeout} s")


def _tail(text: str, chars: int = 800) -> str:
    return text.strip()[-chars:]


def _node_path() -> str:
    """The PATH entries a harness needs besides its own bin directory (node, sh, git)."""
    wanted = ("node", "sh", "git", "env")
    dirs = [str(Path(found).parent) for tool in wanted if (found := shutil.which(tool))]
    return os.pathsep.join(dict.fromkeys([*dirs, "/usr/bin", "/bin"]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _grep(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def progress(text: str) -> None:
    if not QUIET:
        print(f"· {text}", file=sys.stderr, flush=True)


QUIET = False


# -------------------------------------------------------------------------------- wake runs


@dataclass
class WakeSetup:
    """How a harness's wake check makes the conversation its wake run resumes."""

    #: `pager <id> -- ARGS…` of a first run, headless, that leaves a conversation behind
    #: (`{first}` in an argument is FIRST_PROMPT)
    args: list[str]
    #: the conversation that run left, from the launch and its output, and where it is kept;
    #: Unchecked when there is none
    find: Callable[[Launch, str], tuple[str, str]]
    #: how Pager's wiring puts the waiting mail before the model in a wake run (for the report)
    how: str
    #: the recorder's one answer for the first run (a harness that keeps no conversation whose
    #: only model request was refused), or None
    canned: Canned | None = None
    #: lines of the wake run's output that show Pager's wiring at work (a regular expression)
    evidence: str | None = None


FIRST_PROMPT = "verify: a conversation to resume"


def check_wake(ctx: Context, setup: WakeSetup) -> list[Check]:
    """A wake run (docs/wake.md) against the real harness: a first headless run leaves a
    conversation; the identity's session ends; mail is sent to it; then the command the broker
    would run for it (`[wake.launch]`, the connector told it is headless, `{prompt}` the wake
    prompt) must resume that conversation, put the mail before the model, not count the wake
    prompt as typed, and end by itself once the model refused."""
    if ctx.manifest.wake.launch is None:
        return [
            Check(
                "wake run: headless resume",
                UNCHECKED,
                f"{ctx.manifest.name}'s manifest has no [wake.launch] (no headless resume)",
            )
        ]
    checks: list[Check] = []
    first: dict[str, str] = {}
    if setup.canned is not None:
        ctx.model.answer_once(setup.canned)
    args = [arg.replace("{first}", FIRST_PROMPT) for arg in setup.args]
    with ctx.launch(args, headless=True) as launch:

        def conversation() -> str:
            status, out = run(launch, None, ctx.workspace, WAKE_BOUND)
            key, kept = setup.find(launch, out)
            session = launch.session
            first.update(key=key, name=str(session["alias"]), agent=str(session["agent_id"]))
            answered = "answered once by the recorder" if setup.canned else "refused"
            return (
                f"a first headless run (exit {status}, its model request {answered}) left the"
                f" conversation {key} ({kept})"
            )

        checks.append(ctx.check("wake run: a conversation to resume", launch, conversation))
    if not first:
        return checks
    with ctx.wake_launch(first["key"], first["name"]) as launch:
        body = "verify: mail that waits for a wake run"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        before = len(ctx.model.requests)
        ran: dict[str, Any] = {}

        def resume() -> str:
            if launch.session["agent_id"] != first["agent"]:
                raise Unchecked(f"the wake run registered as {launch.session['agent_id']}")
            start = time.monotonic()
            status, out = run(launch, None, ctx.workspace, WAKE_BOUND)
            took = time.monotonic() - start
            ran.update(status=status, out=out)
            (ctx.workspace / "wake-run.log").write_text(launch.redact(out))  # for --keep
            requests = ctx.model.requests[before:]
            if not requests:
                raise Rejected(f"exit {status} after {took:.1f} s, no model request:\n{_tail(out)}")
            prompt = wake_prompt(launch.address)[:40]
            resumed = [p for p, b in requests if _carries(b, prompt) and _carries(b, FIRST_PROMPT)]
            if not resumed:
                raise Rejected(
                    f"exit {status} after {took:.1f} s; no model request carried both the wake"
                    f" prompt and the first run's ({len(requests)} requests): not the"
                    f" conversation {first['key']}?\n{_tail(out)}"
                )
            plain = re.sub(r"\x1b\[[0-9;]*m", "", out).strip()
            last = _one_line(["", *plain.splitlines()][-1], 160) or "no output"
            return (
                f"resumed conversation {first['key']} headless and ended by itself after"
                f" {took:.1f} s (exit {status}, its last line: {last}); its model request (POST"
                f" {resumed[0]}) carried the wake prompt after the first run's"
            )

        checks.append(ctx.check("wake run: headless resume ends by itself", launch, resume))

        def mail() -> str:
            if not ran:
                raise Unchecked("the wake run did not get that far")
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            carried = [p for p, b in ctx.model.requests[before:] if _carries(b, body)]
            if not carried:
                raise Rejected(f"no model request of the run carried the mail (it is {state})")
            if state != "acknowledged":
                raise Rejected(f"the model request carried the mail, but it is {state}")
            hop, cause = ctx.broker.cause(first["agent"])
            if cause is None:
                raise Rejected(
                    "the mail reached the model and was acknowledged, but the identity's"
                    " loop-guard cause was NULL after the run: the wake prompt was reported as"
                    " typed by a person (SPEC §8.1)"
                )
            shown = _grep(str(ran["out"]), setup.evidence) if setup.evidence else []
            said = f" (its output: {'; '.join(line.strip() for line in shown)})" if shown else ""
            return (
                f"mail sent before the run: {setup.how}{said}; the model request (POST"
                f" {carried[0]}) carried it; acknowledged; the identity's cause after the run:"
                f" cause_hop {hop}, cause_id {cause} (the wake prompt did not count as typed)"
            )

        checks.append(ctx.check("wake run: waiting mail into the model request", launch, mail))
    return checks


def _carries(body: str, text: str) -> bool:
    """Whether a recorded request body carries `text` (as is, or JSON-escaped)."""
    return text in body or json.dumps(text)[1:-1] in body


# ------------------------------------------------------------------------------------ codex


def check_codex(ctx: Context) -> list[Check]:
    _codex_home(ctx)
    checks = []
    args = ["mcp", "get", "pager", "--json"]
    with ctx.launch(args) as launch:

        def mcp_config() -> str:
            status, out = run(launch, None, ctx.workspace, 60)
            data = _json(out[out.find("{") :]) if "{" in out else None
            if status != 0 or data is None:
                raise Rejected(f"exit {status}: {_tail(out)}")
            transport = data.get("transport") or {}
            seen = [transport.get(key) for key in ("type", "url", "bearer_token_env_var")]
            if seen != ["streamable_http", f"{launch.relay.url}/mcp", "PAGER_TOKEN"]:
                raise Rejected(f"codex read the server as {json.dumps(transport)}")
            return (
                f"`mcp get pager`: transport streamable_http, url {transport['url']},"
                " bearer_token_env_var PAGER_TOKEN, enabled"
                f" {data.get('enabled')}"
            )

        checks.append(ctx.check("MCP server configuration (-c overrides)", launch, mcp_config))

    with ctx.launch(["app-server"]) as launch:

        def mcp_connect() -> str:
            process = Process(launch.argv, launch.env, ctx.workspace)
            try:
                rpc = _codex_session(process)
                listed = rpc.call("mcpServerStatus/list", {"detail": "toolsAndAuthOnly"})
                server = next((s for s in listed["data"] if s["name"] == "pager"), None)
                if server is None or server.get("toolsError") or not server.get("tools"):
                    raise Rejected(f"mcpServerStatus/list: {json.dumps(server)[:1500]}")
                thread = rpc.call("thread/start", {"cwd": str(ctx.workspace)})["thread"]["id"]
                called = rpc.call(
                    "mcpServer/tool/call",
                    {"server": "pager", "threadId": thread, "tool": "whoami", "arguments": {}},
                )
                me = called.get("structuredContent") or {}
                if called.get("isError") or me.get("address") != launch.address:
                    raise Rejected(f"whoami through Codex answered {json.dumps(called)[:800]}")
                return (
                    f"Codex connected (auth {server.get('authStatus')}), listed"
                    f" {len(server['tools'])} tools ({', '.join(sorted(server['tools']))});"
                    f" its own call of `whoami` answered {me['address']}, implementation"
                    f" {me.get('implementation')}"
                )
            finally:
                process.stop()

        checks.append(ctx.check("MCP connection with the session token", launch, mcp_connect))

    # The hooks: the built-in manifest's third `-c` override (docs/implementations/codex.md).
    with ctx.launch(["app-server"]) as launch:

        def hooks() -> str:
            ours, listed = _codex_hooks(launch, ctx)
            trust = _codex_trust(ctx, ours)
            body = "verify: codex hooks"
            message = ctx.broker.send(ctx.workspace, launch.address, body)
            process = Process(launch.argv, launch.env, ctx.workspace)
            try:
                rpc = _codex_session(process)
                thread = rpc.call("thread/start", {"cwd": str(ctx.workspace)})["thread"]["id"]
                rpc.call(
                    "turn/start",
                    {"threadId": thread, "input": [{"type": "text", "text": "ping"}]},
                )
                done = rpc.wait_note(
                    lambda n: (
                        n.get("method") == "hook/completed"
                        and message in json.dumps(n["params"]["run"].get("entries"))
                    ),
                    30,
                    "a hook/completed notification carrying the message",
                )
                path, _ = ctx.model.wait_for(body, 30)
            finally:
                process.stop()
            run_ = done["params"]["run"]
            kinds = sorted({entry.get("kind") for entry in run_.get("entries", [])})
            state = ctx.broker.wait_state(ctx.workspace, message)
            if state != "acknowledged":
                raise Rejected(f"the hook ran but the message is {state}")
            return (
                f"hooks/list: {listed}; untrusted until trusted once ({trust}); once trusted,"
                f" the {run_['eventName']} hook ran (source {run_['source']}, status"
                f" {run_['status']}) and Codex took its output as entries {kinds}; the model"
                f" request (POST {path}) carried it; acknowledged"
            )

        checks.append(
            ctx.check("hooks through `-c {config_content}` (the built-in manifest)", launch, hooks)
        )
    _codex_wake_ready(ctx)

    def thread(launch: Launch, out: str) -> tuple[str, str]:
        started = [_json(line) or {} for line in out.splitlines() if "thread.started" in line]
        key = str(started[0].get("thread_id") or "") if started else ""
        found = list((ctx.home / ".codex" / "sessions").rglob(f"rollout-*{key}.jsonl"))
        if not key or not found:
            raise Unchecked(f"`codex exec` started no thread that was kept:\n{_tail(out)}")
        kept = found[0].relative_to(ctx.home)
        return key, f"from `exec --json`'s thread.started, kept as ~/{kept}"

    setup = WakeSetup(
        ["exec", "--json", "{first}"],
        thread,
        "Pager's hooks from `-c {config_content}` (trusted once, as a person does in"
        " `/hooks`) ran on the resumed thread and put it before the model",
        evidence=r"^hook: \w+",
    )
    checks += check_wake(ctx, setup)
    checks.append(check_codex_knock(ctx))
    return checks


def _codex_wake_ready(ctx: Context) -> None:
    """What a person has before a wake run of Codex: a workspace that is a git repository
    (`codex exec` refuses another unless trusted: "Not inside a trusted directory and
    --skip-git-repo-check was not specified") and Pager's hooks trusted once."""
    git = shutil.which("git", path=ctx.env["PATH"])
    if git is not None and not (ctx.workspace / ".git").exists():
        _quiet([git, "init", "-q", str(ctx.workspace)], timeout=60)
    config = ctx.home / ".codex" / "config.toml"
    if "trusted_hash" not in config.read_text():
        with contextlib.suppress(Unchecked, Rejected), ctx.launch(["app-server"]) as launch:
            _codex_trust(ctx, _codex_hooks(launch, ctx)[0])


KNOCK_TURN = "verify: a turn before the knock"


def check_codex_knock(ctx: Context) -> Check:
    """The manifest's `[wake] command` (a knock) against a running session: Codex's app server
    on stdio with a thread whose turn has ended, then mail, then the command the provider runs
    (with the thread as `{conversation_key}`): the idle thread must take a turn whose model
    request carries the mail (Pager's UserPromptSubmit hook on the knock's `[pager]` text)."""
    name = "knock: `[wake] command` into a running session"
    command = ctx.manifest.wake.command
    if not command:
        return Check(name, UNCHECKED, f"{ctx.manifest.name}'s manifest has no [wake] command")
    with ctx.launch(["app-server"]) as launch:

        def knock() -> str:
            process = Process(launch.argv, launch.env, ctx.workspace)
            try:
                rpc = _codex_session(process)
                thread = rpc.call("thread/start", {"cwd": str(ctx.workspace)})["thread"]["id"]
                text = [{"type": "text", "text": KNOCK_TURN}]
                rpc.call("turn/start", {"threadId": thread, "input": text})
                rpc.wait_note(
                    lambda n: n.get("method") == "turn/completed", 60, "the first turn's end"
                )
                body = "verify: mail behind a knock"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                values = {
                    "agent_id": str(launch.session["agent_id"]),
                    "session_id": str(launch.session["session_id"]),
                    "conversation_key": thread,
                }
                argv = [render(template, values) for template in command]
                program = shutil.which(argv[0], path=ctx.env["PATH"])
                if program is None:
                    raise Unchecked(f"{argv[0]} is not on the PATH")
                start = time.monotonic()
                done = subprocess.run(
                    [program, *argv[1:]],
                    env=ctx.env,  # the broker's environment, not the session's
                    cwd=ctx.workspace,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=ctx.manifest.wake.timeout,
                    check=False,
                )
                took = time.monotonic() - start
                if done.returncode != 0:
                    raise Rejected(f"the knock exited {done.returncode}: {_tail(done.stderr)}")
                rpc.wait_note(
                    lambda n: (
                        n.get("method") == "item/started"
                        and n["params"]["item"].get("type") == "userMessage"
                        and "[pager]" in json.dumps(n["params"]["item"].get("content"))
                    ),
                    30,
                    "the knock's message in the thread",
                )
                path, _ = ctx.model.wait_for(body, 30)
                state = ctx.broker.wait_state(ctx.workspace, message)
            finally:
                process.stop()
            if state != "acknowledged":
                raise Rejected(f"the knock's turn carried the mail but it is {state}")
            answer = _one_line(done.stdout, 200) or "no output"
            return (
                f"the knock answered in {took:.1f} s ({answer}); the idle thread took a turn"
                f" with its `[pager]` message, whose model request (POST {path}) carried the"
                " mail that Pager's UserPromptSubmit hook added; acknowledged"
            )

        return ctx.check(name, launch, knock, argv=list(command))


def _codex_session(process: Process) -> JsonRpc:
    rpc = JsonRpc(process)
    rpc.call("initialize", {"clientInfo": {"name": "pager-verify", "version": PAGER_VERSION}})
    rpc.notify("initialized")
    return rpc


def _codex_hooks(launch: Launch, ctx: Context) -> tuple[list[dict[str, Any]], str]:
    """Pager's hooks as Codex lists them, and a summary."""
    process = Process(launch.argv, launch.env, ctx.workspace)
    try:
        listed = _codex_session(process).call("hooks/list", {"cwds": [str(ctx.workspace)]})
    finally:
        process.stop()
    entry = listed["data"][0]
    if entry.get("errors"):
        raise Rejected(f"hooks/list errors: {entry['errors']}")
    ours = [hook for hook in entry["hooks"] if "pager hook" in hook.get("command", "")]
    events = {hook["eventName"].lower() for hook in ours}
    pre_tool = ctx.manifest.hooks.pre_tool  # the reservations check (scripts/verify_enforce.py)
    wanted = {event.lower() for event in ctx.manifest.hooks.events}
    wanted |= {pre_tool.event.lower()} if pre_tool is not None else set()
    if events != wanted:
        raise Rejected(f"hooks/list shows {sorted(events)}, not {sorted(wanted)}: {entry}")
    return ours, ", ".join(
        f"{hook['eventName']} (source {hook['source']}, {hook['trustStatus']})" for hook in ours
    )


def _codex_home(ctx: Context) -> None:
    """A user whose model requests go to the recorder (with a dummy key)."""
    config = ctx.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'openai_base_url = "{ctx.model.url}/v1"\n')
    ctx.env["OPENAI_API_KEY"] = "pager-verify-dummy-key"


def _codex_trust(ctx: Context, hooks: list[dict[str, Any]]) -> str:
    """Trust the hooks as Codex's `/hooks` review does: their hash in ~/.codex/config.toml."""
    config = ctx.home / ".codex" / "config.toml"
    lines = [
        f'[hooks.state."{hook["key"]}"]\ntrusted_hash = "{hook["currentHash"]}"\n' for hook in hooks
    ]
    with config.open("a") as file:
        file.write("\n" + "\n".join(lines))
    return "keys " + ", ".join(hook["key"] for hook in hooks)


# ----------------------------------------------------------------------------------- claude


def check_claude(ctx: Context) -> list[Check]:
    # A dummy key: Claude Code gets as far as its model request, which the recorder refuses.
    ctx.env.update(ANTHROPIC_API_KEY="pager-verify-dummy-key", ANTHROPIC_BASE_URL=ctx.model.url)
    ctx.env.update(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    debug = ctx.workspace / "claude-debug.log"
    args = ["-p", "--debug-file", str(debug), "ping"]
    checks = []
    with ctx.launch(args) as launch:
        body = "verify: claude hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        outcome: dict[str, Any] = {}

        def headless() -> str:
            status, out = run(launch, None, ctx.workspace, 120)
            text = debug.read_text(errors="replace") if debug.exists() else ""
            outcome["debug"] = text
            if not text:
                raise Unchecked(f"claude wrote no debug log (exit {status}): {_tail(out)}")
            return f"`claude -p` ran to its end (exit {status}: {_one_line(out, 120)})"

        checks.append(ctx.check("headless launch with Pager's files", launch, headless))
        if "debug" not in outcome:
            return checks
        text = outcome["debug"]

        def mcp() -> str:
            good = _grep(text, r'MCP server "pager": Successfully connected')
            if not good:
                bad = _grep(text, r'MCP server "pager"') or ["no line about the server"]
                raise Rejected("\n".join(bad[-6:]))
            caps = _grep(text, r'MCP server "pager": Connection established with capabilities')
            return _one_line(good[0].split("[DEBUG] ")[-1] + " " + " ".join(caps[:1]), 400)

        checks.append(ctx.check("MCP server from --mcp-config", launch, mcp))

        def hooks() -> str:
            ran = []
            for event in ctx.manifest.hooks.events:
                lines = _grep(text, rf"Hooks: {event}[:\[ ].*pager hook .*finished with status")
                sync = [line for line in lines if "--wait" not in line]
                if not sync:
                    raise Rejected(f"no {event} hook ran; hook lines:\n" + _hook_lines(text))
                if "status 0" not in sync[0]:
                    raise Rejected(sync[0])
                ran.append(sync[0].split("Hooks: ")[-1].split(" [")[0] + " (exit 0)")
            errors = _grep(text, r"(?i)settings.*(invalid|error)|invalid.*settings")
            if errors:
                raise Rejected("\n".join(errors[:5]))
            waiters = [
                line.split("Hooks: ")[-1].split(" [")[0]
                for line in _grep(text, r"pager hook .*--wait.*moved to the background")
            ]
            return f"ran {', '.join(ran)}; background waiters started: {', '.join(waiters)}"

        checks.append(ctx.check("hooks from --settings", launch, hooks))

        def delivery() -> str:
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            if state != "acknowledged":
                raise Rejected(f"the message is {state}; hook lines:\n" + _hook_lines(text))
            path, _ = ctx.model.wait_for(body, 10)
            if _grep(text, r"pager hook .*SessionStart\) provided additionalContext"):
                how = "the SessionStart hook's JSON was parsed ('provided additionalContext')"
            elif re.search(r"error: status code 2\\nstderr:\\n\[pager\]", text):
                how = (
                    "the background waiter claimed it first and exited 2 with it on stderr"
                    " (an asyncRewake)"
                )
            else:
                raise Rejected("the model got the mail, but Claude Code logged no hook using it")
            return (
                f"mail sent before the launch: {how}; the model request (POST {path}) carried"
                " it; the message is acknowledged"
            )

        checks.append(ctx.check("mail through the hooks, into the model request", launch, delivery))

    stream = ["-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    stream += ["--verbose", "--debug-file", str(ctx.workspace / "claude-wake-debug.log")]
    with ctx.launch(stream) as launch:

        def wake() -> str:
            process = Process(launch.argv, launch.env, ctx.workspace)
            try:
                user = {"type": "user", "message": {"role": "user", "content": "ping"}}
                process.write(json.dumps(user))
                process.expect(lambda _s, line: '"type":"result"' in line, 60, "the first turn")
                time.sleep(3)  # the Stop hook's background waiter starts
                before = len(ctx.model.requests)
                body = "verify: claude idle wake"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                path, _ = ctx.model.wait_for(body, 30)
                state = ctx.broker.wait_state(ctx.workspace, message, 10)
            finally:
                process.stop()
            if state != "acknowledged":
                raise Rejected(f"the model got the mail but the message is {state}")
            log = (ctx.workspace / "claude-wake-debug.log").read_text(errors="replace")
            exited = r"Hook (\w+)\S* \(\w+\) error: status code 2\\nstderr:\\n\[pager\]"
            woke = re.findall(exited, log)
            waiter = f"the {woke[0]} hook's background waiter" if woke else "a waiter"
            return (
                f"after the first turn ended, mail sent to the idle session woke it: {waiter}"
                " exited 2 with the mail on stderr and Claude Code made a new model request"
                f" (POST {path}, after {before} requests) carrying it; acknowledged. (The Stop"
                " waiter starts only after a turn that completes, which needs a model.)"
            )

        checks.append(ctx.check("idle wake (asyncRewake)", launch, wake))

    def transcript(launch: Launch, _out: str) -> tuple[str, str]:
        key = launch.plan.conversation.key or ""  # the wrapper chose it (--session-id)
        found = list(ctx.home.glob(f".claude/projects/*/{key}.jsonl")) if key else []
        if not found:
            raise Unchecked(f"no transcript ~/.claude/projects/*/{key}.jsonl")
        return key, f"chosen with --session-id, kept as ~/{found[0].relative_to(ctx.home)}"

    setup = WakeSetup(
        ["-p", "{first}"],
        transcript,
        "Pager's hooks from --settings (SessionStart, UserPromptSubmit; no background waiters"
        " in a headless run) put it before the model",
    )
    return checks + check_wake(ctx, setup)


def _hook_lines(text: str) -> str:
    return "\n".join(_grep(text, r"Hooks?[: ]")[-10:])


# ----------------------------------------------------------------------------------- gemini


def _gemini_home(ctx: Context) -> None:
    """A user who chose API-key auth, trusts the workspace and sends no usage statistics."""
    gemini = ctx.home / ".gemini"
    gemini.mkdir(exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (gemini / "settings.json").write_text(json.dumps(settings))
    (gemini / "trustedFolders.json").write_text(json.dumps({str(ctx.workspace): "TRUST_FOLDER"}))
    # Pre-approves Pager's tools as docs/implementations/gemini.md says (headless runs offer the
    # model only tools that need no confirmation).
    (gemini / "policies").mkdir(exist_ok=True)
    (gemini / "policies" / "pager.toml").write_text(
        '[[rule]]\nmcpName = "pager"\ntoolName = "*"\ndecision = "allow"\npriority = 100\n'
    )
    ctx.env.update(GEMINI_API_KEY="pager-verify-dummy-key", GOOGLE_GEMINI_BASE_URL=ctx.model.url)


def check_gemini(ctx: Context) -> list[Check]:
    _gemini_home(ctx)
    checks = []
    # `gemini mcp list` refuses the --session-id the wrapper puts first for a new conversation
    # (it is an option of the main command only): this check leaves it out.
    no_choice = attrs.evolve(ctx.spec, choose_flag=None)
    with ctx.launch(["mcp", "list"], spec=no_choice) as launch:

        def mcp_list() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            line = next((x for x in out.splitlines() if re.search(r" pager\b.*: ", x)), None)
            if status != 0 or line is None or not line.rstrip().endswith("- Connected"):
                raise Rejected(f"exit {status}: {_tail(out)}")
            warnings = _grep(out, r"(?i)skipping|warning|error")
            if warnings:
                raise Rejected("\n".join(warnings))
            return f"`gemini mcp list`: {line.strip()}"

        checks.append(ctx.check("MCP server from the per-launch extension", launch, mcp_list))

    with ctx.launch(["-d", "-p", "ping"]) as launch:
        body = "verify: gemini hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        log: dict[str, str] = {}
        carried: list[str] = []

        def headless() -> str:
            process = Process(launch.argv, launch.env, ctx.workspace)
            try:
                process.expect(
                    lambda _s, line: "Hook execution for BeforeAgent" in line,
                    90,
                    "the BeforeAgent hook",
                )
                with contextlib.suppress(Rejected):
                    carried.append(ctx.model.wait_for(body, 20)[0])
                    ctx.model.wait_for("mcp_pager_", 10)  # the main request, with the tools
            finally:
                process.stop()
                log["text"] = "".join(process.output)
                (ctx.workspace / "gemini-output.log").write_text(launch.redact(log["text"]))
            text = log["text"]
            hooks = _grep(text, r"Hook execution for|Hook registry initialized")
            bad = _grep(text, r"(?i)hook.*(fail|error|invalid)|security warning")
            if bad:
                raise Rejected("\n".join(bad[:8]))
            if not _grep(text, r"Loading extension: pager-launch"):
                raise Rejected("the extension pager-launch was not loaded:\n" + _tail(text, 1500))
            if not _grep(text, r"Registering notification handlers for server 'pager'"):
                raise Rejected("no connection to the pager server:\n" + _tail(text, 1500))
            return (
                f"`gemini {' '.join(launch.plan.args)}`: loaded the extension pager-launch,"
                f" connected to 'pager'; {'; '.join(line.strip() for line in hooks)}"
            )

        checks.append(ctx.check("headless launch: extension, MCP and hooks", launch, headless))

        def delivery() -> str:
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            if state != "acknowledged":
                raise Rejected(f"the message is {state}")
            if not carried:
                raise Rejected(f"acknowledged, but no model request carried {body!r}")
            sessions = list((ctx.home / ".gemini" / "tmp").glob("*/chats/session-*"))
            kept = f"; the session file is in the user's ~/.gemini/tmp ({len(sessions)})"
            return (
                "mail sent before the launch was printed by the SessionStart hook as"
                f" hookSpecificOutput JSON, and the model request (POST {carried[0]}) carried"
                f" it; acknowledged{kept if sessions else ''}"
            )

        checks.append(ctx.check("mail through the hooks, into the model request", launch, delivery))

        def state() -> str:
            own = ctx.home / ".gemini"
            written = sorted(
                str(path.relative_to(own)) for path in (own / "tmp").rglob("*") if path.is_file()
            )
            settings = json.loads((own / "settings.json").read_text())
            if not written:
                raise Rejected("nothing of the launch reached the user's ~/.gemini/tmp")
            if "mcpServers" in settings or "hooks" in settings:
                raise Rejected(f"the user's settings.json changed: {settings}")
            return (
                "what Gemini CLI wrote under tmp/ during the launch is in the user's own"
                f" ~/.gemini ({', '.join(written[:4])}); the user's settings.json has no Pager"
                " entry"
            )

        checks.append(ctx.check("the user's ~/.gemini after the launch", launch, state))

    def session(launch: Launch, _out: str) -> tuple[str, str]:
        key = launch.plan.conversation.key or ""  # the wrapper chose it (--session-id)
        chats = list((ctx.home / ".gemini" / "tmp").glob(f"*/chats/session-*-{key[:8]}.json*"))
        if not key or not chats:
            raise Unchecked(f"Gemini CLI kept no session {key} in ~/.gemini/tmp/*/chats")
        return key, f"chosen with --session-id, kept as ~/{chats[0].relative_to(ctx.home)}"

    setup = WakeSetup(
        ["-p", "{first}"],
        session,
        "the per-launch extension's BeforeAgent hook (a headless run has no SessionStart hook)"
        " added it after the prompt",
        # Gemini CLI drops a turn whose model request failed from the session it keeps, so a
        # session whose only request was refused cannot be resumed ("No previous sessions
        # found for this project"): the recorder answers the first run's request once.
        Canned("streamGenerateContent", FIRST_PROMPT, "text/event-stream", GEMINI_ANSWER),
    )
    return checks + check_wake(ctx, setup)


#: One streamed Gemini API answer (`alt=sse`): a model turn of one word.
GEMINI_ANSWER = (
    "data: "
    + json.dumps(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "Noted."}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1,
                "candidatesTokenCount": 1,
                "totalTokenCount": 2,
            },
        }
    )
    + "\r\n\r\n"
).encode()


# --------------------------------------------------------------------------------- opencode


def _opencode_home(ctx: Context) -> None:
    """A user whose model is OpenAI's API at the recorder (OpenCode's own free provider off)."""
    config = ctx.home / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    options = {"baseURL": f"{ctx.model.url}/v1", "apiKey": "pager-verify-dummy-key"}
    settings = {
        "provider": {"openai": {"options": options}},
        "model": "openai/gpt-4o-mini",
        "small_model": "openai/gpt-4o-mini",
        "disabled_providers": ["opencode"],
        "autoupdate": False,
        "share": "disabled",
    }
    (config / "opencode.json").write_text(json.dumps(settings))


def check_opencode(ctx: Context) -> list[Check]:
    _opencode_home(ctx)
    checks = []
    with ctx.launch(["mcp", "list"]) as launch:

        def mcp_list() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            text = re.sub(r"\x1b\[[0-9;]*m", "", out)
            lines = [x.strip(" │●") for x in text.splitlines() if "pager" in x or "error" in x]
            if status != 0 or not any("pager" in x and "connected" in x for x in lines):
                raise Rejected(f"exit {status}: {_tail(text)}")
            return "`opencode mcp list`: " + "; ".join(lines)

        checks.append(ctx.check("MCP server from OPENCODE_CONFIG_CONTENT", launch, mcp_list))

    with ctx.launch(["debug", "config"]) as launch:

        def config() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            data = _json(out[out.find("{") :]) if "{" in out else None
            if status != 0 or data is None:
                raise Rejected(f"exit {status}: {_tail(out)}")
            server = (data.get("mcp") or {}).get("pager") or {}
            plugins = [p for p in data.get("plugin", []) if "pager-opencode.js" in str(p)]
            origins = [
                o.get("source")
                for o in data.get("plugin_origins", [])
                if "pager-opencode.js" in str(o)
            ]
            if server.get("type") != "remote" or server.get("oauth") is not False or not plugins:
                raise Rejected(f"resolved configuration: {json.dumps(data)[:1500]}")
            return (
                f"resolved: mcp.pager type remote, url {server.get('url')}, oauth false;"
                f" plugin {launch.short(str(plugins[0]))} (origin {', '.join(map(str, origins))})"
            )

        checks.append(ctx.check("resolved configuration", launch, config))

    port = _free_port()
    args = ["serve", "--port", str(port), "--print-logs", "--log-level", "DEBUG"]
    with ctx.launch(args) as launch:
        url = f"http://127.0.0.1:{port}"
        process = Process(launch.argv, launch.env, ctx.workspace)
        delivered: dict[str, str] = {}  # the OpenCode session and the message the plugin added
        try:

            def plugin() -> str:
                process.expect(lambda _s, line: "listening on" in line, 60, "the server")
                status, created = request_json(url, "POST", "/session", body={}, timeout=30)
                if status != 200:
                    raise Unchecked(f"POST /session answered {status}: {created}")
                session = created["id"]
                time.sleep(1)  # the plugin sees session.created
                body = "verify: opencode plugin"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                found = _opencode_wait(url, session, message)
                path, _ = ctx.model.wait_for(body, 30)
                state = ctx.broker.wait_state(ctx.workspace, message)
                with contextlib.suppress(Rejected):
                    ctx.model.wait_for("pager_whoami", 20)  # the turn's request, with the tools
                errors = _grep("".join(process.output), r"(?i)plugin.*(error|fail)")
                if errors:
                    raise Rejected("\n".join(errors[:5]))
                if state != "acknowledged":
                    raise Rejected(f"the mail was added to the session but is {state}")
                delivered.update(session=session, message=message)
                roles = [m["info"]["role"] for m in found]
                return (
                    "the plugin loaded with `opencode serve`, followed the session created over"
                    " its HTTP API and, when mail arrived, added it as a user message starting"
                    f" 'Pager delivered 1 message(s)' and OpenCode started a turn (messages:"
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
                    raise Unchecked(f"OpenCode did not add the prompt to the session ({answered})")
                if cleared is None:
                    hop, cause = ctx.broker.cause(agent)
                    raise Rejected(
                        f"after the plugin's own mail prompt the cause was {before}, as it should"
                        f" be; then a prompt typed over OpenCode's HTTP API (POST"
                        f" /session/{{id}}/message, {answered}) became a user message of the"
                        f" session, but {PROMPT_BOUND:.0f} s later the identity's cause was"
                        f" still cause_hop {hop}, cause_id {cause}: the plugin did not report"
                        " it (POST /v1/sessions/current/prompted never cleared it)"
                    )
                carried = ""
                with contextlib.suppress(Rejected):
                    carried = f"; its model request (POST {ctx.model.wait_for(text, 20)[0]})"
                    carried += " carried the prompt unchanged"
                return (
                    f"after the plugin's own mail prompt ('Pager delivered …') and its turn the"
                    f" identity's cause was still set ({before}): the delivery did not count as"
                    f" typed; a prompt typed as the TUI sends it (POST /session/{{id}}/message"
                    f" with a text part, {answered}) became a user message and the cause was"
                    f" NULL {cleared:.1f} s after it was sent (the plugin's chat.message hook"
                    f" reported it with POST /v1/sessions/current/prompted){carried}"
                )

            checks.append(
                ctx.check("Pager's plugin: a typed prompt restarts the chain", launch, typed_prompt)
            )
        finally:
            process.stop()
            output = launch.redact("".join(process.output))
            (ctx.workspace / "opencode-serve.log").write_text(output)  # for --keep

    def session(_launch: Launch, out: str) -> tuple[str, str]:
        events = [_json(line) or {} for line in out.splitlines() if line.startswith("{")]
        keys = [str(event["sessionID"]) for event in events if event.get("sessionID")]
        if not keys:
            raise Unchecked(f"`opencode run --format json` named no session:\n{_tail(out)}")
        return keys[0], "from `run --format json`'s events, kept in OpenCode's database"

    setup = WakeSetup(
        ["run", "--format", "json", "{first}"],
        session,
        "Pager's plugin (its headless copy: no long poll) claimed it in `chat.message` and"
        " added it to the run's prompt",
    )
    return checks + check_wake(ctx, setup)


def _opencode_answer(answer: dict[str, Any]) -> str:
    """What OpenCode answered a prompt (POST /session/{id}/message), in a few words."""
    if "error" in answer:
        return f"the request failed: {answer['error']}"
    if "reply" not in answer:
        return "no answer yet"
    status, reply = answer["reply"]
    info = reply.get("info", {}) if isinstance(reply, dict) else {}
    error = info.get("error") or {}
    refused = f", the turn ending with {error.get('name')}" if error else ""
    return f"answered {status} with an {info.get('role', '?')} message{refused}"


def _cause_after_delivery(ctx: Context, agent_id: str, message: str, what: str) -> str:
    """The identity's cause after the harness's own delivery of `message` (which set it when
    the broker delivered it): Rejected if the delivery counted as a typed prompt."""
    time.sleep(3)  # longer than the connector lets a report hold a prompt (REPORT_WAIT_MS)
    hop, cause = ctx.broker.cause(agent_id)
    if cause is None:
        raise Rejected(
            f"the mail was delivered (which sets the cause), but after {what} the identity's"
            " cause was already NULL: the delivery was reported as a prompt the person typed"
        )
    which = "the delivered message" if cause == message else f"not the delivered {message}"
    return f"cause_hop {hop}, cause_id {cause} ({which})"


def _opencode_wait(url: str, session: str, message: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + MAIL_BOUND
    messages: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        _, answer = request_json(url, "GET", f"/session/{session}/message", timeout=10)
        messages = answer if isinstance(answer, list) else []
        texts = [p.get("text", "") for m in messages for p in m.get("parts", [])]
        users = [t for t in texts if message in t and t.startswith("Pager delivered")]
        if users and any(m["info"]["role"] == "assistant" for m in messages):
            return messages
        time.sleep(0.5)
    raise Rejected(f"no delivered mail in the session after {MAIL_BOUND:.0f} s: {messages}")


# --------------------------------------------------------------------------------------- pi

PI_PROBE = """\
// Loaded next to Pager's extension by scripts/verify_harnesses.py: reports the tools it sees.
export default function (pi) {
  pi.registerCommand("pager-verify", {
    description: "report Pager's tools",
    handler: async (_args, ctx) => {
      const active = new Set(pi.getActiveTools());
      const tools = pi.getAllTools()
        .filter((tool) => tool.name.startsWith("pager_"))
        .map((tool) => ({ name: tool.name, active: active.has(tool.name),
                          parameters: Object.keys(tool.parameters?.properties ?? {}) }));
      ctx.ui.notify("PAGER_VERIFY " + JSON.stringify(tools), "info");
    },
  });
}
"""


def _pi_home(ctx: Context) -> None:
    """A user with one model: an OpenAI-compatible endpoint at the recorder."""
    agent = ctx.home / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    provider = {
        "baseUrl": f"{ctx.model.url}/v1",
        "api": "openai-completions",
        "apiKey": "pager-verify-dummy-key",
        "models": [{"id": "none"}],
    }
    (agent / "models.json").write_text(json.dumps({"providers": {"pager-verify": provider}}))


def check_pi(ctx: Context) -> list[Check]:
    _pi_home(ctx)
    probe = ctx.workspace / "pager-verify-probe.ts"
    probe.write_text(PI_PROBE)
    args = ["--mode", "rpc", "--no-session", "--offline", "--model", "pager-verify/none"]
    args += ["-e", str(probe)]
    checks = []
    with ctx.launch(args) as launch:
        process = Process(launch.argv, launch.env, ctx.workspace)
        try:

            def tools() -> str:
                time.sleep(2)  # the extension lists the broker's tools when it loads
                process.write(json.dumps({"type": "prompt", "message": "/pager-verify"}))
                line = process.expect(
                    lambda _s, text: "PAGER_VERIFY" in text, 60, "the probe's report"
                )
                note = _json(line) or {}
                seen = json.loads(str(note.get("message", "")).split(" ", 1)[1])
                names = sorted(tool["name"] for tool in seen if tool["active"])
                wanted = sorted(
                    "pager_" + name for name in ctx.broker.tool_names(launch.session["token"])
                )
                if names != wanted:
                    raise Rejected(f"active Pager tools {names}, the broker has {wanted}")
                return f"Pi loaded the extension; active tools: {', '.join(names)}"

            checks.append(ctx.check("extension: Pager's tools registered", launch, tools))

            delivered: list[str] = []  # the message the extension delivered

            def mail() -> str:
                body = "verify: pi extension"
                message = ctx.broker.send(ctx.workspace, launch.address, body)
                process.expect(
                    lambda _s, text: '"customType":"pager"' in text and message in text,
                    MAIL_BOUND,
                    "a pager message in the session",
                )
                process.expect(
                    lambda _s, text: '"type":"agent_end"' in text or "agent_start" in text,
                    15,
                    "a turn",
                )
                path, _ = ctx.model.wait_for(body, 30)
                state = ctx.broker.wait_state(ctx.workspace, message)
                if state != "acknowledged":
                    raise Rejected(f"the mail reached Pi but is {state}")
                errors = _grep("".join(process.output), r'"type":"extension_error"')
                if errors:
                    raise Rejected("\n".join(errors[:5]))
                delivered.append(message)
                return (
                    "mail sent to the idle session arrived as a custom 'pager' message and"
                    f" started a turn whose model request (POST {path}) carried it;"
                    " acknowledged"
                )

            checks.append(ctx.check("extension: mail wakes the idle session", launch, mail))

            def typed_prompt() -> str:
                if not delivered:
                    raise Unchecked("the mail check did not get as far as a delivery, so there"
                                    " is no loop-guard cause to clear")  # fmt: skip
                agent = str(launch.session["agent_id"])

                def ended() -> bool:
                    return '"type":"agent_end"' in "".join(process.output)

                deadline = time.monotonic() + 30
                while not ended() and time.monotonic() < deadline:
                    time.sleep(0.5)  # the mail's turn ends (a prompt while busy is refused)
                if not ended():
                    raise Unchecked("the mail's turn did not end within 30 s:\n" + process.tail())
                before = _cause_after_delivery(
                    ctx, agent, delivered[0], "the extension's own delivery and its turn"
                )
                text = "verify: a prompt the person typed"
                process.write(json.dumps({"type": "prompt", "message": text}))
                line = process.expect(
                    lambda _s, out: '"command":"prompt"' in out and '"type":"response"' in out,
                    30,
                    "Pi's response to the prompt command",
                )
                response = _json(line) or {}
                if not response.get("success"):
                    raise Unchecked(f"Pi refused the prompt command: {line}")
                cleared = ctx.broker.wait_cause_cleared(agent)
                if cleared is None:
                    hop, cause = ctx.broker.cause(agent)
                    raise Rejected(
                        f"after the extension's own delivery the cause was {before}, as it"
                        ' should be; then Pi accepted an RPC prompt (`{"type": "prompt"}`,'
                        f" answered {line.strip()}), but {PROMPT_BOUND:.0f} s later the"
                        f" identity's cause was still cause_hop {hop}, cause_id {cause}: the"
                        " extension's `input` handler did not report it"
                    )
                errors = _grep("".join(process.output), r'"type":"extension_error"')
                if errors:
                    raise Rejected("\n".join(errors[:5]))
                carried = ""
                with contextlib.suppress(Rejected):
                    carried = f"; its model request (POST {ctx.model.wait_for(text, 20)[0]})"
                    carried += " carried the prompt unchanged (the input went on)"
                return (
                    "after the extension's own delivery (pi.sendMessage) and its turn the"
                    f" identity's cause was still set ({before}): the delivery did not count as"
                    ' typed; then Pi took an RPC prompt ({"type": "prompt"}, an `input` event of'
                    ' source "rpc"; Pi answered success) and the cause was NULL'
                    f" {cleared:.1f} s after Pi answered (the extension reported it with POST"
                    f" /v1/sessions/current/prompted){carried}"
                )

            checks.append(
                ctx.check("extension: a typed prompt restarts the chain", launch, typed_prompt)
            )
        finally:
            process.stop()
            output = launch.redact("".join(process.output))
            (ctx.workspace / "pi-rpc.log").write_text(output)  # for --keep

    # `pager pi` learns a conversation only from `--session <id|path>`; Pi creates a session
    # file at a path that does not exist yet (not for an unknown id).
    chosen = ctx.workspace / "pager-verify-session.jsonl"

    def session(launch: Launch, out: str) -> tuple[str, str]:
        header = _json(chosen.read_text().partition("\n")[0]) if chosen.exists() else None
        if launch.plan.conversation.key != str(chosen) or not header:
            raise Unchecked(f"Pi kept no session at {chosen}:\n{_tail(out)}")
        return str(chosen), f"a session file Pi created there, id {header.get('id')}"

    setup = WakeSetup(
        ["-p", "--session", str(chosen), "--model", "pager-verify/none", "{first}"],
        session,
        "Pager's extension (no UI: no long poll) claimed it on `before_agent_start` and Pi"
        " sent it with the prompt as a custom 'pager' message",
    )
    return checks + check_wake(ctx, setup)


def tools_offered(ctx: Context) -> Check:
    """Whether the model requests the recorder saw offered Pager's tools (by any harness's
    naming: `mcp__pager__send`, `mcp_pager_send`, `pager_send`, `pager-send`)."""
    found: set[str] = set()
    for _, body in ctx.model.requests:
        found |= set(re.findall(r"\b(?:mcp__pager__|mcp_pager_|pager_|pager-)[a-z_]+\b", body))
    names = sorted(n for n in found if re.split("[_-]", n)[-1] in {"whoami", "send", "fetch"}
                   or n.replace("-", "_").endswith(("_ack", "_roster", "_history", "_status",
                                                    "_alias", "_workspace")))  # fmt: skip
    if not ctx.model.requests:
        return Check("Pager's tools offered to the model", UNCHECKED, "no model request seen")
    deferred = any(re.search(r"Deferred tool namespaces:.*?- mcp__pager:", b, re.S)
                   for _, b in ctx.model.requests)  # fmt: skip
    if not names and deferred:
        return Check(
            "Pager's tools offered to the model",
            ACCEPTED,
            "the model request lists `mcp__pager` among the deferred tool namespaces (with the"
            " server's instructions): the model loads its tools by searching, not upfront",
        )
    if not names:
        return Check(
            "Pager's tools offered to the model",
            REJECTED,
            f"{len(ctx.model.requests)} model requests, none naming a Pager tool",
        )
    return Check(
        "Pager's tools offered to the model",
        ACCEPTED,
        f"the model requests offered {len(names)} Pager tools: {', '.join(names)}",
    )


CHECKS: dict[str, Callable[[Context], list[Check]]] = {
    "claude": check_claude,
    "codex": check_codex,
    "gemini": check_gemini,
    "opencode": check_opencode,
    "pi": check_pi,
    "copilot": lambda ctx: _module_checks("verify_copilot", "check_copilot", ctx),
    "qwen": lambda ctx: _module_checks("verify_qwen", "check_qwen", ctx),
    "kilo": lambda ctx: _module_checks("verify_kilo", "check_kilo", ctx),
    "cline": lambda ctx: _module_checks("verify_cline", "check_cline", ctx),
}


def _module_checks(module: str, function: str, ctx: Context) -> list[Check]:
    """A harness's checks kept in a module of their own (scripts/verify_<id>.py), which imports
    this script's helpers as `verify_harnesses` (the same module, not a second copy)."""
    import importlib

    sys.modules.setdefault("verify_harnesses", sys.modules[__name__])
    checks: Callable[[Context], list[Check]] = getattr(importlib.import_module(module), function)
    return checks(ctx)


# ------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    global QUIET
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON report on stdout only")
    parser.add_argument("--only", action="append", choices=sorted(PACKAGES), metavar="ID")
    parser.add_argument("--upgrade", action="store_true", help="re-pin to the latest versions")
    parser.add_argument("--version", action="append", default=[], metavar="ID=VERSION")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument(
        "--pre-tool-only", action="store_true", help="only the reservations check before an edit"
    )
    args = parser.parse_args(argv)
    QUIET = args.json
    wanted: dict[str, str] = {}
    for item in args.version:
        ident, eq, version = item.partition("=")
        if not eq or ident not in PACKAGES or not version:
            parser.error(f"--version {item!r}: write ID=VERSION with ID one of {sorted(PACKAGES)}")
        wanted[ident] = version
    if not (Path(sys.executable).parent / "pager").exists():
        parser.error("run it with the project's interpreter: .venv/bin/python " + sys.argv[0])
    ids = args.only or sorted(PACKAGES)
    installed = npm_install(ids, args.upgrade, wanted)
    CACHE.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=CACHE))
    reports: list[Report] = []
    broker: Broker | None = None
    try:
        broker = Broker(run_dir / "pager-home", run_dir / "broker.log")
        for ident in ids:
            found = installed[ident]
            if isinstance(found, str):
                report = Report(ident, PACKAGES[ident], None)
                report.checks.append(Check("install", UNCHECKED, found))
            else:
                version, bin_dir = found
                report = Report(ident, PACKAGES[ident], version)
                progress(f"{ident} {version}")
                ctx = Context(broker, run_dir, ident, bin_dir)
                try:
                    if not args.pre_tool_only:
                        report.checks = CHECKS[ident](ctx)
                        report.checks.append(tools_offered(ctx))
                    report.checks += _module_checks("verify_enforce", "check_pre_tool", ctx)
                except Unchecked as exc:
                    report.checks.append(Check("launch", UNCHECKED, str(exc)))
                finally:
                    ctx.close()
            report.conclude()
            reports.append(report)
            if not QUIET:
                print_report(report)
    finally:
        if broker is not None:
            broker.stop()
        if args.keep:
            progress(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    if args.json:
        document = {
            "pager": PAGER_VERSION,
            "node": _quiet(["node", "--version"], 30).stdout.strip(),
            "rerun": ".venv/bin/python scripts/verify_harnesses.py"
            + "".join(f" --only {i}" for i in args.only or ()),
            "harnesses": [asdict(report) for report in reports],
        }
        print(json.dumps(document, indent=2))
    return 1 if any(report.verdict == REJECTED for report in reports) else 0


def print_report(report: Report) -> None:
    marks = {ACCEPTED: "ok", REJECTED: "REJECTED", UNCHECKED: "not checked"}
    print(f"\n{report.id} {report.version or '?'} ({report.package}): {report.verdict}")
    for check in report.checks:
        print(f"  [{marks[check.verdict]}] {check.name}")
        if check.command:
            wiring = [f"{k}={shlex.quote(v)}" for k, v in check.env.items() if "PAGER_" not in k]
            print(f"      $ {shlex.join(check.command)}")
            for line in wiring:
                print(f"        with {line}")
        for line in check.observed.splitlines() or [""]:
            print(f"      {line}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)
