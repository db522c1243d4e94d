"""Gemini CLI: a per-launch Gemini home named by `GEMINI_CLI_HOME`, with a per-launch extension
(docs/implementations/gemini.md).

Gemini CLI reads the user's settings and state from `$GEMINI_CLI_HOME/.gemini` (default
`~/.gemini`) and loads every extension directory under its `extensions/`. The connector builds a
home in the launch's private directory (`{config_dir}`):

    <config_dir>/.gemini/<entry>           a link to each entry of the user's own `.gemini`
                                           (settings, credentials, sessions, skills, …)
    <config_dir>/.gemini/extensions/<ext>  a link to each of the user's extensions, and
    <config_dir>/.gemini/extensions/pager-launch/
        gemini-extension.json              the MCP server `pager`: `httpUrl` and the session's
                                           `Authorization` header (0600)
        hooks/hooks.json                   `pager hook --format gemini` on the manifest's events
    <config_dir>/.agents, <config_dir>/.env   links to the user's own (skills, environment)

So the user's settings file stays the one Gemini CLI reads and writes (through the link), the
administrator's system settings apply as usual, and only this launch sees Pager's server and
hooks. Pager's own Gemini extension (`pager plugin install gemini`, the directory `pager`) is
left out of a launch: `pager-launch` replaces it.

Why not a system settings file (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`, the first design): Gemini CLI
skips a system settings file unless it and every directory above it belong to root and are
writable by nobody else (google-gemini/gemini-cli PR #29115, 2026-08), so a file written by the
user is ignored. Found with the real Gemini CLI 0.61.0 by `scripts/verify_harnesses.py`.

Files Gemini CLI creates at the top of its directory during the launch land in the user's own
directory only where a link leads there: the connector links the files Gemini CLI writes in
place even before they exist (settings, credentials), and creates the user's `.gemini/tmp` and
`.gemini/history` (sessions and checkpoints, which Gemini CLI would create itself) when missing.
Files Gemini CLI replaces by renaming (`trustedFolders.json`, `projects.json`) are written into
the launch's directory instead: a folder trusted inside `pager gemini` is asked again next time.

A headless run (a wake run, `gemini --resume ID -p PROMPT`, docs/wake.md) gets no SessionStart
hook: in non-interactive mode Gemini CLI puts that hook's context *before* the prompt
(`<hook_context>…</hook_context>` then the prompt), so the BeforeAgent hook would see the mail
first instead of the wake prompt's `[pager]` and report the prompt as typed by a person
(SPEC §8.1). The run has one prompt, and BeforeAgent adds the waiting mail to it (after the
prompt). Found with Gemini CLI 0.61.0 by scripts/verify_harnesses.py.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pager.implementations.connectors.launch_home import build_config_dir, json_bytes
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: Milliseconds Gemini CLI gives each hook (its default is 60 000).
HOOK_TIMEOUT_MS = 10_000
#: The per-launch extension, and Pager's installed one (`pager plugin install gemini`).
EXTENSION = "pager-launch"
PLUGIN_EXTENSION = "pager"
#: The MCP server's name (Gemini CLI names its tools `mcp_pager_<tool>`).
SERVER = "pager"
#: Files Gemini CLI writes in place: linked even when missing, so a first write reaches the
#: user's directory.
LINKED_FILES = (
    "settings.json",
    "oauth_creds.json",
    "google_accounts.json",
    "installation_id",
    "user_id",
    "trustedFolders.json",
)
#: Directories Gemini CLI fills during a session (sessions, checkpoints): created in the user's
#: directory when missing, so that they outlive the launch.
KEPT_DIRS = ("tmp", "history")
#: Entries of the user's home besides `.gemini` that Gemini CLI reads through its home.
HOME_ENTRIES = (".agents", ".env")
#: Hook events a headless run leaves out (see the module's docstring).
NOT_HEADLESS = ("SessionStart",)


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    home = Path(context.directory) / "gemini-home"
    files = extension(manifest, context.values, headless=context.headless)
    build_home(user_home(context.environ), home, files)
    return {"config_dir": str(home)}


def user_home(environ: Mapping[str, str]) -> Path:
    """The home whose `.gemini` Gemini CLI would use without Pager (an enclosing launch's
    home links to the user's own)."""
    given = environ.get("GEMINI_CLI_HOME") or environ.get("HOME")
    return Path(given) if given else Path(os.path.expanduser("~"))


def extension(
    manifest: Manifest, values: Mapping[str, str], *, headless: bool = False
) -> dict[str, bytes]:
    """The per-launch extension's files, by path relative to its directory."""
    config = {
        "name": EXTENSION,
        "version": "1.0.0",
        "description": "Pager, for this `pager gemini` launch only: the broker's MCP tools,"
        " and waiting mail added as context.",
        "mcpServers": {
            SERVER: {
                "httpUrl": values["mcp_url"],
                # The literal token: the file is private (0600, in a 0700 directory removed
                # after the launch).
                "headers": {"Authorization": f"Bearer {values['token']}"},
            }
        },
    }
    hooks = {"hooks": hook_groups(manifest, values, headless=headless)}
    return {
        "gemini-extension.json": json_bytes(config),
        os.path.join("hooks", "hooks.json"): json_bytes(hooks),
    }


def hook_groups(
    manifest: Manifest, values: Mapping[str, str], *, headless: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """One matcher group per event, running `pager hook` in Gemini's JSON output format (for a
    headless run, not on the events of `NOT_HEADLESS`).

    `PAGER_HOME` is set on the command itself: Gemini CLI may run hooks with a sanitized
    environment (its opt-in redaction, always on in GitHub Actions), and the hook must still find
    this broker."""
    base = f"PAGER_HOME={shlex.quote(values['state_dir'])} {values['hook_command']}"
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    groups = {
        event: [
            {
                "hooks": [
                    {
                        "name": f"pager-{event}",
                        "type": "command",
                        "command": f"{base} --format {fmt} --max-chars {limit}"
                        f" {shlex.quote(event)}",
                        "timeout": HOOK_TIMEOUT_MS,
                        "description": "Pager: waiting mail for this session, as context",
                    }
                ]
            }
        ]
        for event in manifest.hooks.events
        if not (headless and event in NOT_HEADLESS)
    }
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        handler = {
            "name": "pager-reservations",
            "type": "command",
            "command": f"{base} {pre_tool.arguments()}",
            "timeout": HOOK_TIMEOUT_MS,
            "description": "Pager: refuse an edit of a file another agent reserved",
        }
        groups.setdefault(pre_tool.event, []).append({"hooks": [handler]})
    return groups


def build_home(user: Path, home: Path, files: Mapping[str, bytes]) -> None:
    """`home` as described in the module's docstring, for the user's home `user`."""
    build_config_dir(
        user / ".gemini",
        home / ".gemini",
        extension=EXTENSION,
        files=files,
        linked_files=LINKED_FILES,
        kept_dirs=KEPT_DIRS,
        left_out=(PLUGIN_EXTENSION,),
    )
    for name in HOME_ENTRIES:
        if os.path.lexists(user / name):
            (home / name).symlink_to(user / name)
