"""The one HTTP client of the CLI, the hook and the launcher: JSON over HTTP/1.1 on a raw socket.

`http.client` pulls in `email` and costs ~15 ms to import; `pager hook` runs on every prompt and
`pager status` is measured against a bare interpreter, so this speaks just enough HTTP to the
broker itself: one request per connection, a JSON body in, a JSON body out (Content-Length or
chunked).
"""

from __future__ import annotations

import json
import socket

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds here
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class BrokerUnreachable(Exception):
    """No (readable) HTTP answer from the broker's address."""


def request_json(
    url: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    timeout: float = 2.0,
) -> tuple[int, Any]:
    """One request to the broker at `url` (`http://HOST:PORT`); (status, JSON body or None)."""
    host, port = _address(url)
    headers = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    headers.append("Accept: application/json")
    if token:
        headers.append(f"Authorization: Bearer {token}")
    payload = b""
    if body is not None:
        payload = json.dumps(body).encode()
        headers += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    request = ("\r\n".join(headers) + "\r\n\r\n").encode() + payload
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout) as sock:
            sock.sendall(request)
            data = b""
            while not _complete(data):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise BrokerUnreachable(f"{url}: {exc}") from exc
    head, sep, raw = data.partition(b"\r\n\r\n")
    if not sep:
        raise BrokerUnreachable(f"{url}: the connection closed without an answer")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise BrokerUnreachable(f"{url}: not an HTTP answer") from None
    if b"transfer-encoding: chunked" in head.lower():
        raw = _dechunk(raw)
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def _address(url: str) -> tuple[str, int]:
    host, sep, port = url.removeprefix("http://").rstrip("/").rpartition(":")
    if not url.startswith("http://") or not sep or not host or not port.isdigit():
        raise BrokerUnreachable(f"{url!r} is not a broker address (http://HOST:PORT)")
    return host, int(port)


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")  # chunked; otherwise read until the server closes


def _dechunk(raw: bytes) -> bytes:
    out = b""
    while raw:
        size_line, _, rest = raw.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, raw = out + rest[:size], rest[size + 2 :]
    return out


class BrokerRefused(Exception):
    """A streamed request the broker answered with an error (its status and JSON body)."""

    def __init__(self, status: int, answer: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.answer = status, answer


def stream_lines(url: str, path: str, *, token: str, timeout: float = 30.0) -> Iterator[bytes]:
    """GET `path` and yield its body a line at a time as it arrives (constant memory;
    chunked or not). Raises BrokerUnreachable, or BrokerRefused for an error answer."""
    host, port = _address(url)
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()
    try:
        sock = socket.create_connection((host.strip("[]"), port), timeout=timeout)
    except OSError as exc:
        raise BrokerUnreachable(f"{url}: {exc}") from exc
    with sock:
        sock.sendall(request)
        reader = sock.makefile("rb")
        status_line = reader.readline()
        try:
            status = int(status_line.split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise BrokerUnreachable(f"{url}: not an HTTP answer") from None
        chunked = False
        while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
            if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
                chunked = True
        body = _dechunked(reader) if chunked else iter(lambda: reader.read(65536), b"")
        if status != 200:
            raw = b"".join(body)
            try:
                answer = json.loads(raw) if raw else None
            except ValueError:
                answer = None
            raise BrokerRefused(status, answer)
        pending = b""
        for data in body:
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line + b"\n"
        if pending:
            yield pending


def _dechunked(reader: Any) -> Iterator[bytes]:
    while True:
        size = int(reader.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        yield reader.read(size)
        reader.readline()  # the CRLF after the chunk
