"""`pager` with no arguments: the TUI against the broker of this state directory."""

from __future__ import annotations

from pager.launch.discovery import RunningBroker
from pager.launch.paths import StatePaths
from pager.tui.app import PagerApp
from pager.tui.errors import Unreachable
from pager.tui.source import HttpSource, state_dir_locator


def run_tui(paths: StatePaths, broker: RunningBroker) -> int:
    """Run the app until the operator quits; 1 when the local secret cannot be read or the
    app failed."""
    try:
        source = HttpSource(state_dir_locator(paths, broker))
    except Unreachable as exc:
        import sys

        print(f"pager: {exc}", file=sys.stderr)
        return 1
    app = PagerApp(source)
    app.run()
    return app.return_code or 0  # 1 when the app ended on an unexpected error
