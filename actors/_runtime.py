"""The actor runtime: bounded mailboxes, cast/call, one-slot replies and crash propagation.

An actor is one trio task (``run_actor``) that owns its state and handles the messages in its
mailbox one at a time. Callers hold an ``ActorRef``. Every ``Reply`` that a caller may still be
waiting on is tracked by the runtime, so a crash or stop settles them all at once: a caller
never hangs on a dead actor, and a caller that left never crashes the actor. Errors by kind: a
handler's error of a kind the actor declares it survives (``Actor.survives``) is answered to
its caller and the actor goes on; any other crashes it.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from typing import Any, Generic, NoReturn, TypeAlias, TypeVar, overload

import trio

T = TypeVar("T")
M = TypeVar("M")
R = TypeVar("R")  # the reply type a `Call` declares


class ActorError(Exception):
    """Base class for the runtime's errors."""


class ActorCrashed(ActorError):
    """The actor raised before replying; ``reason`` (also ``__cause__``) is its exception.

    Only calls accepted before the crash (current, queued, held) get this; anything sent later
    gets ``ActorStopped``, which always means "not delivered"."""

    def __init__(self, name: str, reason: BaseException) -> None:
        super().__init__(f"actor {name!r} crashed: {reason!r}")
        self.name = name
        self.reason = reason
        self.__cause__ = reason


class ActorStopped(ActorError):
    """The actor is not running (stopping, stopped, crashed earlier), so the message was not
    delivered; or it stopped with this call still queued or unanswered."""


class MailboxFull(ActorError):
    """``try_cast`` found the mailbox full."""


class CallTimeout(ActorError, TimeoutError):
    """``call`` got no reply within its timeout (a ``TimeoutError``: an edge answers it as the
    broker being unavailable for the moment, without knowing of actors)."""


class _State(enum.Enum):
    STARTING = enum.auto()
    RUNNING = enum.auto()
    STOPPING = enum.auto()  # stop requested: finishing the current message
    STOPPED = enum.auto()
    CRASHED = enum.auto()


class Reply(Generic[T]):
    """A one-slot reply channel for one ``call``; the handler may answer now or keep it."""

    __slots__ = ("_caller_gone", "_error", "_event", "_pending", "_sent", "_value")

    def __init__(self, _pending: set[Reply[Any]] | None = None) -> None:
        self._event = trio.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        self._sent = False  # the handler answered (send/fail may happen once)
        self._caller_gone = False
        self._pending = _pending  # the runtime's open replies, settled on crash/stop
        if _pending is not None:
            _pending.add(self)

    @property
    def done(self) -> bool:
        """True once answered, failed by the runtime, or abandoned by its caller."""
        return self._event.is_set() or self._caller_gone

    @property
    def caller_gone(self) -> bool:
        """True if the caller timed out or was cancelled; a held reply can then be dropped."""
        return self._caller_gone

    def send(self, value: T) -> None:
        """Answer the call; silently dropped if the caller has gone or the actor has stopped."""
        self._claim()
        self._value = value
        self._settle()

    def fail(self, exc: BaseException) -> None:
        """Make the caller's ``call()`` raise ``exc`` (e.g. a domain error)."""
        self._claim()
        self._error = exc
        self._settle()

    def _claim(self) -> None:
        if self._sent:
            raise RuntimeError("reply already sent")
        self._sent = True

    def _settle(self) -> None:
        # A reply the runtime already failed (stop/crash) or the caller left is dropped here.
        if not self._event.is_set() and not self._caller_gone:
            self._event.set()
        self._untrack()

    def _fail_by_runtime(self, exc: ActorError) -> None:
        if not self._event.is_set() and not self._caller_gone:
            self._error = exc
            self._event.set()
        self._untrack()

    def _abandon(self) -> None:
        # Called by the caller on its way out; untracking lets a held reply be collected.
        if not self._event.is_set():
            self._caller_gone = True
        self._untrack()

    def _untrack(self) -> None:
        if self._pending is not None:
            self._pending.discard(self)
            self._pending = None

    async def _wait(self) -> T:
        await self._event.wait()
        if self._error is not None:
            error, self._error = self._error, None  # drop the reference: avoid a cycle
            raise error
        return self._value  # type: ignore[return-value]  # set by send() when no error


_Envelope: TypeAlias = tuple[M, Reply[Any] | None]


class _Core(Generic[M]):
    """State shared by an actor's ref and its running loop."""

    def __init__(self, name: str, send: trio.MemorySendChannel[_Envelope[M]]) -> None:
        self.name = name
        self.send = send
        self.state = _State.STARTING
        self.crash_reason: BaseException | None = None
        self.pending: set[Reply[Any]] = set()
        self.idle_scope: trio.CancelScope | None = None  # set while waiting for a message

    def not_running(self) -> ActorStopped:
        match self.state:
            case _State.CRASHED:
                return ActorStopped(f"actor {self.name!r} crashed: {self.crash_reason!r}")
            case _State.STOPPING | _State.STOPPED:
                return ActorStopped(f"actor {self.name!r} is stopped")
            case _State.STARTING | _State.RUNNING:
                return ActorStopped(f"actor {self.name!r} closed its mailbox")

    def check_alive(self) -> None:
        if self.state not in (_State.STARTING, _State.RUNNING):
            raise self.not_running()


class Call(Generic[T]):
    """The base of a request message that declares its reply type: `class Enqueue(Call[Sent])`
    makes `await ref.call(Enqueue(...))` typed `Sent` (ARCHITECTURE.md, typed protocols)."""

    __slots__ = ()


class ActorRef(Generic[M]):
    """The handle the outside world uses to message an actor."""

    __slots__ = ("_core",)

    def __init__(self, core: _Core[M]) -> None:
        self._core = core

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def alive(self) -> bool:
        """True while the actor accepts messages (False once a stop was requested)."""
        return self._core.state in (_State.STARTING, _State.RUNNING)

    def __repr__(self) -> str:
        return f"<ActorRef {self._core.name!r} {self._core.state.name.lower()}>"

    async def cast(self, message: M) -> None:
        """Send without a reply, waiting for mailbox space (backpressure)."""
        self._core.check_alive()
        try:
            await self._core.send.send((message, None))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self._core.not_running() from None

    def try_cast(self, message: M) -> None:
        """Send without a reply or waiting; ``MailboxFull`` if there is no space."""
        self._core.check_alive()
        try:
            self._core.send.send_nowait((message, None))
        except trio.WouldBlock:
            raise MailboxFull(f"mailbox of actor {self._core.name!r} is full") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self._core.not_running() from None

    # A per-call default timeout is the contract (a wedged actor must not hang callers), and
    # CallTimeout names the actor and message, which a caller's fail_after could not.
    @overload
    async def call(self, message: Call[R], *, timeout: float = 5.0) -> R: ...  # noqa: ASYNC109

    @overload
    async def call(self, message: M, *, timeout: float = 5.0) -> Any: ...  # noqa: ASYNC109

    async def call(self, message: Any, *, timeout: float = 5.0) -> Any:  # noqa: ASYNC109
        """Send and wait for the reply; the timeout covers mailbox space and the answer. A
        `Call[R]` message's reply is typed `R`."""
        core = self._core
        core.check_alive()
        # Tracked before sending: the actor may handle (and crash on) it before we resume.
        reply: Reply[Any] = Reply(core.pending)
        try:
            # A bare scope: `move_on_after` costs twice as much (a generator context manager),
            # and every request makes a few calls.
            with trio.CancelScope(deadline=trio.current_time() + timeout):
                try:
                    # Straight into the mailbox when it has room: `send` would also yield to
                    # the scheduler once, and the reply wait below yields anyway.
                    core.send.send_nowait((message, reply))
                except trio.WouldBlock:
                    try:
                        await core.send.send((message, reply))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        raise core.not_running() from None
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise core.not_running() from None
                return await reply._wait()
            raise CallTimeout(
                f"call to actor {core.name!r} with {type(message).__name__} "
                f"got no reply within {timeout}s"
            )
        finally:
            reply._abandon()

    def stop(self) -> None:
        """Ask for a graceful stop: the current message finishes, then ``run_actor`` returns.
        Idempotent; a no-op on an actor that is not running."""
        core = self._core
        if core.state in (_State.STARTING, _State.RUNNING):
            core.state = _State.STOPPING
            if core.idle_scope is not None:
                core.idle_scope.cancel()


class Actor(abc.ABC, Generic[M]):
    """Subclass and implement ``handle``; dispatch with ``match`` and end it with
    ``case _: self.unhandled(message)``."""

    mailbox_size: int = 64
    on_stop_timeout: float = 2.0  # bound on on_stop(), which runs shielded
    #: Errors of kinds that leave the actor's own state whole (an infrastructure failure whose
    #: write was rolled back, raised before the actor changed anything): a handler that raises
    #: one answers its caller with it (``call()`` raises it) and ``on_fault`` is told; the
    #: actor goes on. Anything else is a broken invariant and crashes it.
    survives: tuple[type[Exception], ...] = ()

    @property
    def ref(self) -> ActorRef[M]:
        """This actor's own ref (e.g. to stop itself); set by ``run_actor``."""
        try:
            return self.__ref
        except AttributeError:
            raise RuntimeError(f"{type(self).__name__} is not running") from None

    async def on_start(self) -> None:
        """Runs before ``task_status.started()``; messages sent meanwhile are queued."""

    @abc.abstractmethod
    async def handle(self, message: M, reply: Reply[Any] | None) -> None:
        """Handle one message; ``reply`` is None for a cast."""

    async def on_stop(self) -> None:
        """Runs shielded and bounded on a graceful stop, a cancellation and a crash."""

    def on_fault(self, message: M, error: Exception) -> None:
        """A handler raised one of ``survives`` (its caller, if any, already has it): e.g. log
        one line and arrange to try its background work again later."""

    def unhandled(self, message: object) -> NoReturn:
        """An unknown message is an internal error (crashes the actor), never ignored."""
        raise TypeError(f"{type(self).__name__} cannot handle {message!r}")

    def take_queued(self, limit: int) -> list[tuple[M, Reply[Any] | None]]:
        """Up to ``limit`` more messages already in the mailbox, without waiting: lets a handler
        batch work (e.g. one commit for many writes). The caller must handle or settle each."""
        taken: list[tuple[M, Reply[Any] | None]] = []
        while len(taken) < limit:
            try:
                taken.append(self.__receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        return taken

    def _attach(self, ref: ActorRef[M], receive: trio.MemoryReceiveChannel[_Envelope[M]]) -> None:
        self.__ref = ref
        self.__receive = receive


async def run_actor(
    actor: Actor[M],
    *,
    name: str,
    task_status: trio.TaskStatus[ActorRef[M]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``actor`` until stopped (returns), cancelled, or crashed (re-raises its exception).

    Start it with ``start_actor`` or ``nursery.start(functools.partial(run_actor, name=...), a)``.
    """
    size = actor.mailbox_size
    if not isinstance(size, int) or size < 0:  # rejects math.inf: mailboxes stay bounded
        raise ValueError(f"{type(actor).__name__}.mailbox_size must be an int >= 0: {size!r}")
    send, receive = trio.open_memory_channel[_Envelope[M]](size)
    core = _Core(name, send)
    ref = ActorRef(core)
    actor._attach(ref, receive)
    started = False
    crash: Exception | None = None
    try:
        await actor.on_start()
        if core.state is _State.STARTING:  # on_start may have called stop()
            core.state = _State.RUNNING
        started = True
        task_status.started(ref)
        while core.state is _State.RUNNING:
            envelope: _Envelope[M] | None = None
            try:
                envelope = receive.receive_nowait()  # a busy mailbox needs no idle scope
            except trio.WouldBlock:
                with trio.CancelScope() as core.idle_scope:
                    envelope = await receive.receive()
                core.idle_scope = None
            if envelope is None:  # stop() cancelled the idle wait
                break
            message, reply = envelope
            try:
                await actor.handle(message, reply)
            except actor.survives as fault:  # `except ()` catches nothing
                if reply is not None and not reply.done:
                    reply.fail(fault)
                actor.on_fault(message, fault)
    except Exception as exc:
        crash = exc
        raise
    finally:
        with trio.CancelScope(shield=True):
            await _shut_down(actor, core, receive, crash, run_on_stop=started)


async def _shut_down(
    actor: Actor[M],
    core: _Core[M],
    receive: trio.MemoryReceiveChannel[_Envelope[M]],
    crash: Exception | None,
    *,
    run_on_stop: bool,
) -> None:
    # Runs shielded; settles every tracked reply so no caller waits on a dead actor.
    core.idle_scope = None
    # Close our side first: senders blocked on a full mailbox get ActorStopped rather than
    # being let in by the drain below and then silently dropped.
    core.send.close()
    if crash is not None:
        core.state, core.crash_reason = _State.CRASHED, crash
        for reply in list(core.pending):  # current, queued and held calls
            reply._fail_by_runtime(ActorCrashed(core.name, crash))
    else:
        core.state = _State.STOPPED
    # Queued calls were never handled; held replies stay open so on_stop can answer them.
    while True:
        try:
            _, queued = receive.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            break
        if queued is not None:
            queued._fail_by_runtime(core.not_running())
    receive.close()
    try:
        if run_on_stop:
            with trio.move_on_after(actor.on_stop_timeout):
                await actor.on_stop()
    except Exception as exc:
        if crash is None:
            raise
        # Keep the original crash as the exception a supervisor sees.
        crash.add_note(f"on_stop() also failed: {exc!r}")
    finally:
        for reply in list(core.pending):  # replies the handler held and never answered
            reply._fail_by_runtime(core.not_running())


async def start_actor(nursery: trio.Nursery, actor: Actor[M], *, name: str) -> ActorRef[M]:
    """Start ``actor`` in ``nursery`` and return its ref once ``on_start`` has finished."""

    async def runner(*, task_status: trio.TaskStatus[ActorRef[M]]) -> None:
        await run_actor(actor, name=name, task_status=task_status)

    ref: ActorRef[M] = await nursery.start(runner, name=f"actor:{name}")
    return ref


async def off_loop(fn: Callable[[], T], *, inline: bool = False) -> T:
    """`fn()` in a worker thread, so blocking work (SQLite) never holds the event loop; with
    `inline`, on the loop itself: only for tests on trio's mock clock, where a worker thread
    would let the clock jump while `fn` runs."""
    if inline:
        return fn()
    return await trio.to_thread.run_sync(fn)
