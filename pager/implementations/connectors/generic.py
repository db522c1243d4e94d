"""The connector of implementations that need no per-launch files (e.g. `shell`)."""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    return {}
