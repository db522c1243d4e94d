"""The state directory's location (SPEC §3), with nothing but `os` and `sys`: the hook and
status fast paths use it."""

from __future__ import annotations

import os
import sys


class UnsupportedPlatform(Exception):
    pass


def state_dir() -> str:
    """`PAGER_HOME`, else the platform's user state directory for `pager`."""
    home = os.environ.get("PAGER_HOME")
    if home:
        return os.path.abspath(os.path.expanduser(home))
    if sys.platform.startswith("linux"):
        xdg = os.environ.get("XDG_STATE_HOME")
        base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.local/state")
        return os.path.join(base, "pager")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Application Support/pager")
    raise UnsupportedPlatform(
        f"Pager supports Linux and macOS; this platform ({sys.platform}) is not supported."
    )
