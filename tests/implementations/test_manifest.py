"""Manifest validation: known keys type-checked, unknown keys kept, errors name file and key."""

from __future__ import annotations

import pytest

from pager.cli import COMMANDS, OWN_PARSER
from pager.implementations import (
    DEFAULT_CONNECTOR,
    RESERVED_IDS,
    Manifest,
    ManifestInvalid,
    Source,
    SourceKind,
    TemplateError,
    parse_text,
    validate,
)
from pager.implementations.manifest import Detect

SOURCE = Source(SourceKind.USER, "/cfg/implementations/x.toml", "x.toml")
MINIMAL = 'id = "mine"\nname = "Mine"\nexecutable = "mine"\n'


def parse(text: str) -> Manifest:
    return parse_text(text, SOURCE)


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ManifestInvalid) as caught:
        parse(text)
    return [(error.key, error.message) for error in caught.value.errors]


def test_parse_minimal_manifest_gets_defaults() -> None:
    """Only id, name and executable are required; the rest has documented defaults."""
    manifest = parse(MINIMAL)
    assert (manifest.id, manifest.name, manifest.executable) == ("mine", "Mine", "mine")
    assert manifest.connector == DEFAULT_CONNECTOR
    assert manifest.capabilities == ()
    assert manifest.launch.args == ()
    assert dict(manifest.launch.env) == {}
    assert manifest.launch.stop_leftovers is False
    assert manifest.resume.flags == ()
    assert manifest.resume.choose_flag is None
    assert (manifest.hooks.events, manifest.hooks.output, manifest.hooks.max_chars) == (
        (),
        "text",
        9000,
    )
    assert manifest.skill.dirs == ()
    assert manifest.plugin.supported is False
    assert dict(manifest.extra) == {}


def test_parse_full_manifest_reads_every_key() -> None:
    """Every key of the documented format lands in its typed field."""
    manifest = parse(
        MINIMAL
        + """
description = "d"
capabilities = ["mcp-http", "hooks", "mcp-http"]
connector = "mypkg.connector"
[launch]
args = ["--mcp-config", "{mcp_config_file}"]
env = { PAGER_TOKEN = "{token}", MY_PORT = "{free_port}" }
stop_leftovers = true
[resume]
flags = ["--resume", "-r"]
continue_flags = ["--continue"]
choose_flag = "--session-id"
picker_flags = ["--pick"]
subcommand = "resume"
other_subcommands = ["mcp", "config"]
[hooks]
events = ["SessionStart", "UserPromptSubmit"]
output = "claude"
max_chars = 500
[skill]
dirs = ["~/.mine/skills"]
[plugin]
supported = true
"""
    )
    assert manifest.description == "d"
    assert manifest.capabilities == ("mcp-http", "hooks")  # duplicates dropped, order kept
    assert manifest.connector == "mypkg.connector"
    assert manifest.launch.args == ("--mcp-config", "{mcp_config_file}")
    assert dict(manifest.launch.env) == {"PAGER_TOKEN": "{token}", "MY_PORT": "{free_port}"}
    assert manifest.launch.stop_leftovers is True
    assert manifest.resume.flags == ("--resume", "-r")
    assert manifest.resume.continue_flags == ("--continue",)
    assert manifest.resume.choose_flag == "--session-id"
    assert manifest.resume.picker_flags == ("--pick",)
    assert manifest.resume.subcommand == "resume"
    assert manifest.resume.other_subcommands == ("mcp", "config")
    assert manifest.hooks.events == ("SessionStart", "UserPromptSubmit")
    assert (manifest.hooks.output, manifest.hooks.max_chars) == ("claude", 500)
    assert manifest.skill.dirs == ("~/.mine/skills",)
    assert manifest.plugin.supported is True
    assert manifest.warnings == ()


def test_parse_unknown_keys_are_kept_in_place() -> None:
    """Unknown keys anywhere go to `extra`, mirroring where they were; it is read-only."""
    manifest = parse(
        MINIMAL
        + """
homepage = "https://example.org"
[launch]
args = ["-v"]
cwd = "/tmp"
[wake]
knock = ["mine", "knock", "{agent_id}"]
[wake.limits]
seconds = 5
"""
    )
    assert manifest.extra["homepage"] == "https://example.org"
    assert manifest.extra["launch"] == {"cwd": "/tmp"}
    assert manifest.extra["wake"]["knock"] == ("mine", "knock", "{agent_id}")
    assert manifest.extra["wake"]["limits"]["seconds"] == 5
    assert manifest.launch.args == ("-v",)
    with pytest.raises(TypeError):
        manifest.extra["homepage"] = "changed"  # type: ignore[index]
    json_extra = manifest.to_json()["extra"]
    assert json_extra["wake"] == {
        "knock": ["mine", "knock", "{agent_id}"],
        "limits": {"seconds": 5},
    }


def test_parse_likely_typo_is_kept_with_a_warning() -> None:
    """An unknown key close to a known one is kept as metadata, with a warning naming both."""
    manifest = parse(MINIMAL + '[launch]\narg = ["x"]\n')
    assert manifest.extra["launch"] == {"arg": ("x",)}
    assert manifest.warnings == (
        "launch.arg is not a key Pager knows (did you mean launch.args?); kept as metadata",
    )


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ('name = "N"\nexecutable = "x"\n', "id", "missing (required)"),
        ('id = 7\nname = "N"\nexecutable = "x"\n', "id", "expected a string, got an integer (7)"),
        ('id = "Bad_Id"\nname = "N"\nexecutable = "x"\n', "id", "'Bad_Id' is not a valid id"),
        ('id = "9lives"\nname = "N"\nexecutable = "x"\n', "id", "is not a valid id"),
        ('id = "' + "a" * 33 + '"\nname = "N"\nexecutable = "x"\n', "id", "is not a valid id"),
        ('id = "status"\nname = "N"\nexecutable = "x"\n', "id", "'status' is a pager command"),
        ('id = "mine"\nexecutable = "x"\n', "name", "missing (required)"),
        ('id = "mine"\nname = ""\nexecutable = "x"\n', "name", "must not be empty"),
        ('id = "mine"\nname = "N"\n', "executable", "missing (required)"),
        ('id = "mine"\nname = "N"\nexecutable = ["x"]\n', "executable", "expected a string"),
        (MINIMAL + "description = 3\n", "description", "expected a string"),
        (MINIMAL + 'capabilities = "hooks"\n', "capabilities", "expected an array of strings"),
        (MINIMAL + 'capabilities = ["ok", 2]\n', "capabilities[1]", "expected a string"),
        (MINIMAL + 'capabilities = ["Has Space"]\n', "capabilities[0]", "not a capability"),
        (MINIMAL + 'connector = "not a module"\n', "connector", "is not a module path"),
        (MINIMAL + 'launch = "x"\n', "launch", "expected a table, got a string"),
        (MINIMAL + '[launch]\nargs = "x"\n', "launch.args", "expected an array of strings"),
        (
            MINIMAL + '[launch]\nargs = ["a", "b", "{tokn}"]\n',
            "launch.args[2]",
            "unknown placeholder {tokn} (did you mean {token}?); known: {address}, {agent_id}",
        ),
        (MINIMAL + '[launch]\nargs = ["{"]\n', "launch.args[0]", "unbalanced '{'"),
        (MINIMAL + "[launch]\nenv = { X = 1 }\n", "launch.env.X", "expected a string"),
        (MINIMAL + '[launch]\nenv = { X = "{nope}" }\n', "launch.env.X", "unknown placeholder"),
        (
            MINIMAL + '[launch]\nenv = { "A B" = "x" }\n',
            'launch.env."A B"',
            "not an environment variable name",
        ),
        (MINIMAL + '[launch]\nenv = ["x"]\n', "launch.env", "expected a table of strings"),
        ('id = "mine"\nname = "N"\nexecutable = "{nope}"\n', "executable", "unknown placeholder"),
        (MINIMAL + '[resume]\nflags = ["resume"]\n', "resume.flags[0]", "is not an option"),
        (MINIMAL + '[resume]\nflags = ["--a=b"]\n', "resume.flags[0]", "is not an option"),
        (MINIMAL + '[resume]\nchoose_flag = "id"\n', "resume.choose_flag", "is not an option"),
        (MINIMAL + '[resume]\nsubcommand = "--x"\n', "resume.subcommand", "not a subcommand"),
        (
            MINIMAL + '[resume]\nother_subcommands = ["mcp", "--help"]\n',
            "resume.other_subcommands[1]",
            "starts no conversation",
        ),
        (
            MINIMAL + '[resume]\nsubcommand = "resume"\nother_subcommands = ["resume"]\n',
            "resume.other_subcommands[0]",
            "starts no conversation",
        ),
        (
            MINIMAL + '[resume]\nflags = ["-r"]\ncontinue_flags = ["-r"]\n',
            "resume.continue_flags[0]",
            "-r is also in resume.flags[0]",
        ),
        (MINIMAL + '[hooks]\noutput = "xml"\n', "hooks.output", "'xml' is not one of claude"),
        (MINIMAL + "[hooks]\nmax_chars = 0\n", "hooks.max_chars", "positive integer"),
        (MINIMAL + "[hooks]\nmax_chars = true\n", "hooks.max_chars", "positive integer"),
        (MINIMAL + '[hooks]\nevents = [""]\n', "hooks.events[0]", "must not be empty"),
        (MINIMAL + '[hooks]\nprompt_events = "x"\n', "hooks.prompt_events", "an array of strings"),
        (MINIMAL + '[skill]\ndirs = "~/x"\n', "skill.dirs", "expected an array of strings"),
        (MINIMAL + '[plugin]\nsupported = "yes"\n', "plugin.supported", "expected true or false"),
        (MINIMAL + "[launch]\nstop_leftovers = 1\n", "launch.stop_leftovers", "true or false"),
        (MINIMAL + '[detect]\nexecutables = "x"\n', "detect.executables", "an array of strings"),
        (
            MINIMAL + '[detect]\nexecutables = ["/bin/x"]\n',
            "detect.executables[0]",
            "not a program",
        ),
        (MINIMAL + '[detect]\npaths = ["x", "~/.x"]\n', "detect.paths[0]", "not a path starting"),
        (
            MINIMAL + '[detect]\npaths = ["$HOME/.x"]\n',
            "detect.paths[0]",
            "'~/', '$XDG_CONFIG_HOME/'",
        ),
    ],
)
def test_parse_refuses_wrong_values_naming_the_key(text: str, key: str, message: str) -> None:
    """Each defect gives exactly one error, at the key path, saying what is wrong."""
    found = problems(text)
    assert len(found) == 1, found
    assert found[0][0] == key
    assert message in found[0][1]


def test_detect_is_read_and_defaults_to_nothing() -> None:
    assert parse(MINIMAL).detect == Detect()
    found = parse(MINIMAL + '[detect]\nexecutables = ["mine"]\npaths = ["$XDG_DATA_HOME/mine"]\n')
    assert found.detect == Detect(("mine",), ("$XDG_DATA_HOME/mine",))
    assert found.to_json()["detect"] == {"executables": ["mine"], "paths": ["$XDG_DATA_HOME/mine"]}


def test_hooks_prompt_events_are_kept_apart_from_the_delivering_events() -> None:
    """`[hooks] prompt_events`: events whose output the harness ignores, where `pager hook`
    only reports a typed prompt (duplicates dropped, listed in the JSON)."""
    found = parse(MINIMAL + '[hooks]\nevents = ["Post"]\nprompt_events = ["Start", "Start"]\n')
    assert (found.hooks.events, found.hooks.prompt_events) == (("Post",), ("Start",))
    assert found.to_json()["hooks"]["prompt_events"] == ["Start"]


def test_parse_collects_every_problem_of_a_manifest() -> None:
    """All defects of one file are reported together, so one edit can fix them all."""
    found = problems('id = "Bad"\n[hooks]\noutput = "x"\nmax_chars = -1\n')
    assert [key for key, _ in found] == [
        "id",
        "name",
        "executable",
        "hooks.output",
        "hooks.max_chars",
    ]


def test_parse_bad_toml_names_the_file_and_position() -> None:
    """TOML that does not parse is one error for the whole file, with line and column."""
    with pytest.raises(ManifestInvalid) as caught:
        parse('id = "x"\nname = \n')
    (error,) = caught.value.errors
    assert error.key == ""
    assert str(error).startswith("/cfg/implementations/x.toml: not valid TOML: ")
    assert "line 2" in str(error)


def test_error_text_names_file_and_key_path() -> None:
    """The one-line error reads `<file>: <key path>: <problem>`."""
    with pytest.raises(ManifestInvalid) as caught:
        parse(MINIMAL + '[launch]\nargs = ["a", "b", "{tokn}"]\n')
    assert str(caught.value.errors[0]).startswith(
        "/cfg/implementations/x.toml: launch.args[2]: unknown placeholder {tokn}"
    )


def test_validate_accepts_python_tables_and_refuses_non_string_keys() -> None:
    """Dicts from entry points may use tuples for arrays; non-string keys are refused."""
    manifest = validate({"id": "p", "name": "P", "executable": "p", "capabilities": ("a",)}, SOURCE)
    assert manifest.capabilities == ("a",)
    with pytest.raises(ManifestInvalid) as caught:
        validate({"id": "p", "name": "P", "executable": "p", "launch": {1: "x"}}, SOURCE)
    assert [error.key for error in caught.value.errors] == ["launch"]


def test_reserved_ids_cover_every_cli_command() -> None:
    """Every command of the CLI is a reserved id (no `pager <impl>` clash)."""
    assert {*COMMANDS, *OWN_PARSER} <= RESERVED_IDS


def test_argv_puts_launch_args_before_the_user_args() -> None:
    """The command line is the executable, the rendered launch args, then the user's args."""
    manifest = parse(MINIMAL + '[launch]\nargs = ["--url", "{url}"]\nenv = { T = "{token}" }\n')
    values = {"url": "http://h:1", "token": "s"}
    assert manifest.argv(["-x", "y"], values) == ["mine", "--url", "http://h:1", "-x", "y"]
    assert manifest.launch.render_env(values) == {"T": "s"}


def test_argv_from_args_takes_the_first_user_argument_as_program() -> None:
    """`executable = "{argv0}"`: the first user argument is the program; none is an error."""
    manifest = parse(
        'id = "anything"\nname = "A"\nexecutable = "{argv0}"\n[launch]\nargs = ["-q"]\n'
    )
    assert manifest.executable_from_args
    assert manifest.argv(["make", "test"], {}) == ["make", "-q", "test"]
    with pytest.raises(TemplateError, match="name the program"):
        manifest.argv([], {})
