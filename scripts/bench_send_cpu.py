"""The CPU a send costs Pager's own code, in process, for Git revisions side by side.

No HTTP and no MCP stack (the floor of bench_floor.py and bench_peers.py is that part): the
messaging harness of the tests (tests/messaging/conftest.py: real SQLite, the service, the
identity actors and the store writer, its commit inline on the loop) with every send rate off,
as the benchmarks' brokers run. One sender sends `--sends` messages a figure, `--figures`
figures in a row (so its last hour of sends fills up as a long benchmark's sender's does), and
each figure is the process's CPU (getrusage) per send. Each revision is checked out into a
temporary worktree and measured in a process of its own with its code on PYTHONPATH, in
A-B-B-A order; both are measured on one machine at nearly the same moments, so a machine that
is busy weighs on both.

    .venv/bin/python scripts/bench_send_cpu.py e25fef7 HEAD [--sends 1000] [--figures 4]
    .venv/bin/python scripts/bench_send_cpu.py --measure [--sends N] [--figures N]  (this tree)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_ab import worktrees
from benchlib import machine, progress

SCRIPT = str(Path(__file__).resolve())
BODY = "benchmark message: " + "x" * 80  # as bench_messaging.py's


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(sends: int, figures: int) -> list[float]:
    from pager.config import Limits
    from pager.domain.limits import SendLimits
    from tests.messaging.conftest import open_harness

    rates_off = SendLimits(
        max_hops=0, agent_sends_per_hour=0, pair_sends_per_hour=0, token_sends_per_hour=0
    )
    found: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pager-bench-send-cpu-") as tmp:
        async with open_harness(Path(tmp), limits=Limits(send=rates_off)) as harness:
            _, alice = await harness.register("alice")
            await harness.register("bob")
            for n in range(50):  # warm-up: every actor started, every statement prepared
                await harness.service.send(alice, to="bob", body=f"warm-up {n}")
            for _ in range(figures):
                before = _cpu()
                for n in range(sends):
                    await harness.service.send(alice, to="bob", body=f"{BODY} {n}")
                found.append(round(1e6 * (_cpu() - before) / sends))
    return found


def measure_here(sends: int, figures: int) -> list[float]:
    import trio

    return trio.run(_measure, sends, figures)


def measure_tree(tree: Path, sends: int, figures: int) -> list[float]:
    """This script's `--measure` with `tree`'s code (its tests' harness included)."""
    command = [
        sys.executable,
        SCRIPT,
        "--measure",
        "--sends",
        str(sends),
        "--figures",
        str(figures),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: measuring {tree} failed:\n{done.stderr[-3000:]}")
    figures_found: list[float] = json.loads(done.stdout)
    return figures_found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("revisions", nargs="*", help="revisions to compare (e.g. e25fef7 HEAD)")
    parser.add_argument("--sends", type=int, default=1000, help="sends per figure (1000)")
    parser.add_argument("--figures", type=int, default=4, help="figures in a row (4)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each revision (2)")
    parser.add_argument("--measure", action="store_true", help="measure this tree, print JSON")
    args = parser.parse_args()
    if args.sends < 1 or args.figures < 1 or args.repeats < 1:
        parser.error("--sends, --figures and --repeats must be at least 1")
    if args.measure:
        print(json.dumps(measure_here(args.sends, args.figures)))
        return 0
    if not args.revisions:
        parser.error("name the revisions to compare, or pass --measure")
    runs: dict[str, list[list[float]]] = {revision: [] for revision in args.revisions}
    with worktrees(args.revisions) as trees:
        for repeat in range(args.repeats):
            order = list(zip(args.revisions, trees, strict=True))
            for revision, tree in order if repeat % 2 == 0 else reversed(order):
                progress(f"{revision} ({repeat + 1}/{args.repeats})")
                runs[revision].append(measure_tree(tree, args.sends, args.figures))
    progress("")
    print(f"machine: {machine()}")
    print(f"µs of CPU per send, {args.sends} sends a figure, {args.figures} figures in a row")
    print()
    print("| revision | figures of each run | median |")
    print("|---|---|---|")
    for revision, found in runs.items():
        shown = "; ".join(" ".join(f"{value:.0f}" for value in run) for run in found)
        median = statistics.median(value for run in found for value in run)
        print(f"| {revision} | {shown} | {median:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
