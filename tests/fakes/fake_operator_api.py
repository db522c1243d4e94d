"""FAKE operator side of the broker's `/v1` API, in memory, for unit-level TUI tests.

Serves `GET /v1/snapshot`, `GET /v1/agents/{id}/messages`, `POST /v1/agents/{id}/archive|
unarchive|purge`, `PUT|DELETE /v1/agents/{id}/wake` and the `GET /v1/events` SSE stream
(resumable with `Last-Event-ID`) on 127.0.0.1 from a thread, following the contract the real
routes implement. It is not the broker: no delivery, no identity rules; tests change its state
directly (`add_agent`, `queue_message`) and every change appends an operator event.
`stop()`/`start()` on the same port stand in for a broker restart.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

HEARTBEAT = 0.2  # seconds between comments on an idle stream (notices closed clients)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class FakeOperatorApi:
    def __init__(self, *, secret: str = "fake-secret", chunked: bool = True) -> None:
        self.secret = secret
        self.chunked = chunked
        self.port = 0
        self.lock = threading.Condition()
        self.workspaces: dict[str, str] = {}  # slug -> path
        self.agents: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}  # agent id -> newest first
        self.events: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, Last-Event-ID
        self.next_stream_opens_with: str | None = None  # e.g. "reset" or "overflow"
        self.refuse: dict[str, tuple[int, str]] = {}  # action -> (status, code)
        self._closing = False
        self._abrupt = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._serial = 0

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._closing = self._abrupt = False
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self, *, graceful: bool = True) -> None:
        """Streams get `event: closing` (graceful) or are cut; the port stops answering."""
        with self.lock:
            self._closing, self._abrupt = True, not graceful
            self.lock.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- state changes (each one an operator event) ------------------------------------------

    def add_agent(
        self,
        slug: str,
        alias: str,
        *,
        implementation: str = "shell",
        attached: bool = False,
        archived: bool = False,
        queued: int = 0,
    ) -> str:
        with self.lock:
            self._serial += 1
            agent_id = f"agt_fake{self._serial:04d}"
            self.workspaces.setdefault(slug, f"/work/{slug.rsplit('-', 1)[0]}")
            self.agents[agent_id] = {
                "agent_id": agent_id,
                "alias": alias,
                "address": f"{alias}@{slug}",
                "workspace": slug,
                "implementation": implementation,
                "durable": True,
                "archived": archived,
                "attached": attached,
                "sessions": [],
                "inbox": {"queued": queued, "claimed": 0, "dead": 0},
                "last_seen": _now(),
                "created_at": _now(),
                "archived_at": _now() if archived else None,
            }
            self.messages[agent_id] = []
            self._event("agent.created", {"agent_id": agent_id})
            return agent_id

    def queue_message(self, sender: str, recipient: str, body: str) -> str:
        with self.lock:
            self._serial += 1
            message_id = f"msg_fake{self._serial:04d}"
            base = {
                "message_id": message_id,
                "body": body,
                "thread": None,
                "reply_to": None,
                "sent_at": _now(),
                "state": "queued",
                "attempts": 0,
                "dead_reason": None,
                "settled_at": None,
                "sender": self._party(sender),
                "recipient": self._party(recipient),
            }
            self.messages[recipient].insert(0, {**base, "direction": "in"})
            self.messages[sender].insert(0, {**base, "direction": "out"})
            self.agents[recipient]["inbox"]["queued"] += 1
            self._event("message.queued", {"message_id": message_id, "recipient": recipient})
            return message_id

    def emit(self, kind: str, data: dict[str, Any] | None = None) -> None:
        with self.lock:
            self._event(kind, data or {})

    def _party(self, agent_id: str) -> dict[str, str]:
        agent = self.agents[agent_id]
        return {"agent_id": agent_id, "alias": agent["alias"], "address": agent["address"]}

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        seq = len(self.events) + 1
        self.events.append({"seq": seq, "at": _now(), "type": kind, "data": data})
        self.lock.notify_all()

    # -- answers ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            workspaces = [
                {
                    "slug": slug,
                    "path": path,
                    "agents": [
                        json.loads(json.dumps(a))
                        for a in self.agents.values()
                        if a["workspace"] == slug
                    ],
                }
                for slug, path in sorted(self.workspaces.items())
            ]
            agents = list(self.agents.values())
            totals = {
                "workspaces": len(workspaces),
                "agents": len(agents),
                "attached": sum(1 for a in agents if a["attached"]),
                "archived": sum(1 for a in agents if a["archived"]),
                **{k: sum(a["inbox"][k] for a in agents) for k in ("queued", "claimed", "dead")},
            }
            return {
                "broker": {"ok": True, "instance_id": "fake", "pid": 1, "version": "fake",
                           "schema_version": 0, "started_at": _now()},
                "workspaces": workspaces,
                "totals": totals,
                "seq": len(self.events),
            }  # fmt: skip

    def act(self, agent_id: str, action: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            agent = self.agents.get(agent_id)
            if agent is None:
                return 404, _error("not_found", f"no agent {agent_id}")
            if action in self.refuse:
                status, code = self.refuse[action]
                return status, _error(code, f"refused by the fake: {action}")
            if action == "purge":
                del self.agents[agent_id]
                self._event("agent.purged", {"agent_id": agent_id})
                return 200, {"agent_id": agent_id, "purged": True}
            want = action == "archive"
            if agent["archived"] == want:
                return 409, _error("conflict", f"{agent_id} is already {action}d")
            agent["archived"] = want
            agent["archived_at"] = _now() if want else None
            self._event(f"agent.{action}d", {"agent_id": agent_id})
            return 200, {"agent_id": agent_id, "archived": want}

    def wake(self, agent_id: str, on: bool) -> tuple[int, dict[str, Any]]:
        """`PUT`/`DELETE /v1/agents/{id}/wake`: launch on mail on or off (docs/wake.md)."""
        with self.lock:
            agent = self.agents.get(agent_id)
            if agent is None:
                return 404, _error("not_found", f"no agent {agent_id}")
            was_on = bool(agent.get("wake"))
            agent["wake"] = on
            self._event("wake.enabled" if on else "wake.disabled", {"agent_id": agent_id})
            return 200, {"agent_id": agent_id, "was_on": was_on}

    def page(self, agent_id: str, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if agent_id not in self.agents:
                return 404, _error("not_found", f"no agent {agent_id}")
            direction = query.get("direction", ["both"])[0]
            state = query.get("state", [""])[0]
            limit = int(query.get("limit", ["50"])[0])
            start = int(query.get("cursor", ["0"])[0])
            found = [
                m
                for m in self.messages[agent_id]
                if direction in ("both", m["direction"]) and state in ("", m["state"])
            ]
            page = found[start : start + limit]
            more = start + limit < len(found)
            return 200, {"messages": page, "next_cursor": str(start + limit) if more else None}

    def stream(self, last_id: int | None) -> Iterator[bytes]:
        """Frames after `last_id` (or live ones only), heartbeats, then `closing` on stop."""
        if self.next_stream_opens_with:
            frame, self.next_stream_opens_with = self.next_stream_opens_with, None
            yield f"event: {frame}\ndata: {{}}\n\n".encode()
        with self.lock:
            sent = len(self.events) if last_id is None else last_id
            ready = len(self.events)
        for event in self.events[sent:ready]:  # the replay, then `ready`, then live ones
            yield _frame(event)
        yield f"id: {ready}\nevent: ready\ndata: {json.dumps({'seq': ready})}\n\n".encode()
        sent = max(sent, ready)
        while True:
            with self.lock:
                if not self._closing and len(self.events) <= sent:
                    self.lock.wait(HEARTBEAT)
                if self._closing:
                    if not self._abrupt:
                        yield b"event: closing\ndata: {}\n\n"
                    return
                fresh = self.events[sent:]
            if not fresh:
                yield b": heartbeat\n\n"
            for event in fresh:
                sent = event["seq"]
                yield _frame(event)


def _frame(event: dict[str, Any]) -> bytes:
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _handler(api: FakeOperatorApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if api.chunked else "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._skip_body()
            self._route("POST")

        def do_PUT(self) -> None:
            self._skip_body()
            self._route("PUT")

        def _skip_body(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_DELETE(self) -> None:
            self._route("DELETE")

        def _route(self, method: str) -> None:
            parts = urlsplit(self.path)
            api.requests.append((method, parts.path, self.headers.get("Last-Event-ID")))
            if self.headers.get("Authorization") != f"Bearer {api.secret}":
                self._json(401, _error("unauthenticated", "this route needs the local secret"))
                return
            segments = [unquote(s) for s in parts.path.strip("/").split("/")]
            if method == "GET" and segments == ["v1", "snapshot"]:
                self._json(200, api.snapshot())
            elif method == "GET" and segments == ["v1", "events"]:
                last = self.headers.get("Last-Event-ID")
                self._sse(int(last) if last is not None else None)
            elif method == "GET" and len(segments) == 4 and segments[3] == "messages":
                self._json(*api.page(segments[2], parse_qs(parts.query)))
            elif method in ("PUT", "DELETE") and segments[3:] == ["wake"]:
                self._json(*api.wake(segments[2], method == "PUT"))
            elif method == "POST" and len(segments) == 4 and segments[1] == "agents":
                self._json(*api.act(segments[2], segments[3]))
            else:
                self._json(404, _error("not_found", f"no route {method} {parts.path}"))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _sse(self, last_id: int | None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if api.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            try:
                for frame in api.stream(last_id):
                    if api.chunked:
                        frame = f"{len(frame):x}\r\n".encode() + frame + b"\r\n"
                    self.wfile.write(frame)
                    self.wfile.flush()
                if api.chunked and not api._abrupt:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError:
                return

    return Handler


@contextmanager
def running_api(**options: Any) -> Iterator[FakeOperatorApi]:
    api = FakeOperatorApi(**options)
    api.start()
    try:
        yield api
    finally:
        api.stop(graceful=False)
