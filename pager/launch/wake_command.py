"""The command of a wake run (docs/wake.md): the harness's headless resume from its manifest's
`[wake.launch]` (or the person's `--command`), with the same per-launch wiring as
`pager <implementation>`, and the prompt it starts with.

One place decides whether an identity can be woken this way (`why_not`): `pager wake on`
answers with it, and a run that cannot start says it in its `wake.ended` event.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence

from pager.implementations.manifest import Manifest
from pager.implementations.templates import TemplateError, placeholders, render
from pager.launch.own_pager import with_own_pager
from pager.launch.wake_prompt import wake_prompt
from pager.launch.wrapper import HarnessCommand, LaunchSpec, harness_command, hook_command


def wake_args(manifest: Manifest, command: Sequence[str] | None) -> tuple[str, ...] | None:
    """The headless arguments of a run: the person's `--command`, else the manifest's."""
    if command is not None:
        return tuple(command)
    return None if manifest.wake.launch is None else manifest.wake.launch.args


def why_not(
    manifest: Manifest, command: Sequence[str] | None, conversation_key: str | None
) -> str | None:
    """Why the identity cannot be woken by a launch (None: it can)."""
    args = wake_args(manifest, command)
    if args is None:
        return (
            f"{manifest.name} has no headless resume Pager knows ({manifest.id}'s manifest has"
            " no [wake.launch]); give the command to run with --command"
        )
    try:
        used = {name for arg in args for name in placeholders(arg)}
    except TemplateError as exc:
        return f"the command cannot be filled: {exc}"
    if "conversation_key" in used and not conversation_key:
        return (
            "it has no conversation to resume yet (no session of it named one): launch it once"
            f" with `pager {manifest.id} --session-name NAME`, then turn this on"
        )
    return None


def wake_values(
    *,
    url: str,
    token: str,
    token_file: str,
    agent_id: str,
    address: str,
    alias: str,
    session_id: str,
    state_dir: str,
    conversation_key: str,
    implementation: str,
) -> dict[str, str]:
    """The placeholders' values of a run. Unlike a wrapped launch, the run talks to the broker
    directly: the broker is its parent and ends it before it moves or stops."""
    return {
        "url": url,
        "mcp_url": f"{url}/mcp",
        "token": token,
        "token_file": token_file,
        "agent_id": agent_id,
        "address": address,
        "alias": alias,
        "session_id": session_id,
        "state_dir": state_dir,
        "conversation_key": conversation_key,
        "python": sys.executable,
        "hook_command": hook_command(implementation),
        "prompt": wake_prompt(address),
    }


def wake_command(
    spec: LaunchSpec,
    manifest: Manifest,
    args: Sequence[str],
    values: Mapping[str, str],
    directory: str,
    environ: Mapping[str, str],
) -> HarnessCommand:
    """The run's argv and environment; `LookupError` when the program is not on the PATH of
    `environ`, `TemplateError`/`LaunchError` when a template cannot be filled."""
    # This Pager's `pager` first on the run's PATH, for the program's lookup and the run alike.
    environ = with_own_pager(environ, directory)
    templates = list(args)
    if manifest.executable_from_args:  # `shell`: the command's first part is the program
        executable = render(templates.pop(0), values)
    else:
        executable = render(manifest.executable, values)
    program = shutil.which(executable, path=environ.get("PATH"))
    if program is None:
        raise LookupError(f"{executable!r} is not on the broker's PATH")
    return harness_command(
        spec, program, (), values, directory, environ, headless=True, templates=templates
    )
