"""Every place Pager leans on a dependency's internals, each checked to have taken effect.

Three shims, each measured worth keeping (docs/decisions.md, "Broker CPU per MCP call"):

- `install_idle_timer`: Hypercorn's per-connection keep-alive timer (Hypercorn 0.18);
- `drop_otel_middleware`: the MCP SDK's OpenTelemetry middleware (mcp 2.3);
- `skip_param_header_check`: the MCP SDK's `Mcp-Param-*` header check (mcp 2.3).

Each function applies its shim and returns a `ShimResult` saying whether it took effect, which
it verifies by its effect (what the dependency will actually construct, keep or call), not by
the assignment. A shim that cannot apply leaves the dependency's own behaviour in place; the
`ShimReport` it is recorded in logs one warning for it. `pyproject.toml` bounds each of these
dependencies below its next minor (next 0.x release for Hypercorn), so a new release is taken
only after its internals are checked here again.

`check_shims` runs at the web server's start and applies the Hypercorn shim. The MCP shims
are applied (and recorded in the same report) when the MCP endpoint is built, on the first
`/mcp` request (pager/web/mcp_lazy.py): importing the SDK at start is what that avoids.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import trio

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

log = logging.getLogger("pager.web")

IDLE_TIMER = "hypercorn-idle-timer"
OTEL_MIDDLEWARE = "mcp-otel-middleware"
PARAM_HEADER_CHECK = "mcp-param-header-check"


@attrs.frozen
class ShimResult:
    """Whether one shim took effect; if not, why (and that the dependency's own is kept)."""

    name: str
    in_effect: bool
    reason: str = ""


class ShimReport:
    """The shims' results in this web server; logs one warning per shim not in effect.

    Held by `run_web_server` (a later /health can report `degraded()` from it)."""

    def __init__(self) -> None:
        self._results: dict[str, ShimResult] = {}

    def record(self, result: ShimResult) -> ShimResult:
        self._results[result.name] = result
        if not result.in_effect:
            log.warning("compatibility shim %s is not in effect: %s", result.name, result.reason)
        return result

    def results(self) -> dict[str, ShimResult]:
        return dict(self._results)

    def degraded(self) -> list[str]:
        """One line per shim recorded as not in effect (empty when all took effect)."""
        return [f"{r.name}: {r.reason}" for r in self._results.values() if not r.in_effect]


def check_shims(report: ShimReport | None = None) -> ShimReport:
    """The start-up self-check: apply the shims that apply at start and record each result
    in `report` (a new one if None), which logs a warning for each shim not in effect."""
    report = ShimReport() if report is None else report
    report.record(install_idle_timer())
    return report


# --- Hypercorn: the keep-alive idle timer -------------------------------------------------

#: The name `hypercorn.trio.tcp_server.TCPServer.__init__` makes its idle task from.
_HYPERCORN_NAME = "TrioSingleTask"


class IdleTimer:
    """Runs one `action` at a time in the connection's task group; a restart cancels the last.

    Hypercorn's `SingleTask` interface (`hypercorn.typing`), whose methods are async but here
    await nothing, so there is nothing to lock. It starts the action with the connection's
    nursery (`TaskGroup._nursery`, private); should a task group come without one, it says so
    once and starts it through `TaskGroup.spawn` (the public `hypercorn.typing.TaskGroup`
    protocol; one call more per restart), rather than fail the connection."""

    #: Set once a task group without `_nursery` was met (so the warning is logged once).
    spawn_fallback: ClassVar[bool] = False

    def __init__(self) -> None:
        self._scope: trio.CancelScope | None = None

    async def restart(self, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
        self._cancel()
        self._scope = scope = trio.CancelScope()
        nursery = getattr(task_group, "_nursery", None)
        if isinstance(nursery, trio.Nursery):
            nursery.start_soon(_run_in, scope, action)
            return
        if not IdleTimer.spawn_fallback:
            IdleTimer.spawn_fallback = True
            log.warning(
                "Hypercorn's task group %s has no `_nursery`; Pager's idle timer starts "
                "through its public `spawn` instead",
                type(task_group).__qualname__,
            )
        task_group.spawn(_run_in, scope, action)

    async def stop(self) -> None:
        self._cancel()

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None


async def _run_in(scope: trio.CancelScope, action: Callable[[], Awaitable[None]]) -> None:
    with scope:  # cancelled before it began: the action ends at its first checkpoint
        await action()


def install_idle_timer() -> ShimResult:
    """Make Hypercorn's trio connections use `IdleTimer` as their keep-alive idle timer.

    Replaces: `hypercorn.trio.tcp_server.TrioSingleTask`, the module global `TCPServer.__init__`
    looks up for each accepted connection (`self.idle_task = TrioSingleTask()`).
    Why: Hypercorn restarts that timer after every response and stops it at every request,
    each time behind a `trio.Lock` and through `nursery.start`: several task switches of the
    connection's task per request, ~4% of the broker's CPU per MCP call (py-spy).
    `IdleTimer` does the same with no lock and `start_soon`.
    Written against: Hypercorn 0.18.0 (`pyproject.toml`: `<0.19`).
    Check: a `TCPServer` constructed now gets an `IdleTimer`, and the task group class it
    runs connections in gives its instances the `_nursery` the timer uses.
    Fallback: Hypercorn's own `TrioSingleTask` (put back if it was replaced)."""
    try:
        import hypercorn.trio.tcp_server as tcp_server
        import hypercorn.trio.worker_context as worker_context
        from hypercorn.config import Config
    except ImportError as exc:
        return _inert(IDLE_TIMER, f"Hypercorn's trio worker cannot be imported ({exc})")
    module = vars(tcp_server)
    if not isinstance(module.get(_HYPERCORN_NAME), type):
        return _inert(IDLE_TIMER, f"hypercorn.trio.tcp_server has no {_HYPERCORN_NAME}")
    own = getattr(worker_context, _HYPERCORN_NAME, module[_HYPERCORN_NAME])

    def keep_hypercorns(reason: str) -> ShimResult:
        setattr(tcp_server, _HYPERCORN_NAME, own)
        return _inert(IDLE_TIMER, f"{reason}; Hypercorn's own idle timer is kept")

    try:
        group = module["TaskGroup"]()
    except Exception as exc:
        return keep_hypercorns(f"hypercorn.trio.tcp_server.TaskGroup() failed ({exc!r})")
    if "_nursery" not in vars(group):
        return keep_hypercorns("Hypercorn's trio TaskGroup has no `_nursery`")
    setattr(tcp_server, _HYPERCORN_NAME, IdleTimer)
    # What a connection will get: TCPServer.__init__ only stores what it is given.
    server_class: Any = tcp_server.TCPServer
    try:
        made = server_class(None, Config(), None, None, None).idle_task
    except Exception as exc:
        return keep_hypercorns(f"a probe TCPServer could not be made ({exc!r})")
    if not isinstance(made, IdleTimer):
        return keep_hypercorns(
            f"TCPServer makes its idle task as {type(made).__qualname__}, not from "
            f"the module's {_HYPERCORN_NAME}"
        )
    return ShimResult(IDLE_TIMER, in_effect=True)


# --- MCP SDK: the OpenTelemetry middleware ------------------------------------------------


def drop_otel_middleware(app: Server[Any]) -> ShimResult:
    """Drop the SDK's OpenTelemetry middleware from the chain `app` serves requests through.

    Replaces: nothing; removes the `mcp.server._otel.OpenTelemetryMiddleware` (a private
    module) that the low-level `Server.__init__` puts first in `Server.middleware`. The SDK
    documents dropping it as the opt-out, but the class is only importable from `_otel`.
    Why: it opens a span for every message, "a no-op until an exporter is installed"; Pager
    installs none, and the span still costs ~3% of the broker's CPU per tool call under load.
    Written against: mcp 2.3.0 (`pyproject.toml`: `<2.4`; the SDK calls its middleware API
    provisional within 2.x).
    Check: the chain held one before (so dropping it means something) and holds none after,
    read back from `app.middleware`, the list the SDK's runner composes per request.
    Fallback: the chain as the SDK made it (spans made, and dropped for want of an exporter)."""
    try:
        from mcp.server._otel import OpenTelemetryMiddleware
    except ImportError as exc:
        return _inert(OTEL_MIDDLEWARE, f"mcp.server._otel cannot be imported ({exc}); chain kept")
    chain = app.middleware
    if not any(isinstance(m, OpenTelemetryMiddleware) for m in chain):
        return _inert(OTEL_MIDDLEWARE, "the SDK no longer installs OpenTelemetryMiddleware")
    chain[:] = [m for m in chain if not isinstance(m, OpenTelemetryMiddleware)]
    if any(isinstance(m, OpenTelemetryMiddleware) for m in app.middleware):
        return _inert(OTEL_MIDDLEWARE, "OpenTelemetryMiddleware is still in the served chain")
    return ShimResult(OTEL_MIDDLEWARE, in_effect=True)


# --- MCP SDK: the Mcp-Param-* header check ------------------------------------------------


def _no_schema(name: str) -> None:
    return None


def skip_param_header_check(app: Server[Any]) -> ShimResult:
    """Tell the SDK that no tool of `app` has an input schema to check headers against.

    Only for servers none of whose tools declares `x-mcp-header` (the caller decides).
    Replaces: `app.get_tool_input_schema` (a public attribute of the low-level `Server`,
    which `MCPServer` sets to its tool lookup) with `_no_schema`, answering None.
    Why: on the 2026-07-28 path the SDK checks each `tools/call`'s `Mcp-Param-*` headers
    against the tool's `x-mcp-header` declarations, walking its input schema twice per call
    (~2% of the broker's CPU per call); with None it skips the walk.
    Written against: mcp 2.3.0 (`pyproject.toml`: `<2.4`), whose check is the private
    `mcp.server._streamable_http_modern._mcp_param_rejection`.
    Check: the SDK's modern request handler calls that check, and the check, given a probe
    `tools/call` with arguments, asks `app.get_tool_input_schema` (run by hand: on this path
    it awaits nothing). Without that, replacing the lookup would change nothing.
    Fallback: the SDK's own lookup, kept (the walk per call stays)."""
    own = app.get_tool_input_schema
    try:
        from mcp.server import _streamable_http_modern as modern
    except ImportError as exc:
        return _inert(PARAM_HEADER_CHECK, f"the SDK's modern HTTP path cannot be imported ({exc})")
    check = getattr(modern, "_mcp_param_rejection", None)
    handler = getattr(modern, "handle_modern_request", None)
    if check is None or handler is None:
        return _inert(PARAM_HEADER_CHECK, "the SDK's Mcp-Param header check is not where it was")
    if "_mcp_param_rejection" not in getattr(handler.__code__, "co_names", ()):
        return _inert(PARAM_HEADER_CHECK, "the SDK's modern request handler skips the check")
    asked: list[str] = []

    def probe(name: str) -> None:
        asked.append(name)

    app.get_tool_input_schema = probe
    try:
        _run_probe(check, app)
    except Exception as exc:
        app.get_tool_input_schema = own
        return _inert(PARAM_HEADER_CHECK, f"probing the SDK's header check failed ({exc!r})")
    if asked != ["pager-probe"]:
        app.get_tool_input_schema = own
        return _inert(PARAM_HEADER_CHECK, "the SDK's header check does not ask the lookup")
    app.get_tool_input_schema = _no_schema
    return ShimResult(PARAM_HEADER_CHECK, in_effect=True)


def _run_probe(check: Callable[..., Any], app: Server[Any]) -> None:
    """Run the SDK's header check once on a `tools/call` with an argument and no headers."""
    from mcp_types import JSONRPCRequest
    from starlette.requests import Request

    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": []})
    call = JSONRPCRequest(
        jsonrpc="2.0",
        id=0,
        method="tools/call",
        params={"name": "pager-probe", "arguments": {"probe": 1}},
    )
    coroutine = check(app, request, call, None, None)
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("the check waited for something")


def _inert(name: str, reason: str) -> ShimResult:
    return ShimResult(name, in_effect=False, reason=reason)
