"""The one HTTP client of the CLI, the hook and the launcher: JSON over HTTP/1.1 on a raw socket.

`http.client` pulls in `email` and costs ~15 ms to import; `pager hook` runs on every prompt and
`pager send` is measured against a bare interpreter, so this speaks just enough HTTP to the
broker itself: a JSON body in, a JSON body out (Content-Length or chunked), one request per
connection or, for a command's proof and then its request, two on one (`Connection`). It
imports neither `socket` (its enums and `selectors`: `_socket` does the same work) nor `json`
(`pager.small_json`: the same text, without `re`).

The answer's framing is read here once for every client that speaks HTTP by hand (the wrapper's
lease holder on trio, the TUI's event stream on asyncio): `parse_head` reads a response head,
`BodyReader` its body as it arrives, neither doing any I/O.
"""

from __future__ import annotations

import _socket

from pager.small_json import dumps, loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds here
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

#: A response head longer than this is no answer of the broker's.
HEAD_LIMIT = 64 * 1024


class BrokerUnreachable(Exception):
    """No (readable) HTTP answer from the broker's address."""


class ResponseHead:
    """An HTTP/1.x response head: its status line, status code and headers (names in lower
    case; a repeated header's values joined with ", ")."""

    __slots__ = ("headers", "line", "status")

    def __init__(self, line: str, status: int, headers: dict[str, str]) -> None:
        self.line, self.status, self.headers = line, status, headers

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def length(self) -> int | None:
        """The Content-Length, or None when the body is chunked or ends with the connection.
        Raises ValueError for one that is not a number."""
        value = self.headers.get("content-length")
        if value is None or self.chunked:
            return None
        if not (value.isascii() and value.isdigit()):
            raise ValueError(f"Content-Length is not a number: {value[:40]!r}")
        return int(value)


def parse_head(head: bytes) -> ResponseHead:
    """The response head `head` (up to, not including, its blank line; CRLF or LF line ends).
    Raises ValueError when it is not an HTTP/1.x response head."""
    lines = head.split(b"\n")
    line = lines[0].rstrip(b"\r").decode("latin-1")
    version, _, rest = line.partition(" ")
    code = rest[:3]
    if (
        not version.startswith("HTTP/1.")
        or not (code.isascii() and code.isdigit() and len(code) == 3)
        or rest[3:4] not in ("", " ")
    ):
        raise ValueError(f"not an HTTP answer: {line[:60]!r}")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        name, colon, value = raw.decode("latin-1").partition(":")
        name = name.strip().lower()
        if not colon or not name:
            continue  # a blank line at the end, or no header at all
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return ResponseHead(line, int(code), headers)


def split_head(data: bytes) -> tuple[bytes, bytes] | None:
    """(head, what follows its blank line) once `data`, the start of an answer, holds the
    whole head; None while it does not. Raises ValueError past `HEAD_LIMIT`."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if sep:
        return head, rest
    if len(data) > HEAD_LIMIT:
        raise ValueError(f"an answer head over {HEAD_LIMIT // 1024} KiB")
    return None


class BodyReader:
    """A response body's framing, without I/O: `feed` it what arrives after the head, get the
    body's own bytes. `done` once the body is complete (its Content-Length read, or the last
    chunk); a body with neither ends when the connection does. A malformed chunk raises
    ValueError."""

    __slots__ = ("_after", "_buffer", "_chunked", "_left", "done")

    def __init__(self, head: ResponseHead) -> None:
        self._chunked = head.chunked
        length = head.length
        self._left = length or 0  # bytes of the body (or of the current chunk) still to come
        self._after = False  # a chunk's data was read: its CRLF comes next
        self._buffer = b""  # an unfinished chunk-size line
        self.done = length == 0

    def feed(self, data: bytes) -> bytes:
        if self.done or not data:
            return b""
        if not self._chunked:
            if not self._left:  # ends with the connection
                return data
            data = data[: self._left]
            self._left -= len(data)
            self.done = not self._left
            return data
        buffer = self._buffer + data if self._buffer else data
        pos, end, out = 0, len(buffer), []
        while pos < end:
            if self._left:
                stop = min(end, pos + self._left)
                out.append(buffer[pos:stop])
                self._left -= stop - pos
                self._after = not self._left
                pos = stop
                continue
            newline = buffer.find(b"\n", pos)
            if newline < 0:
                if end - pos > 1024:
                    raise ValueError("a chunk-size line over 1 KiB")
                break
            line = buffer[pos:newline].rstrip(b"\r")
            pos = newline + 1
            if self._after:
                if line:
                    raise ValueError("chunk data longer than its size")
                self._after = False
                continue
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size < 0:
                raise ValueError(f"a negative chunk size: {line[:40]!r}")
            if size == 0:  # the last chunk (trailers, if any, are not read)
                self.done = True
                break
            self._left = size
        self._buffer = b"" if self.done else buffer[pos:]
        return b"".join(out)


def request_json(
    url: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    timeout: float = 2.0,
) -> tuple[int, Any]:
    """One request to the broker at `url` (`http://HOST:PORT`) on a connection of its own;
    (status, JSON body or None)."""
    connection = Connection(url)
    return connection.request(method, path, token=token, body=body, timeout=timeout, last=True)


class Connection:
    """Requests to the broker at `url`, in turn, over one connection (HTTP/1.1 keep-alive).

    A command proves the broker on a connection (pager/launch/discovery.py) and then sends its
    credential on that same connection: the process that proved itself is the one that gets
    it, and the broker serves one connection instead of two. A connection is kept only after
    an answer that leaves it in step (HTTP/1.1, no `Connection: close`, a body of exactly its
    Content-Length); when the broker has closed it since (its idle timeout), the next request
    opens a new one to the same address, as each request did before. A request is never sent
    twice: one whose answer does not come is the caller's failure to report."""

    __slots__ = ("_sock", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self._sock: _socket.socket | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: dict[str, Any] | None = None,
        timeout: float = 2.0,
        last: bool = False,
    ) -> tuple[int, Any]:
        """(status, JSON body or None); `last`: the connection's last request
        (`Connection: close`, and closed after it). Raises BrokerUnreachable."""
        host, port = _address(self.url)
        headers = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
        if last:
            headers.append("Connection: close")
        headers.append("Accept: application/json")
        if token:
            headers.append(f"Authorization: Bearer {token}")
        payload = b""
        if body is not None:
            payload = dumps(body).encode()
            headers += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        request = ("\r\n".join(headers) + "\r\n\r\n").encode() + payload
        url = self.url
        try:
            sock = self._open(host, port, timeout)
            received = 0

            def recv(size: int) -> bytes:
                nonlocal received
                data = sock.recv(size)
                received += len(data)
                return data

            keep = False
            try:
                sock.sendall(request)
                head, body_reader, rest = _answer(url, sock.recv)
                raw = b"".join(_body(body_reader, rest, recv))
                keep = not last and _in_step(head, len(rest) + received)
            finally:
                if not keep:
                    self.close()
        except OSError as exc:
            raise BrokerUnreachable(f"{url}: {exc}") from exc
        except ValueError:  # a malformed chunk
            raise BrokerUnreachable(f"{url}: not an HTTP answer") from None
        try:
            return head.status, loads(raw) if raw else None
        except ValueError:
            return head.status, None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _open(self, host: str, port: int, timeout: float) -> _socket.socket:
        """The kept connection while the broker has not closed it, else a new one."""
        sock = self._sock
        if sock is not None and not _idle_and_open(sock):
            self.close()
            sock = None
        if sock is None:
            sock = self._sock = _connect(host, port, timeout)
        sock.settimeout(timeout)
        return sock


def _in_step(head: ResponseHead, body_bytes: int) -> bool:
    """Whether a connection may carry another request after this answer, whose body was
    `body_bytes` long as it arrived: HTTP/1.1, not closing, exactly its Content-Length."""
    return (
        head.line.startswith("HTTP/1.1 ")
        and "close" not in head.headers.get("connection", "").lower()
        and head.length == body_bytes
    )


def _idle_and_open(sock: _socket.socket) -> bool:
    """Whether the peer has neither closed `sock` nor sent anything since its last answer."""
    sock.setblocking(False)
    try:
        sock.recv(1, _socket.MSG_PEEK)  # b"": it closed; a byte: an answer nobody asked for
    except BlockingIOError:
        return True  # nothing to read: open and idle
    except OSError:
        pass
    return False


#: What `quote` leaves as it is: urllib.parse's unreserved characters and `/`.
_UNQUOTED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def quote(text: str) -> str:
    """`text` percent-encoded for a query string, as `urllib.parse.quote(text)` writes it (its
    UTF-8 bytes; letters, digits, `_.-~` and `/` as they are), without importing urllib.parse,
    which imports `re` (a quick command's path sends its working directory this way).
    UnicodeEncodeError for a lone surrogate, as urllib.parse's."""
    data = text.encode("utf-8")
    return "".join(chr(byte) if byte in _UNQUOTED else f"%{byte:02X}" for byte in data)


def _address(url: str) -> tuple[str, int]:
    host, sep, port = url.removeprefix("http://").rstrip("/").rpartition(":")
    if not url.startswith("http://") or not sep or not host or not port.isdigit():
        raise BrokerUnreachable(f"{url!r} is not a broker address (http://HOST:PORT)")
    return host, int(port)


def _connect(host: str, port: int, timeout: float) -> _socket.socket:
    """A connection to the broker's address, as `socket.create_connection` makes one (each
    address `getaddrinfo` gives, in turn; the last one's error). An ASCII host is handed over
    as bytes: as a str, `getaddrinfo` encodes it with the `idna` codec, which imports
    `encodings.idna`, `stringprep` and `unicodedata` (about a millisecond of every command) for
    an address that needs none (CPython's `getaddrinfo` takes bytes; typeshed says only str)."""
    name = host.strip("[]")
    error: OSError | None = None
    found = _socket.getaddrinfo(
        name.encode() if name.isascii() else name,
        port,
        0,
        _socket.SOCK_STREAM,
    )
    for family, kind, proto, _, address in found:
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError(f"no address for {host}")


def _answer(url: str, recv: Callable[[int], bytes]) -> tuple[ResponseHead, BodyReader, bytes]:
    """The answer's head, its body's reader and what of the body arrived with the head."""
    data = b""
    try:
        while (parts := split_head(data)) is None:
            chunk = recv(65536)
            if not chunk:
                raise BrokerUnreachable(f"{url}: the connection closed without an answer")
            data += chunk
        head = parse_head(parts[0])
        return head, BodyReader(head), parts[1]
    except ValueError:
        raise BrokerUnreachable(f"{url}: not an HTTP answer") from None


def _body(reader: BodyReader, rest: bytes, recv: Callable[[int], bytes]) -> Iterator[bytes]:
    """The body's bytes as they arrive, until it is complete or the connection ends."""
    data = rest
    while True:
        if out := reader.feed(data):
            yield out
        if reader.done or not (data := recv(65536)):
            return


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
        sock = _connect(host, port, timeout)
    except OSError as exc:
        raise BrokerUnreachable(f"{url}: {exc}") from exc
    try:
        sock.sendall(request)
        head, reader, rest = _answer(url, sock.recv)
        body = _body(reader, rest, sock.recv)
        try:
            if head.status != 200:
                raw = b"".join(body)
                try:
                    answer = loads(raw) if raw else None
                except ValueError:
                    answer = None
                raise BrokerRefused(head.status, answer)
            pending = b""
            for data in body:
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line + b"\n"
            if pending:
                yield pending
        except ValueError:  # a malformed chunk
            raise BrokerUnreachable(f"{url}: the answer's chunks are malformed") from None
    finally:
        sock.close()
