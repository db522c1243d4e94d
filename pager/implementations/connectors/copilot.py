"""GitHub Copilot CLI: an MCP configuration file and a hooks plugin, both given per launch
(docs/implementations/copilot.md).

- `{mcp_config_file}`: `{"mcpServers": {"pager": {"type": "http", "url": …, "headers":
  {"Authorization": "Bearer <token>"}}}}`, a private (0600) file in the launch's directory,
  given as `--additional-mcp-config @FILE` (Copilot CLI adds it to the user's own servers for
  this session only).
- `{config_dir}`: a plugin given as `--plugin-dir DIR`: `.plugin/plugin.json` and
  `hooks/hooks.json`, which runs `pager hook --format copilot` on the manifest's events
  (`sessionStart`, `userPromptSubmitted`). Copilot CLI reads the hook's
  `{"additionalContext": …}` and adds it to the model's prompt.

The plugin holds no secret (the hooks read the session's token from `PAGER_TOKEN_FILE`, which
Copilot CLI passes on to them), so it lives at a fixed path in Pager's state directory
(`copilot-plugin/`), rewritten at each launch, and not in the launch's directory: Copilot CLI
creates a data directory in the user's `~/.copilot/plugin-data/_direct/<hash of the plugin's
path>` for every plugin directory it is given and never removes it, so a plugin at a fresh
path per launch would leave a new empty directory there at every launch (Copilot CLI 1.0.102).

Idle wake: the plugin also holds Pager's extension (`extensions/pager/extension.mjs`, from
`assets/copilot/`), which waits, without claiming, for mail while the session is idle and then
sends it a `[pager]` prompt (`session.send`), so the userPromptSubmitted hook delivers the mail
as for any turn. Copilot CLI 1.0.102 runs extensions only under its `EXTENSIONS` feature flag:
`{config_content}` is the value of `COPILOT_CLI_ENABLED_FEATURE_FLAGS` for this launch, the
user's own flags plus `EXTENSIONS` (`--experimental` would turn the flag on too, but Copilot CLI
saves it in the user's settings.json). A wake run (headless) gets a plugin without the
extension, at a fixed path of its own: nobody waits for a next turn there.

Nothing is written to the user's `~/.copilot`: no `mcp-config.json` entry, no installed plugin,
no hooks file, no setting.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: The MCP server's name (Copilot CLI shows its tools as `pager-<tool>`).
SERVER = "pager"
#: The plugin's name and its directory in Pager's state directory.
PLUGIN = "pager-launch"
PLUGIN_DIR = "copilot-plugin"
#: A wake run's plugin: the hooks without the extension.
HEADLESS_PLUGIN_DIR = "copilot-plugin-headless"
#: Pager's extension, and where the plugin holds it.
EXTENSION_ASSET = ("assets", "copilot", "extension.mjs")
EXTENSION_FILE = os.path.join("extensions", "pager", "extension.mjs")
#: Copilot CLI's variable of enabled feature flags (comma-separated), and the one extensions need.
FEATURE_FLAGS = "COPILOT_CLI_ENABLED_FEATURE_FLAGS"
EXTENSIONS_FLAG = "EXTENSIONS"
#: Seconds Copilot CLI gives each hook.
HOOK_TIMEOUT_S = 10


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    values = context.values
    mcp = {
        "mcpServers": {
            SERVER: {
                "type": "http",
                "url": values["mcp_url"],
                # The literal token: the file is private (0600, in a 0700 directory removed
                # after the launch).
                "headers": {"Authorization": f"Bearer {values['token']}"},
                "tools": ["*"],
            }
        }
    }
    mcp_file = os.path.join(context.directory, "mcp-config.json")
    _write(Path(mcp_file), _json(mcp), exclusive=True)
    plugin = Path(values["state_dir"]) / (HEADLESS_PLUGIN_DIR if context.headless else PLUGIN_DIR)
    write_plugin(plugin, launch_plugin_files(manifest, values, extension=not context.headless))
    return {
        "mcp_config_file": mcp_file,
        "config_dir": str(plugin),
        "config_content": feature_flags(context.environ.get(FEATURE_FLAGS, "")),
    }


def feature_flags(own: str) -> str:
    """The user's own enabled feature flags, plus the one that runs extensions."""
    flags = [flag.strip() for flag in own.split(",") if flag.strip()]
    return ",".join(flags if EXTENSIONS_FLAG in flags else [*flags, EXTENSIONS_FLAG])


def launch_plugin_files(
    manifest: Manifest, values: Mapping[str, str], *, extension: bool = True
) -> dict[str, bytes]:
    """The plugin's files, by path relative to its directory; with `extension`, Pager's
    extension for idle wake."""
    meta = {
        "name": PLUGIN,
        "description": "Pager, for `pager copilot` launches: waiting mail added as context.",
        "version": "1.0.0",
    }
    hooks = {"version": 1, "hooks": hook_entries(manifest, values)}
    files = {
        os.path.join(".plugin", "plugin.json"): _json(meta),
        os.path.join("hooks", "hooks.json"): _json(hooks),
    }
    if extension:
        source = resources.files("pager.implementations.connectors").joinpath(*EXTENSION_ASSET)
        files[EXTENSION_FILE] = source.read_bytes()
    return files


def hook_entries(manifest: Manifest, values: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """One command hook per event, running `pager hook` in Copilot CLI's output format.

    `PAGER_HOME` is set on the command itself, so the hook finds this broker whatever
    environment the hook is given."""
    base = f"PAGER_HOME={shlex.quote(values['state_dir'])} {values['hook_command']}"
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    entries = {
        event: [
            {
                "type": "command",
                "bash": f"{base} --format {fmt} --max-chars {limit} {shlex.quote(event)}",
                "timeoutSec": HOOK_TIMEOUT_S,
            }
        ]
        for event in manifest.hooks.events
    }
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        handler = {
            "type": "command",
            "bash": f"{base} {pre_tool.arguments()}",
            "timeoutSec": HOOK_TIMEOUT_S,
        }
        entries.setdefault(pre_tool.event, []).append(handler)
    return entries


def write_plugin(directory: Path, files: Mapping[str, bytes]) -> None:
    """Each file replaced whole (a concurrent launch reads the old file or the new one)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for relative, content in files.items():
        path = directory / relative
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(path, content, exclusive=False)


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def _write(path: Path, content: bytes, *, exclusive: bool) -> None:
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        return
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
