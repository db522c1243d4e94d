"""The launch relay: the one address and credential a wrapped harness is given (SPEC §12).

A harness's MCP client, plugin or extension is configured once, when it starts, with a URL and
a bearer token, and nothing can tell it later that the broker moved to another port or that
its token was revoked (pager/launch/squat.py). So `pager <implementation>` gives the harness the
address of this relay, a loopback listener the wrapper holds for as long as the harness runs,
and a credential that only the relay accepts (so it is worth nothing to anyone the harness
might send it to). For each request the relay

- refuses a `Host` or `Origin` that is not its own (no web page reaches it by DNS rebinding);
- asks the session for the broker that proved itself (pager/launch/discovery.py), starting one
  when none runs; while none does it answers 503 `unavailable` and sends nothing anywhere;
- replaces its credential with the session's current token, and `Host` with the broker's;
- sends the request on a connection of its own (`Connection: close`, so the answer's end is
  the connection's) and streams the answer back as it arrives (event streams included);
- keeps the client's connection open for its next request when the answer has a length (as
  any HTTP/1.1 server would, for `KEEP_ALIVE` seconds): Bun's `fetch` (OpenCode's and Kilo
  CLI's MCP client) may send a request on a connection whose answer said `Connection: close`,
  and met the relay closing it with "The socket connection was closed unexpectedly";
- meets a refused token (401 `expired` or `unauthenticated`) by rejoining (the session client,
  pager/session_client.py) and sending the request once more: the broker did not act on it.

A request with another `Authorization` (or none) passes unchanged: the broker judges it.

Other local users can connect to the port too. A connection counts against the harness's
capacity only once its first request's head carried the credential; until then it is a
stranger, closed when it has not sent a whole head within a few seconds or when newer strangers
need its place (pager/launch/relay_admission.py).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
from typing import NamedTuple

import trio

from pager.client import parse_head
from pager.launch.relay_admission import HARNESS_CONNECTIONS, HEAD_TIMEOUT, Stranger, Strangers
from pager.session_client import REJOINABLE, SessionHandle, error_code
from pager.web.guard import allowed_hosts

#: A request head larger than this is refused (431).
HEAD_LIMIT = 64 * 1024
#: Bodies up to this size are held whole, so that a request refused for its token can be sent
#: again; larger or chunked ones stream through and are not replayed.
REPLAY_LIMIT = 4 * 1024 * 1024
#: Seconds a client has to send a held body after its head before it is dropped (the head has
#: `HEAD_TIMEOUT`, pager/launch/relay_admission.py).
BODY_TIMEOUT = 30.0
#: Seconds a harness's connection is kept open, after an answer, for its next request.
KEEP_ALIVE = 5.0
#: Headers the relay sets itself on the way to the broker.
REWRITTEN = frozenset({b"host", b"connection", b"keep-alive", b"proxy-connection", b"expect"})

REASONS = {400: "Bad Request", 403: "Forbidden", 421: "Misdirected Request",
           431: "Request Header Fields Too Large", 502: "Bad Gateway",
           503: "Service Unavailable"}  # fmt: skip


class Refusal(Exception):
    """The relay answers the request itself, with a Pager error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code

    def answer(self) -> bytes:
        body = json.dumps({"error": {"code": self.code, "message": str(self)}}).encode()
        head = (
            f"HTTP/1.1 {self.status} {REASONS.get(self.status, '')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body


class Request(NamedTuple):
    line: bytes  # b"POST /mcp HTTP/1.1"
    headers: list[tuple[bytes, bytes]]  # as received, minus the ones the relay sets itself
    credential: bool  # it carried the relay's credential (replaced by the session token)
    length: int | None  # the body's Content-Length when it is held; None when it streams
    expect: bool  # the client waits for `100 Continue` before it sends a held body
    body: bytes | None  # the whole body when held (once read); None when it streams
    rest: bytes  # what arrived after the head and was not yet forwarded
    keep_alive: bool = False  # HTTP/1.1 without `Connection: close`: the client may reuse it


class Relay:
    """A loopback listener bound before the harness starts; `serve` relays until cancelled."""

    def __init__(self, sock: socket.socket, credential: str | None = None) -> None:
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self.credential = credential or f"prl_{secrets.token_urlsafe(32)}"
        self.hosts = allowed_hosts("127.0.0.1", self.port)
        self.origins = frozenset(f"http://{host}" for host in self.hosts)
        self.strangers = Strangers()
        self.harness_connections = 0

    @classmethod
    def bind(cls) -> Relay:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", 0))
            sock.listen(socket.SOMAXCONN)
        except OSError:
            sock.close()
            raise
        return cls(sock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(
        self,
        session: SessionHandle,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(self._socket))

        async def handle(stream: trio.SocketStream) -> None:
            await self._handle(stream, session)

        await trio.serve_listeners(handle, [listener], task_status=task_status)

    async def _handle(self, client: trio.SocketStream, session: SessionHandle) -> None:
        async with client:
            with self.strangers.hold() as stranger:
                try:
                    await self._admit(client, session, stranger)
                except Refusal as refusal:
                    await _send_quietly(client, refusal.answer())
                except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError):
                    pass  # the client left

    async def _admit(
        self, client: trio.SocketStream, session: SessionHandle, stranger: Stranger
    ) -> None:
        """Serves the connection's request: with the credential in the harness's pool, without
        it as the stranger it came as."""
        request = None
        with trio.move_on_after(HEAD_TIMEOUT):
            request = self._parse(*await _read_head(client, client_side=True))
        if request is None:
            return  # no whole head in time: an idle or trickling connection
        if not request.credential:
            await self._serve(client, request, session)
            return
        stranger.leave()
        if self.harness_connections >= HARNESS_CONNECTIONS:
            raise Refusal(503, "unavailable", "too many connections to the launch relay")
        self.harness_connections += 1
        try:
            while await self._serve(client, request, session):
                request = None
                with trio.move_on_after(KEEP_ALIVE):  # the harness's next request, if any
                    request = self._parse(*await _read_head(client, client_side=True))
                if request is None:
                    return
        finally:
            self.harness_connections -= 1

    async def _serve(
        self, client: trio.SocketStream, request: Request, session: SessionHandle
    ) -> bool:
        """Relays one request and its answer; whether the connection may serve another."""
        if request.length is not None:
            held = None
            with trio.move_on_after(BODY_TIMEOUT):
                held = await _read_body(client, request)
            if held is None:
                return False
            request = held
        return await self._forward(client, request, session)

    def _parse(self, head: bytes, rest: bytes) -> Request:
        """The request a head announces (its body not read yet). Raises Refusal."""
        lines = head.split(b"\r\n")
        line = lines[0]
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise Refusal(400, "validation_failed", "not an HTTP/1.1 request line")
        headers: list[tuple[bytes, bytes]] = []
        for raw in lines[1:]:
            name, colon, value = raw.partition(b":")
            if not colon or not name or name != name.strip() or raw[:1] in (b" ", b"\t"):
                raise Refusal(400, "validation_failed", "a malformed request header line")
            headers.append((name, value.strip()))
        named: dict[bytes, list[bytes]] = {}
        for name, value in headers:
            named.setdefault(name.lower(), []).append(value)
        hosts = named.get(b"host", [])
        if len(hosts) != 1 or hosts[0].decode("latin-1").lower() not in self.hosts:
            raise Refusal(
                421, "unauthenticated", f"Host is not this launch relay's address ({self.url})"
            )
        origins = named.get(b"origin", [])
        if any(o.decode("latin-1").lower() not in self.origins for o in origins):
            raise Refusal(403, "unauthenticated", "cross-origin requests are refused")
        mine = b"Bearer " + self.credential.encode()
        credential = named.get(b"authorization") == [mine]
        kept = [
            (name, value)
            for name, value in headers
            if name.lower() not in REWRITTEN
            and name.lower() != b"origin"  # the relay's own (others were refused): none upstream
            and not (credential and name.lower() == b"authorization")
        ]
        keep_alive = parts[2] == b"HTTP/1.1" and not any(
            b"close" in value.lower() for value in named.get(b"connection", [])
        )
        lengths = named.get(b"content-length", [])
        if b"transfer-encoding" in named or len(lengths) > 1:
            if lengths:
                raise Refusal(400, "validation_failed", "both Content-Length and Transfer-Encoding")
            return Request(line, kept + _expect(named), credential, None, False, None, rest)
        if lengths and not lengths[0].isdigit():
            raise Refusal(400, "validation_failed", "Content-Length is not a number")
        length = int(lengths[0]) if lengths else 0
        if length > REPLAY_LIMIT:
            return Request(line, kept + _expect(named), credential, None, False, None, rest)
        expect = named.get(b"expect", [b""])[0].lower() == b"100-continue"
        return Request(line, kept, credential, length, expect, None, rest, keep_alive)

    async def _forward(
        self, client: trio.SocketStream, request: Request, session: SessionHandle
    ) -> bool:
        """Sends `request` to the broker and its answer to the client; whether the client's
        connection may serve another request (a held request whose answer came whole, with
        its length)."""
        token = session.token
        for attempt in (1, 2):
            url = await session.url(start=True)
            if url is None:
                raise Refusal(
                    503,
                    "unavailable",
                    "no Pager broker that proved itself runs for this state directory, and none"
                    " could be started; see `pager status`",
                )
            netloc = url.removeprefix("http://")
            host, _, port = netloc.rpartition(":")
            try:
                upstream = await trio.open_tcp_stream(host.strip("[]"), int(port))
            except OSError as exc:
                message = f"the broker at {url} does not answer ({exc})"
                raise Refusal(502, "unavailable", message) from None
            async with upstream:
                await upstream.send_all(_upstream_head(request, netloc, token))
                if request.body is None:  # streamed: no replay
                    await upstream.send_all(request.rest)
                    await _pipe(client, upstream)
                    return False
                await upstream.send_all(request.body)
                head, after = await _read_head(upstream, client_side=False)
                if attempt == 1 and request.credential and _status(head) == 401:
                    after += await _read_to_end(upstream)
                    if error_code(after) in REJOINABLE and await session.rejoin(token):
                        token = session.token
                        continue
                    await client.send_all(head + b"\r\n\r\n" + after)
                    return False
                length = _content_length(head) if request.keep_alive else None
                if length is None:
                    await client.send_all(head + b"\r\n\r\n" + after)
                    await _pipe(client, upstream)
                    return False
                # The answer's end is its length: the connection stays the client's. The
                # client's side is not read meanwhile: what it sends next is its next request.
                await client.send_all(_kept_open(head) + b"\r\n\r\n" + after)
                sent = len(after)
                while sent < length and (chunk := await upstream.receive_some(65536)):
                    await client.send_all(chunk)
                    sent += len(chunk)
                return sent == length
        return False


async def _read_body(client: trio.SocketStream, request: Request) -> Request:
    """`request` with its held body read whole."""
    length = request.length or 0
    body = request.rest
    if length > len(body) and request.expect:
        await client.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")
    while len(body) < length:
        chunk = await client.receive_some(65536)
        if not chunk:
            raise EOFError
        body += chunk
    return request._replace(body=body[:length], rest=b"")


def _expect(named: dict[bytes, list[bytes]]) -> list[tuple[bytes, bytes]]:
    """A streamed body's `Expect` goes on to the broker, which answers it."""
    return [(b"Expect", value) for value in named.get(b"expect", [])]


def _upstream_head(request: Request, netloc: str, token: str) -> bytes:
    lines = [request.line, *(name + b": " + value for name, value in request.headers)]
    lines += [b"Host: " + netloc.encode(), b"Connection: close"]
    if request.credential:
        lines.append(b"Authorization: Bearer " + token.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _read_head(stream: trio.SocketStream, *, client_side: bool) -> tuple[bytes, bytes]:
    """The head (without its blank line) and whatever arrived after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            if client_side:
                raise Refusal(431, "oversized_content", "the request head is over 64 KiB")
            raise Refusal(502, "unavailable", "the broker's answer head is over 64 KiB")
        chunk = await stream.receive_some(65536)
        if not chunk:
            if client_side:
                raise EOFError
            raise Refusal(502, "unavailable", "the broker closed the connection without answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


async def _read_to_end(stream: trio.SocketStream) -> bytes:
    data = b""
    while len(data) <= HEAD_LIMIT and (chunk := await stream.receive_some(65536)):
        data += chunk
    return data


def _content_length(head: bytes) -> int | None:
    """The length of an answer's body as its head gives it (None: it ends with the connection,
    or it is no plain HTTP/1.1 answer with a body of one stated length)."""
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 ") or _status(head) in (None, 101):
        return None
    lengths = []
    for raw in lines[1:]:
        name, _, value = raw.partition(b":")
        if name.strip().lower() == b"transfer-encoding":
            return None
        if name.strip().lower() == b"content-length":
            lengths.append(value.strip())
    if len(lengths) != 1 or not lengths[0].isdigit():
        return None
    return int(lengths[0])


def _kept_open(head: bytes) -> bytes:
    """The broker's answer head without the `Connection: close` the relay asked it for."""
    lines = head.split(b"\r\n")
    kept = [raw for raw in lines[1:] if raw.partition(b":")[0].strip().lower() != b"connection"]
    return b"\r\n".join([lines[0], *kept])


def _status(head: bytes) -> int | None:
    """The status of the broker's answer head, or None when it is no HTTP answer (then it
    passes to the client as it is)."""
    try:
        return parse_head(head).status
    except ValueError:
        return None


async def _pipe(client: trio.SocketStream, upstream: trio.SocketStream) -> None:
    """Copy both ways until either side ends: the broker's end of the answer (it closes), or
    the client leaving (nobody is left to read the rest)."""
    async with trio.open_nursery() as nursery:

        async def copy(source: trio.SocketStream, sink: trio.SocketStream) -> None:
            try:
                while data := await source.receive_some(65536):
                    await sink.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(copy, upstream, client)
        nursery.start_soon(copy, client, upstream)


async def _send_quietly(stream: trio.SocketStream, data: bytes) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)
