"""Implementations (SPEC §10): manifests, the registry, and per-implementation connectors.

    from pager.implementations import discover
    registry = discover()
    claude = registry.get("claude")

The public names below are imported on first use, so that importing a submodule of this package
(a connector, a fast command path) costs nothing beyond that submodule.
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing costs milliseconds on fast paths (see pager.cli).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pager.implementations._validate import parse_text, validate
    from pager.implementations.manifest import (
        DEFAULT_CONNECTOR,
        HOOK_OUTPUTS,
        KNOWN_CAPABILITIES,
        RESERVED_IDS,
        Hooks,
        Launch,
        Manifest,
        ManifestError,
        ManifestInvalid,
        Plugin,
        Resume,
        Skill,
        Source,
        SourceKind,
    )
    from pager.implementations.registry import (
        ENTRY_POINT_GROUP,
        EntryPointLike,
        Implementation,
        ImplementationRegistry,
        UnknownImplementation,
        default_user_dir,
        discover,
    )
    from pager.implementations.templates import PLACEHOLDERS, TemplateError, render

_HOMES = {
    "pager.implementations._validate": ("parse_text", "validate"),
    "pager.implementations.manifest": (
        "DEFAULT_CONNECTOR",
        "HOOK_OUTPUTS",
        "KNOWN_CAPABILITIES",
        "RESERVED_IDS",
        "Hooks",
        "Launch",
        "Manifest",
        "ManifestError",
        "ManifestInvalid",
        "Plugin",
        "Resume",
        "Skill",
        "Source",
        "SourceKind",
    ),
    "pager.implementations.registry": (
        "ENTRY_POINT_GROUP",
        "EntryPointLike",
        "Implementation",
        "ImplementationRegistry",
        "UnknownImplementation",
        "default_user_dir",
        "discover",
    ),
    "pager.implementations.templates": ("PLACEHOLDERS", "TemplateError", "render"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "DEFAULT_CONNECTOR",
    "ENTRY_POINT_GROUP",
    "HOOK_OUTPUTS",
    "KNOWN_CAPABILITIES",
    "PLACEHOLDERS",
    "RESERVED_IDS",
    "EntryPointLike",
    "Hooks",
    "Implementation",
    "ImplementationRegistry",
    "Launch",
    "Manifest",
    "ManifestError",
    "ManifestInvalid",
    "Plugin",
    "Resume",
    "Skill",
    "Source",
    "SourceKind",
    "TemplateError",
    "UnknownImplementation",
    "default_user_dir",
    "discover",
    "parse_text",
    "render",
    "validate",
]


def __getattr__(name: str) -> object:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
