"""Figures of edit reservations (docs/reservations.md), on a real broker over HTTP, one
kept-alive client per agent, one request after another:

- `POST /v1/me/reservations` (reserve one new pattern) p50 / p99, in an empty workspace;
- `POST /v1/me/reservations/check` (two paths, what an edit hook asks) p50 / p99, there;
- the same two in a workspace holding 1,000 reservations (10 agents x 100 globs);
- `GET /v1/me` (whoami: the same authentication and route stack, one lookup) alternating with
  them: the yardstick of the moment (these machines' speed drifts by a third in minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
from benchlib import bench_parser, machine, ms, percentile, progress, report

VENV_BIN = Path(sys.executable).parent
PAGER = str(VENV_BIN / "pager")
#: Requests per figure.
REQUESTS = 300
#: Reservations in the full workspace, and how many agents hold them.
FULL = 1000
HOLDERS = 10


def _register(url: str, secret: str, workspace: Path, name: str) -> str:
    answer = httpx2.post(
        f"{url}/v1/register",
        headers={"Authorization": f"Bearer {secret}"},
        json={"workspace": str(workspace), "implementation": "shell", "session_name": name},
    )
    answer.raise_for_status()
    return str(answer.json()["token"])


def _timed(
    client: httpx2.Client, yardstick: httpx2.Client, count: int, call: Callable[[int], object]
) -> tuple[list[float], list[float]]:
    """Seconds per `call(n)` on `client`, alternating with `GET /v1/me` on `yardstick`."""
    measured: list[float] = []
    health: list[float] = []
    for n in range(count):
        start = time.perf_counter()
        response = call(n)
        measured.append(time.perf_counter() - start)
        if not isinstance(response, httpx2.Response) or response.status_code != 200:
            raise SystemExit(f"a reservation request failed: {response}")
        start = time.perf_counter()
        yardstick.get("/v1/me")
        health.append(time.perf_counter() - start)
    return measured, health


def figures(url: str, secret: str, workspace: Path) -> dict[str, list[float]]:
    tokens = {name: _register(url, secret, workspace, name) for name in ("taker", "checker")}
    clients = {
        name: httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})
        for name, token in tokens.items()
    }
    found: dict[str, list[float]] = {}
    yardstick = httpx2.Client(
        base_url=url, headers={"Authorization": f"Bearer {tokens['checker']}"}
    )
    with yardstick:
        taker, checker = clients["taker"], clients["checker"]

        def reserve(prefix: str) -> Callable[[int], object]:
            return lambda n: taker.post(
                "/v1/me/reservations", json={"paths": [f"{prefix}/{n}.py"], "ttl_s": 3600}
            )

        def check(n: int) -> object:
            paths = [f"held/{n % 97}/x.py", "docs/y.md"]
            return checker.post("/v1/me/reservations/check", json={"paths": paths})

        progress("reserve and check in an empty workspace")
        found["reserve"], found["health"] = _timed(taker, yardstick, REQUESTS, reserve("empty"))
        found["check"], _ = _timed(checker, yardstick, REQUESTS, check)
        taker.post("/v1/me/reservations/release", json={})
        progress(f"filling the workspace with {FULL} reservations")
        for holder in range(HOLDERS):
            token = _register(url, secret, workspace, f"holder{holder}")
            per = FULL // HOLDERS
            paths = [f"held/{holder * per + n}/**" for n in range(per)]
            done = httpx2.post(
                f"{url}/v1/me/reservations",
                headers={"Authorization": f"Bearer {token}"},
                json={"paths": paths},
                timeout=60,
            )
            if done.status_code != 200:
                raise SystemExit(f"filling failed: {done.text}")
        progress(f"reserve and check among {FULL} reservations")
        found["reserve_full"], found["health_full"] = _timed(
            taker, yardstick, REQUESTS, reserve("full")
        )
        found["check_full"], _ = _timed(checker, yardstick, REQUESTS, check)
    for client in clients.values():
        client.close()
    return found


def main() -> int:
    parser = bench_parser(__doc__, runs_help="unused (each figure is 300 requests)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pager-bench-reservations-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env["PAGER_HOME"] = str(Path(tmp) / "home")
        workspace = Path(tmp) / "repo"
        workspace.mkdir()
        started = subprocess.run(
            [PAGER, "start", "--json"], env=env, capture_output=True, check=True
        )
        url = json.loads(started.stdout)["url"]
        secret = (Path(env["PAGER_HOME"]) / "secret").read_text().strip()
        try:
            found = figures(url, secret, workspace)
        finally:
            subprocess.run([PAGER, "exit"], env=env, capture_output=True, check=False)
    results: dict[str, object] = {"machine": machine(), "runs": REQUESTS, "full": FULL}
    for name, values in found.items():
        results[f"{name}_p50_ms"] = ms(percentile(values, 50))
        results[f"{name}_p99_ms"] = ms(percentile(values, 99))

    def pair(name: str) -> str:
        return f"{results[f'{name}_p50_ms']} ms / {results[f'{name}_p99_ms']} ms"

    rows = [
        ("`POST /v1/me/reservations` (one new pattern), empty workspace, p50 / p99",
         pair("reserve"), ""),
        ("`POST /v1/me/reservations/check` (two paths), empty workspace, p50 / p99",
         pair("check"), ""),
        (f"reserve among {FULL} reservations ({HOLDERS} agents), p50 / p99",
         pair("reserve_full"), ""),
        (f"check among {FULL} reservations, p50 / p99", pair("check_full"), ""),
        ("`GET /v1/me` alternating (yardstick), empty / full, p50",
         f"{results['health_p50_ms']} ms / {results['health_full_p50_ms']} ms", ""),
    ]  # fmt: skip
    return report(results, rows, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
