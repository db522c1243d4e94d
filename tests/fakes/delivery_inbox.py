"""FAKE connector inbox: an HTTP listener on 127.0.0.1 that records the notifications the
broker POSTs and answers them as told (accept everything, or refuse everything)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Inbox:
    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.refuse = False
        self.arrived = threading.Condition()
        self.url = ""

    def claims(self) -> list[dict[str, Any]]:
        return [claim for n in self.notifications for claim in n["claims"]]

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Block until `count` notifications arrived (a hang guard, not a timing check)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.notifications) >= count, timeout):
                raise AssertionError(f"only {len(self.notifications)} notifications arrived")
            return list(self.notifications)


@contextmanager
def running_inbox() -> Iterator[Inbox]:
    inbox = Inbox()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            tokens = [claim["token"] for claim in body["claims"]]
            answer = {"accepted": [], "refused": tokens} if inbox.refuse else {"accepted": tokens}
            with inbox.arrived:
                inbox.notifications.append(body)
                inbox.arrived.notify_all()
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    inbox.url = f"http://127.0.0.1:{server.server_address[1]}/inbox"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield inbox
    finally:
        server.shutdown()
        server.server_close()
