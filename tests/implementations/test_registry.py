"""Discovery: built-ins, the user's manifests, entry points; precedence; broken manifests."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pager.implementations import (
    ENTRY_POINT_GROUP,
    ImplementationRegistry,
    SourceKind,
    UnknownImplementation,
    default_user_dir,
    discover,
)
from tests.implementations import entry_targets

BUILTINS = [
    "claude",
    "cline",
    "codex",
    "copilot",
    "gemini",
    "kilo",
    "opencode",
    "pi",
    "qwen",
    "shell",
]
TARGETS = "tests.implementations.entry_targets"


def entry_point(name: str, attr: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"{TARGETS}:{attr}", group=ENTRY_POINT_GROUP)


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def manifest(ident: str, name: str = "Mine", extra: str = "") -> str:
    return f'id = "{ident}"\nname = "{name}"\nexecutable = "{ident}-bin"\n{extra}'


def only_builtins(tmp_path: Path) -> ImplementationRegistry:
    return discover(user_dir=tmp_path / "none", entry_points=False)


def test_discover_finds_the_builtins(tmp_path: Path) -> None:
    """The package ships claude, codex, opencode, pi, gemini, qwen and shell, all valid."""
    registry = only_builtins(tmp_path)
    assert registry.errors() == []
    assert registry.ids() == BUILTINS
    assert [impl.id for impl in registry.all()] == BUILTINS
    for impl in registry.all():
        assert impl.source.kind is SourceKind.BUILTIN
        assert impl.source.label == "builtin"
        assert impl.source.name == f"{impl.id}.toml"
        assert impl.overrides == ()


def test_builtin_claude_launch_resume_and_hooks(tmp_path: Path) -> None:
    """Claude: MCP config and settings per launch, resume selectors, hooks in Claude's format."""
    claude = only_builtins(tmp_path).get("claude").manifest
    assert claude.executable == "claude"
    assert claude.launch.args == (
        "--mcp-config",
        "{mcp_config_file}",
        "--settings",
        "{settings_file}",
    )
    assert claude.resume.flags == ("--resume", "-r")
    assert claude.resume.continue_flags == ("--continue", "-c")
    assert claude.resume.choose_flag == "--session-id"
    assert claude.hooks.events == ("SessionStart", "UserPromptSubmit")
    assert (claude.hooks.output, claude.hooks.max_chars) == ("claude", 9000)
    assert set(claude.capabilities) == {"mcp-http", "hooks", "idle-wake", "plugin", "skill"}
    assert claude.skill.dirs == ("~/.claude/skills",)
    assert claude.plugin.supported


def test_builtin_codex_passes_mcp_url_and_token_variable(tmp_path: Path) -> None:
    """Codex: three `-c` overrides (URL, token variable, the connector's hooks), PAGER_TOKEN,
    a `resume` subcommand."""
    codex = only_builtins(tmp_path).get("codex").manifest
    values = {
        "mcp_url": "http://127.0.0.1:9/mcp",
        "token": "tok",
        "url": "u",
        "agent_id": "a",
        "address": "x@y",
        "config_content": "hooks={}",
    }
    assert codex.argv(["resume", "T1"], values) == [
        "codex",
        "-c",
        'mcp_servers.pager.url="http://127.0.0.1:9/mcp"',
        "-c",
        'mcp_servers.pager.bearer_token_env_var="PAGER_TOKEN"',
        "-c",
        "hooks={}",
        "resume",
        "T1",
    ]
    assert codex.launch.render_env(values)["PAGER_TOKEN"] == "tok"
    assert (codex.resume.subcommand, codex.resume.continue_flags) == ("resume", ("--last",))
    assert codex.resume.choose_flag is None
    assert codex.hooks.output == "codex"


def test_builtin_opencode_pi_gemini_shell(tmp_path: Path) -> None:
    """The other built-ins carry the wiring and resume selectors of HARNESSES.md."""
    registry = only_builtins(tmp_path)
    opencode = registry.get("opencode").manifest
    assert opencode.launch.env["OPENCODE_CONFIG_CONTENT"] == "{config_content}"
    assert (opencode.resume.flags, opencode.resume.continue_flags) == (
        ("--session", "-s"),
        ("--continue", "-c"),
    )
    pi = registry.get("pi").manifest
    assert "extension" in pi.capabilities
    assert pi.launch.args == ("-e", "{extension_path}")
    assert pi.resume.flags == ("--session",)
    assert pi.resume.picker_flags == ("--resume", "-r")
    gemini = registry.get("gemini").manifest
    # A per-launch Gemini home (Gemini CLI ignores a system settings file root does not own).
    assert gemini.launch.env["GEMINI_CLI_HOME"] == "{config_dir}"
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in gemini.launch.env
    assert gemini.resume.flags == ("--resume", "-r")
    assert (gemini.hooks.output, gemini.hooks.max_chars) == ("gemini", 9000)
    shell = registry.get("shell").manifest
    assert shell.executable_from_args
    assert shell.capabilities == ("mcp-http",)
    assert set(shell.launch.env) == {"PAGER_URL", "PAGER_TOKEN", "PAGER_AGENT_ID", "PAGER_ADDRESS"}
    assert shell.argv(["./script.sh", "-v"], {}) == ["./script.sh", "-v"]


def test_user_manifest_appears_with_its_file_as_source(tmp_path: Path) -> None:
    """A manifest in the user directory is listed with its path; the built-ins stay."""
    path = write(tmp_path, "mine.toml", manifest("mine", extra='capabilities = ["mcp-stdio"]\n'))
    registry = discover(user_dir=tmp_path, entry_points=False)
    assert registry.errors() == []
    mine = registry.get("mine")
    assert mine.source.kind is SourceKind.USER
    assert mine.source.location == str(path)
    assert registry.ids() == sorted([*BUILTINS, "mine"])
    assert registry.user_dir == tmp_path


def test_user_manifest_overrides_a_builtin_by_id(tmp_path: Path) -> None:
    """A user manifest with a built-in's id replaces it, and records what it replaced."""
    write(tmp_path, "claude.toml", manifest("claude", name="My Claude"))
    claude = discover(user_dir=tmp_path, entry_points=False).get("claude")
    assert claude.name == "My Claude"
    assert claude.source.kind is SourceKind.USER
    assert [source.kind for source in claude.overrides] == [SourceKind.BUILTIN]
    assert claude.manifest.launch.args == ()  # the whole manifest is replaced, not merged


def test_entry_points_in_every_supported_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point may load to a dict, TOML text, a path, a Traversable, or a callable."""
    path = write(tmp_path / "elsewhere", "p.toml", manifest("from-path"))
    monkeypatch.setattr(entry_targets, "AS_PATH", path)
    points = [
        entry_point("from-dict", "AS_DICT"),
        entry_point("from-text", "AS_TEXT"),
        entry_point("from-path", "AS_PATH"),
        entry_point("shell", "AS_TRAVERSABLE"),
        entry_point("from-callable", "as_callable"),
    ]
    registry = discover(user_dir=tmp_path / "none", entry_points=points)
    assert registry.errors() == []
    for ident in ["from-dict", "from-text", "from-path", "from-callable", "shell"]:
        impl = registry.get(ident)
        assert impl.source.kind is SourceKind.ENTRY_POINT
        assert impl.source.name == ident
    from_dict = registry.get("from-dict")
    assert from_dict.capabilities == ("mcp-http", "push")
    assert from_dict.extra["vendor"] == {"team": "tools"}
    assert from_dict.source.label == "entry point from-dict"
    assert [source.kind for source in registry.get("shell").overrides] == [SourceKind.BUILTIN]


def test_entry_point_overrides_user_manifest(tmp_path: Path) -> None:
    """Precedence is builtin < user < entry point; the winner lists everything it replaced."""
    write(tmp_path, "shell.toml", manifest("shell", name="User shell"))
    registry = discover(user_dir=tmp_path, entry_points=[entry_point("shell", "AS_TRAVERSABLE")])
    shell = registry.get("shell")
    assert shell.source.kind is SourceKind.ENTRY_POINT
    assert [source.kind for source in shell.overrides] == [SourceKind.BUILTIN, SourceKind.USER]


def test_installed_entry_points_are_read_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `entry_points=True` the installed group `pager.implementations` is read."""
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return [entry_point("from-text", "AS_TEXT")]

    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)
    registry = discover(user_dir=tmp_path)
    assert asked == [ENTRY_POINT_GROUP]
    assert registry.get("from-text").source.kind is SourceKind.ENTRY_POINT


@pytest.mark.parametrize(
    ("name", "text", "key", "message"),
    [
        ("badtoml.toml", 'id = "x"\nname = \n', "", "not valid TOML"),
        ("noid.toml", 'name = "N"\nexecutable = "x"\n', "id", "missing (required)"),
        (
            "wrongtype.toml",
            manifest("wrongtype", extra="capabilities = 5\n"),
            "capabilities",
            "expected an array of strings, got an integer (5)",
        ),
        (
            "placeholder.toml",
            manifest("placeholder", extra='[launch]\nargs = ["a", "b", "{tokn}"]\n'),
            "launch.args[2]",
            "unknown placeholder {tokn}",
        ),
        ("clash.toml", manifest("status"), "id", "'status' is a pager command"),
        ("badchars.toml", manifest("My_Harness"), "id", "is not a valid id"),
        ("binary.toml", "\udcff", "", "not UTF-8"),
    ],
)
def test_broken_user_manifest_is_one_error_and_the_rest_works(
    tmp_path: Path, name: str, text: str, key: str, message: str
) -> None:
    """A broken manifest is skipped with one error naming its file and key; others still load."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    write(tmp_path, "good.toml", manifest("good"))
    registry = discover(user_dir=tmp_path, entry_points=False)
    (error,) = registry.errors()
    assert error.source.location == str(path)
    assert error.key == key
    assert message in error.message
    assert str(error).startswith(f"{path}: {key + ': ' if key else ''}")
    assert registry.ids() == sorted([*BUILTINS, "good"])


def test_broken_override_leaves_the_builtin_in_place(tmp_path: Path) -> None:
    """A broken user manifest for a built-in's id does not remove the built-in."""
    write(tmp_path, "claude.toml", manifest("claude", extra='[hooks]\noutput = "xml"\n'))
    registry = discover(user_dir=tmp_path, entry_points=False)
    assert [error.key for error in registry.errors()] == ["hooks.output"]
    assert registry.get("claude").source.kind is SourceKind.BUILTIN


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("raises", "could not be loaded: RuntimeError: the package is broken"),
        ("NOT_A_MANIFEST", "loaded int; an entry point of 'pager.implementations' must give"),
        ("WITH_INT_KEYS", "every key of a table must be a string"),
        ("MISSING_ATTRIBUTE", "could not be loaded: AttributeError"),
    ],
)
def test_broken_entry_point_is_one_error_and_the_rest_works(
    tmp_path: Path, attr: str, message: str
) -> None:
    """An entry point that fails to load or gives no manifest is recorded, not raised."""
    points = [entry_point("broken", attr), entry_point("from-text", "AS_TEXT")]
    registry = discover(user_dir=tmp_path, entry_points=points)
    (error,) = registry.errors()
    assert error.source.kind is SourceKind.ENTRY_POINT
    assert message in error.message
    assert str(error).startswith(f"entry point broken = {TARGETS}:{attr}: ")
    assert "from-text" in registry
    assert len(registry) == len(BUILTINS) + 1


def test_duplicate_id_within_the_user_directory_keeps_the_first(tmp_path: Path) -> None:
    """Two user files with one id: the first (by name) wins, the second is an error on `id`."""
    write(tmp_path, "a.toml", manifest("twin", name="First"))
    second = write(tmp_path, "b.toml", manifest("twin", name="Second"))
    registry = discover(user_dir=tmp_path, entry_points=False)
    assert registry.get("twin").name == "First"
    (error,) = registry.errors()
    assert (error.source.location, error.key) == (str(second), "id")
    assert "already defined by" in error.message


def test_user_directory_ignores_other_files_and_may_be_missing(tmp_path: Path) -> None:
    """Only `*.toml` files that are not hidden are read; a missing directory is no error."""
    write(tmp_path, "notes.txt", "not a manifest")
    write(tmp_path, ".draft.toml", "broken = ")
    (tmp_path / "dir.toml").mkdir()
    assert discover(user_dir=tmp_path, entry_points=False).errors() == []
    assert discover(user_dir=tmp_path / "absent", entry_points=False).errors() == []


def test_user_directory_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    """A file where the directory should be is reported; the built-ins still load."""
    path = write(tmp_path, "implementations", "")
    registry = discover(user_dir=path, entry_points=False)
    assert "is not a directory" in str(registry.errors()[0])
    assert registry.ids() == BUILTINS


def test_registry_lookup_and_capabilities(tmp_path: Path) -> None:
    """`get` raises a KeyError listing the known ids; `with_capability` filters by capability."""
    registry = only_builtins(tmp_path)
    with pytest.raises(KeyError) as caught:
        registry.get("vim")
    assert isinstance(caught.value, UnknownImplementation)
    assert str(caught.value) == f"no implementation 'vim'; known: {', '.join(BUILTINS)}"
    hooked = [impl.id for impl in registry.with_capability("hooks")]
    assert hooked == ["claude", "cline", "codex", "copilot", "gemini", "qwen"]
    assert [impl.id for impl in registry.with_capability("extension")] == ["pi"]
    assert registry.with_capability("teleport") == []
    assert "claude" in registry
    assert "vim" not in registry


def test_discover_returns_a_fresh_registry_each_time(tmp_path: Path) -> None:
    """No state is shared between discoveries: a later one sees a newly added manifest."""
    first = discover(user_dir=tmp_path, entry_points=False)
    write(tmp_path, "late.toml", manifest("late"))
    second = discover(user_dir=tmp_path, entry_points=False)
    assert "late" not in first
    assert "late" in second
    assert first is not second


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG layout is Linux's")
def test_default_user_dir_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`$XDG_CONFIG_HOME/pager/implementations` when absolute, else `~/.config/…`."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_user_dir() == tmp_path / "xdg" / "pager" / "implementations"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")
    assert default_user_dir() == tmp_path / "home" / ".config" / "pager" / "implementations"


def test_importing_the_package_stays_light() -> None:
    """`import pager.implementations` loads no attrs, tomllib or typing (fast paths share it)."""
    code = (
        "import sys, pager.implementations\n"
        "print(sorted(m for m in ('attrs', 'tomllib', 'typing', 'importlib.metadata')"
        " if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
