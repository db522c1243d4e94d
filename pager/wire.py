"""The one cattrs converter: requests (`pager.requests`) in from JSON, strictly; answers
(`pager.domain.results`, `pager.domain.views`) out to JSON."""

from __future__ import annotations

import enum
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from pager.domain.errors import ErrorCode, PagerError
from pager.schema import omits_none, wire_name, without_none

T = TypeVar("T")


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)

    # Strict scalars: "true" is not a bool and 1 is not a string.
    def strict(kind: type[Any]) -> Any:
        def hook(value: object, _: type[Any]) -> Any:
            if type(value) is not kind:
                raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
            return value

        return hook

    def number(value: object, _: type[Any]) -> float:
        if type(value) not in (int, float):
            raise TypeError(f"expected a number, got {type(value).__name__}")
        return float(value)  # type: ignore[arg-type]

    def whole(value: object, _: type[Any]) -> int:
        # JSON has one number type: `2.0` is the integer 2, as JSON Schema (the OpenAPI
        # document) says too.
        if type(value) is float and value.is_integer():
            return int(value)
        if type(value) is not int:
            raise TypeError(f"expected int, got {type(value).__name__}")
        return value

    def nothing(value: object, _: type[Any]) -> None:
        if value is not None:
            raise TypeError(f"expected null, got {type(value).__name__}")

    def one_of(value: object, kind: Any) -> Any:
        choices = get_args(kind)
        if type(value) is not str or value not in choices:
            raise ValueError("should be one of " + ", ".join(map(repr, choices)))
        return value

    def array(value: object, kind: Any) -> list[Any]:
        # Not any iterable: a string is no list of its characters.
        if type(value) is not list:
            raise TypeError(f"expected an array, got {type(value).__name__}")
        (item,) = get_args(kind) or (Any,)
        items = []
        for index, member in enumerate(value):
            try:
                items.append(converter.structure(member, item))
            except Exception as exc:
                raise ValueError(f"item {index}: {_plain(exc)}") from None
        return items

    def variant(value: object, kind: Any) -> Any:
        # A union of request classes told apart by their `kind` (`Literal`), or null.
        if value is None and type(None) in get_args(kind):
            return None
        by_kind = {get_args(typing.get_type_hints(cls)["kind"])[0]: cls for cls in _variants(kind)}
        chosen = by_kind.get(value.get("kind")) if isinstance(value, dict) else None
        if chosen is None:
            raise ValueError(
                "should be an object whose kind is one of " + ", ".join(map(repr, by_kind))
            )
        return converter.structure(value, chosen)

    converter.register_structure_hook(float, number)
    converter.register_structure_hook(int, whole)
    converter.register_structure_hook(type(None), nothing)
    for kind in (str, bool):
        converter.register_structure_hook(kind, strict(kind))
    converter.register_structure_hook_func(lambda kind: _origin(kind) is Literal, one_of)
    converter.register_structure_hook_func(lambda kind: _origin(kind) is list, array)
    converter.register_structure_hook_func(lambda kind: bool(_variants(kind)), variant)
    # Requests (`pager.requests`): unknown keys refused, fields by their wire names.
    converter.register_structure_hook_factory(
        lambda kind: attrs.has(kind) and any("check" in f.metadata for f in attrs.fields(kind)),
        lambda kind: make_dict_structure_fn(
            kind,
            converter,
            _cattrs_forbid_extra_keys=True,
            **{  # type: ignore[arg-type]  # overrides by field name
                f.name: override(rename=wire_name(f))
                for f in attrs.fields(kind)
                if "wire" in f.metadata
            },
        ),
    )

    # Out: enums as their values; the answers' wire names and optional keys (their metadata,
    # read by `pager.schema` too, so a schema always says what is sent).
    for enum_kind in (enum.Enum, enum.StrEnum):  # StrEnum: before `str` in its MRO
        converter.register_unstructure_hook(enum_kind, lambda value: value.value)
    converter.register_unstructure_hook_factory(
        lambda kind: (
            attrs.has(kind)
            and any(
                "wire" in f.metadata or "as_is" in f.metadata or omits_none(f)
                for f in attrs.fields(kind)
            )
        ),
        lambda kind: _shaped_unstructure(kind, converter),
    )
    return converter


def _shaped_unstructure(cls: type[Any], converter: cattrs.Converter) -> Any:
    fields = attrs.fields(cls)
    overrides = {
        f.name: override(
            rename=wire_name(f) if "wire" in f.metadata else None,
            # JSON data already (e.g. a page's fields): walking it would only copy it, and
            # deep data would exhaust the stack.
            unstruct_hook=_as_is if "as_is" in f.metadata else None,
        )
        for f in fields
        if "wire" in f.metadata or "as_is" in f.metadata
    }
    base = make_dict_unstructure_fn(cls, converter, **cast(Any, overrides))
    optional = [wire_name(f) for f in fields if omits_none(f)]

    def unstructure(value: Any) -> dict[str, Any]:
        out: dict[str, Any] = base(value)
        for key in optional:
            if out[key] is None:
                del out[key]
        return out

    return unstructure


def _as_is(value: Any) -> Any:
    return value


CONVERTER = _make_converter()


def structure(data: object, cls: type[T], *, what: str | None = None) -> T:
    """Inbound JSON → request (`pager.requests`), or `validation_failed` naming each bad field
    (in `arguments`) and its problem, never its value (it may be a message body). `what`: the
    tool or command the fields are arguments of; None: a request body."""
    if not isinstance(data, dict):
        raise PagerError(ErrorCode.VALIDATION_FAILED, "the request body must be a JSON object")
    try:
        value = CONVERTER.structure(data, cls)
    except cattrs.BaseValidationError as exc:
        _refuse(_problems(exc, what), what)
    _refuse(_beyond_bounds(value), what)
    return value


def structure_query(args: Mapping[str, str], cls: type[T], *, what: str) -> T:
    """A request from a query string: each value is text, read as its field's type (a number,
    `true`/`false`) first; then as strict as `structure`."""
    hints = typing.get_type_hints(cls)
    kinds = {wire_name(f): without_none(hints[f.name]) for f in attrs.fields(cast(Any, cls))}
    values = {key: _from_text(text, kinds.get(key)) for key, text in args.items()}
    return structure(values, cls, what=what)


_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "off", "f", "n"})


def _from_text(text: str, kind: Any) -> object:
    """`text` as a value of `kind` if it spells one; else the text (the structurer refuses it)."""
    if kind is bool and text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    if kind in (int, float):
        try:
            number = int(text) if kind is int else float(text)
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    return text


def _refuse(problems: list[tuple[str, str]], what: str | None) -> None:
    if not problems:
        return
    arguments = list(dict.fromkeys(argument for argument, _ in problems))
    head = "invalid request" if what is None else f"invalid arguments for {what}"
    raise PagerError(
        ErrorCode.VALIDATION_FAILED,
        f"{head}: " + "; ".join(problem for _, problem in problems),
        arguments=arguments,
    )


def _problems(
    exc: BaseException, what: str | None, path: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """(top-level field, problem) for each error cattrs collected."""
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return [
            (
                (*path, key)[0],
                f"{what} has no argument {_where((*path, key))}"
                if what is not None
                else f"unknown field {_where((*path, key))}",
            )
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, cattrs.BaseValidationError):
        found: list[tuple[str, str]] = []
        for inner in exc.exceptions:
            notes = [n for n in getattr(inner, "__notes__", []) if hasattr(n, "name")]
            step = (_wire_name_of(exc, str(notes[0].name)),) if notes else ()
            found += _problems(inner, what, (*path, *step))
        return found
    top = path[0] if path else "arguments"
    if isinstance(exc, KeyError):  # a required field is missing
        return [(top, f"{_where(path)} is required")]
    return [(top, f"{_where(path)}: {_plain(exc)}")]


def _wire_name_of(exc: cattrs.BaseValidationError, name: str) -> str:
    """The JSON name of field `name` of the class `exc` is about (cattrs names attributes)."""
    cls = getattr(exc, "cl", None)
    if cls is None or not attrs.has(cls) or name not in attrs.fields_dict(cls):
        return name
    return wire_name(attrs.fields_dict(cls)[name])


def _where(path: tuple[str, ...]) -> str:
    return repr(".".join(path)) if path else "the arguments"


def _plain(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(message for _, message in _problems(exc, None))
    return str(exc)


def _beyond_bounds(request: object, path: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(top-level field, problem) for each field of `request` outside its `check` bounds."""
    found: list[tuple[str, str]] = []
    for name, wire, check in _checked_fields(cast(Any, type(request))):
        value = getattr(request, name)
        if hasattr(type(value), "__attrs_attrs__"):  # a nested request (a delivery)
            found += _beyond_bounds(value, (*path, wire))
        problem = _bound_problem(value, check) if check and value is not None else None
        if problem is not None:
            where = (*path, wire)
            found.append((where[0], f"{_where(where)}: {problem}"))
    return found


@functools.cache
def _checked_fields(cls: type) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """(name, wire name, bounds) of each field of request class `cls` (once per class: this
    runs on every request)."""
    return tuple(
        (f.name, wire_name(f), f.metadata.get("check", {})) for f in attrs.fields(cast(Any, cls))
    )


def _bound_problem(value: object, check: dict[str, Any]) -> str | None:
    """What is wrong with `value` under JSON Schema keywords `check`, or None."""
    if value is None or not check:
        return None
    if isinstance(value, str):
        if len(value) < check.get("minLength", 0):
            return f"should have at least {check['minLength']} character(s)"
        if len(value) > check.get("maxLength", math.inf):
            return f"should have at most {check['maxLength']} characters"
        if "pattern" in check and _pattern(check["pattern"]).search(value) is None:
            return f"should match the pattern {check['pattern']}"
    elif isinstance(value, list):
        if len(value) < check.get("minItems", 0):
            return f"should have at least {check['minItems']} item(s)"
        if len(value) > check.get("maxItems", math.inf):
            return f"should have at most {check['maxItems']} items"
        for index, item in enumerate(value):
            problem = _bound_problem(item, check.get("items", {}))
            if problem is not None:
                return f"item {index}: {problem}"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            return "should be a finite number"
        if value < check.get("minimum", -math.inf):
            return f"should be at least {check['minimum']}"
        if value > check.get("maximum", math.inf):
            return f"should be at most {check['maximum']}"
        if "exclusiveMinimum" in check and value <= check["exclusiveMinimum"]:
            return f"should be greater than {check['exclusiveMinimum']}"
    return None


@functools.cache
def _pattern(pattern: str) -> re.Pattern[str]:
    """A JSON Schema pattern as Python reads it: its `$` ends the text (not a last line)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern)


def _origin(kind: Any) -> Any:
    return get_origin(kind)


def _variants(kind: Any) -> tuple[type, ...]:
    """The request classes of a union of them told apart by a `kind` field (else empty)."""
    if get_origin(kind) not in (Union, types.UnionType):
        return ()
    classes = tuple(arg for arg in get_args(kind) if arg is not type(None))
    told_apart = all(
        attrs.has(cls) and get_origin(typing.get_type_hints(cls).get("kind")) is Literal
        for cls in classes
    )
    return classes if classes and told_apart else ()


def unstructure(value: object) -> Any:
    """Outbound attrs objects (e.g. `pager.domain.views`) → JSON-ready dicts and lists."""
    return CONVERTER.unstructure(value)
