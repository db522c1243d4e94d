"""A real broker process (`pager start`) with windows in milliseconds, real HTTP, and the
official MCP SDK client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import attrs
import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from pager.sse import SseParser
from tests.launch.conftest import PagerHome

#: Windows short enough that whole lifecycles run in about a second.
FAST_WINDOWS = {
    "PAGER_WINDOW_ACK_WAIT": "600ms",
    "PAGER_WINDOW_REDELIVERY": "200ms",
    "PAGER_WINDOW_LEASE_TTL": "30s",
}
#: For tests that send in bulk (SPEC §8.1: load tests turn the send limits off explicitly).
NO_SEND_LIMITS = {
    "PAGER_LIMIT_MAX_HOPS": "0",
    "PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "0",
}


@attrs.frozen
class Counts:
    """How many identities, messages and sessions (every session ever attached, ended ones
    too) the broker holds."""

    identities: int = 0
    messages: int = 0
    sessions: int = 0


@attrs.define
class Broker:
    home: PagerHome
    url: str
    secret: str
    workspace: Path

    # -- the broker's state, read through its own HTTP API with the local secret, never from
    # its database, so the tests hold whatever store backs it. The `*_sync` reads are for
    # tests that are not async; the async ones run them in a worker thread.

    def read(self, path: str) -> httpx2.Response:
        """`GET path` with the local secret; it must answer 200."""
        with httpx2.Client(timeout=10) as http:
            response = http.get(self.url + path, headers=self._auth())
        assert response.status_code == 200, (path, response.text)
        return response

    def export_sync(self) -> list[dict[str, Any]]:
        """`GET /v1/export`: every identity record, then every message record (oldest first)."""
        return [json.loads(line) for line in self.read("/v1/export").text.splitlines()]

    def events_sync(self, *types: str) -> list[dict[str, Any]]:
        """Every retained operator event (`{seq, at, type, data}`), oldest first, of `types`
        (of every type if none is given): `GET /v1/events` replayed from `Last-Event-ID: 0`
        up to the snapshot's seq read just before (every event committed by then), then
        closed."""
        latest = int(self.read("/v1/snapshot?agents=false").json()["seq"])
        headers = {**self._auth(), "Last-Event-ID": "0"}
        found: list[dict[str, Any]] = []
        ready, last = False, 0
        parser = SseParser()  # the clients' one parser (pager/sse.py)
        with (
            httpx2.Client(timeout=30) as http,
            http.stream("GET", self.url + "/v1/events", headers=headers) as response,
        ):
            assert response.status_code == 200
            for line in response.iter_lines():
                frame = parser.feed_line(line)
                if frame is None:
                    continue
                # Pruned, cut off or stopping: what was read would not be every event.
                assert frame.event not in ("reset", "overflow", "closing"), frame
                if frame.event == "ready":
                    ready, last = True, max(last, int(frame.id or 0))
                else:
                    event = frame.json()
                    assert isinstance(event, dict), frame
                    found.append(event)
                    last = int(event["seq"])
                if ready and last >= latest:
                    break
        return [event for event in found if not types or event["type"] in types]

    def sessions_sync(self) -> dict[str, str]:
        """Every session ever attached (by id) with its state, as the event log tells:
        `attached` (`agent.attached`) until an `agent.detached` gives the state it ended in
        (`detached`, `expired` or `ended`)."""
        states: dict[str, str] = {}
        for event in self.events_sync("agent.attached", "agent.detached"):
            data = event["data"]
            attached = event["type"] == "agent.attached"
            states[str(data["session_id"])] = "attached" if attached else str(data["state"])
        return states

    async def get(self, path: str) -> httpx2.Response:
        return await trio.to_thread.run_sync(self.read, path)

    async def snapshot(self) -> dict[str, Any]:
        """`GET /v1/snapshot`: workspaces, agents with their live sessions and inbox counts,
        totals, and the latest event seq."""
        snapshot: dict[str, Any] = (await self.get("/v1/snapshot")).json()
        return snapshot

    async def export(self) -> list[dict[str, Any]]:
        return await trio.to_thread.run_sync(self.export_sync)

    async def identities(self) -> list[dict[str, Any]]:
        """The export's identity records."""
        return [record for record in await self.export() if record["kind"] == "identity"]

    async def messages(self) -> list[dict[str, Any]]:
        """The export's message records (state, attempts, dead_reason, origin, hop, cause…)."""
        return [record for record in await self.export() if record["kind"] == "message"]

    async def message(self, message_id: str) -> dict[str, Any]:
        """The export's record of one message (it must be there, once)."""
        [found] = [m for m in await self.messages() if m["message_id"] == message_id]
        return found

    async def events(self, *types: str) -> list[dict[str, Any]]:
        return await trio.to_thread.run_sync(self.events_sync, *types)

    async def sessions(self) -> dict[str, str]:
        return await trio.to_thread.run_sync(self.sessions_sync)

    async def counts(self) -> Counts:
        records = await self.export()
        return Counts(
            identities=sum(record["kind"] == "identity" for record in records),
            messages=sum(record["kind"] == "message" for record in records),
            sessions=len(await self.sessions()),
        )

    async def state(self) -> dict[str, Any]:
        """All the API shows of the store, to compare before and after a request that must
        change nothing: every identity and message record (state, attempts, alias, address,
        archived_at, last_seen…), the snapshot (live sessions and their leases, inbox counts,
        totals, the latest event seq) without its `broker` part (the process's health, not
        the store), and every retained event."""
        snapshot = await self.snapshot()
        del snapshot["broker"]
        return {"export": await self.export(), "snapshot": snapshot, "events": await self.events()}

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}

    # -- acting

    async def register(self, name: str | None = None, **fields: Any) -> dict[str, Any]:
        body = {"workspace": str(self.workspace), "implementation": "shell", **fields}
        if name is not None:
            body["session_name"] = name
        status, answer = await self.post("/v1/register", body, token=self.secret)
        assert status == 201, answer
        return answer

    async def post(
        self, path: str, body: object, *, token: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(self.url + path, json=body, headers=headers)
        return response.status_code, response.json()


def start_broker(home: PagerHome, workspace: Path, **env: str) -> Broker:
    """`pager start` on `home` with `env` added to its environment (e.g. PAGER_WINDOW_*);
    `workspace` is created if missing. Stop it with `home.kill_all()`."""
    home.env.update(env)
    started = home.run("start", "--json")
    assert started.returncode == 0, started.stderr
    url = str(json.loads(started.stdout)["url"])
    workspace.mkdir(exist_ok=True)
    secret = (home.root / "secret").read_text().strip()
    return Broker(home, url, secret, workspace)


#: Stores a module's brokers run on: SQLite alone, unless the module sets `STORES = BOTH`
#: (the messaging, identity, retention and durability suites: SPEC §13, "tested, not assumed")
#: or a test is marked `@pytest.mark.stores(*BOTH)`.
BOTH = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stores(*names): the stores the test's broker runs on")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("stores")
        stores = marker.args if marker else getattr(metafunc.module, "STORES", ("sqlite",))
        metafunc.parametrize("store", stores)


@pytest.fixture
def store_env(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment that points a broker at `store`: nothing for SQLite; for PostgreSQL a
    fresh database of the tests' cluster, named by PAGER_STORE, its password in a PGPASSFILE."""
    if store == "sqlite":
        return {}
    dsn: str = request.getfixturevalue("pg_dsn")
    return postgres_env(dsn, tmp_path)


def postgres_env(dsn: str, directory: Path) -> dict[str, str]:
    """PAGER_STORE for `dsn` (without its password) and a PGPASSFILE that holds it."""
    parts = urlsplit(dsn)
    url = urlunsplit(
        ("postgresql", f"{parts.username}@{parts.hostname}:{parts.port}", parts.path, "", "")
    )
    passfile = directory / "pgpass"
    passfile.write_text(
        f"{parts.hostname}:{parts.port}:*:{parts.username}:{unquote(parts.password or '')}\n"
    )
    passfile.chmod(0o600)
    return {"PAGER_STORE": url, "PGPASSFILE": str(passfile)}


@pytest.fixture
def broker(tmp_path: Path, store_env: dict[str, str]) -> Iterator[Broker]:
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **store_env)
    home.kill_all()


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[Client]:
    """The official MCP client on /mcp with the session token as its static header."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def session_events(broker: Broker, token: str, seen: list[str], ready: trio.Event) -> None:
    """The session's event stream (`/v1/sessions/current/events`): each event type seen;
    `ready` is set once it is live."""
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream(
            "GET",
            f"{broker.url}/v1/sessions/current/events",
            headers={"Authorization": f"Bearer {token}"},
        ) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                seen.append(line.removeprefix("event: "))
                ready.set()
                if seen[-1] == "ended":
                    return


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def tool_error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    error: dict[str, Any] = json.loads(text)
    return error


ROOT = Path(__file__).parents[2]
#: The harnesses the FAKE programs of `fakes` stand in for.
KINDS = ("codex", "gemini", "opencode", "pi", "copilot", "kilo", "cline")


@pytest.fixture
def places(broker: Broker, tmp_path: Path) -> dict[str, Path]:
    """Two repositories (Git checkouts) and the person's own directory."""
    found = {}
    for name in ("api", "web", "desk"):
        path = tmp_path / name
        path.mkdir()
        if name != "desk":
            subprocess.run(["git", "init", "-q", str(path)], check=True)
        found[name] = path
    return found


@pytest.fixture
def fakes(tmp_path: Path, broker: Broker) -> Path:
    """Puts FAKE `codex`, `gemini`, `opencode` and `pi` first on PATH; yields their log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for kind in KINDS:
        shim = bin_dir / kind
        shim.write_text(
            f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m"
            f' tests.fakes.fake_harness_generic {kind} "$@"\n'
        )
        shim.chmod(0o755)
    log = tmp_path / "harness.log"
    env = broker.home.env
    env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    env["FAKE_HARNESS_LOG"] = str(log)
    # Hermetic: a home of its own (the Gemini connector links and creates entries of the
    # user's ~/.gemini), no inline OpenCode config or user manifests of this host.
    env["HOME"] = str(tmp_path / "user-home")
    (tmp_path / "user-home").mkdir()
    inline = ("OPENCODE_CONFIG_CONTENT", "KILO_CONFIG_CONTENT")
    cline = ("CLINE_DIR", "CLINE_DATA_DIR", "CLINE_MCP_SETTINGS_PATH")
    for name in ("GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", *inline, *cline):
        env.pop(name, None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return log
