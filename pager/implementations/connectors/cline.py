"""Cline CLI: a per-launch Cline directory and MCP settings file, both named in the environment
(docs/implementations/cline.md).

Cline CLI reads its hooks from `$CLINE_DIR/hooks` (default `~/.cline`), its state from
`$CLINE_DIR/data` (unless `CLINE_DATA_DIR` names another place) and its MCP servers from
`CLINE_MCP_SETTINGS_PATH` (default `<data>/settings/cline_mcp_settings.json`). The connector
builds, in the launch's private directory:

    <config_dir>/<entry>      a link to each entry of the user's own Cline directory (data,
                              agents, rules, skills, plugins, …); `data` is created in the
                              user's directory when missing, so sessions outlive the launch
    <config_dir>/hooks/       a link to each of the user's hook files, and Pager's hook
                              scripts: `pager hook --format cline` on the manifest's events
                              (PostToolUse), `pager hook --prompt-only` on its prompt events
                              (TaskStart)
    <mcp_config_file>         the user's MCP servers and `pager`: `streamableHttp`, the relay's
                              URL and the session's `Authorization` header (0600)
    <config_dir>/pager-hub/   where the launch's own Cline hub writes its discovery file
                              (the manifest's CLINE_HUB_DISCOVERY_PATH; Cline CLI makes it)

So only this launch sees Pager's server and hooks, and nothing is written to the user's
`~/.cline` (but for creating `data` when Cline CLI has never run). `--hooks-dir` is not used:
Cline CLI 3.0.65 turns it into `CLINE_HOOKS_DIR`, which nothing reads.

What Cline CLI writes during the launch: its sessions and settings go to the user's data
directory through the link; an MCP server added with `cline mcp add` during the launch goes
to the launch's MCP settings file and is lost with it; a new top-level entry it creates in its
directory (the first `worktrees`, `cron`, …) stays in the launch's directory and is lost too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: The MCP server's name (Cline CLI names its tools `pager__<tool>`).
SERVER = "pager"
#: Entries of the user's Cline directory that the launch replaces with its own: the hooks, and
#: the directory of the launch's own hub's discovery file (the manifest's
#: CLINE_HUB_DISCOVERY_PATH).
OWN_ENTRIES = ("hooks", "pager-hub")
#: Cline CLI's state: created in the user's directory when missing, so that it outlives the
#: launch (sessions, provider settings).
KEPT_DIRS = ("data",)
MCP_FILE = "cline_mcp_settings.json"


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    values, environ = context.values, context.environ
    users = user_cline_dir(environ)
    config = Path(context.directory) / "cline"
    config.mkdir(mode=0o700)
    if not environ.get("CLINE_DATA_DIR", "").strip():  # else the state lives there
        for name in KEPT_DIRS:
            (users / name).mkdir(mode=0o700, parents=True, exist_ok=True)
    _link_entries(users, config, skip=OWN_ENTRIES)
    hooks = config / "hooks"
    hooks.mkdir(mode=0o700)
    _link_entries(users / "hooks", hooks, skip=())
    for name, script in hook_scripts(manifest, values).items():
        path = hooks / _free_name(hooks, name)
        _write(path, script, mode=0o700)
    mcp_file = Path(context.directory) / MCP_FILE
    _write(mcp_file, _json(mcp_settings(user_mcp_settings(environ, users), values)), mode=0o600)
    return {"config_dir": str(config), "mcp_config_file": str(mcp_file)}


def user_cline_dir(environ: Mapping[str, str]) -> Path:
    """The user's own Cline directory: `CLINE_DIR`, else `~/.cline`."""
    named = environ.get("CLINE_DIR", "").strip()
    if named:
        return Path(named)
    return Path(environ.get("HOME") or Path.home()) / ".cline"


def user_mcp_settings(environ: Mapping[str, str], users: Path) -> Path:
    """The MCP settings file Cline CLI would read without Pager."""
    named = environ.get("CLINE_MCP_SETTINGS_PATH", "").strip()
    if named:
        return Path(named)
    data = environ.get("CLINE_DATA_DIR", "").strip()
    return (Path(data) if data else users / "data") / "settings" / MCP_FILE


def mcp_settings(users_file: Path, values: Mapping[str, str]) -> dict[str, Any]:
    """The user's servers (when their file is readable JSON) and Pager's `pager`."""
    settings: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(users_file.read_text())
        if isinstance(loaded, dict):
            settings = loaded
    servers = settings.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers[SERVER] = {
        "type": "streamableHttp",
        "url": values["mcp_url"],
        # The literal token: the file is private (0600, in a 0700 directory removed after the
        # launch).
        "headers": {"Authorization": f"Bearer {values['token']}"},
    }
    return {**settings, "mcpServers": servers}


def hook_scripts(manifest: Manifest, values: Mapping[str, str]) -> dict[str, bytes]:
    """One executable per event, named after it, running `pager hook` in Cline CLI's format;
    for the `prompt_events`, `pager hook --prompt-only` (the prompt reported, no mail claimed).

    `PAGER_HOME` is set on the command itself, so the hook finds this broker whatever
    environment Cline CLI gives it. The scripts hold no secret (the hook reads the session's
    token from `PAGER_TOKEN_FILE`)."""
    base = f"PAGER_HOME={shlex.quote(values['state_dir'])} exec {values['hook_command']}"
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    scripts = {
        event: f"{base} --format {fmt} --max-chars {limit} {shlex.quote(event)}"
        for event in manifest.hooks.events
    }
    for event in manifest.hooks.prompt_events:
        scripts.setdefault(event, f"{base} --prompt-only {shlex.quote(event)}")
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        scripts.setdefault(pre_tool.event, f"{base} {pre_tool.arguments()}")
    return {event: f"#!/bin/sh\n{line}\n".encode() for event, line in scripts.items()}


def _link_entries(source: Path, target: Path, *, skip: tuple[str, ...]) -> None:
    if not source.is_dir():
        return
    for entry in sorted(source.iterdir()):
        if entry.name not in skip:
            (target / entry.name).symlink_to(entry)


def _free_name(directory: Path, event: str) -> str:
    """Cline CLI takes `<Event>` or `<Event>.<ext>` (.sh, .py, …): beside a hook of the user's
    for the same event, Pager's gets the other name, so both run."""
    for name in (event, f"{event}.sh", f"{event}.bash"):
        if not os.path.lexists(directory / name):
            return name
    raise FileExistsError(f"{directory}: no free name for Pager's {event} hook")


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def _write(path: Path, content: bytes, *, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(content)
