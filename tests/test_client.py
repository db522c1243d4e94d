"""`pager.client`'s HTTP framing, shared by every hand-written client: the response head
parser, the body reader (Content-Length, chunked, close-delimited), and the client itself
against stand-in servers."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.client import (
    BodyReader,
    BrokerRefused,
    BrokerUnreachable,
    Connection,
    parse_head,
    request_json,
    split_head,
    stream_lines,
)


def test_parse_head_reads_status_and_headers() -> None:
    """Status code, the status line, header names in lower case, repeated ones joined."""
    head = parse_head(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        b"WWW-Authenticate: Bearer\r\nwww-authenticate:  Basic \r\nContent-Length: 2"
    )
    assert (head.status, head.line) == (401, "HTTP/1.1 401 Unauthorized")
    assert head.headers == {
        "content-type": "application/json",
        "www-authenticate": "Bearer, Basic",
        "content-length": "2",
    }
    assert (head.length, head.chunked) == (2, False)


def test_parse_head_takes_lf_line_ends_and_no_reason_phrase() -> None:
    """Bare LF line ends, HTTP/1.0, no reason phrase; Transfer-Encoding in any case."""
    head = parse_head(b"HTTP/1.0 200\nTransfer-Encoding: Chunked\n")
    assert (head.status, head.chunked, head.length) == (200, True, None)


@pytest.mark.parametrize(
    "raw",
    [b"", b"SSH-2.0-OpenSSH_9.6", b"HTTP/1.1 2000 OK", b"HTTP/1.1 abc", b"HTTP/2 200", b"200 OK"],
)
def test_parse_head_refuses_what_is_not_an_http_answer(raw: bytes) -> None:
    """No HTTP/1.x status line with a three-digit status: ValueError."""
    with pytest.raises(ValueError, match="not an HTTP answer"):
        parse_head(raw)


def test_head_length_refuses_a_content_length_that_is_no_number() -> None:
    """A Content-Length that is not all digits is no length."""
    with pytest.raises(ValueError, match="Content-Length"):
        _ = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1").length


def test_split_head_waits_for_the_blank_line_and_bounds_the_head() -> None:
    """None until the blank line arrives; a head over 64 KiB is refused."""
    assert split_head(b"HTTP/1.1 200 OK\r\nA: b\r\n") is None
    assert split_head(b"HTTP/1.1 200 OK\r\n\r\nbody") == (b"HTTP/1.1 200 OK", b"body")
    with pytest.raises(ValueError, match="KiB"):
        split_head(b"x" * (65 * 1024))


def _body(head: bytes, *pieces: bytes) -> tuple[bytes, bool]:
    reader = BodyReader(parse_head(head))
    return b"".join(reader.feed(piece) for piece in pieces), reader.done


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
CHUNKS = b"5;ext=1\r\nhello\r\n1\r\n,\r\nA\r\n world\r\n\r\n\r\n0\r\n\r\nnot body"


def test_body_reader_decodes_chunks_split_at_every_byte() -> None:
    """Sizes (hex, with extensions), data and CRLFs split anywhere; done at the last chunk,
    nothing after it is body."""
    for cut in range(len(CHUNKS) + 1):
        assert _body(CHUNKED, CHUNKS[:cut], CHUNKS[cut:]) == (b"hello, world\r\n\r\n", True)
    assert _body(CHUNKED, *(CHUNKS[i : i + 1] for i in range(len(CHUNKS)))) == (
        b"hello, world\r\n\r\n",
        True,
    )


def test_body_reader_stops_at_content_length_and_reads_to_the_end_without_one() -> None:
    """Content-Length: that many bytes, then done; neither it nor chunks: never done."""
    length = b"HTTP/1.1 200 OK\r\nContent-Length: 5"
    assert _body(length, b"he", b"llo, more") == (b"hello", True)
    assert _body(b"HTTP/1.1 204 No Content\r\nContent-Length: 0") == (b"", True)
    assert _body(b"HTTP/1.1 200 OK", b"a", b"b") == (b"ab", False)


@pytest.mark.parametrize("chunks", [b"zz\r\nab\r\n", b"2\r\nabc\r\n", b"-2\r\nab\r\n", b"9" * 2000])
def test_body_reader_refuses_malformed_chunks(chunks: bytes) -> None:
    """A size that is not hex, is negative or never ends, or data past its size: ValueError."""
    with pytest.raises(ValueError, match=r"chunk|base 16"):
        BodyReader(parse_head(CHUNKED)).feed(chunks)


@contextmanager
def answering(*answers: bytes) -> Iterator[str]:
    """A one-connection server on 127.0.0.1 that reads the request, sends `answers` one
    send at a time, then closes; yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            for answer in answers:
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        thread.join(10)
        listener.close()


def test_request_json_reads_a_chunked_answer_sent_in_pieces() -> None:
    """A head and chunks split across sends make one JSON answer."""
    with answering(
        b"HTTP/1.1 200 OK\r\nTransfer-",
        b'Encoding: chunked\r\n\r\n3\r\n{"a',
        b'\r\n5\r\n": 1}\r\n0\r\n\r\n',
    ) as url:
        assert request_json(url, "GET", "/v1/health") == (200, {"a": 1})


def test_request_json_not_http_or_no_answer_is_unreachable() -> None:
    """Something else on the port, or a connection closed unanswered: BrokerUnreachable."""
    not_http = answering(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    with not_http as url, pytest.raises(BrokerUnreachable, match="not an HTTP answer"):
        request_json(url, "GET", "/v1/health")
    with answering() as url, pytest.raises(BrokerUnreachable, match="closed without an answer"):
        request_json(url, "GET", "/v1/health")


def test_stream_lines_yields_lines_of_a_chunked_body_and_raises_a_refusal() -> None:
    """Lines as they complete (the last one unterminated); an error answer: BrokerRefused."""
    body = b'{"kind": "identity"}\n{"kind": "message"}\n{"tail'
    chunked = b"".join(
        f"{len(body[i : i + 7]):x}\r\n".encode() + body[i : i + 7] + b"\r\n"
        for i in range(0, len(body), 7)
    )
    with answering(CHUNKED + b"\r\n\r\n" + chunked + b"0\r\n\r\n") as url:
        assert list(stream_lines(url, "/v1/export", token="t")) == [
            b'{"kind": "identity"}\n',
            b'{"kind": "message"}\n',
            b'{"tail',
        ]
    refusal = b'{"error": {"code": "unauthenticated"}}'
    head = f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(refusal)}\r\n\r\n".encode()
    with answering(head + refusal) as url, pytest.raises(BrokerRefused) as caught:
        list(stream_lines(url, "/v1/export", token="t"))
    assert caught.value.status == 401
    assert caught.value.answer == {"error": {"code": "unauthenticated"}}


@given(st.text())
def test_quote_writes_what_urllib_writes(text: str) -> None:
    """`pager.client.quote` (no urllib.parse on the quick path) is urllib.parse.quote."""
    from urllib.parse import quote as urllib_quote

    from pager.client import quote

    try:
        expected = urllib_quote(text)
    except UnicodeEncodeError:  # a lone surrogate: both refuse it
        with pytest.raises(UnicodeEncodeError):
            quote(text)
        return
    assert quote(text) == expected


OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"n": 1}'


def _read_request(connection: socket.socket, pending: bytes) -> tuple[bytes, bytes] | None:
    """One request (head and Content-Length body) from `connection`, and what followed it;
    None when the client closed first."""
    while b"\r\n\r\n" not in pending:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        pending += chunk
    head, _, rest = pending.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(rest) < length:
        rest += connection.recv(65536)
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


@contextmanager
def keeping(*connections: list[bytes]) -> Iterator[tuple[str, list[list[bytes]]]]:
    """A server on 127.0.0.1 that accepts one connection per item of `connections`, answers
    its requests in turn with that item's answers, then closes it; yields its URL and the
    requests each connection carried (filled in as they arrive)."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[list[bytes]] = []

    def serve() -> None:
        for answers in connections:
            connection, _ = listener.accept()
            carried: list[bytes] = []
            seen.append(carried)
            with connection:
                pending = b""
                for answer in answers:
                    request = _read_request(connection, pending)
                    if request is None:
                        break
                    carried.append(request[0])
                    pending = request[1]
                    connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        thread.join(10)
        listener.close()


def test_connection_carries_its_requests_on_one_connection() -> None:
    """Two requests in turn on one connection: the first keeps it alive, the last (`last`)
    asks the broker to close it."""
    with keeping([OK, OK]) as (url, seen):
        connection = Connection(url)
        assert connection.request("GET", "/health") == (200, {"n": 1})
        assert connection.request("POST", "/v1/me/send", token="t", body={}, last=True)[0] == 200
    [[first, second]] = seen
    assert b"Connection: close" not in first
    assert second.startswith(b"POST /v1/me/send ")
    assert b"Connection: close\r\n" in second


def test_connection_opens_another_when_the_broker_closed_it() -> None:
    """An answer that closes the connection (`Connection: close`, HTTP/1.0, or a server that
    hung up since): the next request goes on a new connection, once."""
    closing = OK.replace(b"OK\r\n", b"OK\r\nConnection: close\r\n", 1)
    old = OK.replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    with keeping([closing], [old], [OK], [OK]) as (url, seen):
        connection = Connection(url)
        for _ in range(3):
            assert connection.request("GET", "/health") == (200, {"n": 1})
        # The third connection's server answered and hung up: wait for its FIN to arrive.
        kept = connection._sock
        assert kept is not None
        assert select.select([kept], [], [], 10)[0]
        assert connection.request("GET", "/health") == (200, {"n": 1})
    assert [len(carried) for carried in seen] == [1, 1, 1, 1]


def test_connection_out_of_step_is_not_used_again() -> None:
    """An answer longer than its Content-Length (bytes a server slipped in after it) leaves
    the connection: the next answer is the next connection's, never those bytes."""
    forged = b'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"n": 666}'
    with keeping([OK + forged, OK], [OK]) as (url, seen):
        connection = Connection(url)
        assert connection.request("GET", "/health") == (200, {"n": 1})
        assert connection.request("GET", "/health") == (200, {"n": 1})
    assert [len(carried) for carried in seen] == [1, 1]
