"""The broker side of `pager mcp`: one registered session, one MCP client on `/mcp`, recovery.

`BrokerLink` registers the calling session (its session client, pager/session_client.py, which
also holds the session's lease with the event stream and detaches it), keeps one official MCP
client (`mcp.Client` over Streamable HTTP with the session token) open in a task of its own,
forwards tool calls through it, and recovers per SPEC §7:

- `expired` (the lease lapsed) or an unknown token: register again (resume token, conversation
  key, name), reconnect, retry the call once;
- nothing listens at the broker's address, or the broker it found no longer holds its lock
  (the old address may now be anyone's, so no token is sent there): `ensure_broker()` once
  (it adopts only a broker that proves it knows the local secret), reconnect with the same
  token (attachments survive a broker restart; if the broker no longer knows the token, the
  step above follows), retry once;
- `ended`: final. The call and every later one answer a tool error `{code: "ended", …}`;
- a registration refused (409 `alias_conflict`): no session; every call answers that error
  (naming the holder) after trying to register again, in case the holder has left.

The broker answers `/mcp` authentication failures with HTTP 401 before MCP sees the request.
The SDK's Streamable HTTP client turns an HTTP error without a JSON-RPC body into a bare
`INTERNAL_ERROR` ("Server returned an error response") and lets a refused connection crash its
task group; `_ReportingTransport` therefore rewrites both into a JSON-RPC error carrying what
the HTTP layer said, which the SDK raises as an `MCPError` to the one call it concerns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent, Tool

from pager.domain.hints import Edge, for_edge
from pager.launch.discovery import BrokerLocator
from pager.launch.files import session_token
from pager.session_client import (
    REJOINABLE,
    RegistrationFailed,
    SessionClient,
    SessionEnded,
    StreamRefusal,
    hold_lease,
)
from pager.sse import SseEvent

log = logging.getLogger("pager.mcp")

#: The JSON-RPC error code `_ReportingTransport` answers with; `data` carries `REPORT_KEY`.
HTTP_FAILURE = -32050
REPORT_KEY = "pager_http"

#: `fetch` long-polls up to 60 s, so a call may take that long plus the broker's own work.
TIMEOUT = httpx2.Timeout(10.0, read=90.0)
DETACH_TIMEOUT = 2.0
#: Seconds a refused call waits for the wrapper of its launch to rejoin (it does at once).
WRAPPER_REJOIN_WAIT = 10.0

#: What a failure means for the call that met it (see `BrokerFailure.kind`).
GONE, BROKEN, EXPIRED, ENDED, REFUSED = "gone", "broken", "expired", "ended", "refused"
CLOSED = "closed"  # the connection closed before the call was sent: retry on the current one


@attrs.frozen
class McpOptions:
    """Who `pager mcp` registers as."""

    workspace: str
    implementation: str = "mcp"
    session_name: str | None = None
    conversation_key: str | None = None
    hold_lease: bool = True

    def register_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"workspace": self.workspace, "implementation": self.implementation}
        if self.session_name is not None:
            body["session_name"] = self.session_name
        if self.conversation_key is not None:
            body["conversation_key"] = self.conversation_key
        return body


class ToolFailure(Exception):
    """What the model is told instead of a result: a tool error `{code, message, …}`."""

    def __init__(self, error: dict[str, Any]) -> None:
        if "hint" in error:  # a /v1 answer: its hint as an MCP client says it
            error = {**error, "message": for_edge(error, Edge.MCP)}
        super().__init__(str(error.get("message", "")))
        self.error = error

    @classmethod
    def of(cls, code: str, message: str, **details: Any) -> ToolFailure:
        return cls({"code": code, "message": message, **details})

    @property
    def code(self) -> str:
        return str(self.error.get("code", ""))

    def result(self) -> CallToolResult:
        text = json.dumps(self.error, ensure_ascii=False, separators=(",", ":"), default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class BrokerFailure(Exception):
    """The broker answered with an HTTP error (status and Pager error) or did not answer."""

    def __init__(self, kind: str, status: int | None, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.kind = kind
        self.status = status
        self.error = error

    @classmethod
    def from_answer(cls, status: int, answer: Any) -> BrokerFailure:
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            error = {"code": "internal", "message": f"the broker answered HTTP {status}"}
        code = error["code"]
        if status == 401 and code == "ended":
            kind = ENDED
        elif status == 401 and code in REJOINABLE:
            kind = EXPIRED
        else:
            kind = REFUSED
        return cls(kind, status, error)

    @classmethod
    def from_transport(cls, exc: httpx2.TransportError, url: str) -> BrokerFailure:
        # Refused before a byte was sent: the request cannot have taken effect, a retry is safe.
        kind = GONE if isinstance(exc, httpx2.ConnectError) else BROKEN
        what = "does not answer" if kind == GONE else "dropped the request"
        message = f"the Pager broker at {url} {what} ({type(exc).__name__}: {exc})"
        return cls(kind, None, {"code": "internal", "message": message})

    @classmethod
    def from_mcp_error(cls, exc: MCPError) -> BrokerFailure | None:
        """The failure `_ReportingTransport` put into this error, or None for a real MCP error."""
        data = exc.error.data
        report = (
            data.get(REPORT_KEY) if exc.code == HTTP_FAILURE and isinstance(data, dict) else None
        )
        if not isinstance(report, dict):
            return None
        return cls(str(report["kind"]), report.get("status"), dict(report["error"]))

    def report(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "error": self.error}


class _ReportingTransport(httpx2.AsyncBaseTransport):
    """Turns what the SDK would lose (a non-JSON-RPC HTTP error, a refused connection) into a
    JSON-RPC error whose `data` says what happened; everything else passes through."""

    def __init__(self) -> None:
        # No kept-alive connections: a loopback connect costs ~0.1 ms, and a pooled connection
        # to a broker that died would fail a call mid-request (which must not be retried),
        # where a fresh connect is simply refused (which can safely start a broker and retry).
        self._inner = httpx2.AsyncHTTPTransport(
            limits=httpx2.Limits(max_connections=100, max_keepalive_connections=0)
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            origin = f"{request.url.scheme}://{request.url.netloc.decode()}"
            return _jsonrpc_error(request, 503, BrokerFailure.from_transport(exc, origin))
        if response.status_code < 400:
            return response
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "jsonrpc" in answer:  # the SDK reads it itself
            headers = {"content-type": response.headers.get("content-type", "application/json")}
            return httpx2.Response(response.status_code, headers=headers, content=body)
        failure = BrokerFailure.from_answer(response.status_code, answer)
        return _jsonrpc_error(request, response.status_code, failure)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _jsonrpc_error(request: httpx2.Request, status: int, failure: BrokerFailure) -> httpx2.Response:
    # The SDK replaces the id with the one of the request it answers.
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": HTTP_FAILURE,
            "message": str(failure.error.get("message", "")),
            "data": {REPORT_KEY: failure.report()},
        },
    }
    return httpx2.Response(
        status, headers={"content-type": "application/json"}, json=body, request=request
    )


@attrs.define(eq=False)
class _Connection:
    """One open MCP client on one session token; its task closes it once `retire`d and idle."""

    generation: int
    url: str
    session: dict[str, Any]
    client: Client | None = None
    users: int = 0
    retired: bool = False
    closed: bool = False
    release: trio.Event = attrs.Factory(trio.Event)

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.retired and not self.closed

    def retire(self) -> None:
        self.retired = True
        if self.users == 0:
            self.release.set()


class BrokerLink:
    """The registered session of this `pager mcp` process and its connection to the broker."""

    def __init__(self, options: McpOptions, paths: Any = None) -> None:
        self.options = options
        self._paths = paths  # StatePaths, resolved lazily so that a bad state dir is reported
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()
        #: The session (pager/session_client.py), once a broker was found for the state dir.
        self._client: SessionClient | None = None
        self._holding = False  # the lease holder runs
        self._connection: _Connection | None = None
        self._generation = 0
        self._ended: ToolFailure | None = None
        self._tools: list[Tool] | None = None
        # Inside `pager <implementation>` the wrapper already registered this session, holds
        # its lease and detaches it: use that session rather than register a second one.
        token, agent_id = session_token(os.environ), os.environ.get("PAGER_AGENT_ID")
        self._adopted: dict[str, Any] | None = (
            {"token": token, "agent_id": agent_id, "address": os.environ.get("PAGER_ADDRESS")}
            if token and agent_id
            else None
        )

    # -- lifetime -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serves until cancelled: registers in the background and holds the lease."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                nursery.start_soon(self._start)
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.detach()

    async def _start(self) -> None:
        try:
            await self._usable_connection()
        except ToolFailure as failure:
            log.error("%s", failure)  # each tool call will say it again (and try again)
        except Exception:
            log.exception("registering with the broker failed; each tool call tries again")

    async def detach(self) -> None:
        """Graceful detach of the current session (its mail keeps waiting); once. Not the
        wrapper's session (the wrapper detaches it), nor one that ended."""
        if self._client is None:
            return
        with trio.move_on_after(DETACH_TIMEOUT):
            if await self._client.detach():
                log.info("detached")

    # -- what the stdio server asks -------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        """The broker's tools as it lists them; Pager's own definitions while there is no
        session to ask with (a refused registration, a broker that cannot start)."""
        if self._tools is None:
            with contextlib.suppress(ToolFailure):
                await self._usable_connection()
        return self._tools if self._tools is not None else local_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Forwards one call; recovers from `expired` and a vanished broker once each."""
        tried: set[str] = set()
        try:
            connection = await self._usable_connection()
            while True:
                try:
                    return await self._call(connection, name, arguments)
                except BrokerFailure as failure:
                    connection = await self._recover_call(connection, failure, tried)
        except ToolFailure as failure:
            return failure.result()
        except MCPError:
            raise  # the broker's MCP layer refused the request: the harness gets the same error
        except Exception as exc:
            log.exception("forwarding %s failed", name)
            message = f"`pager mcp` failed to forward {name}: {exc!r}"
            return ToolFailure.of("internal", message).result()

    async def _call(
        self, connection: _Connection, name: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        if not self._current(connection):
            raise _broker_gone()  # never a token to a URL only remembered
        async with self._using(connection) as client:
            try:
                return await client.call_tool(name, arguments)
            except MCPError as exc:
                failure = BrokerFailure.from_mcp_error(exc)
                if failure is None:
                    raise  # the broker's MCP layer answered an error: pass it on as is
                raise failure from None

    @contextlib.asynccontextmanager
    async def _using(self, connection: _Connection) -> AsyncIterator[Client]:
        if connection.client is None or connection.closed:
            raise BrokerFailure(
                CLOSED, None, {"code": "internal", "message": "the broker connection closed"}
            )
        connection.users += 1
        try:
            yield connection.client
        finally:
            connection.users -= 1
            if connection.retired and connection.users == 0:
                connection.release.set()

    # -- recovery -------------------------------------------------------------------------

    async def _usable_connection(self) -> _Connection:
        if self._ended is not None:
            raise self._ended
        current = self._connection
        if current is not None and current.usable:
            return current
        async with self._lock:
            if self._ended is not None:
                raise self._ended
            current = self._connection
            if current is not None and current.usable:
                return current
            return await self._establish(None, set())

    async def _recover_call(
        self, used: _Connection, failure: BrokerFailure, tried: set[str]
    ) -> _Connection:
        """The connection to retry a call on after `failure`, or ToolFailure."""
        async with self._lock:
            if self._ended is not None:
                raise self._ended
            current = self._connection
            moved_on = current is not None and current is not used and current.usable
            stale = self._client is None or used.session is not self._client.answer
            if failure.kind in (GONE, EXPIRED, ENDED, CLOSED) and (moved_on or stale):
                # Another call recovered meanwhile, or the session changed under this call:
                # retry on what is current now.
                if "moved:" + failure.kind in tried:
                    raise ToolFailure(failure.error)
                tried.add("moved:" + failure.kind)
                if moved_on:
                    assert current is not None
                    return current
                return await self._establish(None, tried)
            if failure.kind == CLOSED:
                return await self._establish(None, tried)
            return await self._establish(failure, tried)

    async def _establish(self, failure: BrokerFailure | None, tried: set[str]) -> _Connection:
        """Under the lock: a working connection after `failure` (None: none was made yet).
        Each recovery step runs at most once per call (`tried`)."""
        while True:
            if failure is not None:
                if failure.kind not in (GONE, EXPIRED) or failure.kind in tried:
                    raise self._give_up(failure)
                tried.add(failure.kind)
                log.info("broker said %s (%s); recovering", failure.kind, failure)
            client = self._client
            # The token the broker refused, if it did (read before anything is awaited).
            stale = client.token if client is not None and client.answer is not None else None
            try:
                if client is None or (failure is not None and failure.kind == GONE):
                    client = await self._ensure_broker()
                if client.answer is None or (failure is not None and failure.kind == EXPIRED):
                    await self._register(client, stale=stale)
                return await self._connect(client)
            except BrokerFailure as again:
                failure = again

    def _give_up(self, failure: BrokerFailure) -> ToolFailure:
        if failure.kind == ENDED:
            error = dict(failure.error)
            error["message"] = (
                f"{error.get('message', 'this session has ended')}. This Pager session was ended"
                " by the broker (another session took over this identity, or an operator archived"
                " it); `pager mcp` does not rejoin by itself. Restart this MCP server (reconnect"
                " it in your harness) to register again."
            )
            self._ended = ToolFailure(error)
            self._retire()
            if self._client is not None:
                self._client.end("ended")  # no rejoin, no detach; the lease holder stops
            log.warning("%s", error["message"])
            return self._ended
        if failure.kind == EXPIRED:
            error = dict(failure.error)
            error["message"] = (
                f"{error.get('message', '')} (`pager mcp` registered again and retried once;"
                " the broker still refused)"
            )
            return ToolFailure(error)
        if failure.kind == GONE:
            return ToolFailure.of(
                "internal",
                f"{failure.error['message']}, even after `pager mcp` tried to start it. Check"
                " `pager status` and the broker log in the state directory's logs/.",
            )
        if failure.kind == BROKEN:
            return ToolFailure.of(
                "internal",
                f"{failure.error['message']}; the call may or may not have taken effect. Call"
                " again (a send with the same idempotency_key is not sent twice).",
            )
        return ToolFailure(failure.error)

    async def _ensure_broker(self) -> SessionClient:
        """Adopts the running broker or starts one; the session client, which goes with it."""
        from pager.launch.lifecycle import LifecycleError, ensure_broker
        from pager.launch.paths import StateDirError, state_paths

        try:
            if self._paths is None:
                self._paths = state_paths()
            broker = await trio.to_thread.run_sync(ensure_broker, self._paths)
        except (LifecycleError, StateDirError, OSError) as exc:
            raise ToolFailure.of(
                "internal", f"`pager mcp` could not start or adopt the Pager broker: {exc}"
            ) from None
        log.info("using the broker at %s (pid %s)", broker.url, broker.pid)
        if self._client is None:
            locator = BrokerLocator(self._paths, broker)
            notices = _LoggedNotices(self._retire)
            self._client = SessionClient(locator, self.options.register_body(), notices=notices)
        else:
            self._client.locator.broker = broker
        return self._client

    def _current(self, connection: _Connection) -> bool:
        """The connection goes to the verified broker, which still holds its lock (a file lock
        probe): the broker's old address may now be anyone's."""
        return self._client is not None and self._client.current_url() == connection.url

    async def _register(self, client: SessionClient, *, stale: str | None) -> None:
        """Registers the session (SPEC §7): the first time (`stale` None), or again after the
        broker refused the token `stale`: with the resume token if there is one, else by
        conversation key or name."""
        if stale is not None and self._adopted is not None and os.environ.get("PAGER_TOKEN_FILE"):
            # The wrapper rejoins its session itself and writes the new token to that file.
            self._adopted = {**self._adopted, "token": await self._renewed_token()}
            stale = None
        if stale is None and self._adopted is not None:
            client.adopt(self._adopted)
            self._retire()
            log.info("using the session of the wrapped launch (%s)", self._adopted["address"])
            return
        try:
            await client.register(stale=stale)
        except OSError as exc:
            raise ToolFailure.of(
                "internal", f"`pager mcp` cannot read the local secret {exc.filename}: {exc}"
            ) from None
        except SessionEnded:
            error = {"code": "ended", "message": "this session has ended"}
            raise BrokerFailure(ENDED, 401, error) from None
        except RegistrationFailed as exc:
            raise _registration_failure(client, exc) from None
        if self.options.hold_lease and self._adopted is None and not self._holding:
            assert self._nursery is not None
            self._holding = True
            self._nursery.start_soon(self._hold_lease, client)

    async def _renewed_token(self) -> str:
        """The wrapped launch's token once its wrapper has rejoined (it differs from ours)."""
        assert self._adopted is not None
        with trio.move_on_after(WRAPPER_REJOIN_WAIT):
            while True:
                token = session_token(os.environ)
                if token and token != self._adopted["token"]:
                    return token
                await trio.sleep(0.2)
        raise ToolFailure.of(
            "expired",
            "the broker refused this wrapped launch's session and its wrapper did not rejoin;"
            " restart the harness with `pager <implementation>`",
        )

    async def _connect(self, session: SessionClient) -> _Connection:
        """Opens a client with the current session's token; lists the tools through it."""
        assert self._nursery is not None
        assert session.answer is not None
        url = session.current_url()
        if url is None:
            raise _broker_gone()
        self._generation += 1
        connection = _Connection(self._generation, url, session.answer)
        try:
            await self._nursery.start(_own_client, connection)
        except Exception as exc:  # a Cancelled (a BaseException) passes
            error = _single(exc)
            failure = BrokerFailure.from_mcp_error(error) if isinstance(error, MCPError) else None
            if failure is not None:
                raise failure from None
            raise ToolFailure.of(
                "internal", f"connecting to the broker's MCP endpoint failed: {error!r}"
            ) from exc
        self._retire()
        self._connection = connection
        if self._tools is None:
            try:
                async with self._using(connection) as client:
                    self._tools = await _all_tools(client)
            except MCPError as exc:
                failure = BrokerFailure.from_mcp_error(exc)
                if failure is not None:
                    raise failure from None
                log.warning("listing the broker's tools failed (%s); advertising Pager's own", exc)
        return connection

    def _retire(self) -> None:
        if self._connection is not None:
            self._connection.retire()
            self._connection = None

    # -- the lease ------------------------------------------------------------------------

    async def _hold_lease(self, client: SessionClient) -> None:
        """Keeps the session's event stream open (it holds the lease while the harness runs).
        Tool calls decide when the session ended (after a forced takeover the token runs on as
        a fresh agent) and register again when a refused stream's rejoin did not cure it."""
        try:
            await hold_lease(client, decides_the_end=False)
        except Exception:
            log.exception("holding the session's lease failed; it lapses when idle from now on")


class _LoggedNotices:
    """What the session client did, told in `pager mcp`'s log (stderr)."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._changed = changed  # the MCP connection on the old token is retired

    def info(self, text: str) -> None:
        log.info("%s", text)

    def warn(self, text: str) -> None:
        log.warning("%s", text)

    def registered(self, url: str, answer: dict[str, Any], previous: dict[str, Any] | None) -> None:
        self._changed()
        if previous is not None and previous.get("agent_id") != answer.get("agent_id"):
            log.warning(
                "rejoined as a different identity: %s (%s) instead of %s",
                answer.get("address"),
                answer.get("agent_id"),
                previous.get("agent_id"),
            )
        log.info(
            "registered as %s (%s), session %s",
            answer.get("address"),
            answer.get("agent_id"),
            answer.get("session_id"),
        )

    def refused(self, refusal: StreamRefusal) -> None:
        failure = BrokerFailure.from_answer(refusal.status, refusal.answer)
        log.warning("the broker refused the session's event stream: %s", failure)

    def ended(self, event: SseEvent) -> None:
        log.warning("the broker ended this session: %s", event.data.strip())


def _broker_gone() -> BrokerFailure:
    """The verified broker no longer holds its lock: recover as when nothing listens."""
    error = {"code": "unavailable", "message": "the broker this session used is gone"}
    return BrokerFailure(GONE, None, error)


async def _own_client(
    connection: _Connection, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Owns one `mcp.Client` (its task group lives in this task) until it is released."""
    started = False
    try:
        async with (
            httpx2.AsyncClient(
                headers=_bearer(connection.session["token"]),
                transport=_ReportingTransport(),
                timeout=TIMEOUT,
            ) as http,
            Client(
                streamable_http_client(f"{connection.url}/mcp", http_client=http), cache=None
            ) as client,
        ):
            connection.client = client
            started = True
            task_status.started()
            await connection.release.wait()
    except Exception:
        if not started:
            raise
        log.exception("the MCP connection to the broker failed")
    finally:
        connection.closed = True


async def _all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def local_tools() -> list[Tool]:
    """Pager's tools from this installation's own definitions (the broker's come from the same)."""
    from mcp.types import ToolAnnotations

    from pager.web.mcp_tools import TOOLS

    return [
        Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema(),
            annotations=ToolAnnotations(read_only_hint=True) if spec.read_only else None,
        )
        for spec in TOOLS
    ]


def _conflict(body: dict[str, Any], error: dict[str, Any]) -> ToolFailure:
    holder = error.get("holder") if isinstance(error.get("holder"), dict) else {}
    assert isinstance(holder, dict)
    name = body.get("session_name")
    held_by = (
        f" It is held by {holder.get('address')} ({holder.get('agent_id')},"
        f" implementation {holder.get('implementation')}), which is attached."
        if holder
        else ""
    )
    message = (
        f"`pager mcp` could not register this session as {name!r}: {error.get('message')}."
        f"{held_by} Stop that session, or give this MCP server another name (PAGER_SESSION_NAME"
        " or --session-name) and restart it. Every call tries to register again, so calls work"
        " once the name is free."
    )
    return ToolFailure({**error, "message": message})


def _registration_failure(client: SessionClient, failed: RegistrationFailed) -> Exception:
    """What a registration the broker refused (or did not answer) means for the call."""
    if failed.status == 0:
        # Nothing listened (a started broker may take it), or the request was dropped.
        kind, what = (GONE, "does not answer") if failed.gone else (BROKEN, "dropped the request")
        message = f"the Pager broker {what} ({failed.error.get('message')})"
        return BrokerFailure(kind, None, {"code": "internal", "message": message})
    error = BrokerFailure.from_answer(failed.status, failed.answer).error
    if error.get("code") == "alias_conflict":
        return _conflict(client.registration, error)
    message = f"`pager mcp` could not register this session: {error.get('message')}"
    return ToolFailure({**error, "message": message})


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _single(exc: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
