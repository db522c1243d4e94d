"""FAKE processes that occupy a Pager state directory, for lifecycle tests.

Run as `python -m tests.fakes.fake_broker MODE STATE_DIR [SCHEMA]`:
- `lock-holder`: a live non-broker process holding broker.lock (writes nothing into it).
- `foreign-http`: an HTTP server that is not Pager; broker.json points at it.
- `broker`: impersonates a Pager broker of schema SCHEMA (lock identity, broker.json, /health
  with the proof of the local secret, as a broker of that version on this account would give);
  it exits on SIGTERM, like a real broker asked to stop.
Prints `ready` on stdout once set up, then serves until killed.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pager.launch.files import ensure_secret
from pager.launch.proof import health_proof


def main(mode: str, state_dir: str, schema: int) -> None:
    root = Path(state_dir)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock_fd = None
    health: dict[str, Any] = {"hello": "not pager"}
    if mode in ("lock-holder", "broker"):
        lock_fd = os.open(root / "broker.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if mode == "lock-holder":
        print("ready", flush=True)
        signal.pause()
        return
    if mode == "broker":
        identity = {"instance_id": uuid.uuid4().hex, "pid": os.getpid(), "schema_version": schema}
        os.write(lock_fd, json.dumps(identity).encode())  # type: ignore[arg-type]
        health = {"ok": True, "version": "0.0.fake", "started_at": "2026-01-01T00:00:00+00:00"}
        health.update(identity)
        secret = ensure_secret(root / "secret")  # as a real broker does before it answers

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = dict(health)
            challenge = parse_qs(urlsplit(self.path).query).get("challenge")
            if mode == "broker" and challenge:
                address = f"127.0.0.1:{server.server_address[1]}"
                answer["proof"] = health_proof(secret, challenge[0], health["instance_id"], address)
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    info = {"url": url, "pid": os.getpid(), **{k: v for k, v in health.items() if k != "ok"}}
    (root / "broker.json").write_text(json.dumps(info))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
