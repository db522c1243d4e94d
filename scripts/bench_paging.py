"""Figures of the paging issue (12), on real processes against a real broker.

- `pager notify` (as the person, in a workspace) against a bare interpreter that imports json
  and http.client, alternating: <= 1.5x. `pager notify --token` (no state directory used) too.
- `pager run -- true` against `true`, alternating (the run's page included): adds <= 100 ms;
  also as installed from the wheel (what `pipx install .` gives: no editable install's finder
  imported at every start), beside that environment's bare interpreter.
- `POST /v1/notify` with a mailbox token, one kept-alive client, sequential: p50 <= 5 ms
  (p99 recorded), alternating with `POST /v1/me/send` (a plain send through the same route
  stack) as the yardstick of the moment: these machines' speed drifts by a third in minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from benchlib import (  # scripts/benchlib.py, beside this file
    NO_SEND_LIMITS,
    bench_parser,
    machine,
    ms,
    percentile,
    progress,
    report,
)

VENV_BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
PAGER = str(VENV_BIN / "pager")
BARE = [str(VENV_BIN / "python"), "-I", "-c", "import json, http.client"]
NOTIFY_REQUESTS = 500


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:  # a failing command would measure the failure, not the work
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed


def side_by_side(
    name: str, argv: list[str], baseline: list[str], env: dict[str, str], cwd: Path, runs: int
) -> tuple[list[float], list[float]]:
    """Seconds per run of `argv` and of `baseline`, alternating."""
    measured: list[float] = []
    base: list[float] = []
    for run in range(runs):
        measured.append(timed(argv, env, cwd))
        base.append(timed(baseline, env, cwd))
        progress(f"{name} {run + 1}/{runs}")
    return measured, base


def wheel_install(tmp: Path) -> Path:
    """`pager` as `pipx install .` leaves it (without its dependencies, which the commands
    measured here never import): the wheel of the tracked files in a fresh environment, so
    not this checkout's editable install and its import-time finder. Its `bin`. Offline, as
    tests/launch/test_wheel_install.py builds it."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")  # fmt: skip
    source = tmp / "source"
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "wheels"),
                    str(source)], check=True, capture_output=True)  # fmt: skip
    [wheel] = (tmp / "wheels").glob("pager-*.whl")
    fresh = tmp / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    subprocess.run([*pip, "--python", str(fresh / "bin" / "python"), "install", "--no-deps",
                    str(wheel)], check=True, capture_output=True)  # fmt: skip
    subprocess.run([str(fresh / "bin" / "python"), "-m", "compileall", "-q", str(fresh)],
                   check=True, capture_output=True)  # fmt: skip
    return fresh / "bin"


def notify_latency(
    url: str, token: str, secret: str, workspace: Path, me: str, count: int
) -> tuple[list[float], list[float]]:
    """Seconds per `POST /v1/notify` (the mailbox token) and per `POST /v1/me/send` (the
    person's plain send, the same route stack: the yardstick), alternating, one kept-alive
    connection each, one request after another."""
    pages: list[float] = []
    sends: list[float] = []
    with (
        httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as paging,
        httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as sending,
    ):
        for n in range(count):
            body = {"message": f"bench {n}", "job_id": "bench", "status": "success"}
            start = time.perf_counter()
            response = paging.post("/v1/notify", json=body)
            pages.append(time.perf_counter() - start)
            if response.status_code != 202:
                raise SystemExit(f"POST /v1/notify answered {response.status_code}")
            start = time.perf_counter()
            response = sending.post(
                "/v1/me/send", params={"workspace": str(workspace)},
                json={"to": me, "body": f"bench {n}"},
            )  # fmt: skip
            sends.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise SystemExit(f"POST /v1/me/send answered {response.status_code}")
            if n % 50 == 0:
                progress(f"POST /v1/notify and /v1/me/send {n}/{count}")
    return pages, sends


def main() -> int:
    parser = bench_parser(__doc__, runs_help="runs per command figure (default 15)")
    args = parser.parse_args()
    runs = max(args.runs, 3)
    med = statistics.median
    # Measured as installed: with bytecode compiled (PYTHONDONTWRITEBYTECODE, set in some
    # shells, would otherwise make every run compile whatever changed since the last write).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "pager")], check=True,
                   capture_output=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pager-bench-paging-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env.update(NO_SEND_LIMITS)
        env["PAGER_LIMIT_TOKEN_SENDS_PER_HOUR"] = "0"
        env["PAGER_HOME"] = str(Path(tmp) / "home")
        workspace = Path(tmp) / "repo"
        workspace.mkdir()
        started = subprocess.run(
            [PAGER, "start", "--json"], env=env, capture_output=True, check=True
        )
        url = json.loads(started.stdout)["url"]
        try:
            me = json.loads(
                subprocess.run([PAGER, "whoami", "--json"], env=env, cwd=workspace,
                               capture_output=True, check=True).stdout
            )["alias"]  # fmt: skip
            token = (
                subprocess.run([PAGER, "token", "create", me, "--label", "bench"], env=env,
                               cwd=workspace, capture_output=True, check=True).stdout.decode()
                .strip()
            )  # fmt: skip
            notify = [PAGER, "notify", me, "bench page", "--status", "success"]
            as_person = side_by_side("pager notify", notify, BARE, env, workspace, runs)
            stateless = {**env, "PAGER_HOME": str(Path(tmp) / "nowhere"), "PAGER_URL": url,
                         "PAGER_NOTIFY_TOKEN": token}  # fmt: skip
            with_token = side_by_side("pager notify --token", notify, BARE, stateless, workspace,
                                      runs)  # fmt: skip
            true = shutil.which("true") or "/bin/true"
            ran = side_by_side(
                "pager run -- true", [PAGER, "run", "--", true], [true], env, workspace, runs
            )
            secret = (Path(env["PAGER_HOME"]) / "secret").read_text().strip()
            progress("building the wheel")
            fresh = wheel_install(Path(tmp) / "wheel")
            # No PYTHONPATH: `pager run` needs only the standard library (the broker runs).
            ran_installed = side_by_side(
                "pager run -- true (wheel)", [str(fresh / "pager"), "run", "--", true],
                [str(fresh / "python"), "-I", "-c", "import json, http.client"], env,
                workspace, runs,
            )  # fmt: skip
            latency, sends = notify_latency(url, token, secret, workspace, me, NOTIFY_REQUESTS)
        finally:
            subprocess.run([PAGER, "exit"], env=env, capture_output=True, check=False)
    results = {
        "machine": machine(),
        "runs": runs,
        "bare_ms": ms(med(as_person[1])),
        "notify_ms": ms(med(as_person[0])),
        "notify_ratio": round(med(as_person[0]) / med(as_person[1]), 2),
        "notify_token_ms": ms(med(with_token[0])),
        "notify_token_ratio": round(med(with_token[0]) / med(with_token[1]), 2),
        "run_true_ms": ms(med(ran[0])),
        "true_ms": ms(med(ran[1])),
        "run_overhead_ms": ms(med(ran[0]) - med(ran[1])),
        "run_true_wheel_ms": ms(med(ran_installed[0])),
        "bare_wheel_ms": ms(med(ran_installed[1])),
        "post_notify_p50_ms": ms(percentile(latency, 50)),
        "post_notify_p99_ms": ms(percentile(latency, 99)),
        "post_me_send_p50_ms": ms(percentile(sends, 50)),
        "post_me_send_p99_ms": ms(percentile(sends, 99)),
    }
    rows = [
        ("`pager notify` (the person) / bare interpreter, medians",
         f"{results['notify_ms']} ms / {results['bare_ms']} ms = {results['notify_ratio']}x",
         "<= 1.5x"),
        ("`pager notify --token` (no state) / bare interpreter, medians",
         f"{results['notify_token_ms']} ms = {results['notify_token_ratio']}x", "<= 1.5x"),
        ("`pager run -- true` minus `true`, medians",
         f"{results['run_true_ms']} ms - {results['true_ms']} ms = "
         f"{results['run_overhead_ms']} ms", "<= 100 ms"),
        ("the same, `pager` installed from the wheel (no editable finder) / its bare"
         " interpreter", f"{results['run_true_wheel_ms']} ms / {results['bare_wheel_ms']} ms",
         "(`true` itself: ~1 ms)"),
        (f"`POST /v1/notify`, {NOTIFY_REQUESTS} sequential, p50 / p99",
         f"{results['post_notify_p50_ms']} ms / {results['post_notify_p99_ms']} ms", "p50 <= 5 ms"),
        ("`POST /v1/me/send` (a plain send, alternating with the pages), p50 / p99",
         f"{results['post_me_send_p50_ms']} ms / {results['post_me_send_p99_ms']} ms",
         "(yardstick)"),
    ]  # fmt: skip
    return report(results, rows, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
