"""Reading and validating manifests: TOML text or a table in, a `Manifest` or `ManifestInvalid`
(every problem, each naming the source and the key path) out."""

from __future__ import annotations

import datetime
import difflib
import re
import tomllib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pager.implementations.manifest import (
    DEFAULT_CONNECTOR,
    DEFAULT_MAX_CHARS,
    DETECT_PATH_PREFIXES,
    HOOK_OUTPUTS,
    ID_PATTERN,
    MAX_MANIFEST_BYTES,
    PRE_TOOL_REFUSALS,
    RESERVED_IDS,
    Detect,
    Hooks,
    Launch,
    Manifest,
    ManifestError,
    ManifestInvalid,
    Plugin,
    PreTool,
    Resume,
    Skill,
    Source,
    Wake,
    WakeHub,
    WakeInput,
    WakeLaunch,
    freeze,
)
from pager.implementations.templates import EXECUTABLE_FROM_ARGS, TemplateError, placeholders

_CAPABILITY = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def parse_text(text: str, source: Source) -> Manifest:
    """Parse a manifest's TOML text; `ManifestInvalid` names the source and each key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestInvalid([ManifestError(source, "", f"not valid TOML: {exc}")]) from None
    return validate(data, source)


def read_bytes(raw: bytes, source: Source) -> Manifest:
    if len(raw) > MAX_MANIFEST_BYTES:
        message = f"larger than {MAX_MANIFEST_BYTES // 1024} KiB; is this a manifest?"
        raise ManifestInvalid([ManifestError(source, "", message)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestInvalid([ManifestError(source, "", f"not UTF-8 text: {exc}")]) from None
    return parse_text(text, source)


def validate(data: Mapping[str, Any], source: Source) -> Manifest:
    """Check a manifest table (as TOML parses it, or a dict from an entry point) and build
    the `Manifest`. Arrays may also be tuples and tables any mapping with string keys."""
    return _Validator(source).manifest(data)


def _odd_keys(value: object, path: str) -> list[str]:
    """Paths of tables whose keys are not all strings (possible only outside TOML)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            found.append(path)
        for key, item in value.items():
            if isinstance(key, str):
                found += _odd_keys(item, _key(path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found += _odd_keys(item, f"{path}[{index}]")
    return found


_TOP_KEYS = ("id", "name", "executable", "description", "capabilities", "connector")
_SECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "launch": ("args", "env", "default_program", "greeting", "stop_leftovers", "before"),
        "resume": (
            "flags",
            "continue_flags",
            "choose_flag",
            "picker_flags",
            "subcommand",
            "other_subcommands",
        ),
        "hooks": ("events", "output", "max_chars", "prompt_events", "pre_tool"),
        "skill": ("dirs",),
        "plugin": ("supported",),
        "wake": ("command", "timeout", "launch", "input", "hub"),
        "detect": ("executables", "paths"),
    }
)


def _key(path: str, key: str) -> str:
    part = key if _BARE_KEY.match(key) else '"' + key.replace('"', '\\"') + '"'
    return f"{path}.{part}" if path else part


def _type_name(value: object) -> str:
    names = [
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list | tuple, "an array"),
        (Mapping, "a table"),
        (datetime.datetime, "a date-time"),
        (datetime.date, "a date"),
        (datetime.time, "a time"),
    ]
    for kind, name in names:
        if isinstance(value, kind):
            scalar = isinstance(value, bool | int | float | str)
            return f"{name} ({value!r})" if scalar else name
    return type(value).__name__


class _Validator:
    """Collects every problem of one manifest, each with its key path."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.errors: list[ManifestError] = []
        self.warnings: list[str] = []

    def fail(self, key: str, message: str) -> None:
        self.errors.append(ManifestError(self.source, key, message))

    def manifest(self, data: Mapping[str, Any]) -> Manifest:
        if not isinstance(data, Mapping):
            self.fail("", f"a manifest is a table, not {_type_name(data)}")
            raise ManifestInvalid(self.errors)
        for path in _odd_keys(data, ""):
            self.fail(path, "every key of a table must be a string")
        if self.errors:
            raise ManifestInvalid(self.errors)
        extra: dict[str, Any] = {}
        self._unknown(data, "", (*_TOP_KEYS, *_SECTIONS), extra)
        ident = self._id(data.get("id"))
        name = self.string(data, "", "name", required=True)
        executable = self._executable(data)
        description = self.string(data, "", "description") or ""
        capabilities = self._capabilities(data)
        connector = self.string(data, "", "connector", pattern=_MODULE, what="a module path")
        sections = {section: self.table(data, section, extra) for section in _SECTIONS}
        launch = self._launch(sections["launch"])
        resume = self._resume(sections["resume"])
        hooks = self._hooks(sections["hooks"])
        skill = Skill(tuple(self.strings(sections["skill"], "skill", "dirs")))
        plugin = Plugin(self.boolean(sections["plugin"], "plugin", "supported", default=False))
        wake = self._wake(sections["wake"])
        detect = self._detect(sections["detect"])
        if self.errors:
            raise ManifestInvalid(self.errors)
        assert ident is not None
        assert name is not None
        assert executable is not None
        return Manifest(
            id=ident,
            name=name,
            executable=executable,
            description=description,
            capabilities=capabilities,
            connector=connector or DEFAULT_CONNECTOR,
            launch=launch,
            resume=resume,
            hooks=hooks,
            skill=skill,
            plugin=plugin,
            wake=wake,
            detect=detect,
            extra=freeze(extra),
            warnings=tuple(self.warnings),
        )

    # -- structure ---------------------------------------------------------------------------

    def _unknown(
        self, table: Mapping[str, Any], path: str, known: Sequence[str], extra: dict[str, Any]
    ) -> None:
        """Keep unknown keys in `extra`; note those that look like typos of known ones."""
        for key, value in table.items():
            if key in known:
                continue
            extra[key] = value
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            if close:
                self.warnings.append(
                    f"{_key(path, key)} is not a key Pager knows (did you mean "
                    f"{_key(path, close[0])}?); kept as metadata"
                )

    def table(self, data: Mapping[str, Any], name: str, extra: dict[str, Any]) -> Mapping[str, Any]:
        value = data.get(name, {})
        if not isinstance(value, Mapping):
            self.fail(name, f"expected a table, got {_type_name(value)}")
            return {}
        section_extra: dict[str, Any] = {}
        self._unknown(value, name, _SECTIONS[name], section_extra)
        if section_extra:
            extra[name] = section_extra
        return value

    # -- scalars and lists -------------------------------------------------------------------

    def string(
        self,
        table: Mapping[str, Any],
        path: str,
        key: str,
        *,
        required: bool = False,
        pattern: re.Pattern[str] | None = None,
        what: str = "",
    ) -> str | None:
        where = _key(path, key)
        if key not in table:
            if required:
                self.fail(where, "missing (required)")
            return None
        value = table[key]
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {_type_name(value)}")
            return None
        if required and not value.strip():
            self.fail(where, "must not be empty")
            return None
        if pattern is not None and not pattern.match(value):
            self.fail(where, f"{value!r} is not {what}")
            return None
        return value

    def strings(self, table: Mapping[str, Any], path: str, key: str) -> list[str]:
        where = _key(path, key)
        value = table.get(key, [])
        if not isinstance(value, list | tuple):
            self.fail(where, f"expected an array of strings, got {_type_name(value)}")
            return []
        found: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{where}[{index}]", f"expected a string, got {_type_name(item)}")
            elif not item:
                self.fail(f"{where}[{index}]", "must not be empty")
            else:
                found.append(item)
        return found

    def boolean(self, table: Mapping[str, Any], path: str, key: str, *, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            self.fail(_key(path, key), f"expected true or false, got {_type_name(value)}")
            return default
        return value

    def template(self, where: str, value: str) -> None:
        try:
            placeholders(value)
        except TemplateError as exc:
            self.fail(where, str(exc))

    # -- keys --------------------------------------------------------------------------------

    def _id(self, value: object) -> str | None:
        if value is None:
            self.fail("id", "missing (required)")
            return None
        if not isinstance(value, str):
            self.fail("id", f"expected a string, got {_type_name(value)}")
            return None
        if not ID_PATTERN.match(value):
            self.fail(
                "id",
                f"{value!r} is not a valid id: 1-32 characters of a-z, 0-9 and '-', "
                "starting with a letter",
            )
            return None
        if value in RESERVED_IDS:
            self.fail(
                "id",
                f"{value!r} is a pager command (`pager {value}`) and cannot name an "
                f"implementation; reserved: {', '.join(sorted(RESERVED_IDS))}",
            )
            return None
        return value

    def _executable(self, data: Mapping[str, Any]) -> str | None:
        found = self.string(data, "", "executable", required=True)
        if found is not None and found != EXECUTABLE_FROM_ARGS:
            self.template("executable", found)
        return found

    def _capabilities(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        found: list[str] = []
        for index, item in enumerate(self.strings(data, "", "capabilities")):
            if not _CAPABILITY.match(item):
                self.fail(
                    f"capabilities[{index}]",
                    f"{item!r} is not a capability name (lower-case letters, digits, '.', '_', "
                    "'-', starting with a letter)",
                )
            elif item not in found:
                found.append(item)
        return tuple(found)

    def _launch(self, table: Mapping[str, Any]) -> Launch:
        args = self.strings(table, "launch", "args")
        for index, arg in enumerate(args):
            self.template(f"launch.args[{index}]", arg)
        env: dict[str, str] = {}
        raw = table.get("env", {})
        if not isinstance(raw, Mapping):
            self.fail("launch.env", f"expected a table of strings, got {_type_name(raw)}")
            raw = {}
        for name, value in raw.items():
            where = _key("launch.env", name)
            if not _ENV_NAME.match(name):
                self.fail(where, f"{name!r} is not an environment variable name")
            elif not isinstance(value, str):
                self.fail(where, f"expected a string, got {_type_name(value)}")
            else:
                self.template(where, value)
                env[name] = value
        default_program = self.strings(table, "launch", "default_program")
        greeting = self.string(table, "launch", "greeting") or ""
        if greeting:
            self.template("launch.greeting", greeting)
        stop_leftovers = self.boolean(table, "launch", "stop_leftovers", default=False)
        before = self.strings(table, "launch", "before")
        for index, arg in enumerate(before):
            self.template(f"launch.before[{index}]", arg)
        return Launch(
            tuple(args),
            MappingProxyType(env),
            tuple(default_program),
            greeting,
            stop_leftovers,
            tuple(before),
        )

    def _wake(self, table: Mapping[str, Any]) -> Wake:
        command = self.strings(table, "wake", "command")
        for index, arg in enumerate(command):
            self.template(f"wake.command[{index}]", arg)
        timeout = table.get("timeout", 10.0)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= 300
        ):
            self.fail(
                "wake.timeout", f"expected seconds between 0 and 300, got {_type_name(timeout)}"
            )
            timeout = 10.0
        return Wake(
            tuple(command),
            float(timeout),
            self._wake_launch(table),
            self._wake_input(table),
            self._wake_hub(table),
        )

    def _wake_launch(self, table: Mapping[str, Any]) -> WakeLaunch | None:
        """`[wake.launch]`: non-empty `args`, each a template (`{prompt}` included)."""
        if "launch" not in table:
            return None
        launch = table["launch"]
        if not isinstance(launch, Mapping):
            self.fail("wake.launch", f"expected a table, got {_type_name(launch)}")
            return None
        for key in launch:
            if key != "args":
                self.warnings.append(f"wake.launch.{key} is not a key Pager knows; ignored")
        args = self.strings(launch, "wake.launch", "args")
        if not args:
            if not launch.get("args"):  # else each bad item is reported already
                self.fail("wake.launch.args", "expected the headless resume's arguments, got none")
            return None
        for index, arg in enumerate(args):
            self.template(f"wake.launch.args[{index}]", arg)
        return WakeLaunch(tuple(args))

    def _wake_input(self, table: Mapping[str, Any]) -> WakeInput | None:
        """`[wake.input]`: `args` naming `{input_file}`, and `line`, a table of templates."""
        if "input" not in table:
            return None
        given = table["input"]
        if not isinstance(given, Mapping):
            self.fail("wake.input", f"expected a table, got {_type_name(given)}")
            return None
        for key in given:
            if key not in ("args", "line"):
                self.warnings.append(f"wake.input.{key} is not a key Pager knows; ignored")
        args = self.strings(given, "wake.input", "args")
        for index, arg in enumerate(args):
            self.template(f"wake.input.args[{index}]", arg)
        if not any("{input_file}" in arg for arg in args):
            self.fail("wake.input.args", "expected the option that names {input_file}")
        line = given.get("line")
        fields: dict[str, str] = {}
        if not isinstance(line, Mapping) or not line:
            self.fail("wake.input.line", f"expected a table of strings, got {_type_name(line)}")
        else:
            for name, value in line.items():
                where = _key("wake.input.line", name)
                if not isinstance(value, str):
                    self.fail(where, f"expected a string, got {_type_name(value)}")
                else:
                    self.template(where, value)
                    fields[name] = value
        return WakeInput(tuple(args), MappingProxyType(fields))

    def _wake_hub(self, table: Mapping[str, Any]) -> WakeHub | None:
        """`[wake.hub]`: `discovery`, the template of the hub's discovery file."""
        if "hub" not in table:
            return None
        given = table["hub"]
        if not isinstance(given, Mapping):
            self.fail("wake.hub", f"expected a table, got {_type_name(given)}")
            return None
        for key in given:
            if key != "discovery":
                self.warnings.append(f"wake.hub.{key} is not a key Pager knows; ignored")
        discovery = self.string(given, "wake.hub", "discovery", required=True)
        if discovery is None:
            return None
        self.template("wake.hub.discovery", discovery)
        return WakeHub(discovery)

    def _detect(self, table: Mapping[str, Any]) -> Detect:
        """`[detect]`: program names (no path: PATH is searched) and directory paths."""
        executables = self.strings(table, "detect", "executables")
        for index, name in enumerate(executables):
            if "/" in name or name != name.strip() or name in (".", ".."):
                self.fail(
                    f"detect.executables[{index}]",
                    f"{name!r} is not a program name (like claude); PATH is searched for it",
                )
        paths = self.strings(table, "detect", "paths")
        for index, entry in enumerate(paths):
            if not entry.startswith(DETECT_PATH_PREFIXES):
                self.fail(
                    f"detect.paths[{index}]",
                    f"{entry!r} is not a path starting with "
                    + ", ".join(repr(prefix) for prefix in DETECT_PATH_PREFIXES),
                )
        return Detect(tuple(executables), tuple(paths))

    def _flags(self, table: Mapping[str, Any], key: str) -> list[str]:
        flags = self.strings(table, "resume", key)
        for index, flag in enumerate(flags):
            if not flag.startswith("-") or flag in ("-", "--") or "=" in flag or " " in flag:
                self.fail(f"resume.{key}[{index}]", f"{flag!r} is not an option (like --resume)")
        return flags

    def _resume(self, table: Mapping[str, Any]) -> Resume:
        lists = {
            key: self._flags(table, key) for key in ("flags", "continue_flags", "picker_flags")
        }
        choose = self.string(table, "resume", "choose_flag")
        if choose is not None and (not choose.startswith("-") or choose in ("-", "--")):
            self.fail("resume.choose_flag", f"{choose!r} is not an option (like --session-id)")
            choose = None
        subcommand = self.string(table, "resume", "subcommand")
        if subcommand is not None and (not subcommand or subcommand.startswith("-")):
            self.fail("resume.subcommand", f"{subcommand!r} is not a subcommand (like resume)")
            subcommand = None
        others = self.strings(table, "resume", "other_subcommands")
        for index, word in enumerate(others):
            if not word or word.startswith("-") or " " in word or word == subcommand:
                self.fail(
                    f"resume.other_subcommands[{index}]",
                    f"{word!r} is not a subcommand that starts no conversation (like mcp)",
                )
        seen: dict[str, str] = {}  # option -> the key path that claimed it first
        named = [
            (f"resume.{key}[{index}]", flag)
            for key, flags in lists.items()
            for index, flag in enumerate(flags)
        ]
        named += [("resume.choose_flag", choose)] if choose else []
        for where, flag in named:
            first = seen.setdefault(flag, where)
            if first.partition("[")[0] != where.partition("[")[0]:
                self.fail(where, f"{flag} is also in {first}; an option can mean only one thing")
        return Resume(
            flags=tuple(lists["flags"]),
            continue_flags=tuple(lists["continue_flags"]),
            choose_flag=choose,
            picker_flags=tuple(lists["picker_flags"]),
            subcommand=subcommand,
            other_subcommands=tuple(others),
        )

    def _hooks(self, table: Mapping[str, Any]) -> Hooks:
        events = self.strings(table, "hooks", "events")
        output = self.string(table, "hooks", "output")
        if output is not None and output not in HOOK_OUTPUTS:
            self.fail("hooks.output", f"{output!r} is not one of {', '.join(HOOK_OUTPUTS)}")
            output = None
        max_chars = table.get("max_chars", DEFAULT_MAX_CHARS)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            self.fail(
                "hooks.max_chars", f"expected a positive integer, got {_type_name(max_chars)}"
            )
            max_chars = DEFAULT_MAX_CHARS
        prompted = self.strings(table, "hooks", "prompt_events")
        return Hooks(
            tuple(dict.fromkeys(events)),
            output or "text",
            max_chars,
            tuple(dict.fromkeys(prompted)),
            self._pre_tool(table["pre_tool"]) if "pre_tool" in table else None,
        )

    def _pre_tool(self, table: object) -> PreTool | None:
        """`[hooks.pre_tool]`: every key type-checked; an unknown one is an error (a typo here
        would silently turn enforcement off)."""
        where = "hooks.pre_tool"
        if not isinstance(table, Mapping):
            self.fail(where, f"expected a table, got {_type_name(table)}")
            return None
        known = ("event", "refusal", "tool", "input", "paths", "shell", "patches")
        for key in table:
            if key not in known:
                self.fail(_key(where, key), f"unknown key; known: {', '.join(known)}")
        event = self.string(table, where, "event", required=True)
        refusal = self.string(table, where, "refusal") or "claude"
        if refusal not in PRE_TOOL_REFUSALS:
            self.fail(
                _key(where, "refusal"),
                f"{refusal!r} is not one of {', '.join(PRE_TOOL_REFUSALS)}",
            )
        tool = self.string(table, where, "tool") or "tool_name"
        arguments = self.string(table, where, "input") or "tool_input"
        paths: dict[str, tuple[str, ...]] = {}
        raw_paths = table.get("paths", {})
        if not isinstance(raw_paths, Mapping):
            self.fail(_key(where, "paths"), f"expected a table, got {_type_name(raw_paths)}")
            raw_paths = {}
        for name in raw_paths:
            value = raw_paths[name]
            keys = [value] if isinstance(value, str) else value
            paths[name] = tuple(self.strings({name: keys}, _key(where, "paths"), name))
        named = {}
        for part in ("shell", "patches"):
            raw = table.get(part, {})
            if not isinstance(raw, Mapping):
                self.fail(_key(where, part), f"expected a table, got {_type_name(raw)}")
                raw = {}
            named[part] = {n: self.string(raw, _key(where, part), n) or "" for n in raw}
        if event is None:
            return None
        return PreTool(
            event=event,
            refusal=refusal,
            tool=tool,
            input=arguments,
            paths=MappingProxyType(paths),
            shell=MappingProxyType(named["shell"]),
            patches=MappingProxyType(named["patches"]),
        )
