"""FAKE Cline hub daemon for wrapper tests: what `cline hub start` (the fake's `hub start`)
leaves running, detached, with the launch's environment.

It listens on 127.0.0.1, port $CLINE_HUB_PORT (WebSocket, path /hub), writes its discovery
file at $CLINE_HUB_DISCOVERY_PATH (url, authToken) as Cline CLI 3.0.65's hub does, accepts
only a client offering the subprotocol `cline-hub-auth.<authToken>`, and answers Cline's hub
protocol (v1) for its session, always idle (and one of another process's): `session.list`,
and `session.send_input`, which it logs (`hub_input`) and then runs as Cline CLI runs a
turn: the hooks of the launch's `$CLINE_DIR/hooks` named by FAKE_HUB_TURNS (`;` between
turns, `,` between a turn's events; empty: none), each logged as a `hook` record; with
FAKE_HUB_GATE, only once that file exists (the queued prompt's turn begins later). A refused
client is logged (`hub_refused`). It exits after DAEMON_BOUND seconds at most.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    RejectConnection,
    Request,
    TextMessage,
)

from tests.fakes.fake_harness_generic import DAEMON_BOUND, log, run_hook

SESSION = "fake-hub-session"


class Hub:
    def __init__(self) -> None:
        self.token = secrets.token_hex(16)
        turns = os.environ.get("FAKE_HUB_TURNS", "")
        self.turns = [turn.split(",") for turn in turns.split(";")]
        self.knocks = 0

    def serve(self) -> None:
        host = "127.0.0.1"
        port = int(os.environ["CLINE_HUB_PORT"])
        listener = socket.create_server((host, port))
        url = f"ws://{host}:{port}/hub"
        discovery = Path(os.environ["CLINE_HUB_DISCOVERY_PATH"])
        discovery.parent.mkdir(parents=True, exist_ok=True)
        part = discovery.with_name(discovery.name + ".part")
        part.write_text(json.dumps({"url": url, "authToken": self.token, "pid": os.getpid()}))
        os.replace(part, discovery)
        listener.settimeout(1.0)
        deadline = time.monotonic() + DAEMON_BOUND
        while time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                with contextlib.suppress(OSError):
                    self.connection(conn)

    def connection(self, conn: socket.socket) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        while data := conn.recv(65536):
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    wanted = f"cline-hub-auth.{self.token}"
                    if wanted not in event.subprotocols:
                        log({"hub_refused": event.subprotocols})
                        conn.sendall(ws.send(RejectConnection(status_code=401)))
                        return
                    conn.sendall(ws.send(AcceptConnection(subprotocol=wanted)))
                elif isinstance(event, TextMessage):
                    after = self.command(conn, ws, json.loads(event.data))
                    if after is not None:
                        after()
                elif isinstance(event, CloseConnection):
                    conn.sendall(ws.send(event.response()))
                    return

    def command(self, conn: socket.socket, ws: WSConnection, frame: dict[str, Any]) -> Any:
        envelope = frame["envelope"]
        name, payload = envelope["command"], envelope.get("payload") or {}
        answer: dict[str, Any] = {}
        after = None
        if name == "session.list":
            # Its own pid stands for the TUI's (both hold the launch's credential); a session
            # of another process (init's) kept in the user's data directory, updated later.
            mine = {"sessionId": SESSION, "status": "idle", "updatedAt": 1}
            other = {"sessionId": "elsewhere", "status": "idle", "updatedAt": 2}
            answer = {"sessions": [{**mine, "metadata": {"pid": os.getpid()}},
                                   {**other, "metadata": {"pid": 1}}]}  # fmt: skip
        elif name == "session.send_input":
            log({"hub_input": payload})
            turn = self.turns[min(self.knocks, len(self.turns) - 1)]
            self.knocks += 1
            after = lambda: self.run_turn(turn)  # noqa: E731  (after the reply, as Cline does)
        reply = {"version": "v1", "requestId": envelope.get("requestId"), "ok": True}
        message = json.dumps({"kind": "reply", "envelope": {**reply, "payload": answer}})
        conn.sendall(ws.send(TextMessage(message)))
        return after

    def run_turn(self, events: list[str]) -> None:
        gate = os.environ.get("FAKE_HUB_GATE")
        deadline = time.monotonic() + DAEMON_BOUND
        while gate and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        for event in filter(None, events):
            log({"hook": run_hook("cline", [], event, "thread-unknown")})


if __name__ == "__main__":
    Hub().serve()
    sys.exit(0)
