"""OpenCode: the inline configuration `OPENCODE_CONFIG_CONTENT` (docs/implementations/opencode.md).

`{config_content}` is the JSON OpenCode layers over its own configuration files for this launch:

- `mcp.pager`: the broker's MCP endpoint as a remote server, its `Authorization` header read from
  `PAGER_TOKEN` by OpenCode's `{env:…}` substitution (so the token is in no file and no argument),
  and `oauth: false` (no OAuth discovery for a server that has a static credential);
- `plugin`: Pager's plugin (a copy of `assets/opencode/pager.js` in the launch's private
  directory, as a `file://` URL), which pushes mail into the session and wakes it when idle,
  and refuses an edit of a file another agent reserved (its PRE_TOOL, from the manifest's
  `[hooks.pre_tool]`).

Written for OpenCode 1.x's configuration and plugin API. A configuration already in the user's
`OPENCODE_CONFIG_CONTENT` is kept: Pager's entries are added to it.

For a headless run (a wake run, `opencode run --session ID PROMPT`, docs/wake.md) the copy says
`HEADLESS = true`: the plugin then adds the waiting mail to the run's prompt instead of pushing
it with its long poll, which would acknowledge mail the run ends before reading (checked with
OpenCode 1.18.33 by scripts/verify_harnesses.py).
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from pager.implementations.connectors.pre_tool import with_pre_tool
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

PLUGIN_ASSET = ("assets", "opencode", "pager.js")
PLUGIN_NAME = "pager-opencode.js"
SCHEMA = "https://opencode.ai/config.json"
#: The plugin's switch, as the asset has it and as a headless run's copy has it.
INTERACTIVE = b"const HEADLESS = false;"
HEADLESS = b"const HEADLESS = true;"


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    return {
        "config_content": inline_config(
            manifest,
            context,
            variable="OPENCODE_CONFIG_CONTENT",
            plugin_name=PLUGIN_NAME,
            schema=SCHEMA,
        )
    }


def inline_config(
    manifest: Manifest, context: LaunchContext, *, variable: str, plugin_name: str, schema: str
) -> str:
    """The JSON of the inline configuration variable `variable` for this launch: the user's own
    (if any) with the `pager` MCP server and Pager's plugin (copied as `plugin_name`) added.
    OpenCode's forks that read the same configuration (Kilo CLI) reuse it with their names."""
    content = plugin_source(headless=context.headless)
    content = with_pre_tool(content, manifest, context.values["hook_command"])
    plugin = _copy_asset(context.directory, plugin_name, content)
    config = _existing_config(context.environ.get(variable))
    config.setdefault("$schema", schema)
    servers = config.get("mcp")
    if not isinstance(servers, dict):
        servers = config["mcp"] = {}
    servers["pager"] = {
        "type": "remote",
        "url": context.values["mcp_url"],
        "headers": {"Authorization": "Bearer {env:PAGER_TOKEN}"},
        "oauth": False,
        "enabled": True,
    }
    plugins = config.get("plugin")
    suffix = f"/{plugin_name}"
    kept = [p for p in plugins if not _is_pagers(p, suffix)] if isinstance(plugins, list) else []
    config["plugin"] = [*kept, Path(plugin).as_uri()]
    return json.dumps(config, separators=(",", ":"))


def _existing_config(text: str | None) -> dict[str, Any]:
    """The user's own inline configuration, if any and if it is a JSON object."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _is_pagers(entry: object, suffix: str) -> bool:
    """A plugin entry of an enclosing `pager <id>` launch (its copy of Pager's plugin)."""
    return isinstance(entry, str) and entry.endswith(suffix)


def plugin_source(*, headless: bool) -> bytes:
    """The plugin as a launch gets it: the asset, switched to headless for a wake run."""
    source = resources.files("pager.implementations.connectors").joinpath(*PLUGIN_ASSET)
    content = source.read_bytes()
    if not headless:
        return content
    if content.count(INTERACTIVE) != 1:
        raise RuntimeError(f"{'/'.join(PLUGIN_ASSET)} has no single {INTERACTIVE.decode()!r}")
    return content.replace(INTERACTIVE, HEADLESS)


def _copy_asset(directory: str, name: str, content: bytes) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(content)
    return path
