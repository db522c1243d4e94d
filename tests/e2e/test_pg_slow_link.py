"""A broker on PostgreSQL whose link to the database goes silent mid-request: the statement a
send is waiting on runs off the broker's event loop, so every other request (here `/health`)
is answered meanwhile; once the link is back the send is answered too (2xx, or `unavailable`),
never lost. Were the lookup on the loop, /health would answer only after the send."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2
import trio

from pager.store.pg._writer import LOOKUP_ANSWER
from tests.e2e.conftest import FAST_WINDOWS, postgres_env, start_broker
from tests.launch.conftest import PagerHome
from tests.pg_proxy import PausableProxy

#: A hang guard for each step (not a timing check).
STEP = 20


def through(dsn: str, port: int) -> str:
    """`dsn` with its host and port replaced by the proxy's."""
    parts = urlsplit(dsn)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@127.0.0.1:{port}"))


async def test_health_answers_while_a_send_waits_on_a_silent_database_link(
    tmp_path: Path, pg_dsn: str
) -> None:
    upstream = urlsplit(pg_dsn)
    assert upstream.hostname is not None
    assert upstream.port is not None
    proxy = PausableProxy(upstream.hostname, upstream.port)
    home = PagerHome(tmp_path / "home")
    async with trio.open_nursery() as nursery:
        port = await nursery.start(proxy.serve)
        env = postgres_env(through(pg_dsn, port), tmp_path)
        env["PAGER_STORE"] += "?sslmode=disable"  # plain text on the proxy: its marker shows
        try:
            broker = await trio.to_thread.run_sync(
                lambda: start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **env)
            )
            alice = await broker.register("alice")
            zebra = await broker.register("zebra")
            async with httpx2.AsyncClient(timeout=60) as http:

                async def send(body: str) -> int:
                    answer = await http.post(
                        f"{broker.url}/v1/me/send",
                        json={"to": zebra["agent_id"], "body": body},
                        headers={"Authorization": f"Bearer {alice['token']}"},
                    )
                    return answer.status_code

                with trio.fail_after(STEP):
                    assert await send("over a working link") == 200

                proxy.pause()
                answered: list[int] = []
                done = trio.Event()

                async def stuck_send() -> None:
                    answered.append(await send("over a silent link"))
                    done.set()

                nursery.start_soon(stuck_send)
                with trio.fail_after(STEP):
                    # Its recipient's lookup (by id: the first statement names it) is stuck.
                    await proxy.wait_held(zebra["agent_id"].encode())
                with trio.fail_after(STEP):  # on a blocked loop this would wait for the send
                    health = await http.get(f"{broker.url}/health")
                assert health.status_code == 200
                assert answered == []  # /health was answered while the send still waited

                proxy.resume()
                with trio.fail_after(STEP):
                    await done.wait()
                assert answered[0] in (200, 503), answered
        finally:
            proxy.resume()
            await trio.to_thread.run_sync(home.kill_all)
            nursery.cancel_scope.cancel()


async def test_a_lookup_on_a_silent_link_gives_up_and_says_unavailable(
    tmp_path: Path, pg_dsn: str
) -> None:
    """The link goes silent for good (TCP still accepted, nothing passed on): the send that
    waits on it is answered `unavailable` while the link is still silent, once its lookup has
    waited LOOKUP_ANSWER, and /health shows the store degraded; sends succeed again once the
    link passes data."""
    upstream = urlsplit(pg_dsn)
    assert upstream.hostname is not None
    assert upstream.port is not None
    proxy = PausableProxy(upstream.hostname, upstream.port)
    home = PagerHome(tmp_path / "home")
    async with trio.open_nursery() as nursery:
        port = await nursery.start(proxy.serve)
        env = postgres_env(through(pg_dsn, port), tmp_path)
        env["PAGER_STORE"] += "?sslmode=disable"
        try:
            broker = await trio.to_thread.run_sync(
                lambda: start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **env)
            )
            alice = await broker.register("alice")
            zebra = await broker.register("zebra")
            async with httpx2.AsyncClient(timeout=60) as http:

                async def send(body: str) -> httpx2.Response:
                    return await http.post(
                        f"{broker.url}/v1/me/send",
                        json={"to": zebra["agent_id"], "body": body},
                        headers={"Authorization": f"Bearer {alice['token']}"},
                    )

                with trio.fail_after(STEP):
                    assert (await send("over a working link")).status_code == 200
                proxy.pause()
                with trio.fail_after(LOOKUP_ANSWER + STEP):
                    answer = await send("over a link gone silent")
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "unavailable"
                assert not proxy.flowing  # answered while the link still passed nothing
                with trio.fail_after(STEP):
                    health = (await http.get(f"{broker.url}/health")).json()
                assert health["status"] == "degraded", health

                proxy.resume()  # the broker's probe gets through: sends go again
                with trio.fail_after(STEP):
                    statuses = [(await send("over the link back")).status_code]
                    while statuses[-1] != 200:
                        await trio.sleep(0.1)  # a pace for the retries, not a timer awaited
                        statuses.append((await send("over the link back")).status_code)
                assert set(statuses) <= {200, 503}, statuses
        finally:
            proxy.resume()
            await trio.to_thread.run_sync(home.kill_all)
            nursery.cancel_scope.cancel()
