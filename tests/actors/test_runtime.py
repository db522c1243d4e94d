"""Tests for the actor runtime: cast/call, replies, backpressure, crash, stop and cancellation."""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorCrashed,
    ActorError,
    ActorRef,
    ActorStopped,
    CallTimeout,
    MailboxFull,
    Reply,
    run_actor,
    start_actor,
)


@attrs.frozen
class Record:
    value: object


@attrs.frozen
class Echo:
    value: object


@attrs.frozen
class Hold:
    key: str


@attrs.frozen
class Release:
    key: str
    value: object


@attrs.frozen
class Refuse:
    text: str


@attrs.frozen
class Boom:
    pass


@attrs.frozen
class Gate:
    """Blocks the actor inside its handler until released, so later messages queue up."""

    entered: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)


@attrs.frozen
class Unknown:
    pass


Msg = Record | Echo | Hold | Release | Refuse | Boom | Gate


class Probe(Actor[Msg]):
    def __init__(
        self,
        *,
        mailbox_size: int = 64,
        first: object = None,
        stall_on_stop: bool = False,
        fail_on_stop: bool = False,
    ) -> None:
        self.mailbox_size = mailbox_size
        self.first = first  # cast to itself from on_start
        self.stall_on_stop = stall_on_stop
        self.fail_on_stop = fail_on_stop
        self.seen: list[object] = []
        self.held: dict[str, Reply[Any]] = {}
        self.stopped = False

    async def on_start(self) -> None:
        if self.first is not None:
            self.ref.try_cast(self.first)  # type: ignore[arg-type]  # may be Unknown

    async def handle(self, message: Msg, reply: Reply[Any] | None) -> None:
        match message:
            case Record(value):
                self.seen.append(value)
            case Echo(value):
                assert reply is not None
                reply.send(value)
            case Hold(key):
                assert reply is not None
                self.held[key] = reply
            case Release(key, value):
                self.held.pop(key).send(value)
            case Refuse(text):
                assert reply is not None
                reply.fail(LookupError(text))
            case Boom():
                raise ValueError("boom")
            case Gate(entered, release):
                entered.set()
                await release.wait()
                self.seen.append("gate")
            case _:
                self.unhandled(message)

    async def on_stop(self) -> None:
        self.stopped = True
        if self.stall_on_stop:
            await trio.sleep_forever()
        if self.fail_on_stop:
            raise RuntimeError("on_stop failed")


async def record_call(
    results: dict[str, object], key: str, ref: ActorRef[Msg], message: Msg
) -> None:
    """Run a call in the background and keep its result or runtime error under ``key``."""
    try:
        results[key] = await ref.call(message)
    except ActorError as exc:
        results[key] = exc


async def test_cast_handled_in_order() -> None:
    """Casts are handled one at a time in the order sent."""
    with trio.fail_after(5):
        actor = Probe()
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="order")
            for i in range(10):
                await ref.cast(Record(i))
            ref.try_cast(Record(10))
            assert await ref.call(Echo("sync")) == "sync"
            assert actor.seen == list(range(11))
            ref.stop()


async def test_call_returns_reply() -> None:
    """call() returns the value the handler sends."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            ref = await nursery.start(functools.partial(run_actor, name="echo"), Probe())
            assert await ref.call(Echo({"a": 1})) == {"a": 1}
            assert ref.name == "echo"
            ref.stop()


async def test_call_deferred_reply(autojump_clock: trio.testing.MockClock) -> None:
    """A handler may keep the Reply and answer later; the caller waits for it."""
    with trio.fail_after(10):
        actor = Probe()
        results: dict[str, object] = {}
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="deferred")
            nursery.start_soon(record_call, results, "r", ref, Hold("d"))
            await trio.sleep(3)  # well past handling, still inside the 5 s timeout
            assert "d" in actor.held
            assert results == {}
            await ref.cast(Release("d", 42))
            await trio.testing.wait_all_tasks_blocked()
            assert results == {"r": 42}
            ref.stop()


async def test_call_timeout_raises_call_timeout(autojump_clock: trio.testing.MockClock) -> None:
    """An unanswered call raises CallTimeout after its timeout, naming actor and message."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, Probe(), name="slow")
            start = trio.current_time()
            with pytest.raises(CallTimeout, match=r"'slow'.*Hold"):
                await ref.call(Hold("t"), timeout=1.5)
            assert trio.current_time() - start == pytest.approx(1.5)
            ref.stop()


async def test_call_caller_gone_actor_survives(autojump_clock: trio.testing.MockClock) -> None:
    """Replies to callers that timed out or were cancelled are dropped; the actor lives on."""
    with trio.fail_after(10):
        actor = Probe()
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="survivor")
            with pytest.raises(CallTimeout):
                await ref.call(Hold("timed-out"), timeout=1)
            with trio.move_on_after(1) as scope:
                await ref.call(Hold("cancelled"))
            assert scope.cancelled_caught
            for key in ("timed-out", "cancelled"):
                assert actor.held[key].caller_gone
                assert actor.held[key].done
            await ref.cast(Release("timed-out", 1))
            await ref.cast(Release("cancelled", 2))
            assert await ref.call(Echo("still here")) == "still here"
            assert ref.alive
            ref.stop()


async def test_crash_fails_current_queued_and_held_calls_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A crash fails the current, queued and held calls with ActorCrashed without waiting."""
    with trio.fail_after(10):
        actor = Probe()
        results: dict[str, object] = {}
        gate = Gate()
        async with trio.open_nursery() as callers:
            with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="boom")):
                async with trio.open_nursery() as nursery:
                    ref = await start_actor(nursery, actor, name="crashy")
                    callers.start_soon(record_call, results, "held", ref, Hold("h"))
                    await trio.testing.wait_all_tasks_blocked()
                    assert "h" in actor.held
                    await ref.cast(gate)
                    await gate.entered.wait()
                    # Started one at a time: trio does not promise start_soon order.
                    callers.start_soon(record_call, results, "current", ref, Boom())
                    await trio.testing.wait_all_tasks_blocked()
                    callers.start_soon(record_call, results, "queued", ref, Echo(1))
                    await trio.testing.wait_all_tasks_blocked()
                    start = trio.current_time()
                    gate.release.set()
        # Any caller left waiting would have let the autojump clock reach its 5 s timeout.
        assert trio.current_time() == start
        assert set(results) == {"held", "current", "queued"}
        for error in results.values():
            assert isinstance(error, ActorCrashed)
            assert isinstance(error.reason, ValueError)
            assert error.__cause__ is error.reason
        assert actor.stopped  # on_stop runs on a crash too
        assert not ref.alive


async def test_run_actor_crash_propagates() -> None:
    """The handler's own exception propagates out of run_actor, unwrapped."""
    with trio.fail_after(5):
        actor = Probe(first=Boom())
        with pytest.raises(ValueError, match="boom"):
            await run_actor(actor, name="crashy")
        assert actor.stopped


async def test_run_actor_unhandled_message_crashes() -> None:
    """An unknown message crashes the actor with a TypeError naming the actor class."""
    with trio.fail_after(5):
        with pytest.raises(TypeError, match=r"Probe cannot handle Unknown\(\)"):
            await run_actor(Probe(first=Unknown()), name="strict")


async def test_call_after_crash_raises_actor_stopped() -> None:
    """After a crash, new calls and casts are refused with ActorStopped naming the crash."""
    with trio.fail_after(5):
        actor = Probe(first=Boom())
        with pytest.raises(ValueError, match="boom"):
            await run_actor(actor, name="dead")
        ref = actor.ref
        with pytest.raises(ActorStopped, match=r"crashed.*boom"):
            await ref.call(Echo(1))
        with pytest.raises(ActorStopped):
            await ref.cast(Record(1))
        with pytest.raises(ActorStopped):
            ref.try_cast(Record(1))


async def test_call_after_stop_raises_actor_stopped() -> None:
    """A stopped actor refuses call, cast and try_cast with ActorStopped."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, Probe(), name="gone")
            ref.stop()
            ref.stop()  # idempotent
        assert not ref.alive
        with pytest.raises(ActorStopped, match="'gone' is stopped"):
            await ref.call(Echo(1))
        with pytest.raises(ActorStopped):
            await ref.cast(Record(1))
        with pytest.raises(ActorStopped):
            ref.try_cast(Record(1))


async def test_try_cast_mailbox_full() -> None:
    """try_cast raises MailboxFull when the bounded mailbox has no space."""
    with trio.fail_after(5):
        actor = Probe(mailbox_size=2)
        gate = Gate()
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="full")
            ref.try_cast(gate)
            await gate.entered.wait()
            ref.try_cast(Record(1))
            ref.try_cast(Record(2))
            with pytest.raises(MailboxFull, match="'full'"):
                ref.try_cast(Record(3))
            gate.release.set()
            assert await ref.call(Echo(None)) is None
            assert actor.seen == ["gate", 1, 2]
            ref.stop()


async def test_cast_backpressure_blocks_until_space(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """cast() on a full mailbox waits until the actor makes space."""
    with trio.fail_after(100):
        actor = Probe(mailbox_size=1)
        gate = Gate()
        sent = trio.Event()

        async def cast_then_flag() -> None:
            await ref.cast(Record(2))
            sent.set()

        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="slowpoke")
            await ref.cast(gate)
            await gate.entered.wait()
            ref.try_cast(Record(1))
            nursery.start_soon(cast_then_flag)
            await trio.sleep(60)
            assert not sent.is_set()
            gate.release.set()
            await sent.wait()
            assert await ref.call(Echo(None)) is None
            assert actor.seen == ["gate", 1, 2]
            ref.stop()


async def test_cast_blocked_sender_released_on_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A cast waiting for mailbox space gets ActorStopped when the actor stops."""
    with trio.fail_after(100):
        actor = Probe(mailbox_size=1)
        gate = Gate()
        results: dict[str, object] = {}

        async def blocked_cast() -> None:
            try:
                await ref.cast(Record(2))
            except ActorStopped as exc:
                results["cast"] = exc

        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="closing")
            await ref.cast(gate)
            await gate.entered.wait()
            ref.try_cast(Record(1))
            nursery.start_soon(blocked_cast)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            ref.stop()
            gate.release.set()
        assert trio.current_time() == start
        assert isinstance(results["cast"], ActorStopped)
        assert actor.seen == ["gate"]


async def test_on_stop_failure_after_crash_keeps_crash() -> None:
    """If on_stop() fails after a crash, the crash still propagates, with a note."""
    with trio.fail_after(5):
        actor = Probe(first=Boom(), fail_on_stop=True)
        with pytest.raises(ValueError, match="boom") as info:
            await run_actor(actor, name="messy")
        assert any("on_stop() also failed" in note for note in info.value.__notes__)


async def test_reply_fail_reraised_in_caller() -> None:
    """Reply.fail() makes call() raise that exception; the actor keeps running."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, Probe(), name="picky")
            with pytest.raises(LookupError, match="no such thing"):
                await ref.call(Refuse("no such thing"))
            assert await ref.call(Echo(1)) == 1
            ref.stop()


def test_reply_second_send_raises() -> None:
    """A Reply is answered once: a second send or fail is a RuntimeError."""
    reply: Reply[int] = Reply()  # synchronous: nothing here can block
    assert not reply.done
    reply.send(1)
    assert reply.done
    with pytest.raises(RuntimeError, match="already sent"):
        reply.send(2)
    with pytest.raises(RuntimeError, match="already sent"):
        reply.fail(ValueError("late"))


async def test_stop_finishes_current_message_and_fails_pending_calls() -> None:
    """stop() lets the current message finish, fails queued and held calls, and returns."""
    with trio.fail_after(5):
        actor = Probe()
        gate = Gate()
        results: dict[str, object] = {}
        # The inner nursery exits cleanly only if run_actor returned normally.
        async with trio.open_nursery() as callers, trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="graceful")
            callers.start_soon(record_call, results, "held", ref, Hold("h"))
            await trio.testing.wait_all_tasks_blocked()
            await ref.cast(gate)
            await gate.entered.wait()
            callers.start_soon(record_call, results, "queued", ref, Echo(1))
            await trio.testing.wait_all_tasks_blocked()
            ref.stop()
            assert not ref.alive
            with pytest.raises(ActorStopped):
                await ref.cast(Record("late"))
            gate.release.set()
        assert actor.seen == ["gate"]
        assert isinstance(results["queued"], ActorStopped)
        assert isinstance(results["held"], ActorStopped)
        assert actor.stopped


async def test_on_stop_bounded_by_timeout(autojump_clock: trio.testing.MockClock) -> None:
    """A stuck on_stop() is cut off after on_stop_timeout; queued calls fail before it runs."""
    with trio.fail_after(10):
        actor = Probe(stall_on_stop=True)
        gate = Gate()
        failed_at = math.nan

        async def queued_call() -> None:
            nonlocal failed_at
            with pytest.raises(ActorStopped):
                await ref.call(Echo(1))
            failed_at = trio.current_time()

        async with trio.open_nursery() as nursery:
            ref = await start_actor(nursery, actor, name="sticky")
            await ref.cast(gate)
            await gate.entered.wait()
            nursery.start_soon(queued_call)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            ref.stop()
            gate.release.set()
        assert failed_at == start
        assert trio.current_time() - start == pytest.approx(actor.on_stop_timeout)


async def test_run_actor_cancelled_fails_callers_and_reraises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelling run_actor fails queued and held calls with ActorStopped; Cancelled propagates."""
    with trio.fail_after(10):
        actor = Probe()
        gate = Gate()
        results: dict[str, object] = {}
        start = math.nan

        async def drive(started: trio.Event) -> None:
            nonlocal start
            await started.wait()
            callers.start_soon(record_call, results, "held", actor.ref, Hold("h"))
            await trio.testing.wait_all_tasks_blocked()
            await actor.ref.cast(gate)
            await gate.entered.wait()
            callers.start_soon(record_call, results, "queued", actor.ref, Echo(1))
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            scope.cancel()

        async with trio.open_nursery() as callers:
            started = trio.Event()
            callers.start_soon(drive, started)
            with trio.CancelScope() as scope:
                await run_actor(actor, name="doomed", task_status=_SetOnStarted(started))
                pytest.fail("run_actor returned instead of raising Cancelled")
        assert scope.cancelled_caught
        assert trio.current_time() == start  # failed at once, not at the 5 s call timeout
        assert isinstance(results["held"], ActorStopped)
        assert isinstance(results["queued"], ActorStopped)
        assert actor.seen == []  # the gate handler was interrupted
        assert actor.stopped
        assert not actor.ref.alive


class _SetOnStarted(trio.TaskStatus[ActorRef[Msg]]):
    """A task_status for calling run_actor directly: sets an event once the actor is ready."""

    def __init__(self, event: trio.Event) -> None:
        self.event = event

    def started(self, value: ActorRef[Msg] | None = None) -> None:
        self.event.set()


async def test_run_actor_rejects_unbounded_mailbox() -> None:
    """An unbounded mailbox (math.inf) is refused."""
    with trio.fail_after(5):
        actor = Probe()
        actor.mailbox_size = math.inf  # type: ignore[assignment]
        with pytest.raises(ValueError, match="mailbox_size"):
            await run_actor(actor, name="unbounded")
