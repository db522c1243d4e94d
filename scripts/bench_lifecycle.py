"""Lifecycle figures of the broker foundation issue, measured on real processes.

- `pager start` with no broker running, until ready (health OK): median over runs, both on a
  fresh state directory (database created) and on an existing one (broker just exited).
- `pager status` with a broker running against a bare interpreter
  (`.venv/bin/python -I -c 'import json, http.client'`), alternating, in one run: the ratio of
  medians is what counts, since absolute times drift on a shared machine.
- Resident memory of an idle broker (VmRSS from /proc after it has idled).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (  # scripts/benchlib.py, beside this file
    bench_parser,
    machine,
    print_table,
    progress,
)

VENV_BIN = Path(sys.executable).parent
PAGER = str(VENV_BIN / "pager")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def status_json(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run([PAGER, "status", "--json"], env=env, capture_output=True, check=False)
    report: dict[str, object] = json.loads(out.stdout)
    return report


def main() -> int:
    parser = bench_parser(__doc__, runs_help="runs per figure (default 15)")
    args = parser.parse_args()
    results: dict[str, object] = {"machine": machine(), "runs": args.runs}

    with tempfile.TemporaryDirectory(prefix="pager-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        fresh: list[float] = []
        for run in range(args.runs):
            env["PAGER_HOME"] = str(Path(tmp) / f"fresh-{run}")
            fresh.append(timed([PAGER, "start"], env))
            timed([PAGER, "exit"], env)
            progress(f"start (fresh state dir) {run + 1}/{args.runs}")
        env["PAGER_HOME"] = str(Path(tmp) / "warm")
        timed([PAGER, "start"], env)
        timed([PAGER, "exit"], env)
        warm: list[float] = []
        for run in range(args.runs):
            warm.append(timed([PAGER, "start"], env))
            timed([PAGER, "exit"], env)
            progress(f"start (existing state dir) {run + 1}/{args.runs}")

        timed([PAGER, "start"], env)
        status: list[float] = []
        bare: list[float] = []
        bare_argv = [str(VENV_BIN / "python"), "-I", "-c", "import json, http.client"]
        for run in range(args.runs * 2):
            status.append(timed([PAGER, "status"], env))
            bare.append(timed(bare_argv, env))
            progress(f"status vs bare {run + 1}/{args.runs * 2}")

        time.sleep(3)  # let the broker settle before reading its memory
        pid = status_json(env)["pid"]
        rss_kb = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
        timed([PAGER, "exit"], env)
        progress("")

    ms = lambda values: round(statistics.median(values) * 1000, 1)  # noqa: E731
    results.update(
        start_fresh_median_ms=ms(fresh),
        start_existing_median_ms=ms(warm),
        status_median_ms=ms(status),
        bare_interpreter_median_ms=ms(bare),
        status_to_bare_ratio=round(statistics.median(status) / statistics.median(bare), 2),
        idle_rss_mb=round(rss_kb / 1024, 1),
    )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}; {args.runs} runs per figure")
    r = results
    rows = [
        (
            "`pager start`, fresh state dir, median",
            f"{r['start_fresh_median_ms']} ms",
            "<= 1500 ms",
        ),
        (
            "`pager start`, existing state dir, median",
            f"{r['start_existing_median_ms']} ms",
            "<= 1500 ms",
        ),
        (
            "`pager status` / bare interpreter, medians",
            f"{r['status_median_ms']} ms / {r['bare_interpreter_median_ms']} ms"
            f" = {r['status_to_bare_ratio']}x",
            "<= 2x",
        ),
        ("idle broker resident memory", f"{r['idle_rss_mb']} MB", "<= 80 MB"),
    ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
