"""The connector session client: one registered session of a connector and its lease (SPEC §7).

Shared by the wrapper of `pager <implementation>` (pager/launch/wrapper.py, whose launch relay
forwards the harness's requests with the current token, pager/launch/relay.py) and `pager mcp`
(pager/mcp_stdio_link.py). A `SessionClient`

- registers the session (POST /v1/register with the local secret), only ever with the broker
  that proved itself (pager/launch/discovery.py), starting one on demand when none runs;
- keeps its current token, and writes it where Pager's own clients in a wrapped harness read it
  (`PAGER_TOKEN_FILE`) each time it changes;
- rejoins when the broker refuses the token (`expired`, or a token it does not know, e.g. after
  a broker that found its kept port squatted revoked every token, pager/launch/squat.py): it
  registers again with the session's resume token (an unknown one: as a new session would);
- treats `ended` (a takeover, an archive, a newer attachment) as final: no rejoin, no detach;
- detaches gracefully when the connector leaves.

`hold_lease` keeps the session's event stream open, which holds its lease, and follows the
session when its token changes. What the client does is told through `SessionNotices`: the
wrapper prints it, `pager mcp` logs it. Stdlib (and trio) only: the wrapper must not import the
server stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import trio

from pager.client import (
    BodyReader,
    BrokerUnreachable,
    ResponseHead,
    parse_head,
    request_json,
    split_head,
)
from pager.launch.discovery import BrokerLocator, still_running
from pager.launch.files import write_private_text
from pager.launch.lifecycle import LifecycleError, ensure_broker
from pager.sse import SseEvent, SseParser

#: Seconds a register (or the wrapper's detach) call waits for the broker: a busy broker commits
#: them in well under that; a shorter bound turned a slow answer into a failed launch or a
#: session left to lapse instead of detaching.
BROKER_CALL_TIMEOUT = 10.0
#: A broker is started on demand at most this often (seconds): a start that failed is not
#: retried for every request of a harness that keeps calling.
START_INTERVAL = 5.0
#: The event stream sends a heartbeat every 15 s: one silent for this long (seconds) is dead.
STREAM_IDLE = 60.0
#: Seconds between reconnections of the event stream: the first, and at most (doubling).
FIRST_DELAY, MAX_DELAY = 0.5, 15.0
#: Refusals that a rejoin can cure; `ended` cannot (SPEC §7).
REJOINABLE = frozenset({"expired", "unauthenticated"})


class SessionNotices(Protocol):
    """What a connector tells its user of its session (the wrapper: `pager: …` lines on
    stderr; `pager mcp`: its log)."""

    def info(self, text: str) -> None:
        """A detail only a log shows."""

    def warn(self, text: str) -> None:
        """Something the user should know (a rejoin that failed, a broker that cannot start)."""

    def registered(self, url: str, answer: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """The broker at `url` registered the session (`previous`: the answer it had before)."""

    def refused(self, refusal: StreamRefusal) -> None:
        """The broker refused the session's event stream and no rejoin cured it."""

    def ended(self, event: SseEvent) -> None:
        """The broker ended the session (the stream's `ended` event)."""


class SessionHandle(Protocol):
    """What the launch relay and the lease holder need of a session (`SessionClient`)."""

    @property
    def token(self) -> str: ...

    @property
    def ended(self) -> str | None: ...

    @property
    def changed(self) -> trio.Event: ...

    @property
    def notices(self) -> SessionNotices: ...

    async def url(self, *, start: bool = False) -> str | None: ...

    async def rejoin(self, stale: str) -> bool: ...

    def end(self, reason: str) -> None: ...


class StreamRefusal(NamedTuple):
    """A 4xx answer to the event stream's request."""

    status: int
    line: str  # the status line, e.g. "HTTP/1.1 401 Unauthorized"
    answer: Any  # its JSON body, or None

    @property
    def code(self) -> str | None:
        return answer_code(self.answer)


class RegistrationFailed(Exception):
    """The broker refused a registration (its status and answer), or none answered (status 0;
    `gone`: nothing listened, so nothing was sent and a started broker may take it)."""

    def __init__(self, status: int, answer: Any, *, gone: bool = False) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.answer, self.gone = status, answer, gone

    @classmethod
    def unavailable(cls, message: str, *, gone: bool) -> RegistrationFailed:
        return cls(0, {"error": {"code": "unavailable", "message": message}}, gone=gone)

    @property
    def error(self) -> dict[str, Any]:
        """The Pager error of the answer ({} when it has none)."""
        error = self.answer.get("error") if isinstance(self.answer, dict) else None
        return error if isinstance(error, dict) else {}

    @property
    def reason(self) -> str:
        error = self.error
        return f"{error.get('code')}: {error.get('message')}" if error else f"HTTP {self.status}"


class SessionEnded(Exception):
    """The broker ended the session: it is not registered again (SPEC §7)."""


class SessionClient:
    """The registered session of one connector: its broker, its token, its rejoin, its detach."""

    def __init__(
        self,
        locator: BrokerLocator,
        registration: dict[str, Any],
        *,
        notices: SessionNotices,
        token_file: Path | None = None,
    ) -> None:
        self.locator = locator
        self._first = dict(registration)  # the first registration's body (`force` included)
        #: The body a rejoin sends (with the resume token): the first one without `force`.
        self.registration = {k: v for k, v in registration.items() if k != "force"}
        #: The broker's last register answer (token, resume token, agent id, …); None before.
        self.answer: dict[str, Any] | None = None
        self.token_file = token_file
        self.notices = notices
        self.ended: str | None = None  # why the session ended for good, once it has
        self.owned = True  # registered by this client (False: `adopt`ed; someone else detaches)
        self._changed = trio.Event()
        self._registering = trio.Lock()
        self._starting = trio.Lock()
        self._last_start = -START_INTERVAL
        self._detached = False

    @property
    def token(self) -> str:
        if self.answer is None:
            raise RuntimeError("the session is not registered yet")
        return str(self.answer["token"])

    @property
    def changed(self) -> trio.Event:
        """Set (and replaced) when the token changes or the session ends."""
        return self._changed

    def write_token_file(self) -> None:
        if self.token_file is not None and self.answer is not None:
            write_private_text(self.token_file, self.token + "\n")

    def current_url(self) -> str | None:
        """The verified broker's URL while it still holds its lock (a lock probe and a small
        read: no request, no thread), else None."""
        known = self.locator.broker
        return known.url if known is not None and still_running(self.locator.paths, known) else None

    async def url(self, *, start: bool = False) -> str | None:
        """The URL of the broker that proved itself (None: none does; nothing may be sent).
        With `start`, a broker is started when none runs, as any Pager command would."""
        if (known := self.current_url()) is not None:
            return known
        url = await trio.to_thread.run_sync(self.locator.url)  # may ask /health: a thread
        if url is not None or not start:
            return url
        async with self._starting:
            url = await trio.to_thread.run_sync(self.locator.url)
            if url is None and trio.current_time() - self._last_start >= START_INTERVAL:
                self._last_start = trio.current_time()
                try:
                    broker = await trio.to_thread.run_sync(ensure_broker, self.locator.paths)
                except LifecycleError as exc:
                    self.notices.warn(f"no broker runs and none could be started: {exc}")
                    return None
                self.locator.broker = broker
                url = broker.url
            return url

    async def register(self, *, stale: str | None = None) -> dict[str, Any]:
        """Registers the session, the first time or, with `stale` (the token the broker
        refused), again with the resume token, unless another task already did since; the
        broker's answer. Raises RegistrationFailed, SessionEnded, OSError (the local secret)."""
        async with self._registering:
            if self.ended is not None:
                raise SessionEnded(self.ended)
            if stale is not None and self.answer is not None and self.token != stale:
                return self.answer
            url = await self.url()
            if url is None:
                message = "no Pager broker that proved itself runs for this state directory"
                raise RegistrationFailed.unavailable(message, gone=True)
            return await self._register_at(url, self._secret(), resume=stale is not None)

    async def rejoin(self, stale: str) -> bool:
        """Registers again after the broker refused `stale` (`expired`, or a token it does not
        know), starting a broker if none runs; True when the session now has a token other than
        `stale`. Why not is told (`notices`)."""
        async with self._registering:
            if self.ended is not None:
                return False
            if self.token != stale:
                return True  # another request already rejoined
            url = await self.url(start=True)
            if url is None:
                return False
            try:
                secret = self._secret()
            except OSError as exc:
                self.notices.warn(f"cannot rejoin: the local secret is unreadable ({exc})")
                return False
            try:
                await self._register_at(url, secret, resume=True)
            except RegistrationFailed as exc:
                self.notices.warn(f"could not rejoin the broker at {url}: {exc.reason}")
                return False
            return True

    def adopt(self, answer: dict[str, Any]) -> None:
        """Takes a session someone else registered, holds and detaches (a wrapped launch's)."""
        self.answer, self.owned = dict(answer), False
        self._change()

    def end(self, reason: str) -> None:
        """The session ended for good: no rejoin, no detach; the lease holder stops."""
        self.ended = reason
        self._change()

    async def detach(self) -> bool:
        """Detaches the session gracefully (its mail keeps waiting), once; not one that ended
        or that this client did not register. True when the broker answered. Cancellable at
        once (a caller may bound it)."""
        if self.answer is None or not self.owned or self.ended is not None or self._detached:
            return False
        url = await self.url()
        if url is None:
            return False  # the broker is gone: the lease lapses by itself
        self._detached = True
        call = partial(
            request_json,
            url,
            "POST",
            "/v1/sessions/current/detach",
            token=self.token,
            body={},
            timeout=BROKER_CALL_TIMEOUT,
        )
        try:
            await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        except BrokerUnreachable:
            return False
        return True

    def _secret(self) -> str:
        return self.locator.paths.secret.read_text().strip()

    async def _register_at(self, url: str, secret: str, *, resume: bool) -> dict[str, Any]:
        """Under the lock: POST /v1/register to the verified broker at `url`."""
        plain = self._first if self.answer is None else self.registration
        token = self.answer.get("resume_token") if resume and self.answer is not None else None
        status, answer = await self._post(
            url, secret, {**plain, "resume_token": token} if token else plain
        )
        if status == 401 and answer_code(answer) == "unauthenticated" and token:
            # The resume token is unknown (the identity was reaped): as a new session would.
            self.notices.info("the resume token is unknown (identity reaped?); registering afresh")
            status, answer = await self._post(url, secret, plain)
        if status != 201 or not isinstance(answer, dict) or "token" not in answer:
            raise RegistrationFailed(status, answer)
        previous, self.answer, self.owned = self.answer, answer, True
        self.write_token_file()
        self._change()
        self.notices.registered(url, answer, previous)
        return answer

    async def _post(self, url: str, secret: str, body: dict[str, Any]) -> tuple[int, Any]:
        call = partial(
            request_json,
            url,
            "POST",
            "/v1/register",
            token=secret,
            body=body,
            timeout=BROKER_CALL_TIMEOUT,
        )
        try:
            return await trio.to_thread.run_sync(call)
        except BrokerUnreachable as exc:
            refused = isinstance(exc.__cause__, ConnectionRefusedError)
            raise RegistrationFailed.unavailable(str(exc), gone=refused) from None

    def _change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


# -- the lease --------------------------------------------------------------------------------

#: What became of one event stream that did not end the session.
DROPPED, STREAMED = "dropped", "streamed"


async def hold_lease(
    session: SessionHandle,
    *,
    decides_the_end: bool = True,
    on_mail: Callable[[], None] | None = None,
    live: trio.Event | None = None,
) -> None:
    """Keeps the session's event stream open (it holds the lease); reconnects when it drops
    (backing off), at once with the new token when the token changes, and rejoins when the
    broker refuses the token (`expired`, unknown). The URL comes from the session before every
    connection: only a broker that proved itself gets the token.

    Returns once the session ended: an `ended` event, or a refusal no rejoin cures. With
    `decides_the_end` False (`pager mcp`, whose tool calls decide) only a refusal `ended` ends
    it: after an `ended` event it reconnects (a forced takeover leaves the token to a fresh
    agent, whose lease it goes on holding), and after an `expired` refusal the rejoin did not
    cure it waits until someone else registers again (the next tool call). `on_mail` is called
    at each `mail` event (mail waits that nobody took: docs/protocol.md); `live` is set once
    a stream was accepted."""
    delay = FIRST_DELAY
    while session.ended is None:
        changed = session.changed
        url = await session.url()
        if url is not None:
            token = session.token
            outcome: SseEvent | StreamRefusal | str = DROPPED
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as watch:
                    watch.start_soon(_cancel_when_set, changed, scope)
                    outcome = await _follow(url, token, session.notices, on_mail, live)
                    watch.cancel_scope.cancel()
            if scope.cancelled_caught:  # the token changed: its stream at once
                delay = FIRST_DELAY
                continue
            if isinstance(outcome, SseEvent):
                session.notices.ended(outcome)
                if decides_the_end:
                    session.end("ended")
                    return
                delay = FIRST_DELAY
            elif isinstance(outcome, StreamRefusal):
                if outcome.code in REJOINABLE and await session.rejoin(token):
                    continue  # rejoined: the new token's stream at once
                session.notices.refused(outcome)
                if decides_the_end or outcome.code == "ended":
                    session.end("refused")  # retrying cannot help
                    return
                if outcome.code in REJOINABLE:
                    await changed.wait()
                    continue
            elif outcome == STREAMED:
                delay = FIRST_DELAY
        with trio.move_on_after(delay):  # the stream dropped: the broker may be gone
            await changed.wait()
        delay = min(delay * 2, MAX_DELAY)


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _follow(
    url: str,
    token: str,
    notices: SessionNotices,
    on_mail: Callable[[], None] | None = None,
    live: trio.Event | None = None,
) -> SseEvent | StreamRefusal | str:
    """One event stream: its `ended` event, the broker's refusal, or what became of it."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    request = (
        f"GET /v1/sessions/current/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    try:
        stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        async with stream:
            await stream.send_all(request)
            answer = await _answer(stream)
            if answer is None:
                return DROPPED
            head, body, rest = answer
            if 400 <= head.status < 500:
                raw = await _small_body(stream, body, rest)
                return StreamRefusal(head.status, head.line, _loads(raw))
            events = head.status == 200
            if events and live is not None:
                live.set()
            ended = await _until_ended(stream, body, rest, events, notices, on_mail)
            if ended is not None:
                return ended
            return STREAMED if head.status == 200 else DROPPED
    except (OSError, trio.BrokenResourceError, trio.TooSlowError):  # refused, reset, silent
        return DROPPED


async def _receive(stream: trio.abc.ReceiveStream) -> bytes:
    with trio.fail_after(STREAM_IDLE):
        return bytes(await stream.receive_some(65536))


async def _answer(stream: trio.abc.ReceiveStream) -> tuple[ResponseHead, BodyReader, bytes] | None:
    """The answer's head, its body's reader and what of the body came with the head; None when
    the connection ends first (what came is read to the end when it is no HTTP answer)."""
    data = b""
    try:
        while (parts := split_head(data)) is None:
            if not (chunk := await _receive(stream)):
                return None
            data += chunk
        head = parse_head(parts[0])
        return head, BodyReader(head), parts[1]
    except ValueError:
        while await _receive(stream):
            pass  # not the broker's answer: wait for its end, then retry (with backoff)
        return None


async def _small_body(stream: trio.abc.ReceiveStream, body: BodyReader, rest: bytes) -> bytes:
    """A small (error) answer's body: what of it arrives in the next moment, up to 64 KiB."""
    raw = b""
    try:
        raw = body.feed(rest)
        with trio.move_on_after(1.0):
            while not body.done and len(raw) <= 65536:
                if not (chunk := await stream.receive_some(65536)):
                    break
                raw += body.feed(bytes(chunk))
    except ValueError:  # malformed chunks
        pass
    return raw


async def _until_ended(
    stream: trio.abc.ReceiveStream,
    body: BodyReader,
    rest: bytes,
    events: bool,
    notices: SessionNotices,
    on_mail: Callable[[], None] | None = None,
) -> SseEvent | None:
    """The stream's `ended` event, or None when the stream ends without one. Another answer
    than 200 carries no events: it is read to its end."""
    parser = SseParser()
    data = rest
    try:
        while True:
            received = body.feed(data)
            for event in parser.feed(received) if events else ():
                if event.event == "ended":
                    return event
                if event.event == "closing":
                    notices.info("the broker is shutting down")
                if event.event == "mail" and on_mail is not None:
                    on_mail()
            if body.done or not (data := await _receive(stream)):
                return None
    except ValueError:  # malformed chunks: as if the stream dropped
        return None


# -- Pager errors -----------------------------------------------------------------------------


def answer_code(answer: Any) -> str | None:
    """The `code` of a Pager error answer (JSON), or None."""
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def error_code(body: bytes) -> str | None:
    """The `code` of a Pager error body, or None."""
    return answer_code(_loads(body))


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
