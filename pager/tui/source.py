"""Where the TUI's data comes from: the broker's `/v1` API (`HttpSource`), or a stand-in.

The JSON calls are blocking (`pager.client.request_json`, one request per connection) and run
in worker threads; the event stream is an asyncio stream (`sse.stream_events`). The broker's
address and the local secret are looked up before every request (a lock probe while the broker
that proved itself still runs, discovery again otherwise), so a broker that restarts elsewhere
is found again, and the secret never goes to whatever holds a remembered address.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlencode

from pager.client import BrokerUnreachable, request_json
from pager.tui.errors import ApiError, Unreachable
from pager.tui.model import MessagePage, Snapshot, parse_messages, parse_snapshot
from pager.tui.sse import SseEvent, stream_events

if TYPE_CHECKING:
    from pager.launch.discovery import RunningBroker
    from pager.launch.paths import StatePaths

#: Each operator action the TUI offers: its method and the route under /v1/agents/{id}/.
ACTIONS = {
    "archive": ("POST", "archive"),
    "unarchive": ("POST", "unarchive"),
    "purge": ("POST", "purge"),
    "wake_on": ("PUT", "wake"),  # launch on mail with its defaults (docs/wake.md)
    "wake_off": ("DELETE", "wake"),
}
#: The action that breaks an agent's edit reservations: each by its id, on
#: `/v1/reservations/{id}` (docs/reservations.md), not a route of the agent's.
BREAK_RESERVATIONS = "break_reservations"
REQUEST_TIMEOUT = 10.0  # a snapshot of thousands of agents on a loaded machine

#: Returns the broker's URL and the local secret; raises `Unreachable` when no broker proves
#: itself. Called before every request, so it must be cheap while the broker runs.
Locator = Callable[[], tuple[str, str]]


class OperatorSource(Protocol):
    """What the app needs. Blocking methods run in threads; `events` on the event loop."""

    @property
    def where(self) -> str: ...

    def relocate(self) -> None:
        """Look the broker up again (before a reconnection attempt)."""

    def snapshot(self) -> Snapshot: ...

    def messages(
        self, agent_id: str, *, direction: str, state: str, limit: int, cursor: str | None
    ) -> MessagePage: ...

    def act(self, agent_id: str, action: str) -> None:
        """One of `ACTIONS` on one agent; `ApiError` when refused."""

    def break_reservations(self, reservation_ids: tuple[str, ...]) -> None:
        """End these edit reservations as the operator; `ApiError` when one is refused."""

    def events(self, last_id: int) -> AsyncIterator[SseEvent]: ...


class HttpSource:
    """The broker's `/v1` API with the local secret as the bearer token."""

    def __init__(self, locate: Locator) -> None:
        self._locate = locate
        self._url, self._token = locate()

    @classmethod
    def fixed(cls, url: str, token: str) -> HttpSource:
        return cls(lambda: (url, token))

    @property
    def where(self) -> str:
        return self._url

    def relocate(self) -> None:
        self._url, self._token = self._locate()

    def snapshot(self) -> Snapshot:
        snapshot = self._get("/v1/snapshot")
        try:  # each agent's edit reservations (docs/reservations.md), shown in its row
            reservations = self._get("/v1/reservations").get("reservations")
        except ApiError:  # a broker without them: the agents all the same
            reservations = None
        return parse_snapshot(snapshot, reservations)

    def messages(
        self, agent_id: str, *, direction: str, state: str, limit: int, cursor: str | None
    ) -> MessagePage:
        query: dict[str, str | int] = {"direction": direction, "limit": limit}
        if state:
            query["state"] = state
        if cursor:
            query["cursor"] = cursor
        path = f"/v1/agents/{quote(agent_id, safe='')}/messages?{urlencode(query)}"
        return parse_messages(self._get(path))

    def act(self, agent_id: str, action: str) -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown operator action {action!r}")
        method, route = ACTIONS[action]
        body: dict[str, Any] | None = None if method == "DELETE" else {}
        self._call(method, f"/v1/agents/{quote(agent_id, safe='')}/{route}", body)

    def break_reservations(self, reservation_ids: tuple[str, ...]) -> None:
        for reservation_id in reservation_ids:
            self._call("DELETE", f"/v1/reservations/{quote(reservation_id, safe='')}", None)

    def events(self, last_id: int) -> AsyncIterator[SseEvent]:
        # No relocate here: this runs on the event loop, and the app relocates (in a thread)
        # before every reconnection, just before it reads the snapshot.
        return stream_events(self._url, "/v1/events", token=self._token, last_event_id=last_id)

    def _get(self, path: str) -> dict[str, Any]:
        return self._call("GET", path, None)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        self.relocate()
        try:
            status, answer = request_json(
                self._url, method, path, token=self._token, body=body, timeout=REQUEST_TIMEOUT
            )
        except BrokerUnreachable as exc:
            raise Unreachable(str(exc)) from exc
        if 200 <= status < 300:
            return answer if isinstance(answer, dict) else {}
        error = answer.get("error") if isinstance(answer, dict) else None
        error = error if isinstance(error, dict) else {}
        code = str(error.get("code") or "http_error")
        message = str(error.get("message") or f"{method} {path.split('?')[0]} answered {status}")
        if status >= 500 and status != 501:
            raise Unreachable(message)
        raise ApiError(status, code, message)


def state_dir_locator(paths: StatePaths, broker: RunningBroker) -> Locator:
    """The URL of the broker that proved itself (`broker`, then whichever does after it), and
    the secret."""
    from pager.launch.discovery import BrokerLocator

    locator = BrokerLocator(paths, broker)

    def locate() -> tuple[str, str]:
        url = locator.url()
        if url is None:
            raise Unreachable("no broker runs for this state directory (`pager status` says why)")
        try:
            token = paths.secret.read_text().strip()
        except OSError as exc:
            raise Unreachable(f"cannot read the local secret {paths.secret}: {exc}") from exc
        return url, token

    return locate
