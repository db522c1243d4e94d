"""Implementation manifests (SPEC §10): the format's vocabulary and the validated values.

A manifest describes one harness: its id and name, the program to run, how to wire it to Pager
at launch (argument and environment templates), which arguments resume a conversation, its hooks,
skill and plugin. Known keys are type-checked; unknown keys anywhere are kept in `extra` (the
metadata is open). Every problem names the manifest's source and the key path.
Reading and validation: `_validate.py`. The format for people who write one:
docs/implementations/README.md.
"""

from __future__ import annotations

import datetime
import enum
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from pager.implementations.templates import (
    EXECUTABLE_FROM_ARGS,
    TemplateError,
    render,
)

#: Ids an implementation may not take: `pager <id>` would be a command.
RESERVED_IDS = frozenset(
    {
        *("serve", "start", "status", "exit", "restart", "mcp", "hook", "skill", "plugin"),
        *("implementations", "help", "send", "ls", "who", "whoami", "alias", "claim", "inbox"),
        *("export", "notify", "run", "reset", "read", "ack", "history", "sent", "archive"),
        *("unarchive", "purge", "token", "wake", "tui", "store", "setup", "doctor"),
        *("reserve", "release", "reservations"),
    }
)
ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
DEFAULT_CONNECTOR = "pager.implementations.connectors.generic"
DEFAULT_MAX_CHARS = 9000
#: Output formats `pager hook` can write.
HOOK_OUTPUTS = ("claude", "codex", "gemini", "copilot", "cline", "text")
#: The capabilities Pager knows; others are allowed and shown as they are.
KNOWN_CAPABILITIES: Mapping[str, str] = MappingProxyType(
    {
        "mcp-http": "talks to the broker's MCP endpoint over HTTP with the session's token",
        "mcp-stdio": "runs `pager mcp` as a stdio MCP server",
        "hooks": "runs `pager hook` on hook events, which injects waiting mail as context",
        "push": "a Pager plugin or extension inside the harness pushes delivered mail into "
        "the live session",
        "knock": "the provider can run a helper command that nudges a session when mail waits",
        "idle-wake": "an idle session can be made to take a turn when mail arrives",
        "plugin": "`pager plugin install ID` registers a plugin or hook so that sessions "
        "started without `pager` join",
        "skill": "`pager skill install` writes the Pager skill into the [skill] dirs",
        "extension": "Pager ships an extension the harness loads (tools and delivery) instead "
        "of an MCP server",
    }
)
MAX_MANIFEST_BYTES = 256 * 1024
#: The capabilities that show a session its waiting mail at its turns, or sooner, without its
#: asking. A harness with none of them (a shell) has no turns: its mail waits to be read.
MAIL_AT_TURNS = frozenset({"hooks", "push", "extension", "idle-wake"})


class SourceKind(enum.Enum):
    """Where a manifest came from, in increasing precedence."""

    BUILTIN = "builtin"
    USER = "user"
    ENTRY_POINT = "entry-point"


@attrs.frozen
class Source:
    """One place a manifest was read from.

    `location` is the file's absolute path (for built-ins, the path inside the installed
    package) or, for an entry point, `name = value`; `name` is the file or entry point name.
    """

    kind: SourceKind
    location: str
    name: str
    distribution: str | None = None  # the package that declared the entry point

    @property
    def label(self) -> str:
        """Short, for listings: `builtin`, `~/.config/…/foo.toml`, `entry point foo (pkg)`."""
        if self.kind is SourceKind.BUILTIN:
            return "builtin"
        if self.kind is SourceKind.USER:
            return tilde(self.location)
        return f"entry point {self.name}" + (f" ({self.distribution})" if self.distribution else "")

    @property
    def where(self) -> str:
        """For error messages: which file or entry point to fix."""
        if self.kind is SourceKind.BUILTIN:
            return f"builtin manifest {self.name}"
        if self.kind is SourceKind.USER:
            return tilde(self.location)
        return f"entry point {self.location}" + (
            f" (package {self.distribution})" if self.distribution else ""
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "location": self.location,
            "name": self.name,
            "distribution": self.distribution,
            "label": self.label,
        }


def tilde(path: str) -> str:
    """`/home/me/x` → `~/x`, for messages people read."""
    try:
        home = Path.home()
        relative = Path(path).relative_to(home)
    except (RuntimeError, ValueError):
        return path
    return "~" if relative == Path() else f"~/{relative}"


@attrs.frozen
class ManifestError:
    """One problem with one manifest: its source, the key path (empty for the whole file)."""

    source: Source
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.source.where}: {self.key + ': ' if self.key else ''}{self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source.to_json(),
            "key": self.key,
            "message": self.message,
            "text": str(self),
        }


class ManifestInvalid(Exception):
    """A manifest could not be accepted; `errors` lists every problem found."""

    def __init__(self, errors: Sequence[ManifestError]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(str(error) for error in self.errors))


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@attrs.frozen
class Launch:
    """`[launch]`: templates put before the user's arguments, and into the environment."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=_empty)
    #: With `executable = "{argv0}"`: the program when the user names none, the first of
    #: these that is set (`$NAME`: that variable of the launching environment).
    default_program: tuple[str, ...] = ()
    #: Said on stderr once the launch has joined (a template: `{address}`, …); empty: nothing.
    greeting: str = ""
    #: When the harness exits, stop the processes it left running that still hold the
    #: launch's credential in their environment (a daemon it starts detached).
    stop_leftovers: bool = False
    #: Arguments of the harness's own program, run to their end with the launch's environment
    #: before an interactive launch starts the harness (a daemon it should find running).
    before: tuple[str, ...] = ()

    def render_args(self, values: Mapping[str, str]) -> list[str]:
        return [render(arg, values) for arg in self.args]

    def render_env(self, values: Mapping[str, str]) -> dict[str, str]:
        return {name: render(value, values) for name, value in self.env.items()}


@attrs.frozen
class Resume:
    """`[resume]`: which of the user's arguments resume a conversation."""

    flags: tuple[str, ...] = ()  # `--resume X` / `--resume=X`: X is the conversation
    continue_flags: tuple[str, ...] = ()  # "the last conversation", unnamed
    choose_flag: str | None = None  # the wrapper may choose the id of a new conversation
    picker_flags: tuple[str, ...] = ()  # open an interactive picker: unknown at launch
    subcommand: str | None = None  # `codex resume X`: a leading subcommand that resumes
    #: Leading subcommands that start no conversation (`gemini mcp list`): no id is chosen.
    other_subcommands: tuple[str, ...] = ()


#: How `pager hook --pre-tool` writes a refusal (pager/pretool.py): `claude` is
#: `hookSpecificOutput.permissionDecision` (Claude Code, Qwen Code, Codex CLI), `decision` is
#: `{"decision": "deny", "reason"}` (Gemini CLI), `copilot` is a top-level `permissionDecision`,
#: `cline` is `{"cancel": true, "errorMessage"}`.
PRE_TOOL_REFUSALS = ("claude", "decision", "copilot", "cline")


@attrs.frozen
class PreTool:
    """`[hooks.pre_tool]`: the harness's event before a tool runs, where `pager hook --pre-tool`
    refuses a file-writing call on a path another agent reserved exclusively."""

    event: str
    refusal: str = "claude"
    #: Dotted keys of the payload: the tool's name and its arguments (an object or JSON text).
    tool: str = "tool_name"
    input: str = "tool_input"
    #: Tool name -> the argument keys holding the paths it writes.
    paths: Mapping[str, tuple[str, ...]] = attrs.field(factory=lambda: MappingProxyType({}))
    #: Tool name -> the argument key holding a shell command (its `rm`, `mv`, `>` targets).
    shell: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))
    #: Tool name -> the argument key holding an `apply_patch` envelope.
    patches: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))

    def spec(self) -> str:
        """What `pager hook --pre-tool` is given: this table as compact JSON."""
        table = {
            "refusal": self.refusal,
            "tool": self.tool,
            "input": self.input,
            "paths": {name: list(keys) for name, keys in self.paths.items()},
            "shell": dict(self.shell),
            "patches": dict(self.patches),
        }
        return json.dumps(table, separators=(",", ":"))

    def arguments(self) -> str:
        """`pager hook`'s arguments for this event, quoted for a shell."""
        return f"--pre-tool {shlex.quote(self.spec())} {shlex.quote(self.event)}"


@attrs.frozen
class Hooks:
    """`[hooks]`: the events Pager registers and how `pager hook` writes its output."""

    events: tuple[str, ...] = ()
    output: str = "text"
    max_chars: int = DEFAULT_MAX_CHARS
    #: Events whose output the harness ignores but that fire once per prompt a person typed:
    #: `pager hook --prompt-only` reports the prompt there and claims no mail.
    prompt_events: tuple[str, ...] = ()
    pre_tool: PreTool | None = None


@attrs.frozen
class Skill:
    dirs: tuple[str, ...] = ()  # `~` allowed; where SKILL.md is written


@attrs.frozen
class Plugin:
    supported: bool = False


#: How a `[detect] paths` entry may start: your home, an XDG base directory, or the root.
DETECT_PATH_PREFIXES = ("~/", "$XDG_CONFIG_HOME/", "$XDG_DATA_HOME/", "/")


@attrs.frozen
class Detect:
    """`[detect]`: what marks the harness as installed on this machine, for `pager setup`
    and `pager doctor`: any of `executables` found on PATH, or any of `paths` existing.
    `paths` name what the harness itself writes (its settings, its sessions), never a
    directory Pager's own installs create (`~/.claude/skills`, and so `~/.claude`).
    Neither (the default): never detected; `pager setup --only ID` still wires it."""

    executables: tuple[str, ...] = ()
    #: Files or directories: `~/…`, `$XDG_CONFIG_HOME/…` (default `~/.config`),
    #: `$XDG_DATA_HOME/…` (default `~/.local/share`) or absolute.
    paths: tuple[str, ...] = ()


@attrs.frozen
class WakeLaunch:
    """`[wake.launch]`: the harness's headless resume of a conversation, for launching it
    when mail arrives (docs/wake.md). `args` follow the executable and `[launch]` args."""

    args: tuple[str, ...]


@attrs.frozen
class WakeInput:
    """`[wake.input]`: idle wake through a file an interactive session reads prompts from.
    `pager <id>` adds `args` (with `{input_file}`) to an interactive launch (not to a
    subcommand, not to a wake run) and appends `line` to the file, as one JSON object, when
    the broker says mail waits (docs/protocol.md, `event: mail`). `line`'s string values are
    templates (`{prompt}`: a prompt starting with `[pager]`)."""

    args: tuple[str, ...]
    line: Mapping[str, str]


@attrs.frozen
class WakeHub:
    """`[wake.hub]`: idle wake through the harness's hub daemon (Cline CLI's protocol): when
    the broker says mail waits, `pager <id>` sends the `[pager]` prompt to the idle session of
    the hub whose discovery file is `discovery` (a template), and marks the knock pending for
    `pager hook --prompt-only` (the turn's first hook may not see the prompt)."""

    discovery: str


@attrs.frozen
class Wake:
    """`[wake]`: a helper command the provider runs (with a timeout) to tell an attached
    session that mail waits, for harnesses with a queue/knock command (empty: none), the
    headless launch of `[wake.launch]` (None: the harness has no headless resume), and the
    input file of `[wake.input]` (None: none)."""

    command: tuple[str, ...] = ()
    timeout: float = 10.0
    launch: WakeLaunch | None = None
    input: WakeInput | None = None
    hub: WakeHub | None = None


@attrs.frozen
class Manifest:
    """A validated manifest. `extra` holds every key Pager does not know, in place."""

    id: str
    name: str
    executable: str
    description: str = ""
    capabilities: tuple[str, ...] = ()
    connector: str = DEFAULT_CONNECTOR
    launch: Launch = attrs.Factory(Launch)
    resume: Resume = attrs.Factory(Resume)
    hooks: Hooks = attrs.Factory(Hooks)
    skill: Skill = attrs.Factory(Skill)
    plugin: Plugin = attrs.Factory(Plugin)
    wake: Wake = attrs.Factory(Wake)
    detect: Detect = attrs.Factory(Detect)
    extra: Mapping[str, Any] = attrs.field(factory=_empty)
    #: Unknown keys that look like typos of known ones (kept in `extra` all the same).
    warnings: tuple[str, ...] = ()

    @property
    def sees_mail_at_turns(self) -> bool:
        """Whether a session of it is shown waiting mail without asking (`MAIL_AT_TURNS`)."""
        return not MAIL_AT_TURNS.isdisjoint(self.capabilities)

    @property
    def executable_from_args(self) -> bool:
        """`executable = "{argv0}"`: the program is the first of the user's arguments."""
        return self.executable == EXECUTABLE_FROM_ARGS

    def argv(self, user_args: Sequence[str], values: Mapping[str, str]) -> list[str]:
        """The command line to run (before any PATH lookup): the executable, the rendered
        `launch.args`, then the user's arguments."""
        user = list(user_args)
        if self.executable_from_args:
            if not user:
                raise TemplateError(f"{self.id}: name the program to run after the options")
            return [user[0], *self.launch.render_args(values), *user[1:]]
        return [render(self.executable, values), *self.launch.render_args(values), *user]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "executable": self.executable,
            "description": self.description,
            "capabilities": list(self.capabilities),
            "connector": self.connector,
            "launch": {
                "args": list(self.launch.args),
                "env": dict(self.launch.env),
                "default_program": list(self.launch.default_program),
                "greeting": self.launch.greeting,
                "stop_leftovers": self.launch.stop_leftovers,
                "before": list(self.launch.before),
            },
            "resume": {
                "flags": list(self.resume.flags),
                "continue_flags": list(self.resume.continue_flags),
                "choose_flag": self.resume.choose_flag,
                "picker_flags": list(self.resume.picker_flags),
                "subcommand": self.resume.subcommand,
                "other_subcommands": list(self.resume.other_subcommands),
            },
            "hooks": {
                "events": list(self.hooks.events),
                "output": self.hooks.output,
                "max_chars": self.hooks.max_chars,
                "prompt_events": list(self.hooks.prompt_events),
                "pre_tool": None
                if self.hooks.pre_tool is None
                else json.loads(self.hooks.pre_tool.spec()) | {"event": self.hooks.pre_tool.event},
            },
            "skill": {"dirs": list(self.skill.dirs)},
            "plugin": {"supported": self.plugin.supported},
            "wake": {
                "command": list(self.wake.command),
                "timeout": self.wake.timeout,
                "launch": None
                if self.wake.launch is None
                else {"args": list(self.wake.launch.args)},
                "input": None
                if self.wake.input is None
                else {"args": list(self.wake.input.args), "line": dict(self.wake.input.line)},
                "hub": None if self.wake.hub is None else {"discovery": self.wake.hub.discovery},
            },
            "detect": {
                "executables": list(self.detect.executables),
                "paths": list(self.detect.paths),
            },
            "extra": thaw(self.extra),
            "warnings": list(self.warnings),
        }


def freeze(value: Any) -> Any:
    """TOML data made read-only: tables become mapping proxies, arrays tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of `freeze`, for JSON: dicts and lists (dates become ISO strings)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value
