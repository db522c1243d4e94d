"""The one bearer parser (`pager.web.dispatch.bearer_token`), as `/mcp` and the Quart `/v1`
routes (`pager.web.routes_v1.bearer`) both use it: exactly one `Bearer <token>` or nothing."""

from __future__ import annotations

import pytest
import trio
from quart import request
from quart_trio import QuartTrio
from werkzeug.datastructures import Headers

from pager.web.dispatch import bearer_token
from pager.web.routes_v1 import bearer

#: Values refused as one header: another scheme, no token, a token with a space in it, a
#: bare token.
MALFORMED = ["Basic YWxpY2U6eA==", "Bearer", "Bearer ", "Token alice-token", "Bearer a b",
             "Bearer\ta", "alice-token", ""]  # fmt: skip


@pytest.mark.parametrize("value", ["Bearer alice-token", "bearer alice-token",
                                   "BEARER  alice-token ", " Bearer alice-token"])  # fmt: skip
def test_bearer_token_reads_one_bearer_header(value: str) -> None:
    """The scheme in any case, spaces around the token: the token, from text or raw bytes."""
    assert bearer_token([value]) == "alice-token"
    assert bearer_token([value.encode("latin-1")]) == "alice-token"


@pytest.mark.parametrize("value", MALFORMED)
def test_bearer_token_refuses_a_malformed_header(value: str) -> None:
    """Anything but `Bearer <one token>` is no credential."""
    assert bearer_token([value]) is None
    assert bearer_token([value.encode("latin-1")]) is None


def test_bearer_token_refuses_none_or_two_headers() -> None:
    """No header is no credential; two are one too many (which would the request act as?),
    even when they agree."""
    assert bearer_token([]) is None
    assert bearer_token(["Bearer alice-token", "Bearer bob-token"]) is None
    assert bearer_token([b"Bearer alice-token", b"Bearer alice-token"]) is None


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ([("Authorization", "Bearer alice-token")], "alice-token"),
        ([("authorization", "bearer alice-token"), ("X-Other", "1")], "alice-token"),
        ([], None),
        ([("Authorization", "Bearer a b")], None),
        ([("Authorization", "Bearer alice-token"), ("Authorization", "Bearer bob-token")], None),
    ],
)
def test_routes_bearer_reads_quart_headers_like_the_dispatcher(
    headers: list[tuple[str, str]], token: str | None
) -> None:
    """`routes_v1.bearer` over Quart's (werkzeug) headers answers as `bearer_token` does."""
    assert bearer(Headers(headers)) == token


async def test_routes_bearer_in_a_request_sees_every_authorization_header() -> None:
    """Inside a real Quart request a repeated Authorization header is refused, not read as
    its first value."""
    app = QuartTrio(__name__)

    @app.get("/who")
    async def who() -> str:
        return repr(bearer(request.headers))

    client = app.test_client()
    with trio.fail_after(10):
        one = await client.get("/who", headers={"Authorization": "Bearer alice-token"})
        two = await client.get(
            "/who",
            headers=Headers(
                [("Authorization", "Bearer alice-token"), ("Authorization", "Bearer bob-token")]
            ),
        )
    assert await one.get_data(as_text=True) == "'alice-token'"
    assert await two.get_data(as_text=True) == "None"
