"""`pager plugin install HARNESS`: the plugin that lets sessions started without `pager` join.

Which harnesses offer one is the registry's answer (`[plugin] supported = true`). The files are
built by the harness's own plugin module, found by convention, so that nothing here switches on
an implementation id (SPEC §10):

1. the implementation's connector module (`connector = …` in its manifest), if it defines
   `plugin_files`;
2. otherwise `pager.install.plugins.<id>` (`-` in the id becomes `_`).

`plugin_files(manifest, context) -> PluginPlan` returns the exact files (content included) and
the manual steps to print. Writing them, the record and `--uninstall` are `files.py`'s job.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pager.implementations.manifest import Manifest
from pager.implementations.registry import Implementation, ImplementationRegistry
from pager.install import command
from pager.install.entries import Entry
from pager.install.files import InstallError, Outcome, Planned, Record, apply, load_record, remove
from pager.versions import VERSION

BUILDER_PACKAGE = "pager.install.plugins"
BUILDER_NAME = "plugin_files"


@dataclass(frozen=True)
class PluginContext:
    """What a plugin builder may use: where home is, and how to run this Pager."""

    home: Path
    pager: tuple[str, ...]
    environ: Mapping[str, str]
    version: str = VERSION

    @property
    def config_home(self) -> Path:
        """`$XDG_CONFIG_HOME` when set to an absolute path, else `~/.config`."""
        xdg = self.environ.get("XDG_CONFIG_HOME")
        return Path(xdg) if xdg and os.path.isabs(xdg) else self.home / ".config"

    def hook_commands(self, manifest: Manifest) -> dict[str, str]:
        return command.hook_commands(self.pager, manifest)

    def mcp_server(self, manifest: Manifest) -> dict[str, object]:
        return command.mcp_server(self.pager, manifest)

    def tilde(self, path: Path) -> str:
        """`path` with the home directory shown as `~`, for messages."""
        try:
            return f"~/{path.relative_to(self.home)}"
        except ValueError:
            return str(path)


@dataclass(frozen=True)
class PluginPlan:
    """A plugin's files and what the user still has to do by hand."""

    location: Path  # the plugin's directory (or single file)
    files: tuple[Planned, ...]
    next_steps: tuple[str, ...] = ()  # after installing, e.g. registering it with the harness
    uninstall_steps: tuple[str, ...] = ()  # before/after removing the files
    notes: tuple[str, ...] = ()
    #: Keys in the harness's own settings that enable the plugin. `pager plugin install`
    #: prints `next_steps` instead; `pager setup` adds these (and can take them back), then
    #: prints `entries_steps` in place of `next_steps`.
    entries: tuple[Entry, ...] = ()
    entries_steps: tuple[str, ...] = ()
    #: The harness's own commands that register the plugin (pager/install/harness_commands.py):
    #: `pager setup` runs them and then prints `register_steps` in place of `next_steps`;
    #: `pager setup --undo` runs `unregister`. `pager plugin install` prints `next_steps`.
    register: tuple[tuple[str, ...], ...] = ()
    register_steps: tuple[str, ...] = ()
    unregister: tuple[tuple[str, ...], ...] = ()


PluginBuilder = Callable[[Manifest, PluginContext], PluginPlan]


@dataclass
class PluginResult:
    implementation: str
    name: str
    location: str
    outcomes: list[Outcome]
    next_steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def offering(registry: ImplementationRegistry) -> list[Implementation]:
    """The implementations whose manifest says they offer a plugin."""
    return [impl for impl in registry.all() if impl.manifest.plugin.supported]


def find_builder(manifest: Manifest) -> PluginBuilder | None:
    """The harness's plugin module's `plugin_files`, or None when this Pager has none yet."""
    candidates = (manifest.connector, f"{BUILDER_PACKAGE}.{manifest.id.replace('-', '_')}")
    for name in candidates:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        except Exception:  # a broken connector must not hide Pager's own builder
            if name == manifest.connector:
                continue
            raise
        builder = getattr(module, BUILDER_NAME, None)
        if callable(builder):
            return builder  # type: ignore[no-any-return]
    return None


def record_name(ident: str) -> str:
    return f"plugin-{ident}"


def install(
    registry: ImplementationRegistry,
    ident: str,
    state_root: Path,
    *,
    force: bool = False,
    environ: Mapping[str, str] | None = None,
    dry_run: bool = False,
) -> PluginResult:
    """Write the plugin of `ident`. Raises `UnknownImplementation` or `InstallError`."""
    manifest = registry.get(ident).manifest
    plan = build(registry, ident, environ)
    extra: dict[str, Any] = {
        "implementation": manifest.id,
        "location": str(plan.location),
        "uninstall_steps": list(plan.uninstall_steps),
    }
    outcomes = apply(
        state_root,
        record_name(manifest.id),
        plan.files,
        force=force,
        extra=extra,
        dry_run=dry_run,
    )
    return PluginResult(
        manifest.id,
        manifest.name,
        str(plan.location),
        outcomes,
        list(plan.next_steps),
        list(plan.notes),
    )


def build(
    registry: ImplementationRegistry, ident: str, environ: Mapping[str, str] | None = None
) -> PluginPlan:
    """The plugin of `ident` as its builder plans it, nothing written. Raises
    `UnknownImplementation`, or `InstallError` when it offers none or this Pager has none."""
    impl = registry.get(ident)
    manifest = impl.manifest
    if not manifest.plugin.supported:
        others = ", ".join(item.id for item in offering(registry)) or "none"
        raise InstallError(f"{ident} offers no plugin; harnesses that do: {others}")
    builder = find_builder(manifest)
    if builder is None:
        raise InstallError(
            f"{ident}: not yet. This version of Pager cannot install the {manifest.name} plugin;"
            " see docs/skill-and-plugins.md for the state of each harness"
        )
    env = os.environ if environ is None else environ
    context = PluginContext(home=Path.home(), pager=command.pager_argv(env), environ=env)
    return builder(manifest, context)


def uninstall(ident: str, state_root: Path) -> tuple[Record | None, list[Outcome], list[str]]:
    """Remove exactly the files the install of `ident` wrote; the manual steps to print."""
    if load_record(state_root, record_name(ident)) is None:
        return None, [], []
    record, outcomes = remove(state_root, record_name(ident))
    steps = [str(step) for step in (record.extra.get("uninstall_steps") or [])] if record else []
    return record, outcomes, steps
