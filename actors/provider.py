"""The delivery provider: writes claims to a session's delivery address (docs/protocol.md).

One POST per push, each in its own task so a slow inbox never holds up another. Whatever goes
wrong (refused, unreachable, malformed answer, timeout) is reported back as refused claims,
which the identity actor requeues on the redelivery schedule.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from actors._runtime import Actor, ActorError, Reply
from actors.identity_delivery import Deliver, ProviderMessage, WakeSession
from actors.identity_launch import LaunchRun
from actors.identity_protocol import Pushed
from pager.domain.records import DeliveryKind
from pager.domain.results import mail_message
from pager.implementations.manifest import Wake
from pager.rendering import cause, encoded, render_each
from pager.store.ports import ClaimView

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("pager.provider")

#: A delivery address must answer within this long (its identity pushes nothing else meanwhile).
DELIVERY_TIMEOUT = 2.0


def notification(deliver: Deliver) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The body POSTed to a delivery address, and the tokens of the claims left out of it
    because their messages cannot be rendered (`pager.rendering`: they die, the rest go)."""
    rendered = render_each(deliver.claims, _pushed_claim)
    for view, exc in rendered.failed:
        log.warning(
            "message %s cannot be rendered (%s); dead-lettered as unrenderable",
            view.claim.message.id,
            cause(exc),
        )
    body = {"session_id": deliver.session_id, "claims": [claim for _, claim in rendered.shown]}
    return body, tuple(view.claim.token for view, _ in rendered.failed)


def _pushed_claim(view: ClaimView) -> dict[str, Any]:
    message = mail_message(
        view.claim.message, sender=view.sender_address, recipient=view.recipient_address
    )
    return {
        "token": view.claim.token,
        "expires_at": view.claim.expires_at,
        "message": encoded(message),
    }


def refused_tokens(tokens: list[str], status: int, raw: bytes) -> tuple[str, ...]:
    """The pushed claims the inbox did not take: all of them unless it answered 2xx, and then
    every token its `accepted` list does not name (only what it names counts as delivered)."""
    if not 200 <= status < 300:
        return tuple(tokens)
    try:
        answer = json.loads(raw)
        accepted = answer.get("accepted", []) if isinstance(answer, dict) else []
    except ValueError:
        accepted = []
    taken = {token for token in accepted if isinstance(token, str)}
    return tuple(token for token in tokens if token not in taken)


def _http_error() -> type[Exception]:
    import httpx2

    return httpx2.HTTPError


class DeliveryProvider(Actor[ProviderMessage]):
    mailbox_size = 1024

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        timeout: float = DELIVERY_TIMEOUT,
        wake: Wake | None = None,
        launch: Callable[[LaunchRun], Awaitable[None]] | None = None,
    ) -> None:
        self._nursery = nursery
        self._timeout = timeout
        self._wake = wake
        self._launch = launch  # starts a wake run as a child of this provider
        self._clients: dict[str | None, httpx2.AsyncClient] = {}

    def _client(self, uds: str | None) -> httpx2.AsyncClient:
        import httpx2  # on the first delivery: an idle broker need not load it

        client = self._clients.get(uds)
        if client is None:
            transport = httpx2.AsyncHTTPTransport(uds=uds, trust_env=False)
            client = httpx2.AsyncClient(transport=transport, timeout=self._timeout, trust_env=False)
            self._clients[uds] = client
        return client

    async def handle(self, message: ProviderMessage, reply: Reply[Any] | None) -> None:
        match message:
            case Deliver():
                self._nursery.start_soon(self._post, message)
            case WakeSession(values=values):
                if self._wake is not None and self._wake.command:
                    self._nursery.start_soon(self._run_wake, self._wake, values)
            case LaunchRun():
                if self._launch is not None:
                    self._nursery.start_soon(self._launch, message)
            case _:
                self.unhandled(message)
        if reply is not None:
            reply.send(None)

    async def _run_wake(self, wake: Wake, values: dict[str, str]) -> None:
        """The implementation's wake helper, as a subprocess with a timeout; failures are
        logged, never raised (the mail keeps waiting for the next hook or fetch)."""
        if not values.get("conversation_key") and any(
            "{conversation_key}" in part for part in wake.command
        ):
            log.info("wake helper %s: the session's conversation is not known yet", wake.command[0])
            return  # e.g. a harness that names its thread at its first hook: it has not yet
        try:
            command = [part.format_map(values) for part in wake.command]
        except (KeyError, ValueError) as exc:
            log.warning("wake helper %r: cannot fill %s", wake.command, exc)
            return
        try:
            with trio.fail_after(wake.timeout):
                done = await trio.run_process(
                    command, capture_stdout=True, capture_stderr=True, check=False
                )
        except (OSError, trio.TooSlowError) as exc:
            log.warning("wake helper %s failed: %r", command[0], exc)
            return
        if done.returncode != 0:
            log.warning(
                "wake helper %s exited %d: %s",
                command[0],
                done.returncode,
                done.stderr.decode(errors="replace").strip()[-200:],
            )

    async def _post(self, deliver: Deliver) -> None:
        tokens = [view.claim.token for view in deliver.claims]
        delivery = deliver.delivery
        if delivery.kind is DeliveryKind.UNIX:
            client, url = self._client(delivery.target), "http://pager-inbox/"
        else:
            client, url = self._client(None), delivery.target
        body, unrenderable = notification(deliver)
        tokens = [token for token in tokens if token not in unrenderable]
        refused: tuple[str, ...] = tuple(tokens)
        try:
            if tokens:
                with trio.fail_after(self._timeout):
                    response = await client.post(url, json=body)
                    raw = await response.aread()
                refused = refused_tokens(tokens, response.status_code, raw)
        except (_http_error(), OSError, trio.TooSlowError) as exc:
            log.info("delivery to %s failed: %r; will retry on the schedule", delivery.target, exc)
        if refused:
            log.info("delivery address %s refused %d claim(s)", delivery.target, len(refused))
        # If the identity stopped, its claims lapse and return to the queue after the ack wait.
        with contextlib.suppress(ActorError):
            deliver.identity.try_cast(Pushed(deliver.push_id, refused, unrenderable))

    async def on_stop(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()
