"""The launch relay (pager/launch/relay.py) between a client and a stand-in broker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from pager.launch.relay import HEAD_LIMIT, KEEP_ALIVE, Relay
from pager.launch.relay_admission import HARNESS_CONNECTIONS, HEAD_TIMEOUT, STRANGERS
from tests.launch.session_fakes import FakeSession, Handler, json_answer, read_request, serve
from tests.other_user import SYSTEM_PYTHON

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}'


async def exchange(relay: Relay, request: bytes) -> bytes:
    """Sends `request` to the relay; its answer: until the end its length gives, else until
    the relay closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", relay.port)
    async with stream:
        await stream.send_all(request)
        answer = b""
        while not complete(answer) and (chunk := await stream.receive_some(65536)):
            answer += chunk
        return answer


def complete(answer: bytes) -> bool:
    """Whether `answer` holds a whole answer of a stated length."""
    head, found, body = answer.partition(b"\r\n\r\n")
    lengths = [
        int(line.partition(b":")[2])
        for line in head.split(b"\r\n")[1:]
        if line.partition(b":")[0].strip().lower() == b"content-length"
    ]
    return bool(found) and len(lengths) == 1 and len(body) >= lengths[0]


def post(relay: Relay, *headers: str, body: bytes = CALL, host: str | None = None) -> bytes:
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: {host or f'127.0.0.1:{relay.port}'}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def bearer(relay: Relay) -> str:
    return f"Authorization: Bearer {relay.credential}"


def error_of(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)["error"]["code"]


async def relayed(
    broker: Handler | None,
    request: Callable[[Relay], bytes],
    tokens: tuple[str, ...] = ("tok_test",),
) -> tuple[bytes, Relay, FakeSession]:
    """`request` (made for the relay's port and credential) through a relay in front of
    `broker` (None: no broker proves itself); the answer, the relay and its session."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = None if broker is None else await serve(nursery, broker)
            session = FakeSession(url, tokens=tokens)
            relay = Relay.bind()
            await nursery.start(relay.serve, session)
            answer = await exchange(relay, request(relay))
            nursery.cancel_scope.cancel()
    return answer, relay, session


async def test_forwards_with_the_session_token_and_the_brokers_host() -> None:
    """The relay's credential becomes the session's token, Host the broker's; the body and the
    other headers arrive as sent; the broker's answer comes back unchanged."""
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(json_answer(200, b'{"ok": true}'))

    answer, relay, session = await relayed(broker, lambda r: post(r, bearer(r), "X-Trace: 7"))
    assert answer.endswith(b'\r\n\r\n{"ok": true}')
    [request] = seen
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /mcp HTTP/1.1"
    assert f"Host: {str(session.urls[0]).removeprefix('http://')}".encode() in lines
    assert b"Authorization: Bearer tok_test" in lines
    assert b"Connection: close" in lines
    assert b"X-Trace: 7" in lines
    assert relay.credential.encode() not in request
    assert body == CALL


async def test_other_credentials_pass_unchanged_and_none_is_added() -> None:
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(json_answer(401, b'{"error": {"code": "unauthenticated"}}'))

    other = "Authorization: Bearer someone-else"
    first, _, session = await relayed(broker, lambda r: post(r, other), ("tok_a", "tok_b"))
    second, _, _ = await relayed(broker, post, ("tok_a", "tok_b"))
    assert error_of(first) == error_of(second) == (401, "unauthenticated")
    assert b"Authorization: Bearer someone-else" in seen[0]
    assert b"authorization" not in seen[1].lower()
    assert session.rejoins == []  # only a refusal of the session's own token is rejoined


@pytest.mark.parametrize(
    ("extra", "host", "status"),
    [
        ((), "evil.example:80", 421),  # DNS rebinding: a foreign name for the relay's address
        (("Origin: http://evil.example",), None, 403),  # a web page
    ],
)
async def test_foreign_host_or_origin_is_refused_before_anything_is_sent(
    extra: tuple[str, ...], host: str | None, status: int
) -> None:
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))

    answer, _, _ = await relayed(broker, lambda r: post(r, bearer(r), *extra, host=host))
    assert error_of(answer) == (status, "unauthenticated")
    assert seen == []


async def test_its_own_origin_is_accepted_and_not_passed_on() -> None:
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(json_answer(200, b"{}"))

    answer, _, _ = await relayed(
        broker, lambda r: post(r, bearer(r), f"Origin: http://localhost:{r.port}")
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"origin" not in seen[0].lower()


async def test_no_verified_broker_answers_unavailable_and_sends_nothing() -> None:
    answer, _, session = await relayed(None, lambda r: post(r, bearer(r)))
    assert error_of(answer) == (503, "unavailable")
    assert session.starts == 1  # it asked for a broker to be started


async def test_a_revoked_token_is_rejoined_and_the_request_sent_again() -> None:
    """401 `expired` for the session's token: the session rejoins, the same request goes
    again with the new token, and the client sees only the answer to that."""
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        request = await read_request(stream)
        seen.append(request)
        if b"Bearer tok_old" in request:
            await stream.send_all(json_answer(401, b'{"error": {"code": "expired"}}'))
        else:
            await stream.send_all(json_answer(200, b'{"result": "done"}'))

    answer, _, session = await relayed(broker, lambda r: post(r, bearer(r)), ("tok_old", "tok_new"))
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b'{"result": "done"}')
    assert session.rejoins == ["tok_old"]
    assert len(seen) == 2
    assert seen[0].replace(b"tok_old", b"tok_new") == seen[1]  # the very same request


async def test_an_ended_session_is_not_rejoined() -> None:
    async def broker(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(json_answer(401, b'{"error": {"code": "ended"}}'))

    answer, _, session = await relayed(broker, lambda r: post(r, bearer(r)), ("tok_old", "tok_new"))
    assert error_of(answer) == (401, "ended")
    assert session.rejoins == []


async def test_an_event_stream_is_passed_on_as_it_comes_and_ends_with_its_client() -> None:
    """The first event reaches the client while the broker still holds the stream open; when
    the client leaves, the relay closes its connection to the broker."""
    first_read, broker_saw_close = trio.Event(), trio.Event()

    async def broker(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: ready\n\n"
        )
        await first_read.wait()
        while await stream.receive_some(65536):
            pass
        broker_saw_close.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            relay = Relay.bind()
            await nursery.start(relay.serve, FakeSession(await serve(nursery, broker)))
            stream = await trio.open_tcp_stream("127.0.0.1", relay.port)
            await stream.send_all(
                f"GET /v1/sessions/current/events HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\n"
                f"{bearer(relay)}\r\nAccept: text/event-stream\r\n\r\n".encode()
            )
            got = b""
            while b"event: ready\n\n" not in got:
                got += await stream.receive_some(65536)
            first_read.set()
            await stream.aclose()
            await broker_saw_close.wait()
            nursery.cancel_scope.cancel()


async def answer_on(stream: trio.SocketStream) -> bytes:
    """One whole answer of a stated length read from `stream` (b"" if it closes first)."""
    answer = b""
    while not complete(answer):
        chunk = await stream.receive_some(65536)
        if not chunk:
            return b""
        answer += chunk
    return answer


async def test_the_harness_connection_serves_its_next_request() -> None:
    """Bun's `fetch` (OpenCode's and Kilo CLI's MCP client) sends its next request on the
    connection of the last answer, even one that said `Connection: close`; the relay closed
    it, and the request failed with "The socket connection was closed unexpectedly" (Kilo's
    `mcp list`: "Failed to get tools"). Now an answer with a length leaves the harness's
    connection open (no `Connection: close`), and the next request on it is relayed with the
    session's token like the first."""
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(json_answer(200, b'{"n": %d}' % len(seen)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            relay = Relay.bind()
            await nursery.start(relay.serve, FakeSession(await serve(nursery, broker)))
            stream = await trio.open_tcp_stream("127.0.0.1", relay.port)
            async with stream:
                answers = []
                for _ in range(3):
                    await stream.send_all(post(relay, bearer(relay)))
                    answers.append(await answer_on(stream))
            nursery.cancel_scope.cancel()
    assert [a.endswith(b'{"n": %d}' % n) for n, a in enumerate(answers, 1)] == [True] * 3
    assert all(b"connection:" not in a.partition(b"\r\n\r\n")[0].lower() for a in answers)
    assert len(seen) == 3
    assert all(b"Authorization: Bearer tok_test" in request for request in seen)


@pytest.mark.parametrize(
    ("extra", "with_credential"),
    [(("Connection: close",), True), ((), False)],
    ids=["client-says-close", "stranger"],
)
async def test_connections_not_kept_open(
    extra: tuple[str, ...], with_credential: bool, mock_clock: trio.testing.MockClock
) -> None:
    """Closed after the answer: a client that said `Connection: close`, and a request without
    the credential (another local user's connection is never held for a next request, so it
    cannot keep a place); a harness's connection left idle is closed after KEEP_ALIVE."""
    mock_clock.autojump_threshold = 0.1

    async def broker(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(json_answer(200, b"{}"))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            relay = Relay.bind()
            await nursery.start(relay.serve, FakeSession(await serve(nursery, broker)))
            for headers in (
                (*extra, *([bearer(relay)] if with_credential else [])),
                (bearer(relay),),
            ):
                stream = await trio.open_tcp_stream("127.0.0.1", relay.port)
                async with stream:
                    await stream.send_all(post(relay, *headers))
                    assert (await answer_on(stream)).startswith(b"HTTP/1.1 200 ")
                    start = trio.current_time()
                    assert await stream.receive_some(65536) == b""  # closed by the relay
                    waited = trio.current_time() - start
                if headers == (bearer(relay),):
                    assert waited >= KEEP_ALIVE  # idle: kept open, then closed
                else:
                    assert waited < KEEP_ALIVE
            nursery.cancel_scope.cancel()


async def test_expect_100_continue_is_answered_by_the_relay() -> None:
    """A client that waits for `100 Continue` before its body gets it from the relay (which
    holds the body to be able to send it again)."""
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(json_answer(200, b"{}"))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            relay = Relay.bind()
            await nursery.start(relay.serve, FakeSession(await serve(nursery, broker)))
            stream = await trio.open_tcp_stream("127.0.0.1", relay.port)
            async with stream:
                request = post(relay, bearer(relay), "Expect: 100-continue")
                head, _, body = request.partition(b"\r\n\r\n")
                await stream.send_all(head + b"\r\n\r\n")
                assert await stream.receive_some(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
                await stream.send_all(body)
                answer = b""
                while chunk := await stream.receive_some(65536):
                    answer += chunk
            nursery.cancel_scope.cancel()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"expect" not in seen[0].lower()
    assert seen[0].endswith(CALL)


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"NONSENSE\r\n\r\n", 400, "validation_failed"),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "validation_failed"),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * (HEAD_LIMIT + 10), 431, "oversized_content"),
        (
            b"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: -1\r\n\r\n",
            400,
            "validation_failed",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            400,
            "validation_failed",
        ),
    ],
)
async def test_malformed_requests_are_refused_and_nothing_is_sent(
    request_bytes: bytes, status: int, code: str
) -> None:
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        seen.append(await read_request(stream))

    answer, _, _ = await relayed(
        broker, lambda r: request_bytes.replace(b"{host}", f"127.0.0.1:{r.port}".encode())
    )
    assert error_of(answer) == (status, code)
    assert seen == []


async def test_a_chunked_body_streams_through() -> None:
    """A body without a length is not held: it streams to the broker as it comes."""
    seen: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            data += await stream.receive_some(65536)
        seen.append(data)
        await stream.send_all(json_answer(200, b"{}"))

    def chunked(relay: Relay) -> bytes:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\n{bearer(relay)}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        return head.encode() + b"5\r\nhello\r\n0\r\n\r\n"

    answer, _, _ = await relayed(broker, chunked)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert seen[0].endswith(b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in seen[0]


#: The outsider (standard library only: another user runs it with the system's Python): opens
#: IDLE connections to the relay that send nothing and TRICKLING ones that send half a request
#: head and then a byte every 50 ms, says `ready`, then `closed` each time the relay closes one,
#: and `all closed` at the end. It never opens one again.
HOARDER = r"""
import selectors, socket, sys
port, idle, trickling = (int(arg) for arg in sys.argv[1:4])
half = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: " % port
held = {}
for kind, count in (("idle", idle), ("trickling", trickling)):
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        if kind == "trickling":
            sock.sendall(half)
        sock.setblocking(False)
        held[sock] = kind
print("ready", flush=True)
selector = selectors.DefaultSelector()
for sock in held:
    selector.register(sock, selectors.EVENT_READ)
while held:
    for key, _ in selector.select(0.05):
        try:
            data = key.fileobj.recv(65536)
        except OSError:
            data = b""
        if not data:
            print("closed", held.pop(key.fileobj), flush=True)
            selector.unregister(key.fileobj)
            key.fileobj.close()
    for sock, kind in held.items():
        if kind == "trickling":
            try:
                sock.send(b"a")
            except OSError:
                pass
print("all closed", flush=True)
"""
IDLE, TRICKLING = 200, 20


class Lines:
    """The lines a process prints, as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream, self._buffer = stream, b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some(65536)
            assert chunk, "the outsider ended early"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


@pytest.fixture(params=["same user", "another user"])
def outsider(request: pytest.FixtureRequest) -> dict[str, Any]:
    """How to run the hoarder: as this user (everywhere), or as a throwaway other Unix user
    (root only; skipped with the reason elsewhere)."""
    if request.param == "same user":
        return {"executable": sys.executable}
    return {"executable": SYSTEM_PYTHON, "user": request.getfixturevalue("other_user")}


async def test_outsiders_holding_sockets_do_not_cut_the_harness_off(
    outsider: dict[str, Any], mock_clock: trio.testing.MockClock
) -> None:
    """A local user holds 200 idle connections to the relay and 20 that trickle half a head
    (before: 64 of them took every slot, and each of the harness's calls got 503). The
    harness's requests, with the credential, are all served while the outsider still holds
    more connections than the harness may use; once the head deadline passes, the relay has
    closed every one of the outsider's connections, the trickling ones included. The harness's
    event stream, open all along, still delivers."""
    mock_clock.rate = 1  # real time, plus the jump past the head deadline below

    second_event = trio.Event()

    async def broker(stream: trio.SocketStream) -> None:
        if b"GET /v1/sessions/current/events" not in await read_request(stream):
            await stream.send_all(json_answer(200, b'{"ok": true}'))
            return
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        await stream.send_all(b"event: ready\n\n")
        await second_event.wait()
        await stream.send_all(b"event: mail\n\n")

    statuses: list[bytes] = []

    async def call(relay: Relay) -> None:
        try:
            answer = await exchange(relay, post(relay, bearer(relay)))
        except trio.BrokenResourceError:  # refused before its body was read
            statuses.append(b"reset")
        else:
            statuses.append(answer.split(b" ")[1])

    with trio.fail_after(60 + HEAD_TIMEOUT):
        async with trio.open_nursery() as nursery:
            relay = Relay.bind()
            await nursery.start(relay.serve, FakeSession(await serve(nursery, broker)))
            # The harness's event stream, open before the outsider comes, must outlive it.
            events = await trio.open_tcp_stream("127.0.0.1", relay.port)
            await events.send_all(
                f"GET /v1/sessions/current/events HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\n"
                f"{bearer(relay)}\r\nAccept: text/event-stream\r\n\r\n".encode()
            )
            await receive_until(events, b"event: ready\n\n")
            executable, user = outsider["executable"], outsider.get("user")
            command = [executable, "-c", HOARDER, str(relay.port), str(IDLE), str(TRICKLING)]
            hoarder = await trio.lowlevel.open_process(
                command, stdout=subprocess.PIPE, cwd="/", **({"user": user} if user else {})
            )
            nursery.start_soon(_killed_when_cancelled, hoarder)
            assert hoarder.stdout is not None
            lines = Lines(hoarder.stdout)
            assert await lines.next() == "ready"
            # The relay accepted them all (it holds at most STRANGERS: the oldest went first).
            for _ in range(IDLE + TRICKLING - STRANGERS):
                assert await lines.next() == "closed idle"
            for _ in range(2):
                async with trio.open_nursery() as calls:
                    for _ in range(10):
                        calls.start_soon(call, relay)
            assert statuses == [b"200"] * 20
            assert len(relay.strangers) > HARNESS_CONNECTIONS  # the outsider still held them

            mock_clock.jump(HEAD_TIMEOUT)
            closed = []
            while (line := await lines.next()) != "all closed":
                closed.append(line)
            assert "closed trickling" in closed
            assert len(relay.strangers) == 0
            second_event.set()
            await receive_until(events, b"event: mail\n\n")
            await events.aclose()
            assert await hoarder.wait() == 0
            nursery.cancel_scope.cancel()


async def receive_until(stream: trio.SocketStream, end: bytes) -> None:
    got = b""
    while not got.endswith(end):
        chunk = await stream.receive_some(65536)
        assert chunk, f"the stream ended before {end!r}"
        got += chunk


async def _killed_when_cancelled(process: trio.Process) -> None:
    try:
        await trio.sleep_forever()
    finally:
        process.kill()
