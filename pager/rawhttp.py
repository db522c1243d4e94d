"""A minimal HTTP/1.1 JSON client over a raw socket, for `pager hook`.

`http.client` pulls in `email` and costs ~15 ms to import; the hook runs on every prompt of
every session, so it speaks just enough HTTP to the broker itself: one request per
connection, a Content-Length body in and out.
"""

from __future__ import annotations

import json
import socket
from typing import Any


class RawHttpError(Exception):
    """The broker could not be reached or answered something unreadable."""


def post_json(
    host: str, port: int, path: str, body: dict[str, Any], *, token: str, timeout: float
) -> tuple[int, Any]:
    payload = json.dumps(body).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + payload
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(request)
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if _complete(data):
                    break
    except OSError as exc:
        raise RawHttpError(f"{host}:{port}: {exc}") from exc
    head, sep, raw = data.partition(b"\r\n\r\n")
    if not sep:
        raise RawHttpError("the broker closed the connection without an answer")
    try:
        status = int(head.split(b" ", 2)[1])
        return status, json.loads(raw) if raw else None
    except (IndexError, ValueError) as exc:
        raise RawHttpError(f"unreadable answer: {exc}") from exc


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False
