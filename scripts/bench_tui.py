"""Operator TUI figures (issue 5): "the TUI renders 1,000 agents and stays responsive (keys
answered <= 100 ms)".

The app is the real `PagerApp`, driven headless by Textual's pilot (`App.run_test`: every
widget is laid out and composited, nothing is written to a terminal). Its data comes from a
FAKE in-process snapshot source, not a broker: the snapshot is a JSON document of --agents
agents over --workspaces workspaces (a quarter of them archived), decoded and parsed on every
read as the HTTP source would (`json.loads` + `parse_snapshot`), so HTTP and the broker's own
query time are left out. Each of --runs runs opens a fresh app and measures:

Every figure ends at the first paint that shows the result (see `PaintWatch`): the screen
update Textual runs on its frame timer, so about 16 ms of any figure is waiting for the next
frame.

- first render: from creating the app to the first paint of the table holding every row
  (app start, snapshot read and parse, table built).
- key presses, posted to the app's driver as the terminal's input thread posts them: `down`
  (cursor movement, 40 per run), `enter` (open the agent's message view until its first page
  of 50 messages is painted, 5 per run) and `escape` (back to the table). p50 / p95 over all
  runs.
  Next to each, the process's CPU time over the same span (every thread; about 1 ms of it is
  this script polling for the paint): wall time above it is waiting, for the next frame or
  for a core when the machine is busy.
- live update: an operator event for a changed inbox count, until the row shows the new
  count (the snapshot re-read and a cell update; samples 250 ms apart, so the 5-per-second
  pacing of re-reads adds nothing), and an event for a new agent (a full table rebuild).

The TUI collects and freezes its heap once, right after the first snapshot is shown (see
pager/tui/app.py); between runs the finished app is collected outside the timings. `--raw`
keeps every sample in the JSON.

Progress goes to stderr only when it is a terminal.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from benchlib import (  # scripts/benchlib.py, beside this file
    bench_parser,
    machine,
    ms,
    percentile,
    print_table,
    progress,
)
from textual import events
from textual.screen import Screen

from pager.tui.app import PagerApp
from pager.tui.messages import MessagesScreen
from pager.tui.model import MessagePage, Snapshot, parse_messages, parse_snapshot
from pager.tui.rows import table_rows
from pager.tui.sse import SseEvent

BASE_RUNS = 10
KEY_TARGET_MS = 100.0
SIZE = (160, 50)
DOWN_PRESSES = 40
OPEN_PRESSES = 5
LIVE_SAMPLES = 5
LIVE_SPACING = 0.25  # > the 0.2 s minimum between snapshot re-reads


# -- the fake source ---------------------------------------------------------------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def build_snapshot(agents: int, workspaces: int) -> dict[str, Any]:
    spaces: list[dict[str, Any]] = [
        {"slug": f"repo{w:03d}-{w:06x}", "path": f"/src/repo{w:03d}", "agents": []}
        for w in range(workspaces)
    ]
    for index in range(agents):
        space = spaces[index % workspaces]
        alias = f"agent{index:04d}"
        space["agents"].append(
            {
                "agent_id": f"agt_{index:016d}",
                "alias": alias,
                "address": f"{alias}@{space['slug']}",
                "workspace": space["slug"],
                "implementation": ("claude", "codex", "opencode", "shell")[index % 4],
                "durable": True,
                "archived": index % 4 == 3,
                "attached": index % 3 == 0,
                "sessions": [],
                "inbox": {"queued": index % 7, "claimed": index % 2, "dead": int(index % 11 == 0)},
                "last_seen": _now(),
                "created_at": _now(),
                "archived_at": None,
            }
        )
    return {
        "broker": {"ok": True, "instance_id": "bench", "pid": 0, "version": "bench"},
        "workspaces": spaces,
        "totals": {"workspaces": workspaces, "agents": agents},
        "seq": 0,
    }


def build_messages(count: int) -> dict[str, Any]:
    party = {"agent_id": "agt_x", "alias": "peer", "address": "peer@repo000-000000"}
    return {
        "messages": [
            {
                "message_id": f"msg_{i:08d}",
                "direction": "in" if i % 2 else "out",
                "sender": party,
                "recipient": party,
                "body": f"message {i}: " + "lorem ipsum " * 20,
                "thread": None,
                "reply_to": None,
                "sent_at": _now(),
                "state": ("queued", "claimed", "acknowledged", "dead")[i % 4],
                "attempts": i % 3,
                "dead_reason": "expired" if i % 4 == 3 else None,
                "settled_at": None,
            }
            for i in range(count)
        ],
        "next_cursor": "more",
    }


class FakeSource:
    """Stands in for the broker: JSON decoded and parsed on every read, events on demand."""

    where = "fake snapshot source"

    def __init__(self, agents: int, workspaces: int) -> None:
        self.data = build_snapshot(agents, workspaces)
        self.raw = json.dumps(self.data)
        self.messages_raw = json.dumps(build_messages(50))
        self.queue: asyncio.Queue[SseEvent] | None = None
        self.seq = 0

    def relocate(self) -> None:
        pass

    def snapshot(self) -> Snapshot:
        return parse_snapshot(json.loads(self.raw))

    def messages(
        self, agent_id: str, *, direction: str, state: str, limit: int, cursor: str | None
    ) -> MessagePage:
        return parse_messages(json.loads(self.messages_raw))

    def act(self, agent_id: str, action: str) -> None:
        pass

    async def events(self, last_id: int) -> AsyncIterator[SseEvent]:
        self.queue = asyncio.Queue()
        while True:
            yield await self.queue.get()

    def change(self, mutate: Callable[[dict[str, Any]], None]) -> None:
        """Change the data, then announce it as an operator event (call on the app's loop)."""
        mutate(self.data)
        self.data["seq"] = self.seq = self.seq + 1
        self.raw = json.dumps(self.data)
        assert self.queue is not None
        self.queue.put_nowait(SseEvent(str(self.seq), "message.queued", "{}"))


# -- one run -----------------------------------------------------------------------------------


class PaintWatch:
    """When the screen was first painted with a condition holding.

    Wraps `Screen._compositor_refresh` (Textual's screen update, run on its frame timer when
    something changed): after each paint, an armed condition is checked, and the first paint
    that shows it is the answer. Keys are posted to the app's driver the way a terminal's
    input thread does, so the time covers input handling, layout and compositing, and none of
    the pilot's own idle waits (`pilot.press` sleeps at least 40 ms per key to let the app
    settle, which would swamp the figure).
    """

    def __init__(self) -> None:
        self.condition: Callable[[], bool] | None = None
        self.hit: float | None = None
        self.hit_cpu = 0.0
        self.began_cpu = 0.0
        self.cpu = 0.0  # process CPU seconds of the last measurement (every thread)
        original = Screen._compositor_refresh

        def traced(screen: Screen[Any]) -> None:
            original(screen)
            if self.condition is not None and self.hit is None and self.condition():
                self.hit = time.perf_counter()
                self.hit_cpu = time.process_time()

        Screen._compositor_refresh = traced  # type: ignore[method-assign]

    async def after(self, began: float, bound: float = 60.0) -> float:
        """Seconds from `began` to the first paint with `condition` true (armed beforehand)."""
        deadline = time.perf_counter() + bound
        while self.hit is None:
            if time.perf_counter() > deadline:
                raise RuntimeError("the app never painted the expected state")
            await asyncio.sleep(0.0005)
        hit, self.condition, self.hit = self.hit, None, None
        self.cpu = self.hit_cpu - self.began_cpu
        return hit - began

    def arm(self, condition: Callable[[], bool]) -> None:
        self.condition, self.hit = condition, None
        self.began_cpu = time.process_time()


def press(app: PagerApp, key: str) -> float:
    """Post one key press as the terminal driver would; the time it was posted."""
    began = time.perf_counter()
    assert app._driver is not None
    app._driver.send_message(events.Key(key, None))
    return began


async def one_run(
    agents: int, workspaces: int, samples: dict[str, list[float]], watch: PaintWatch
) -> None:
    source = FakeSource(agents, workspaces)
    expected = len(table_rows(source.snapshot(), datetime.now(UTC), set()))
    began = time.perf_counter()
    app = PagerApp(source)
    watch.arm(lambda: app.is_mounted(app.table) and app.table.row_count == expected)
    async with app.run_test(size=SIZE) as pilot:
        samples["render"].append(await watch.after(began))
        await pilot.pause()
        while source.queue is None:
            await pilot.pause(0.01)

        app.table.move_cursor(row=1)
        await pilot.pause()
        for _ in range(DOWN_PRESSES):
            target = app.table.cursor_row + 1
            watch.arm(lambda t=target: app.table.cursor_row == t)
            samples["down"].append(await watch.after(press(app, "down")))
            samples["down_cpu"].append(watch.cpu)

        for _ in range(OPEN_PRESSES):
            while app.current_agent() is None:
                await pilot.press("down")
            watch.arm(lambda: isinstance(app.screen, MessagesScreen) and app.screen.loads >= 1)
            samples["open"].append(await watch.after(press(app, "enter")))
            samples["open_cpu"].append(watch.cpu)
            main = app.screen_stack[0]
            watch.arm(lambda m=main: app.screen is m)
            samples["back"].append(await watch.after(press(app, "escape")))
            samples["back_cpu"].append(watch.cpu)
            await pilot.press("down")

        first = source.data["workspaces"][0]["agents"][0]
        for _ in range(LIVE_SAMPLES):
            await asyncio.sleep(LIVE_SPACING)
            wanted = first["inbox"]["queued"] + 1

            def bump(data: dict[str, Any], wanted: int = wanted) -> None:
                data["workspaces"][0]["agents"][0]["inbox"]["queued"] = wanted

            watch.arm(lambda w=wanted: str(app.table.get_row(first["agent_id"])[5]) == str(w))
            began = time.perf_counter()
            source.change(bump)
            samples["live_update"].append(await watch.after(began))

        for index in range(LIVE_SAMPLES):
            await asyncio.sleep(LIVE_SPACING)
            new_id = f"agt_new{index:012d}"

            def add(data: dict[str, Any], new_id: str = new_id) -> None:
                template = dict(data["workspaces"][-1]["agents"][0])
                template.update(agent_id=new_id, alias=new_id, archived=False)
                data["workspaces"][-1]["agents"].append(template)

            watch.arm(lambda n=new_id: n in app._shown_keys)
            began = time.perf_counter()
            source.change(add)
            samples["live_rebuild"].append(await watch.after(began))


# -- report ------------------------------------------------------------------------------------


def summarize(samples: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in samples.items():
        out[name] = {
            "samples": len(values),
            "p50_ms": ms(percentile(values, 50)),
            "p95_ms": ms(percentile(values, 95)),
            "max_ms": ms(max(values)),
        }
    return out


def _mark(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    f = results["figures"]
    agents = results["agents"]
    rows = [
        (
            f"first render of {agents:,} agents (app start, snapshot parse, table) p50 / max",
            f"{f['render']['p50_ms']} / {f['render']['max_ms']} ms ({f['render']['samples']} runs)",
            "(reported)",
        )
    ]
    for name, label in (
        ("down", "key `down` (cursor) answered p50 / p95"),
        ("open", "key `enter` (message view, first page shown) p50 / p95"),
        ("back", "key `escape` (back to the table) p50 / p95"),
    ):
        fig, cpu = f[name], f[f"{name}_cpu"]
        rows.append(
            (
                f"{label}, {agents:,} agents (CPU p50 / p95)",
                f"{fig['p50_ms']} / {fig['p95_ms']} ms ({fig['samples']} presses,"
                f" {_mark(fig['p95_ms'], KEY_TARGET_MS)}; CPU {cpu['p50_ms']} /"
                f" {cpu['p95_ms']} ms)",
                f"<= {KEY_TARGET_MS:g} ms",
            )
        )
    for name, label in (
        ("live_update", "event -> changed count shown (re-read + cell update)"),
        ("live_rebuild", "event -> new agent shown (re-read + table rebuild)"),
    ):
        fig = f[name]
        rows.append(
            (
                f"{label}, {agents:,} agents, p50 / p95",
                f"{fig['p50_ms']} / {fig['p95_ms']} ms ({fig['samples']} events)",
                "(reported)",
            )
        )
    return rows


def main() -> int:
    parser = bench_parser(
        __doc__, runs=BASE_RUNS, runs_help=f"fresh apps measured (default {BASE_RUNS})"
    )
    parser.add_argument("--agents", type=int, default=1000, help="agents (default 1,000)")
    parser.add_argument("--workspaces", type=int, default=10, help="workspaces (default 10)")
    parser.add_argument("--raw", action="store_true", help="keep every sample in the JSON")
    args = parser.parse_args()
    if args.agents < args.workspaces or args.workspaces < 1:
        parser.error("--agents must be at least --workspaces, and --workspaces at least 1")
    names = ("render", "down", "open", "back", "live_update", "live_rebuild")
    names += ("down_cpu", "open_cpu", "back_cpu")
    samples: dict[str, list[float]] = {name: [] for name in names}
    watch = PaintWatch()
    for run in range(max(args.runs, 1)):
        progress(f"run {run + 1}/{args.runs}: {args.agents} agents")
        asyncio.run(one_run(args.agents, args.workspaces, samples, watch))
        gc.collect()  # the finished app is garbage; the real TUI has one app per process
    progress("")
    if sys.stderr.isatty() and not os.environ.get("PAGER_BENCH_QUIET"):
        print(file=sys.stderr)
    results = {
        "machine": machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "runs": args.runs,
        "agents": args.agents,
        "workspaces": args.workspaces,
        "source": "fake in-process snapshot source (JSON decode + parse on every read)",
        "target_key_p95_ms": KEY_TARGET_MS,
        "figures": summarize(samples),
    }
    if args.raw:
        results["samples_ms"] = {name: [ms(v) for v in values] for name, values in samples.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"machine: {results['machine']}; load average {results['load_average']} at the end;"
        f" --runs {args.runs}; {results['source']}"
    )
    print_table(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
