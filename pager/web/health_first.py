"""`GET /health`: the broker's identity, what it reports degraded, and its proof.

Every command line proves the broker before it sends a credential (pager/launch/proof.py), so
each `pager send` costs the broker one `/health?challenge=…`: a few hundred bytes of JSON, for
which Quart's request and response machinery was about a sixth of the broker's CPU per proof
(docs/benchmarks.md). `HealthFirst` answers the two plain forms of it (`GET /health`, and `GET
/health?challenge=HEX` with a well-formed challenge) before Quart, behind the edge guard (its
Host and Origin checks still apply), with the bytes and headers the Quart route gives
(tests/web/test_health_first.py compares them). Every other form (HEAD, a malformed
challenge, any other query) goes on to the Quart route, which answers it as before. Both
build the answer with `HealthAnswer`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pager.health import HealthBoard
from pager.launch.proof import CHALLENGE_BYTES, valid_challenge
from pager.web.guard import ASGIApp, Receive, Scope, Send

_PREFIX = b"challenge="
_HEADERS = [(b"content-type", b"application/json")]


class HealthAnswer:
    """What `GET /health` answers: `ok`, the broker's identity (`health`), the board's
    status, and with a challenge the proof of it (`prove`; None: this broker has no secret)."""

    def __init__(
        self,
        health: dict[str, Any],
        board: HealthBoard,
        prove: Callable[[str], str] | None,
    ) -> None:
        self.health, self.board, self.prove = health, board, prove

    def __call__(self, challenge: str | None) -> dict[str, Any]:
        """The answer; `challenge` must be None or well-formed, with `prove` set (the caller
        refuses the rest)."""
        # `ok`: the broker answers; `status`: whether anything is degraded (pager/health.py).
        answer = {"ok": True, **self.health, **self.board.snapshot()}
        if challenge is not None:
            assert self.prove is not None
            answer["proof"] = self.prove(challenge)
        return answer

    def answers(self, challenge: str | None) -> bool:
        """Whether `challenge` gets an answer rather than a refusal."""
        return challenge is None or (self.prove is not None and valid_challenge(challenge))


def encode(answer: dict[str, Any]) -> bytes:
    """A JSON body as Quart's `jsonify` writes it outside debug mode: sorted keys, compact
    separators, ASCII, one newline at the end."""
    return (json.dumps(answer, sort_keys=True, separators=(",", ":")) + "\n").encode()


class HealthFirst:
    """ASGI middleware: the plain forms of `GET /health` answered here, the rest by `app`."""

    def __init__(self, app: ASGIApp, answer: HealthAnswer) -> None:
        self.app = app
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/health" and scope["method"] == "GET":
            query: bytes = scope["query_string"]
            challenge = _challenge(query)
            if (query == b"" or challenge is not None) and self.answer.answers(challenge):
                await _read_body(receive)  # so the guard ends the response without draining
                body = encode(self.answer(challenge))
                length = (b"content-length", str(len(body)).encode())
                headers = [*_HEADERS, length]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _challenge(query: bytes) -> str | None:
    """The challenge of a query that is exactly `challenge=` and the challenge's length of
    characters (which `valid_challenge` then checks), else None."""
    if len(query) != len(_PREFIX) + 2 * CHALLENGE_BYTES or not query.startswith(_PREFIX):
        return None
    return query[len(_PREFIX) :].decode("latin-1")


async def _read_body(receive: Receive) -> None:
    """Read the request's body to its end (a GET's is empty: one message)."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
