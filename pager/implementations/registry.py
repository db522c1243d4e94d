"""The implementation registry (SPEC §10): manifests discovered by convention.

Three sources, in increasing precedence (a later one replaces an earlier one with the same id):

1. built-ins shipped in the package, `pager/implementations/builtin/*.toml`;
2. the user's manifests, `*.toml` in `default_user_dir()` (`~/.config/pager/implementations`);
3. the Python entry-point group `pager.implementations`.

A broken manifest is recorded as errors against its source and skipped; it never breaks the
others. `discover()` builds a fresh registry every time: there is no module-level state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol

import attrs

from pager.implementations._validate import parse_text, read_bytes, validate
from pager.implementations.manifest import (
    Manifest,
    ManifestError,
    ManifestInvalid,
    Source,
    SourceKind,
)

ENTRY_POINT_GROUP = "pager.implementations"
BUILTIN_PACKAGE = "pager.implementations"
BUILTIN_DIR = "builtin"


class EntryPointLike(Protocol):
    """What discovery needs of an entry point (`importlib.metadata.EntryPoint` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


class UnknownImplementation(KeyError):
    """No implementation has this id; the message lists those that exist."""

    def __init__(self, ident: str, known: Iterable[str]) -> None:
        self.ident = ident
        self.known = tuple(known)
        listed = ", ".join(self.known) or "none"
        super().__init__(f"no implementation {ident!r}; known: {listed}")

    def __str__(self) -> str:
        return str(self.args[0])


@attrs.frozen
class Implementation:
    """A validated manifest, where it came from, and the sources it replaced."""

    manifest: Manifest
    source: Source
    overrides: tuple[Source, ...] = ()

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def capabilities(self) -> tuple[str, ...]:
        return self.manifest.capabilities

    @property
    def extra(self) -> Mapping[str, Any]:
        """The manifest's keys Pager does not know, kept as they were (read-only)."""
        return self.manifest.extra

    def has_capability(self, name: str) -> bool:
        return name in self.manifest.capabilities

    def to_json(self) -> dict[str, Any]:
        return {
            **self.manifest.to_json(),
            "source": self.source.to_json(),
            "overrides": [source.to_json() for source in self.overrides],
        }


@attrs.frozen
class ImplementationRegistry:
    """The implementations found, by id, and the manifests that could not be read."""

    _by_id: Mapping[str, Implementation]
    _errors: tuple[ManifestError, ...]
    user_dir: Path | None = None

    def get(self, ident: str) -> Implementation:
        try:
            return self._by_id[ident]
        except KeyError:
            raise UnknownImplementation(ident, sorted(self._by_id)) from None

    def all(self) -> list[Implementation]:
        """Every implementation, sorted by id."""
        return [self._by_id[ident] for ident in sorted(self._by_id)]

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def errors(self) -> list[ManifestError]:
        return list(self._errors)

    def with_capability(self, name: str) -> list[Implementation]:
        return [impl for impl in self.all() if impl.has_capability(name)]

    def __contains__(self, ident: object) -> bool:
        return ident in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)


def default_user_dir() -> Path:
    """Where the user's manifests live: `$XDG_CONFIG_HOME/pager/implementations` (or
    `~/.config/pager/implementations`) on Linux, `~/Library/Application Support/pager/
    implementations` on macOS."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "pager" / "implementations"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "pager" / "implementations"


def discover(
    *,
    user_dir: Path | None = None,
    entry_points: bool | Iterable[EntryPointLike] = True,
) -> ImplementationRegistry:
    """Read every manifest and build a fresh registry.

    `user_dir`: the user's manifest directory (default `default_user_dir()`; a missing one is
    fine). `entry_points`: True reads the installed group `pager.implementations`, False none;
    an iterable supplies the entry points (tests, embedders).
    """
    directory = user_dir if user_dir is not None else default_user_dir()
    errors: list[ManifestError] = []
    tiers = [_builtin(errors), _user(directory, errors), _entry_points(entry_points, errors)]
    chosen: dict[str, Implementation] = {}
    for tier in tiers:
        seen: dict[str, Source] = {}
        for source, manifest in tier:
            if manifest.id in seen:
                first = seen[manifest.id].where
                message = f"id {manifest.id!r} is already defined by {first}; this one is ignored"
                errors.append(ManifestError(source, "id", message))
                continue
            seen[manifest.id] = source
            earlier = chosen.get(manifest.id)
            overrides = (*earlier.overrides, earlier.source) if earlier else ()
            chosen[manifest.id] = Implementation(manifest, source, overrides)
    return ImplementationRegistry(chosen, tuple(errors), directory)


Loaded = list[tuple[Source, Manifest]]


def _load(source: Source, read: Callable[[], Manifest], errors: list[ManifestError]) -> Loaded:
    try:
        return [(source, read())]
    except ManifestInvalid as exc:
        errors.extend(exc.errors)
    except OSError as exc:
        errors.append(ManifestError(source, "", f"cannot be read: {exc.strerror or exc}"))
    except Exception as exc:  # one odd manifest must never break discovery of the others
        message = f"could not be read ({type(exc).__name__}: {exc})"
        errors.append(ManifestError(source, "", message))
    return []


def _builtin(errors: list[ManifestError]) -> Loaded:
    folder = resources.files(BUILTIN_PACKAGE).joinpath(BUILTIN_DIR)
    try:
        entries = sorted(folder.iterdir(), key=lambda item: item.name)
    except OSError as exc:
        source = Source(SourceKind.BUILTIN, str(folder), BUILTIN_DIR)
        message = f"the built-in manifests cannot be listed ({exc}); reinstall pager"
        errors.append(ManifestError(source, "", message))
        return []
    found: Loaded = []
    for entry in entries:
        if entry.name.endswith(".toml") and entry.is_file():
            source = Source(SourceKind.BUILTIN, str(entry), entry.name)
            found += _load(source, partial(_read, entry, source), errors)
    return found


def _user(directory: Path, errors: list[ManifestError]) -> Loaded:
    if not directory.exists():
        return []
    dir_source = Source(SourceKind.USER, str(directory), directory.name)
    if not directory.is_dir():
        errors.append(ManifestError(dir_source, "", "is not a directory; manifests go in it"))
        return []
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        errors.append(ManifestError(dir_source, "", f"cannot be listed: {exc.strerror or exc}"))
        return []
    found: Loaded = []
    for path in entries:
        if path.suffix != ".toml" or path.name.startswith(".") or path.is_dir():
            continue
        source = Source(SourceKind.USER, str(path), path.name)
        found += _load(source, partial(_read, path, source), errors)
    return found


def _read(entry: Traversable | Path, source: Source) -> Manifest:
    return read_bytes(entry.read_bytes(), source)


def _entry_points(wanted: bool | Iterable[EntryPointLike], errors: list[ManifestError]) -> Loaded:
    if wanted is False:
        return []
    if wanted is True:
        from importlib.metadata import entry_points

        points: Iterable[EntryPointLike] = entry_points(group=ENTRY_POINT_GROUP)
    else:
        points = wanted
    found: Loaded = []
    for point in sorted(points, key=lambda item: (item.name, item.value)):
        dist = getattr(point, "dist", None)
        source = Source(
            SourceKind.ENTRY_POINT,
            f"{point.name} = {point.value}",
            point.name,
            getattr(dist, "name", None),
        )
        found += _load(source, partial(_from_entry_point, point, source), errors)
    return found


def _from_entry_point(point: EntryPointLike, source: Source) -> Manifest:
    """An entry point loads to a table (dict), TOML text (str), a path to a TOML file
    (`os.PathLike` or an `importlib.resources` Traversable), or a callable returning one."""
    try:
        value = point.load()
        if callable(value) and not isinstance(value, Traversable):
            value = value()
    except Exception as exc:  # third-party code: whatever it raises is its own error
        message = f"could not be loaded: {type(exc).__name__}: {exc}"
        raise ManifestInvalid([ManifestError(source, "", message)]) from None
    if isinstance(value, Mapping):
        return validate(value, source)
    if isinstance(value, str):
        return parse_text(value, source)
    if isinstance(value, os.PathLike):
        return _read(Path(os.fsdecode(value)), source)
    if isinstance(value, Traversable):
        return _read(value, source)
    message = (
        f"loaded {type(value).__name__}; an entry point of {ENTRY_POINT_GROUP!r} must give a "
        "dict (the manifest table), a str (TOML text), a path to a TOML file, or a callable "
        "returning one of these"
    )
    raise ManifestInvalid([ManifestError(source, "", message)])
