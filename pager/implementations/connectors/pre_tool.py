"""The reservations check in a harness's own plugin or extension (OpenCode's and Kilo CLI's
plugin, Pi's extension): the asset says `const PRE_TOOL = null;`, and a launch's copy says which
command to run before which tools, from the manifest's `[hooks.pre_tool]` (docs/reservations.md).
"""

from __future__ import annotations

import json

from pager.implementations.manifest import Manifest

NO_PRE_TOOL = b"const PRE_TOOL = null;"


def with_pre_tool(source: bytes, manifest: Manifest, hook_command: str) -> bytes:
    """`source` with PRE_TOOL set: `{command, event, tools}` (the tools that start the hook)."""
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is None:
        return source
    if source.count(NO_PRE_TOOL) != 1:
        raise RuntimeError(f"the plugin asset has no single {NO_PRE_TOOL.decode()!r}")
    value = {
        "command": f"{hook_command} {pre_tool.arguments()}",
        "event": pre_tool.event,
        "tools": sorted({*pre_tool.paths, *pre_tool.shell, *pre_tool.patches}),
    }
    return source.replace(NO_PRE_TOOL, b"const PRE_TOOL = " + json.dumps(value).encode() + b";")
