"""`pager <implementation> …`: launch a harness as a Pager agent in this terminal (SPEC §4).

Registers first (a refused name exits non-zero without starting the harness), launches the
harness with per-launch wiring only (arguments, environment, files in a private temporary
directory; never the user's own configuration) that points it at the launch relay
(pager/launch/relay.py), serves that relay and holds the session's lease through the event
stream while the harness runs (rejoining when the broker revokes the token: its session
client, pager/session_client.py), forwards termination signals, detaches gracefully and exits
with the harness's status.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from pager.launch.discovery import BrokerLocator
from pager.launch.hub_wake import HubKnock, HubWake
from pager.launch.input_wake import InputKnock, InputWake
from pager.launch.leftovers import stop_holders
from pager.launch.lifecycle import LifecycleError, ensure_broker
from pager.launch.own_pager import own_command, with_own_pager
from pager.launch.paths import StatePaths
from pager.launch.relay import Relay
from pager.launch.wrapper_args import (
    Conversation,
    WrapperArgs,
    find_conversation,
    parse_wrapper_args,
)
from pager.session_client import (
    RegistrationFailed,
    SessionClient,
    StreamRefusal,
    hold_lease,
)
from pager.sse import SseEvent

#: Signals sent to the wrapper itself that the harness must get too. SIGINT is not among
#: them: a terminal sends it to the whole foreground group, the harness included.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Seconds a harness with an idle wake waits, at most, for the session's event stream (its
#: `mail` events knock) before it starts.
STREAM_WAIT = 5.0
#: Seconds the manifest's `[launch] before` command may take.
BEFORE_BOUND = 60.0


class LaunchError(Exception):
    """The launch cannot go ahead; the message says why and what to do."""


@attrs.frozen
class LaunchSpec:
    """What the wrapper needs of an implementation (from its manifest)."""

    implementation: str
    executable: str | None  # None: the first harness argument is the program (`shell`)
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: With no executable: the program when none is given, the first set (`$NAME`: a variable).
    default_program: tuple[str, ...] = ()
    greeting: str = ""  # a template said on stderr once the launch has joined
    resume_flags: tuple[str, ...] = ()
    continue_flags: tuple[str, ...] = ()
    choose_flag: str | None = None
    resume_subcommand: str | None = None
    other_subcommands: tuple[str, ...] = ()
    prepare: Any = None  # Callable[[LaunchContext], dict[str, str]]: per-launch files
    #: Idle wake through an input file (`[wake.input]`), for interactive launches only.
    input_wake: InputWake | None = None
    #: Stop what the harness left running with the launch's credential (pager/launch/leftovers.py).
    stop_leftovers: bool = False
    #: Arguments of the program run to their end before an interactive launch's harness.
    before: tuple[str, ...] = ()
    #: Idle wake through the harness's hub (`[wake.hub]`), for interactive launches only.
    hub_wake: HubWake | None = None


@attrs.frozen
class LaunchContext:
    """Values a connector may use to write its per-launch files."""

    directory: str  # private (0700), removed after the launch
    values: Mapping[str, str]
    #: The environment the harness inherits (the user's HOME, their own harness variables).
    environ: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    #: A wake run (docs/wake.md): headless, nobody at the terminal, ended by its provider;
    #: a connector leaves out what waits for a person (e.g. Claude's idle-wake hooks).
    headless: bool = False


@attrs.frozen
class LaunchPlan:
    """What the user's arguments ask for, before the broker is involved."""

    wrapper: WrapperArgs
    conversation: Conversation
    executable: str  # the program to look up on PATH (or a path)
    args: tuple[str, ...]  # the harness's own arguments, the wrapper's choices included


@attrs.frozen
class HarnessCommand:
    """What `pager <implementation>` runs: the harness's argv and whole environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    #: Starts a turn with the `[pager]` prompt when mail waits: through the harness's input
    #: file or its hub (None: the harness has neither, or this launch is not interactive).
    knock: InputKnock | HubKnock | None = None
    #: When the harness exits, stop the processes still holding the launch's credential.
    stop_leftovers: bool = False
    #: Run to its end before the harness (the manifest's `[launch] before`; empty: nothing).
    before: tuple[str, ...] = ()


def run_wrapped(paths: StatePaths, spec: LaunchSpec, argv: Sequence[str]) -> int:
    """The whole wrapped launch; returns the exit status to exit with."""
    plan = plan_launch(spec, argv, os.environ)
    with private_directory() as directory:
        # The program is looked up on the PATH it will run with: this Pager's `pager` first.
        environ = with_own_pager(os.environ, directory)
        program = shutil.which(plan.executable, path=environ["PATH"])
        if program is None:
            raise LaunchError(f"{plan.executable!r} is not on PATH; install it or fix PATH")
        try:
            broker = ensure_broker(paths)
        except LifecycleError as exc:
            raise LaunchError(str(exc)) from None
        body = registration(spec, plan, os.getcwd())
        session = SessionClient(BrokerLocator(paths, broker), body, notices=TerminalNotices())
        return trio.run(_launch, session, spec, plan, program, directory, environ)


async def _launch(
    session: SessionClient,
    spec: LaunchSpec,
    plan: LaunchPlan,
    program: str,
    directory: str,
    environ: Mapping[str, str],
) -> int:
    answer = await register(session)
    try:
        relay = Relay.bind()
        session.token_file = Path(directory) / "session-token"
        session.write_token_file()
        paths = session.locator.paths
        values = launch_values(
            relay.url, relay.credential, answer, paths, plan, spec, session.token_file
        )
        harness = harness_command(spec, program, plan.args, values, directory, environ)
        if spec.greeting:  # who the launch joined as, where the harness does not say it
            _say(_render(spec.greeting, values))
        return await _run_harness(harness, relay, session)
    finally:
        with trio.CancelScope(shield=True):
            await session.detach()  # not when the broker is gone or ended the session


def plan_launch(
    spec: LaunchSpec, argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> LaunchPlan:
    """The wrapper's options, the conversation, the program and its arguments of `argv` (the
    arguments after `pager <implementation>`; `environ` gives a default program's `$NAME`).
    Raises WrapperUsageError, LaunchError."""
    wrapper = parse_wrapper_args(argv)
    conversation = find_conversation(
        wrapper.harness_args,
        resume_flags=spec.resume_flags,
        continue_flags=spec.continue_flags,
        choose_flag=spec.choose_flag,
        subcommand=spec.resume_subcommand,
        other_subcommands=spec.other_subcommands,
    )
    args = list(conversation.args)
    executable = spec.executable
    if executable is None:
        if not args:
            args = _default_program(spec, os.environ if environ is None else environ)
        if not args:
            raise LaunchError(f"give the program to run: pager {spec.implementation} -- PROGRAM …")
        executable = args.pop(0)
    return LaunchPlan(wrapper, conversation, executable, tuple(args))


def _default_program(spec: LaunchSpec, environ: Mapping[str, str]) -> list[str]:
    """The manifest's default program: the first candidate that is set, as one argument."""
    for candidate in spec.default_program:
        value = environ.get(candidate[1:], "") if candidate.startswith("$") else candidate
        if value:
            return [value]
    return []


def registration(spec: LaunchSpec, plan: LaunchPlan, workspace: str) -> dict[str, Any]:
    """The body of the launch's `POST /v1/register`."""
    body: dict[str, Any] = {"workspace": workspace, "implementation": spec.implementation}
    if plan.wrapper.session_name is not None:
        body["session_name"] = plan.wrapper.session_name
    if plan.conversation.key is not None:
        body["conversation_key"] = plan.conversation.key
    if plan.wrapper.force:
        body["force"] = True
    return body


def launch_values(
    url: str,
    credential: str,
    session: Mapping[str, Any],
    paths: StatePaths,
    plan: LaunchPlan,
    spec: LaunchSpec,
    token_file: Path,
) -> dict[str, str]:
    """The placeholders' values known before the connector runs (SPEC §10). `url` and
    `credential` are the launch relay's (pager/launch/relay.py): the harness is never given
    the broker's address or a session token, which may change while it runs; Pager's own
    clients read the current token from `token_file`."""
    return {
        "url": url,
        "mcp_url": f"{url}/mcp",
        "token": credential,
        "token_file": str(token_file),
        "agent_id": session["agent_id"],
        "address": session["address"],
        "alias": session["alias"],
        "session_id": session["session_id"],
        "state_dir": str(paths.root),
        "conversation_key": plan.conversation.key or "",
        "python": sys.executable,
        "hook_command": hook_command(spec.implementation),
    }


def harness_command(
    spec: LaunchSpec,
    program: str,
    args: Sequence[str],
    values: Mapping[str, str],
    directory: str,
    environ: Mapping[str, str] | None = None,
    *,
    headless: bool = False,
    templates: Sequence[str] = (),
) -> HarnessCommand:
    """The harness's command line and environment for one launch, without running it.

    Runs the connector, which writes its per-launch files into `directory` (private; the caller
    removes it after the harness ended), then fills the manifest's templates. The command is
    the program, the manifest's `[launch]` args, `templates` filled the same way (a wake
    run's headless arguments, docs/wake.md), then `args` as given (the user's own). `environ`
    is the environment the harness inherits (default: this process's). An interactive launch
    (not headless, no subcommand) of a harness with `[wake.input]` also gets its input file:
    the options naming it follow the `[launch]` args; one with `[wake.hub]` gets its hub's
    knock, and `[launch] before` (the program with those arguments, run before it)."""
    # Whatever the harness runs as `pager` (its shell tool, its hooks) is this Pager.
    inherited = with_own_pager(os.environ if environ is None else environ, directory)
    filled = {"free_port": str(free_port()), **values}
    if spec.prepare is not None:
        context = LaunchContext(directory, dict(values), inherited, headless=headless)
        filled.update(spec.prepare(context))
    knock: InputKnock | HubKnock | None = None
    input_args: tuple[str, ...] = ()
    subcommand = bool(args) and args[0] in spec.other_subcommands  # `qwen mcp list`
    interactive = not headless and not subcommand
    if spec.input_wake is not None and interactive:
        knock = InputKnock.create(directory, spec.input_wake, filled)
        filled["input_file"] = str(knock.path)
        input_args = spec.input_wake.args
    elif spec.hub_wake is not None and interactive:
        knock = HubKnock.create(directory, spec.hub_wake, filled)
    before = (program, *(_render(t, filled) for t in spec.before)) if spec.before else ()
    rendered = (_render(t, filled) for t in (*spec.args, *input_args, *templates))
    argv = (program, *rendered, *args)
    env = {
        **inherited,
        "PAGER_URL": filled["url"],
        "PAGER_TOKEN": filled["token"],
        "PAGER_AGENT_ID": filled["agent_id"],
        "PAGER_ADDRESS": filled["address"],
        "PAGER_IMPLEMENTATION": spec.implementation,
        # Where Pager's own clients (the hook, the CLI) read the session's current token.
        "PAGER_TOKEN_FILE": filled["token_file"],
        **{key: _render(value, filled) for key, value in spec.env.items()},
    }
    return HarnessCommand(argv, env, knock, spec.stop_leftovers, before if interactive else ())


async def register(session: SessionClient) -> dict[str, Any]:
    """Register the launch's session with the broker; its answer (token, agent id, …)."""
    try:
        return await session.register()
    except RegistrationFailed as exc:
        if exc.status == 0:
            raise LaunchError(f"the broker did not answer: {exc.error.get('message')}") from None
        error, answer, body = exc.error, exc.answer, session.registration
        holder = error.get("holder")
        if error.get("code") == "alias_conflict" and isinstance(holder, dict):
            raise LaunchError(
                f"the name {body.get('session_name')!r} is held by {holder.get('address')}"
                f" ({holder.get('agent_id')}, {holder.get('implementation')}), which is attached."
                " Choose another --session-name, stop that session, or add --force to take over."
            ) from None
        raise LaunchError(
            f"registration refused ({exc.status}): {error.get('message', answer)}"
        ) from None


def _render(template: str, values: Mapping[str, str]) -> str:
    try:
        return template.format_map(values)
    except (KeyError, ValueError) as exc:
        raise LaunchError(f"the manifest template {template!r} cannot be filled: {exc}") from None


def hook_command(implementation: str) -> str:
    """The hook command a harness runs: this Pager by absolute path, never whatever `pager`
    a PATH finds."""
    return f"{own_command()} hook --implementation {shlex.quote(implementation)}"


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (`{free_port}`): the kernel's pick, released at once
    for the harness to bind."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def private_directory() -> Iterator[str]:
    """A private (0700) directory for one launch's files, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="pager-launch-")  # 0700
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def _run_harness(harness: HarnessCommand, relay: Relay, session: SessionClient) -> int:
    """The launch's small tree: the relay, the lease holder (which knocks on the harness's
    input file or hub when mail waits, if it has one), the `before` command, then the harness
    (stdio inherited)."""
    on_mail = None if harness.knock is None else harness.knock.knock
    live = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.serve, session)
        nursery.start_soon(partial(hold_lease, session, on_mail=on_mail, live=live))
        if harness.knock is not None:
            nursery.start_soon(harness.knock.run)
        try:
            if harness.before:
                await _run_before(harness)
            if on_mail is not None:  # so that mail sent once the harness runs knocks
                with trio.move_on_after(STREAM_WAIT):
                    await live.wait()
            status = await _harness_status(harness)
        finally:
            if harness.stop_leftovers:  # however the harness ended
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(stop_holders, relay.credential)
        nursery.cancel_scope.cancel()
    return 128 - status if status < 0 else status


async def _run_before(harness: HarnessCommand) -> None:
    """The manifest's `[launch] before` command, with the harness's environment and no
    input; its stderr goes to the terminal (its stdout, Cline CLI's hub URL, does not). A
    failure is said, not fatal: the harness runs without what it would have started (its idle
    wake, for Cline CLI's hub)."""
    shown = shlex.join([os.path.basename(harness.before[0]), *harness.before[1:]])
    try:
        with trio.fail_after(BEFORE_BOUND):
            done = await trio.run_process(
                list(harness.before),
                env=dict(harness.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                check=False,
            )
    except (OSError, trio.TooSlowError) as exc:
        _say(f"{shown!r} did not finish: {exc}; going on without it")
        return
    if done.returncode != 0:
        _say(f"{shown!r} exited {done.returncode}; going on without it")


async def _harness_status(harness: HarnessCommand) -> int:
    """Runs the harness, forwarding termination signals to it; its exit status."""
    with trio.open_signal_receiver(*FORWARDED) as signals:
        process = await trio.lowlevel.open_process(list(harness.argv), env=dict(harness.env))

        async def forward() -> None:
            async for signum in signals:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signum)

        # The forwarder must end before the signal receiver closes.
        async with trio.open_nursery() as forwarding:
            forwarding.start_soon(forward)
            with _ignoring(signal.SIGINT):  # the terminal delivers it to the harness itself
                status = await process.wait()
            forwarding.cancel_scope.cancel()
    return status


@contextlib.contextmanager
def _ignoring(signum: int) -> Iterator[None]:
    previous = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, previous)


class TerminalNotices:
    """What the launch's session client did, told the user in `pager: …` lines on stderr."""

    def info(self, text: str) -> None:
        pass  # a detail for a log; the wrapper's terminal is the harness's

    def warn(self, text: str) -> None:
        _say(text)

    def registered(self, url: str, answer: dict[str, Any], previous: dict[str, Any] | None) -> None:
        if previous is None:
            return  # the launch's own registration: the harness starting says enough
        same = answer.get("agent_id") == previous.get("agent_id")
        also = "" if same else " (a different identity)"
        _say(f"rejoined the broker at {url} as {answer.get('address')}{also}")

    def refused(self, refusal: StreamRefusal) -> None:
        try:
            error = refusal.answer["error"]
            reason = f"{error['code']}: {error['message']}"
        except (KeyError, TypeError):
            reason = refusal.line
        _say(f"the broker no longer holds this session ({reason})")

    def ended(self, event: SseEvent) -> None:
        """Tells why the broker ended the session (its `reason`, not the message meant for a
        program, which would repeat "ended" and add "do not retry")."""
        data = event.json()
        if isinstance(data, dict):
            reason = data.get("reason") or data.get("message") or "no reason given"
            _say(f"the broker ended this session: {reason}")


def _say(line: str) -> None:
    print(f"pager: {line}", file=sys.stderr)
