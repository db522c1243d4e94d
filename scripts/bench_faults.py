"""A broker on SQLite through store faults under load, as an operator would try it.

4 agents send over `POST /v1/me/send`, one request after another, and 4 long-poll
`POST /v1/me/claim` (`wait_s`) and ack, each with its own session token; `GET /health` is
probed every 50 ms. Once mail flows: the disk under the state directory is full for 15 s (a
small tmpfs filled with a file, then the file removed; needs root), then, on a fresh broker,
another process holds `BEGIN IMMEDIATE` on `pager.db` for 10 s (`database is locked`). For
each: whether the broker process stayed the same, how `/health` answered (and whether it said
`degraded`), how every send was answered, whether the sessions were kept, how many sends
answered 2xx were delivered, and how long after the fault ended a send succeeded again. The
load and the faults are tests/fault_load.py's, which tests/e2e/test_store_faults.py runs
briefly.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from benchlib import NO_SEND_LIMITS, bench_parser, chosen_figures, machine, progress, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/fault_load.py: the load and the faults the tests use

from tests.fault_load import (  # noqa: E402
    DatabaseLocked,
    Fault,
    FaultRun,
    FullDisk,
    Hold,
    Unavailable,
    tmpfs,
)

PAGER = str(Path(sys.executable).parent / "pager")
DISK_FULL_S = 15.0
LOCKED_S = 10.0
#: A hang guard for one phase (the fault, then up to 60 s to recover and 60 s to drain).
PHASE_BOUND_S = 300
FIGURES = ("disk", "locked")


def run_broker(home: Path, workspace: Path, fault: Callable[[Path], Fault], hold: Hold) -> Any:
    """`pager start` on `home`, the load and the fault, then the broker stopped; the figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
    env.update(NO_SEND_LIMITS, PAGER_HOME=str(home))
    workspace.mkdir(exist_ok=True)
    started = subprocess.run(
        [PAGER, "start", "--json"], env=env, cwd=workspace, capture_output=True, check=True
    )
    url = str(json.loads(started.stdout)["url"])
    secret = (home / "secret").read_text().strip()
    pid = int(json.loads(subprocess.run(
        [PAGER, "status", "--json"], env=env, capture_output=True, check=True
    ).stdout)["pid"])  # fmt: skip
    try:
        run = FaultRun(url, secret, workspace, recovery_bound_s=60, drain_bound_s=60,
                       progress=progress)  # fmt: skip

        async def main() -> Any:
            with trio.fail_after(PHASE_BOUND_S):
                return await run.run(fault(home), hold)

        return trio.run(main).summary()
    finally:
        subprocess.run([PAGER, "exit"], env=env, capture_output=True, timeout=60, check=False)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the broker did not stop (or is already gone)


def full_disk(tmp: Path) -> dict[str, Any]:
    try:
        with tmpfs(tmp / "disk", "16m") as disk:
            figures: dict[str, Any] = run_broker(
                disk / "home", tmp / "repo-disk", lambda _: FullDisk(disk),
                Hold(DISK_FULL_S, DISK_FULL_S),
            )  # fmt: skip
            return figures
    except Unavailable as exc:
        return {"fault": "full disk", "skipped": str(exc)}


def locked(tmp: Path) -> dict[str, Any]:
    figures: dict[str, Any] = run_broker(
        tmp / "home", tmp / "repo-locked", lambda home: DatabaseLocked(home / "pager.db"),
        Hold(LOCKED_S, LOCKED_S),
    )  # fmt: skip
    return figures


def rows(figures: dict[str, Any], label: str) -> list[tuple[str, str, str]]:
    if "skipped" in figures:
        return [(label, f"not run: {figures['skipped']}", "")]
    f = figures
    yes = {True: "yes", False: "no"}
    return [
        (f"{label}: broker pid the same", yes[f["broker_pid_same"]], "yes"),
        (f"{label}: `/health` answered / probes (within 1 s)",
         f"{f['health_answered']} / {f['health_probes']} ({f['health_within_1s']})", "all"),
        (f"{label}: `/health` p50 / p99 / max",
         f"{f['health_p50_ms']} / {f['health_p99_ms']} / {f['health_max_ms']} ms", "max < 1 s"),
        (f"{label}: `degraded` seen while the fault held", yes[f["degraded_seen"]], "yes"),
        (f"{label}: sends 2xx / 503 / 500 / unanswered",
         f"{f['sends_2xx']} / {f['sends_503']} / {f['sends_500']} / {f['sends_unanswered']}",
         "no 500, none unanswered"),
        (f"{label}: receivers' sessions kept", yes[f["sessions_kept"]], "yes"),
        (f"{label}: 2xx sends delivered / total", f"{f['delivered']} / {f['sent_2xx']}", "all"),
        (f"{label}: fault ended to first successful send",
         "never (60 s bound)" if f["recovery_s"] is None else f"{f['recovery_s']} s", "< 5 s"),
    ]  # fmt: skip


def main() -> int:
    parser = bench_parser(
        __doc__, runs=1, runs_help="unused: one run of each fault", figures=FIGURES
    )
    args = parser.parse_args()
    chosen = chosen_figures(parser, args.figures, FIGURES)
    results: dict[str, Any] = {"machine": machine(), "runs": 1}
    table = []
    with tempfile.TemporaryDirectory(prefix="pager-bench-faults-") as tmp:
        if "disk" in chosen:
            results["full_disk"] = full_disk(Path(tmp))
            table += rows(results["full_disk"], f"disk full {DISK_FULL_S:g} s")
        if "locked" in chosen:
            results["database_locked"] = locked(Path(tmp))
            table += rows(results["database_locked"], f"`database is locked` {LOCKED_S:g} s")
    return report(results, table, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
