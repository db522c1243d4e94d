"""What the `m` menu offers: the Pager skill and each harness's plugin, installed by running
`pager skill install` / `pager plugin install HARNESS` (with `--json`) as a subprocess, so the
TUI reports exactly what the command line would do. No Textual here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

INSTALL_TIMEOUT = 300.0  # `npx skills add` may download the installer first


@dataclass(frozen=True)
class InstallChoice:
    key: str
    label: str
    args: tuple[str, ...]  # after `pager`
    available: bool = True
    note: str = ""

    @property
    def command(self) -> str:
        return "pager " + " ".join(self.args)


@dataclass
class InstallResult:
    choice: InstallChoice
    exit_status: int
    report: dict[str, Any] | None
    output: str  # what the command printed that is not its JSON report
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def install_choices() -> list[InstallChoice]:
    """The skill (through the skills installer when `npx` is on PATH, else as files), the skill
    as files, then every harness the registry says offers a plugin."""
    from pager.implementations.registry import discover
    from pager.install import plugin, skill

    npx = skill.find_npx() is not None
    choices = [
        InstallChoice(
            "skill",
            "Pager skill" + (" (via npx skills)" if npx else " (SKILL.md files)"),
            ("skill", "install", "--json"),
        ),
    ]
    if npx:
        choices.append(
            InstallChoice(
                "skill-files",
                "Pager skill as files (no npx)",
                ("skill", "install", "--no-npx", "--json"),
            )
        )
    for impl in plugin.offering(discover()):
        available = plugin.find_builder(impl.manifest) is not None
        choices.append(
            InstallChoice(
                f"plugin-{impl.id}",
                f"{impl.name} plugin",
                ("plugin", "install", impl.id, "--json"),
                available,
                "" if available else "not yet in this version",
            )
        )
    return choices


def run_install(
    choice: InstallChoice,
    *,
    pager: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = INSTALL_TIMEOUT,
) -> InstallResult:
    """Run the install command; never raises for a failed install (the result says so)."""
    argv = [*(pager or (sys.executable, "-m", "pager")), *choice.args]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=dict(os.environ if env is None else env),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        result = InstallResult(choice, 1, None, f"{choice.command} did not finish in {timeout}s")
    except OSError as exc:
        result = InstallResult(choice, 1, None, f"could not run {choice.command}: {exc}")
    else:
        report, rest = _split_report(done.stdout)
        output = "\n".join(part for part in (rest.strip(), done.stderr.strip()) if part)
        result = InstallResult(choice, done.returncode, report, output)
    result.lines = describe(result)
    return result


def _split_report(stdout: str) -> tuple[dict[str, Any] | None, str]:
    """The JSON report printed last, and whatever came before it (e.g. npx's own output)."""
    start = 0 if stdout.startswith("{") else stdout.rfind("\n{") + 1
    if stdout.startswith("{") or start > 0:
        try:
            report = json.loads(stdout[start:])
        except ValueError:
            return None, stdout
        if isinstance(report, dict):
            return report, stdout[:start]
    return None, stdout


def describe(result: InstallResult) -> list[str]:
    """The result as lines for people: outcome, files and their fate, steps left, notes."""
    verdict = "done" if result.ok else f"failed (exit status {result.exit_status})"
    lines = [f"{result.choice.command}: {verdict}"]
    report = result.report or {}
    if report.get("location"):
        lines.append(f"plugin in {report['location']}")
    files = report.get("files") or []
    if files:
        lines.append("files:")
        for item in files:
            reason = f"  ({item['reason']})" if item.get("reason") else ""
            suffix = "/" if item.get("kind") == "directory" else ""
            lines.append(f"  {item.get('status', '?'):<9}  {item.get('path', '?')}{suffix}{reason}")
    installer = report.get("skills_installer")
    if isinstance(installer, dict):
        command = " ".join(str(part) for part in installer.get("command") or [])
        lines.append(f"ran: {command} (exit status {installer.get('exit_status')})")
    steps = report.get("next_steps") or []
    if steps:
        lines.append("still to do by hand:")
        lines += [f"  {step}" for step in steps]
    lines += [f"note: {note}" for note in report.get("notes") or []]
    if result.output:
        lines += ["", *result.output.splitlines()]
    return lines
