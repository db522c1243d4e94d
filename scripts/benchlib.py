"""What the bench scripts share: the machine line, progress on a terminal, the results table."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def bench_parser(
    doc: str | None,
    *,
    runs: int = 15,
    runs_help: str = "scales sample sizes (default 15)",
    figures: Sequence[str] = (),
) -> argparse.ArgumentParser:
    """The options every bench takes: --runs and --json, and --figures when it has several."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--runs", type=int, default=runs, help=runs_help)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--quiet", action=_Quiet, nargs=0, help="no progress lines (also PAGER_BENCH_QUIET=1)"
    )
    if figures:
        parser.add_argument(
            "--figures",
            default=",".join(figures),
            help=f"comma-separated subset of {','.join(figures)} (default: all)",
        )
    return parser


def chosen_figures(parser: argparse.ArgumentParser, text: str, known: Sequence[str]) -> list[str]:
    """The figures named in `--figures`; an unknown name is a usage error."""
    figures = [f for f in text.split(",") if f]
    unknown = set(figures) - set(known)
    if unknown:
        parser.error(f"unknown figures {sorted(unknown)}; known: {', '.join(known)}")
    return figures


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(value: float) -> float:
    return round(value * 1000, 2)


def machine() -> str:
    """Cores, CPU model, Python and OS: the line every result is recorded with."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, {platform.system()}"
    )


class _Quiet(argparse.Action):
    """`--quiet`: progress() stays silent, in this process and the ones it starts."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        os.environ["PAGER_BENCH_QUIET"] = "1"


def progress(text: str) -> None:
    """One overwritten status line on stderr, only when a person is watching and did not ask
    for quiet (`--quiet`, or PAGER_BENCH_QUIET=1 as ./scripts/bench --quiet sets)."""
    if sys.stderr.isatty() and not os.environ.get("PAGER_BENCH_QUIET"):
        print(f"\r{text:<72}", file=sys.stderr, end="", flush=True)


def print_table(rows: Iterable[tuple[str, str, str]]) -> None:
    """The markdown table docs/benchmarks.md records: figure, result, target."""
    print("| figure | result | target |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def report(results: dict[str, Any], rows: Iterable[tuple[str, str, str]], *, as_json: bool) -> int:
    """End the progress line, then print `results` as JSON or the machine line and the table."""
    progress("")
    if sys.stderr.isatty() and not os.environ.get("PAGER_BENCH_QUIET"):
        print(file=sys.stderr)
    if as_json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}; --runs {results['runs']}")
    print_table(rows)
    return 0


#: SPEC §8.1: "benchmarks and load tests turn them off explicitly" (a bench sends far more than
#: any agent should in an hour).
NO_SEND_LIMITS = {
    "PAGER_LIMIT_MAX_HOPS": "0",
    "PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_TOKEN_SENDS_PER_HOUR": "0",
}


#: Where the benches keep what they install (peers' venvs, Pager's wheel): ignored by git.
CACHE = Path(__file__).resolve().parents[1] / ".cache"


def peer_venv(
    name: str, requirement: str, python: str = sys.executable, pip_args: Sequence[str] = ()
) -> Path:
    """A venv of its own under .cache/peers/NAME holding exactly `requirement` (pinned, from
    PyPI), made on first use; its bin directory. Idempotent: a stamp names what it holds."""
    venv = CACHE / "peers" / name
    stamp = venv / ".bench-stamp"
    if stamp.is_file() and stamp.read_text().strip() == requirement:
        return venv / "bin"
    progress(f"installing {requirement} into {venv} (once)")
    if not (venv / "bin" / "python").exists():
        made = subprocess.run([python, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            raise SystemExit(f"bench: {python} -m venv {venv} failed: {made.stderr.strip()}")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", *pip_args, requirement],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(
            f"bench: installing {requirement} into {venv} failed:\n{done.stderr.strip()[-2000:]}"
        )
    stamp.write_text(requirement + "\n")
    return venv / "bin"
