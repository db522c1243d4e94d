"""The session of one wrapped launch: where its broker is, its current token, and its rejoin.

A harness is wired once, when it starts, with the launch relay's address and credential
(pager/launch/relay.py); the session token behind them may change while it runs. A broker that
found its kept port held by another program revokes every earlier token (pager/launch/squat.py),
and a lease lapses when no broker ran for longer than its TTL. Then the wrapper registers again
with the session's resume token and the local secret (SPEC §7), writes the new token where
Pager's own clients in the harness read it (`PAGER_TOKEN_FILE`), and the harness goes on as the
same agent without noticing. `ended` (a takeover, an archive, a purge) is final: no rejoin.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from pager.client import BrokerUnreachable, request_json
from pager.launch.discovery import BrokerLocator, still_running
from pager.launch.files import write_private_text
from pager.launch.lifecycle import LifecycleError, ensure_broker

#: Seconds a register call waits for the broker (as the launch's own registration does).
REGISTER_TIMEOUT = 10.0
#: A broker is started on demand at most this often (seconds): a start that failed is not
#: retried for every request of a harness that keeps calling.
START_INTERVAL = 5.0


class WrappedSession:
    """The registered session of a wrapped launch, shared by its relay and its lease holder."""

    def __init__(
        self,
        locator: BrokerLocator,
        registration: dict[str, Any],
        answer: dict[str, Any],
        token_file: Path | None = None,
    ) -> None:
        self.locator = locator
        #: The body the launch registered with (a rejoin sends it again, without `force`).
        self.registration = {k: v for k, v in registration.items() if k != "force"}
        self.answer = dict(answer)  # the broker's last register answer: token, resume token, …
        self.token_file = token_file
        self.ended: str | None = None  # why the session ended for good, once it has
        self._rejoining = trio.Lock()
        self._starting = trio.Lock()
        self._last_start = -START_INTERVAL

    @property
    def token(self) -> str:
        return str(self.answer["token"])

    def write_token_file(self) -> None:
        if self.token_file is not None:
            write_private_text(self.token_file, self.token + "\n")

    async def url(self, *, start: bool = False) -> str | None:
        """The URL of the broker that proved itself (None: none does; nothing may be sent).
        With `start`, a broker is started when none runs, as any Pager command would."""
        known = self.locator.broker
        if known is not None and still_running(self.locator.paths, known):
            return known.url  # a lock probe and a small read: no thread for the common case
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
                    _say(f"no broker runs and none could be started: {exc}")
                    return None
                self.locator.broker = broker
                url = broker.url
            return url

    async def rejoin(self, stale: str) -> bool:
        """Register again after the broker refused `stale` (`expired`, or a token it does not
        know); True when the session now has a token other than `stale`."""
        async with self._rejoining:
            if self.ended is not None:
                return False
            if self.token != stale:
                return True  # another request already rejoined
            url = await self.url(start=True)
            if url is None:
                return False
            try:
                secret = self.locator.paths.secret.read_text().strip()
            except OSError as exc:
                _say(f"cannot rejoin: the local secret is unreadable ({exc})")
                return False
            resume = self.answer.get("resume_token")
            body = {**self.registration, **({"resume_token": resume} if resume else {})}
            status, answer = await self._register(url, secret, body)
            if status == 401 and _code(answer) == "unauthenticated" and resume:
                # The resume token is unknown (the identity was reaped): as a new launch would.
                status, answer = await self._register(url, secret, self.registration)
            if status != 201 or not isinstance(answer, dict) or "token" not in answer:
                _say(f"could not rejoin the broker at {url}: {_reason(status, answer)}")
                return False
            before = self.answer.get("agent_id")
            self.answer = answer
            self.write_token_file()
            same = "" if answer.get("agent_id") == before else " (a different identity)"
            _say(f"rejoined the broker at {url} as {answer.get('address')}{same}")
            return True

    def end(self, reason: str) -> None:
        self.ended = reason

    async def _register(self, url: str, secret: str, body: dict[str, Any]) -> tuple[int, Any]:
        call = partial(
            request_json,
            url,
            "POST",
            "/v1/register",
            token=secret,
            body=body,
            timeout=REGISTER_TIMEOUT,
        )
        try:
            return await trio.to_thread.run_sync(call)
        except BrokerUnreachable as exc:
            return 0, {"error": {"code": "unavailable", "message": str(exc)}}


def _code(answer: Any) -> str | None:
    error = answer.get("error") if isinstance(answer, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _reason(status: int, answer: Any) -> str:
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        return f"{error.get('code')}: {error.get('message')}"
    return f"HTTP {status}"


def _say(line: str) -> None:
    print(f"pager: {line}", file=sys.stderr)
