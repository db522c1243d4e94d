"""`pager mcp`: a stdio MCP server for harnesses configured with a command (SPEC §4).

It starts or adopts the broker, registers the calling session (workspace, implementation, name
and conversation key from its options and environment), re-advertises the broker's tools and
forwards every call to the broker's `/mcp` (see `pager.mcp_stdio_link` for the recovery rules),
holds the session's lease while it runs, and detaches when the harness closes its stdin.

Stdout carries the MCP protocol only; logs go to stderr. Imported by `pager.commands.harnesses`
only when the command runs: it pulls in the MCP SDK.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

import trio

from pager.mcp_stdio_link import BrokerLink, McpOptions
from pager.versions import VERSION

log = logging.getLogger("pager.mcp")

#: Environment variables read when the matching option is not given.
ENV_WORKSPACE = "PAGER_WORKSPACE"
ENV_IMPLEMENTATION = "PAGER_IMPLEMENTATION"
ENV_SESSION_NAME = "PAGER_SESSION_NAME"
ENV_CONVERSATION_KEY = "PAGER_CONVERSATION_KEY"
ENV_CONVERSATION_KEY_ENV = "PAGER_CONVERSATION_KEY_ENV"
ENV_HOLD_LEASE = "PAGER_MCP_HOLD_LEASE"

DEFAULT_IMPLEMENTATION = "mcp"


def options_from(args: Any, environ: Mapping[str, str]) -> McpOptions:
    """Command-line options first, then the environment, then the defaults. An empty value
    counts as absent (harness configurations often expand a missing variable to "")."""

    def pick(flag: str | None, env: str) -> str | None:
        return flag or environ.get(env) or None

    key_env = pick(getattr(args, "conversation_key_env", None), ENV_CONVERSATION_KEY_ENV)
    conversation_key = (
        getattr(args, "conversation_key", None)
        or (environ.get(key_env) if key_env else None)
        or environ.get(ENV_CONVERSATION_KEY)
        or None
    )
    workspace = pick(getattr(args, "workspace", None), ENV_WORKSPACE) or os.getcwd()
    hold = environ.get(ENV_HOLD_LEASE, "1").strip().lower() not in ("0", "false", "no", "off")
    return McpOptions(
        workspace=os.path.abspath(os.path.expanduser(workspace)),
        implementation=pick(getattr(args, "implementation", None), ENV_IMPLEMENTATION)
        or DEFAULT_IMPLEMENTATION,
        session_name=pick(getattr(args, "session_name", None), ENV_SESSION_NAME),
        conversation_key=conversation_key,
        hold_lease=hold and not getattr(args, "no_hold_lease", False),
    )


def main(args: Any, environ: Mapping[str, str] | None = None) -> int:
    """Runs the server until the harness closes stdin (0) or signals it to stop."""
    _configure_logging(getattr(args, "log_level", None) or "info")
    options = options_from(args, os.environ if environ is None else environ)
    log.info(
        "pager mcp %s: workspace %s, implementation %s, name %s, conversation key %s",
        VERSION,
        options.workspace,
        options.implementation,
        options.session_name or "(none)",
        "given" if options.conversation_key else "(none)",
    )
    try:
        return trio.run(serve, options)
    except KeyboardInterrupt:
        return 130


async def serve(options: McpOptions, paths: Any = None) -> int:
    """The stdio MCP server in front of a `BrokerLink`; returns the exit status."""
    from mcp.server.stdio import stdio_server

    link = BrokerLink(options, paths)
    server = build_server(link)
    async with trio.open_nursery() as nursery:
        await nursery.start(link.run)
        nursery.start_soon(_stop_on_signal, link)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        log.info("stdin closed; detaching")
        nursery.cancel_scope.cancel()  # the link detaches on its way out
    return 0


async def _stop_on_signal(link: BrokerLink) -> None:
    """SIGTERM/SIGHUP: detach, then exit at once. The stdio transport reads stdin in a worker
    thread that cannot be cancelled, so an orderly unwinding would wait for the harness to
    close stdin, which is what it did not do."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("stopping on signal %d", signum)
            with trio.CancelScope(shield=True):
                await link.detach()
            logging.shutdown()
            os._exit(128 + signum)


def build_server(link: BrokerLink) -> Any:
    """The SDK's low-level server: `tools/list` and `tools/call` proxied through `link`."""
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.types import (
        CallToolRequestParams,
        CallToolResult,
        ListToolsResult,
        PaginatedRequestParams,
    )

    from pager.web.mcp import INSTRUCTIONS

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=await link.list_tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return await link.call_tool(params.name, dict(params.arguments or {}))

    server: Server[Any] = Server(
        "pager",
        version=VERSION,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    return server


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pager mcp: %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("pager").setLevel(level.upper())
