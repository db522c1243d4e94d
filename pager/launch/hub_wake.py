"""Idle wake through a harness's hub (a manifest's `[wake.hub]`): Cline CLI's TUI runs its
session in a hub daemon, a WebSocket server that takes prompts from any client holding its
token. When the broker says on the session's event stream that mail waits (`event: mail`,
docs/protocol.md), the launch sends the session the `[pager]` wake prompt through the hub,
as a queued prompt; the TUI runs it as a turn and the harness's own hooks claim, show and
acknowledge the mail there.

The hub is the launch's own (its discovery file in the launch's private directory, a port of
its own). It lists every session kept in the user's data directory, so the knock picks the one
whose process (`metadata.pid`) holds the launch's credential in its environment: the TUI's
(Linux only, as pager/launch/leftovers.py reads /proc; elsewhere nothing is knocked).

Its protocol (Cline's "v1", read in @cline/core 0.0.86): JSON text frames, `{"kind":
"command", "envelope": {"version": "v1", "command": …, "requestId": …, "payload": …}}`
answered by `{"kind": "reply", "envelope": {"requestId": …, "ok": …, "payload": …}}`; the
bearer token travels as the WebSocket subprotocol `cline-hub-auth.<token>`, read from the
discovery file (`url`, `authToken`).

The turn the knock starts begins with a hook (Cline CLI's TaskStart) whose payload has no
prompt, so it cannot see the `[pager]` mark: before sending, the launch leaves a pending-knock
mark (pager/launch/knock_mark.py) that `pager hook --prompt-only` takes instead of reporting
a typed prompt.

Nothing here claims mail, and a failure (no hub yet, a refusal) is not the launch's: the mail
waits for the session's next turn.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from pager.launch.knock_mark import has_mark, leave_mark, take_mark
from pager.launch.leftovers import holders
from pager.launch.wake_prompt import wake_prompt

#: The subprotocol prefix carrying the hub's token (Cline's `cline-hub-auth.`).
AUTH_PREFIX = "cline-hub-auth."
#: Seconds one knock may take, from connecting to the hub's acceptance of the prompt.
KNOCK_BOUND = 10.0
#: A reply larger than this is not the hub's.
MAX_MESSAGE = 4 * 1024 * 1024
#: Hub session states in which a queued prompt starts a turn at once.
IDLE = frozenset({"idle", "completed", "aborted", "failed"})


class HubError(Exception):
    """The hub cannot be reached or refused a command."""


@attrs.frozen
class HubWake:
    """What the wrapper needs of `[wake.hub]`: the hub's discovery file (a template)."""

    discovery: str


class HubConnection:
    """One WebSocket connection to the hub: commands and their replies."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self._stream, self._ws = stream, ws
        self._ids = itertools.count(1)
        self._text = ""

    @classmethod
    async def open(cls, discovery: Path) -> HubConnection:
        """Connects to the hub the discovery file names, its token as the subprotocol."""
        url, token = read_discovery(discovery)
        parts = urlsplit(url)
        if parts.scheme != "ws" or not _loopback(parts.hostname):
            raise HubError(f"the hub's url {url!r} is not a loopback ws:// address")
        assert parts.hostname is not None
        port = parts.port or 80
        stream = await trio.open_tcp_stream(parts.hostname, port)
        ws = WSConnection(ConnectionType.CLIENT)
        connection = cls(stream, ws)
        try:
            request = Request(
                host=f"{parts.hostname}:{port}",
                target=parts.path or "/",
                subprotocols=[f"{AUTH_PREFIX}{token}"],
            )
            await stream.send_all(ws.send(request))
            event = await connection._next_event()
            if not isinstance(event, AcceptConnection):
                raise HubError(f"the hub refused the connection ({type(event).__name__})")
        except BaseException:
            await stream.aclose()
            raise
        return connection

    async def command(self, name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Sends one command; the payload of its `ok` reply (HubError otherwise). Events the
        hub sends meanwhile are skipped."""
        request_id = await self.send(name, payload)
        while True:
            frame = await self._next_message()
            envelope = frame.get("envelope")
            if frame.get("kind") != "reply" or not isinstance(envelope, dict):
                continue
            if envelope.get("requestId") != request_id:
                continue
            if not envelope.get("ok"):
                raise HubError(f"the hub refused {name}: {envelope.get('error')}")
            answer = envelope.get("payload")
            return answer if isinstance(answer, dict) else {}

    async def send(self, name: str, payload: Mapping[str, Any]) -> str:
        """Sends one command without waiting for its reply; its request id."""
        request_id = f"pager-{next(self._ids)}"
        envelope = {"version": "v1", "command": name, "requestId": request_id}
        frame = {"kind": "command", "envelope": {**envelope, "payload": dict(payload)}}
        await self._stream.send_all(self._ws.send(TextMessage(json.dumps(frame))))
        return request_id

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stream.aclose()

    async def _next_message(self) -> dict[str, Any]:
        while True:
            event = await self._next_event()
            if isinstance(event, TextMessage):
                self._text += event.data
                if len(self._text) > MAX_MESSAGE:
                    raise HubError("the hub sent a message larger than 4 MiB")
                if event.message_finished:
                    text, self._text = self._text, ""
                    try:
                        frame = json.loads(text)
                    except ValueError:
                        continue
                    if isinstance(frame, dict):
                        return frame
            elif isinstance(event, Ping):
                await self._stream.send_all(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection | RejectConnection):
                raise HubError("the hub closed the connection")

    async def _next_event(self) -> Event:
        while True:
            for event in self._ws.events():
                return event
            data = await self._stream.receive_some(65536)
            if not data:
                raise HubError("the hub closed the connection")
            self._ws.receive_data(bytes(data))


def _loopback(host: str | None) -> bool:
    """An address of this machine's loopback (127.0.0.0/8, ::1): the token goes nowhere else."""
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def read_discovery(path: Path) -> tuple[str, str]:
    """The hub's WebSocket URL and token from its discovery file (HubError when unusable)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HubError(f"no hub discovery file at {path}: {exc}") from None
    url = found.get("url") if isinstance(found, dict) else None
    token = found.get("authToken") if isinstance(found, dict) else None
    if not isinstance(url, str) or not isinstance(token, str) or not token:
        raise HubError(f"{path} names no hub url and authToken")
    return url, token


def live_session(sessions: Any, owners: Collection[int]) -> dict[str, Any] | None:
    """The session the knock is for: of the sessions whose process (`metadata.pid`, the TUI
    that runs it) is one of `owners`, the one updated last (the TUI may have started another
    with `/new`). `session.list` also lists every session kept in the user's data directory:
    earlier launches', and other terminals', which may be running."""
    live = []
    for session in sessions:
        if not isinstance(session, dict) or not isinstance(session.get("sessionId"), str):
            continue
        metadata = session.get("metadata")
        pid = metadata.get("pid") if isinstance(metadata, dict) else None
        if isinstance(pid, int) and pid in owners:
            live.append(session)
    if not live:
        return None
    return max(live, key=lambda s: s.get("updatedAt") or 0)


class HubKnock:
    """One launch's knock through its hub: `knock()` (called at each `mail` event) asks for
    one; `run()` (a task of the launch) sends them, one at a time. `owners` gives the pids of
    the launch's processes (those holding its credential: the TUI among them)."""

    def __init__(
        self,
        discovery: Path,
        prompt: str,
        mark_dir: Path,
        owners: Callable[[], Iterable[int]],
    ) -> None:
        self.discovery, self.prompt, self.mark_dir = discovery, prompt, mark_dir
        self.owners = owners
        self._wanted = trio.Event()
        #: What became of the last knock (for a test or a log): "sent", or why not.
        self.outcome: str | None = None

    @classmethod
    def create(cls, directory: str, wake: HubWake, values: Mapping[str, str]) -> HubKnock:
        """The knock of the launch whose private directory is `directory`, its hub's discovery
        file rendered with `values`."""
        discovery = Path(wake.discovery.format_map(values))
        owners = partial(holders, values["token"])  # the relay credential of PAGER_TOKEN
        return cls(discovery, wake_prompt(values["address"]), Path(directory), owners)

    def knock(self) -> None:
        self._wanted.set()

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            outcome = "timed out"
            with trio.move_on_after(KNOCK_BOUND):
                try:
                    outcome = await self.knock_once()
                except (OSError, HubError, trio.BrokenResourceError, ValueError) as exc:
                    outcome = f"failed: {exc}"
            self.outcome = outcome

    async def knock_once(self) -> str:
        """Queues the wake prompt in the hub's session: "sent", or why not. A busy session
        runs it after its turn (whose hooks may deliver the mail first: the knock's turn then
        finds none). While an earlier knock's turn has not begun (its mark is still there)
        and the session is busy, that knock is still queued: no second one."""
        connection = await HubConnection.open(self.discovery)
        try:
            listed = await connection.command("session.list", {"limit": 50})
            owners = frozenset(await trio.to_thread.run_sync(lambda: list(self.owners())))
            session = live_session(listed.get("sessions") or [], owners)
            if session is None:
                return "no session of the launch's in the hub (none typed into yet)"
            if has_mark(self.mark_dir) and session.get("status") not in IDLE:
                return "a knock is queued already"
            leave_mark(self.mark_dir)
            payload = {
                "sessionId": session["sessionId"],
                "prompt": self.prompt,
                "delivery": "queue",
            }
            try:
                await connection.command("session.send_input", payload)
            except HubError:
                take_mark(self.mark_dir)  # no turn of the knock's will begin
                raise
            return "sent"
        finally:
            await connection.aclose()
