"""`[wake.input]`: idle wake through a file an interactive harness reads prompts from
(pager/launch/input_wake.py): how a manifest declares it, which launches get the file, and
what a knock appends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pager.implementations import Manifest, ManifestInvalid, Source, SourceKind, parse_text
from pager.implementations.launching import launch_spec
from pager.launch.input_wake import InputKnock
from pager.launch.wake_command import wake_values
from pager.launch.wake_prompt import wake_prompt
from pager.launch.wrapper import HarnessCommand, harness_command

SOURCE = Source(SourceKind.USER, "/cfg/implementations/x.toml", "x.toml")
BASE = (
    'id = "mine"\nname = "Mine"\nexecutable = "mine"\n'
    '[resume]\nother_subcommands = ["mcp"]\n'
    '[launch]\nargs = ["--url", "{mcp_url}"]\n'
)
INPUT = (
    '[wake.input]\nargs = ["--input-file", "{input_file}"]\n'
    'line = { type = "submit", text = "{prompt}" }\n'
)


def parse(text: str) -> Manifest:
    return parse_text(text, SOURCE)


def test_wake_input_is_read_with_its_templates() -> None:
    manifest = parse(BASE + INPUT)
    assert manifest.wake.input is not None
    assert manifest.wake.input.args == ("--input-file", "{input_file}")
    assert dict(manifest.wake.input.line) == {"type": "submit", "text": "{prompt}"}
    assert manifest.to_json()["wake"]["input"] == {
        "args": ["--input-file", "{input_file}"],
        "line": {"type": "submit", "text": "{prompt}"},
    }
    assert parse(BASE).wake.input is None


@pytest.mark.parametrize(
    ("section", "key", "needle"),
    [
        ('[wake.input]\nargs = ["--in"]\nline = {t = "x"}\n', "wake.input.args", "{input_file}"),
        ('[wake.input]\nargs = ["{input_file}"]\n', "wake.input.line", "expected a table"),
        ('[wake.input]\nargs = ["{input_file}"]\nline = {t = 1}\n', "wake.input.line.t",
         "expected a string"),
        ('[wake.input]\nargs = ["{input_file}"]\nline = {t = "{nope}"}\n', "wake.input.line.t",
         "unknown placeholder"),
        ('[wake]\ninput = "--input-file"\n', "wake.input", "expected a table"),
    ],
)  # fmt: skip
def test_wake_input_mistakes_name_the_key(section: str, key: str, needle: str) -> None:
    with pytest.raises(ManifestInvalid) as caught:
        parse(BASE + section)
    assert [(e.key, needle in e.message) for e in caught.value.errors] == [(key, True)]


def _command(tmp_path: Path, args: tuple[str, ...], *, headless: bool = False) -> HarnessCommand:
    values = wake_values(
        url="http://127.0.0.1:1", token="prl_x", token_file=str(tmp_path / "t"),
        agent_id="agt_a", address="a@ws", alias="a", session_id="ses_s",
        state_dir=str(tmp_path), conversation_key="c1", implementation="mine",
    )  # fmt: skip
    directory = tmp_path / "launch"
    directory.mkdir(mode=0o700)
    spec = launch_spec(parse(BASE + INPUT))
    return harness_command(spec, "/bin/mine", args, values, str(directory), {}, headless=headless)


def test_an_interactive_launch_gets_a_private_input_file_and_knocks_append_the_line(
    tmp_path: Path,
) -> None:
    """After the `[launch]` args: the options naming a new, empty 0600 file in the launch's
    private directory (another local user can neither read nor type into it). Each knock
    appends the manifest's line, one JSON object, its prompt the `[pager]` wake prompt."""
    command = _command(tmp_path, ("--model", "m"))
    knock = command.knock
    assert isinstance(knock, InputKnock)
    path = tmp_path / "launch" / "input.jsonl"
    assert command.argv == (
        "/bin/mine", "--url", "http://127.0.0.1:1/mcp", "--input-file", str(path), "--model", "m"
    )  # fmt: skip
    assert knock.path == path
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path.read_bytes() == b""
    knock.knock()
    knock.knock()
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"type": "submit", "text": wake_prompt("a@ws")}
    ] * 2
    assert lines[0].startswith('{"type": "submit", "text": "[pager] ')


@pytest.mark.parametrize(
    ("args", "headless"), [(("mcp", "list"), False), (("-p", "x"), True)], ids=["sub", "wake"]
)
def test_subcommands_and_wake_runs_get_no_input_file(
    tmp_path: Path, args: tuple[str, ...], headless: bool
) -> None:
    """A subcommand (which would reject the option) and a wake run (headless: nobody idles)
    get neither the option nor a file."""
    command = _command(tmp_path, args, headless=headless)
    assert command.knock is None
    assert command.argv == ("/bin/mine", "--url", "http://127.0.0.1:1/mcp", *args)
    assert "input.jsonl" not in os.listdir(tmp_path / "launch")


def test_a_knock_after_the_launch_is_gone_does_nothing(tmp_path: Path) -> None:
    """The launch's directory removed (the launch ended): a late `mail` event is ignored."""
    command = _command(tmp_path, ())
    knock = command.knock
    assert isinstance(knock, InputKnock)
    knock.path.unlink()
    knock.knock()
    assert not knock.path.exists()
