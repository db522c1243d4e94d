"""Pi: Pager's extension, loaded for one launch with `pi -e {extension_path}`
(docs/implementations/pi.md).

Pi has no MCP client. The extension (`assets/pi/pager.ts`, copied into the launch's private
directory) registers Pager's tools, forwarding each call to the broker's MCP endpoint with the
session token from `PAGER_TOKEN`, and delivers mail with `pi.sendMessage(…, {deliverAs:
"followUp", triggerTurn: true})`. Nothing of the user's Pi configuration is touched.
"""

from __future__ import annotations

import os
from importlib import resources

from pager.implementations.connectors.pre_tool import with_pre_tool
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

EXTENSION_ASSET = ("assets", "pi", "pager.ts")


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    source = resources.files("pager.implementations.connectors").joinpath(*EXTENSION_ASSET)
    path = os.path.join(context.directory, "pager-pi-extension.ts")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(with_pre_tool(source.read_bytes(), manifest, context.values["hook_command"]))
    return {"extension_path": path}
