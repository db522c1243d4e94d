"""OpenCode's and Kilo CLI's inline configuration (`OPENCODE_CONFIG_CONTENT`,
`KILO_CONFIG_CONTENT`): the user's own is kept, an enclosing launch's plugin is replaced, and
each harness reads only its own variable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pager.implementations import discover
from pager.implementations.launching import launch_spec
from pager.launch.wrapper import LaunchContext

NO_USER_DIR = Path(__file__).parent / "no-user-manifests"  # the built-ins only
HARNESSES = {
    "opencode": ("OPENCODE_CONFIG_CONTENT", "pager-opencode.js"),
    "kilo": ("KILO_CONFIG_CONTENT", "pager-kilo.js"),
}


def config_for(ident: str, directory: Path, environ: dict[str, str]) -> dict[str, Any]:
    directory.mkdir()
    spec = launch_spec(discover(entry_points=False, user_dir=NO_USER_DIR).get(ident).manifest)
    values = {"mcp_url": "http://127.0.0.1:4555/mcp", "hook_command": "/venv/bin/pager hook"}
    filled = spec.prepare(LaunchContext(str(directory), values, environ))
    config: dict[str, Any] = json.loads(filled["config_content"])
    return config


@pytest.mark.parametrize("ident", sorted(HARNESSES))
def test_the_users_inline_config_is_kept_and_an_enclosing_launchs_plugin_replaced(
    ident: str, tmp_path: Path
) -> None:
    variable, plugin = HARNESSES[ident]
    users = {
        "mcp": {"theirs": {"type": "local", "command": ["x"]}},
        "plugin": ["their-plugin", f"file:///tmp/pager-launch-outer/{plugin}"],
        "model": "theirs/model",
    }
    other = "KILO_CONFIG_CONTENT" if ident == "opencode" else "OPENCODE_CONFIG_CONTENT"
    environ = {variable: json.dumps(users), other: json.dumps({"model": "the other harness's"})}
    config = config_for(ident, tmp_path / "launch", environ)
    assert config["model"] == "theirs/model"  # its own variable, not the other harness's
    assert set(config["mcp"]) == {"theirs", "pager"}
    assert config["plugin"] == ["their-plugin", (tmp_path / "launch" / plugin).as_uri()]
    header = config["mcp"]["pager"]["headers"]["Authorization"]
    assert header == "Bearer {env:PAGER_TOKEN}"  # the credential stays in the environment


@pytest.mark.parametrize("ident", sorted(HARNESSES))
def test_a_malformed_inline_config_of_the_user_is_replaced(ident: str, tmp_path: Path) -> None:
    variable, plugin = HARNESSES[ident]
    config = config_for(ident, tmp_path / "launch", {variable: "[not an object"})
    assert list(config["mcp"]) == ["pager"]
    assert config["plugin"] == [(tmp_path / "launch" / plugin).as_uri()]
