"""Every figure of `./scripts/bench`, for two Git revisions, side by side in one run.

Each revision is checked out into a temporary worktree; each group of figures (lifecycle,
messaging, implementations, operator, paging, refusals, floor, multihost, wake) runs that
revision's own bench script with this checkout's interpreter and PYTHONPATH set to the worktree,
so the brokers, hooks and commands it starts run that revision's code. The two revisions take
turns script by script, `--repeats` times each in A-B-B-A order, and each figure is the median
of its repeats: a machine that speeds up or slows down during the run weighs on both (figures
that are already ratios to a yardstick measured in the same script, e.g.
`status_to_bare_ratio`, are the steadiest).
The output is every numeric figure the groups report (their `--json`, flattened), the two
revisions' values and their ratio (the second's over the first's).

    .venv/bin/python scripts/bench_revisions.py 26f1b48 HEAD [--groups lifecycle,messaging]
        [--runs N] [--repeats 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_ab import worktrees
from benchlib import machine, progress

GROUPS = {
    "lifecycle": ["bench_lifecycle.py"],
    "messaging": ["bench_messaging.py"],
    "implementations": ["bench_implementations.py"],
    "operator": ["bench_operator_api.py", "bench_events.py", "bench_tui.py"],
    "paging": ["bench_paging.py"],
    "refusals": ["bench_refusals.py"],
    "floor": ["bench_floor.py"],
    "multihost": ["bench_multihost.py"],
    "wake": ["bench_wake.py"],
}


class ScriptFailed(Exception):
    """A bench script failed: its figures are left out of this run, the others still count."""


def run_group(tree: Path, script: str, runs: int | None) -> dict[str, Any]:
    """One bench script of `tree`, its code on PYTHONPATH: its `--json` answer."""
    command = [sys.executable, str(tree / "scripts" / script), "--json"]
    if runs is not None:
        command += ["--runs", str(runs)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ScriptFailed(f"{script} at {tree} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON answer by its path (`sequential.send.p50_ms`)."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, int | float):
        return {prefix: float(value)}
    found: dict[str, float] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found.update(flatten(item, f"{prefix}[{n}]"))
    return found


def medians(answers: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Each figure's median over its repeats."""
    values: dict[str, list[float]] = {}
    for name, repeats in answers.items():
        for answer in repeats:
            for key, value in flatten(answer, name).items():
                values.setdefault(key, []).append(value)
    return {key: statistics.median(found) for key, found in values.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="the earlier revision (e.g. 26f1b48)")
    parser.add_argument("after", help="the later revision (e.g. HEAD)")
    parser.add_argument("--groups", default=",".join(GROUPS), help="comma-separated groups")
    parser.add_argument("--runs", type=int, default=None, help="passed to each bench script")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each script per side")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    groups = [group.strip() for group in args.groups.split(",") if group.strip()]
    unknown = [group for group in groups if group not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; groups: {', '.join(GROUPS)}")
    revisions = [args.before, args.after]
    # revision -> "group.script" -> one answer per repeat
    results: dict[str, dict[str, list[dict[str, Any]]]] = {revision: {} for revision in revisions}
    failures: list[str] = []
    with worktrees(revisions) as trees:
        for group in groups:
            for script in GROUPS[group]:
                name = f"{group}.{Path(script).stem}"
                for repeat in range(args.repeats):
                    for index in [0, 1] if repeat % 2 == 0 else [1, 0]:
                        progress(f"{name} at {revisions[index]} ({repeat + 1}/{args.repeats})")
                        try:
                            answer = run_group(trees[index], script, args.runs)
                        except ScriptFailed as failed:  # a run of hours keeps the rest
                            print(failed, file=sys.stderr)
                            failures.append(f"{name} at {revisions[index]}")
                            continue
                        results[revisions[index]].setdefault(name, []).append(answer)
    progress("")
    if failures:
        print(f"failed, left out: {', '.join(failures)}", file=sys.stderr)
    if args.json:
        print(json.dumps({"machine": machine(), "results": results, "failed": failures}, indent=2))
        return 1 if failures else 0
    before, after = (medians(results[revision]) for revision in revisions)
    print(f"Machine: {machine()}")
    print()
    print(f"| figure | {args.before} | {args.after} | ratio |")
    print("|---|---|---|---|")
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        ratio = f"{new / old:.2f}x" if old and new is not None else "-"
        shown = ["-" if v is None else f"{v:.4g}" for v in (old, new)]
        print(f"| {key} | {shown[0]} | {shown[1]} | {ratio} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
