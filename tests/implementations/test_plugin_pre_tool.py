"""The reservations check inside OpenCode's (and Kilo's) plugin and Pi's extension, run by Node:
a launch's copy runs its PRE_TOOL command for the tools the manifest names, with the call as a
hook payload, and refuses the call with the hook's reason (OpenCode: throws; Pi: `block`);
other tools never start it, and a hook that fails lets the call through (fail open)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pager.implementations import discover
from pager.implementations.connectors.pre_tool import with_pre_tool

NO_USER_DIR = Path(__file__).parent / "no-user-manifests"  # the built-ins only
DENY = {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "held"}}

OPENCODE_DRIVER = r"""
const mod = await import(process.argv[2]);
const hooks = await mod.PagerPlugin({ client: { session: {} }, directory: process.cwd() });
const results = [];
for (const [tool, args] of JSON.parse(process.argv[3])) {
  try {
    await hooks["tool.execute.before"]({ tool, sessionID: "ses_1", callID: "c" }, { args });
    results.push(null);
  } catch (error) {
    results.push(String(error.message));
  }
}
console.log(JSON.stringify(results));
process.exit(0);
"""

PI_DRIVER = r"""
const mod = await import(process.argv[2]);
const handlers = {};
mod.default({ registerTool: () => {}, on: (event, handler) => { handlers[event] = handler; } });
const results = [];
for (const [toolName, input] of JSON.parse(process.argv[3])) {
  const answer = await handlers.tool_call({ type: "tool_call", toolCallId: "t", toolName, input },
                                          { cwd: process.cwd(), hasUI: false });
  results.push(answer?.block ? String(answer.reason) : null);
}
console.log(JSON.stringify(results));
process.exit(0);
"""

ASSETS = {
    "opencode": (("assets", "opencode", "pager.js"), OPENCODE_DRIVER, "filePath"),
    "kilo": (("assets", "opencode", "pager.js"), OPENCODE_DRIVER, "filePath"),
    "pi": (("assets", "pi", "pager.ts"), PI_DRIVER, "path"),
}


def _run(ident: str, hook: str, calls: list[tuple[str, dict[str, Any]]], tmp_path: Path) -> Any:
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    asset, driver, _ = ASSETS[ident]
    manifest = discover(entry_points=False, user_dir=NO_USER_DIR).get(ident).manifest
    source = resources.files("pager.implementations.connectors").joinpath(*asset).read_bytes()
    # The hook stand-in ends with `#`: the `--pre-tool SPEC EVENT` appended to it is a comment.
    module = tmp_path / "module.mjs"
    module.write_bytes(with_pre_tool(source, manifest, f"{hook} #"))
    script = tmp_path / "driver.mjs"
    script.write_text(driver)
    env = {"PATH": "/usr/bin:/bin", "PAGER_URL": "http://127.0.0.1:9", "PAGER_TOKEN": "prl_x"}
    done = subprocess.run(
        [node, str(script), module.as_uri(), json.dumps(calls)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("ident", sorted(ASSETS))
def test_a_denied_write_is_refused_and_a_read_never_asks(ident: str, tmp_path: Path) -> None:
    key = ASSETS[ident][2]
    payloads = tmp_path / "payloads.jsonl"
    saved = shlex.quote(str(payloads))
    hook = f"cat >> {saved}; echo >> {saved}; echo {shlex.quote(json.dumps(DENY))}"
    calls = [("write", {key: "src/x.py"}), ("read", {key: "src/x.py"})]
    results = _run(ident, hook, calls, tmp_path)
    assert results == ["held", None]
    [payload] = [json.loads(line) for line in payloads.read_text().splitlines() if line]
    assert payload["tool_name"] == "write"
    assert payload["tool_input"] == {key: "src/x.py"}
    assert payload["cwd"] == str(tmp_path)


@pytest.mark.parametrize("ident", sorted(ASSETS))
@pytest.mark.parametrize("hook", ["exit 1", "echo not json", "echo '{}'", "true"])
def test_the_call_goes_ahead_when_the_hook_fails_or_allows(
    ident: str, hook: str, tmp_path: Path
) -> None:
    key = ASSETS[ident][2]
    assert _run(ident, hook, [("write", {key: "src/x.py"})], tmp_path) == [None]


@pytest.mark.parametrize("ident", ["opencode", "kilo"])
def test_the_installed_plugin_checks_sessions_started_without_pager(
    ident: str, tmp_path: Path
) -> None:
    """`pager plugin install opencode|kilo` (and `pager setup`) write a plugin for sessions
    started without `pager`: it asks `pager hook --pre-tool` before a write, with the call as
    the payload, refuses with the hook's reason, never asks for a read, and lets the call
    through when the hook fails."""
    from pager.install.plugin import PluginContext
    from pager.install.plugins.kilo import plugin_files as kilo_files
    from pager.install.plugins.opencode import plugin_files

    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    manifest = discover(entry_points=False, user_dir=NO_USER_DIR).get(ident).manifest
    payloads = tmp_path / "payloads.jsonl"
    stand_in = tmp_path / "pager"  # the `pager` the plugin runs: records argv and payload
    stand_in.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(tmp_path / "argv.txt"))}\n'
        f"cat >> {shlex.quote(str(payloads))}; echo >> {shlex.quote(str(payloads))}\n"
        f"echo {shlex.quote(json.dumps(DENY))}\n"
    )
    stand_in.chmod(0o755)
    build = plugin_files if ident == "opencode" else kilo_files
    context = PluginContext(home=tmp_path, pager=(str(stand_in),), environ={})
    (planned,) = build(manifest, context).files
    module = tmp_path / "plugin.mjs"
    module.write_bytes(planned.content)
    script = tmp_path / "driver.mjs"
    script.write_text(OPENCODE_DRIVER)  # the installed plugin exports the same `PagerPlugin`
    calls = [("write", {"filePath": "src/x.py"}), ("read", {"filePath": "src/x.py"})]
    done = subprocess.run(
        [node, str(script), module.as_uri(), json.dumps(calls)],
        env={"PATH": "/usr/bin:/bin"},  # no PAGER_TOKEN: a session started without `pager`
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["held", None]
    [payload] = [json.loads(line) for line in payloads.read_text().splitlines() if line]
    assert (payload["tool_name"], payload["tool_input"]) == ("write", {"filePath": "src/x.py"})
    argv = (tmp_path / "argv.txt").read_text().split()
    assert argv[:4] == ["hook", "--implementation", ident, "--pre-tool"]

    stand_in.write_text("#!/bin/sh\nexit 1\n")  # the hook fails: the write goes ahead
    done = subprocess.run(
        [node, str(script), module.as_uri(), json.dumps(calls[:1])],
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [None], done.stderr
