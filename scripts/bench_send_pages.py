"""The pages a send writes to SQLite's WAL, each one waited for by its commit's fsync.

The messaging harness of the tests (tests/messaging/conftest.py: real SQLite, the service, the
identity actors and the store writer) with every send rate off: one sender sends `--sends`
messages to one recipient, one at a time, and the WAL is read back (tests/wal_pages.py) for
each commit's pages and the table or index each page belongs to; and each send's wall time
(its commit inline, fsync included: the harness's writer commits on the loop). Keep `--sends`
under ~80: the WAL is checkpointed at 1,000 pages and only its last generation can be read.

    .venv/bin/python scripts/bench_send_pages.py [--sends 70] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pager.config import Limits
from pager.domain.limits import SendLimits
from tests.messaging.conftest import open_harness
from tests.wal_pages import commits_on

UNLIMITED = Limits(send=SendLimits(agent_sends_per_hour=0, pair_sends_per_hour=0))


async def measure(sends: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        async with open_harness(tmp, limits=UNLIMITED) as harness:
            _, alice = await harness.register("alice")
            await harness.register("bob")
            await harness.service.send(alice, to="bob", body="the first one")
            took: list[float] = []
            with commits_on(tmp / "pager.db") as written:
                for n in range(sends):
                    start = time.perf_counter()
                    await harness.service.send(alice, to="bob", body=f"message {n}")
                    took.append(time.perf_counter() - start)
    sizes = [len(commit) for commit in written.commits]
    owners = Counter(owner for commit in written.commits for owner in commit.owners)
    return {
        "sends": sends,
        "commits": len(sizes),
        "pages": sum(sizes),
        "pages_per_send": round(sum(sizes) / sends, 2),
        "median_per_commit": statistics.median(sizes),
        "send_p50_ms": round(statistics.median(took) * 1000, 3),
        "pages_by_owner": dict(owners.most_common()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=70, help="sends, one at a time (70)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args()
    result = trio.run(measure, args.sends)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['sends']} sends: {result['commits']} commits, {result['pages']} pages,"
        f" {result['pages_per_send']} a send (median {result['median_per_commit']} a commit);"
        f" send p50 {result['send_p50_ms']} ms"
    )
    owners = result["pages_by_owner"]
    assert isinstance(owners, dict)
    for owner, count in owners.items():
        print(f"  {owner}: {count}")


if __name__ == "__main__":
    main()
