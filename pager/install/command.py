"""The command line that runs this Pager from files written for hosts (SPEC §3).

Hosts run hook and MCP commands without the user's shell (GUI apps do not inherit its PATH),
on every prompt, so the command is absolute and never goes through a shim or a slow launcher:

- by default the `pager` console script of the running interpreter's installation, when it is
  this Pager's (pager/launch/own_pager.py), else this interpreter with `-m pager`;
- `PAGER_PACKAGE_ROOT` (a stable path to the installation that survives upgrades, holding
  `bin/pager`) names the entry point through that path instead;
- `PAGER_PYTHON` (an absolute interpreter path) runs that entry point with that interpreter.

Both variables are validated: a value that does not work is an error naming what to fix, never
a file that breaks later inside a host.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pager.implementations.manifest import Manifest
from pager.install.files import InstallError
from pager.launch.own_pager import console_script

#: How long `PAGER_PYTHON` gets to prove it can import Pager.
PROBE_TIMEOUT = 30.0


def pager_argv(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The argv prefix that runs this Pager: `(entry,)`, `(python, entry)` or
    `(python, "-m", "pager")`."""
    env = os.environ if environ is None else environ
    entry = _entry_point(env)
    python = env.get("PAGER_PYTHON")
    if python:
        _validate_python(python)
        return (python, entry) if entry else (python, "-m", "pager")
    return (entry,) if entry else (sys.executable, "-m", "pager")


def hook_command(pager: Sequence[str], manifest: Manifest, event: str) -> str:
    """The shell command a harness runs for `event`: `pager hook` in the manifest's format."""
    return shlex.join(
        [
            *pager,
            "hook",
            "--implementation",
            manifest.id,
            "--format",
            manifest.hooks.output,
            "--max-chars",
            str(manifest.hooks.max_chars),
            event,
        ]
    )


def hook_commands(pager: Sequence[str], manifest: Manifest) -> dict[str, str]:
    """Every hook the harness runs: event -> `pager hook` for waiting mail on the manifest's
    events, and the reservations check on its `[hooks.pre_tool]` event."""
    commands = {event: hook_command(pager, manifest, event) for event in manifest.hooks.events}
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:
        base = shlex.join([*pager, "hook", "--implementation", manifest.id])
        commands.setdefault(pre_tool.event, f"{base} {pre_tool.arguments()}")
    return commands


def mcp_server(pager: Sequence[str], manifest: Manifest) -> dict[str, object]:
    """A stdio MCP server entry (`command` + `args`) that runs `pager mcp` for `manifest`."""
    return {"command": pager[0], "args": [*pager[1:], "mcp", "--implementation", manifest.id]}


def _entry_point(env: Mapping[str, str]) -> str | None:
    root = env.get("PAGER_PACKAGE_ROOT")
    if root:
        entry = Path(root) / "bin" / "pager"
        if not os.path.isabs(root) or not _executable(entry):
            raise InstallError(
                f"PAGER_PACKAGE_ROOT={root} has no executable bin/pager; set it to the stable"
                " path of Pager's installation (the directory holding bin/pager) or unset it"
            )
        return str(entry)
    script = console_script()  # verified as this Pager's: /usr/bin/pager may be `less`
    return None if script is None else str(script)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _validate_python(python: str) -> None:
    advice = f"point it at the Python of Pager's installation (this one is {sys.executable})"
    if not os.path.isabs(python) or not _executable(Path(python)):
        raise InstallError(
            f"PAGER_PYTHON={python} is not an absolute path to an executable; {advice}"
        )
    probe = "import sys, pager.cli; raise SystemExit(0 if sys.version_info >= (3, 11) else 3)"
    try:
        result = subprocess.run(
            [python, "-I", "-c", probe],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"PAGER_PYTHON={python} could not be run ({exc}); {advice}") from None
    if result.returncode != 0:
        raise InstallError(f"PAGER_PYTHON={python} cannot import Pager 3.11+; {advice}")
