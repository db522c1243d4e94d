"""JSON Schemas (2020-12) of the attrs classes the edges answer with (`pager.domain.results`).

The one definition of an answer gives its JSON (through `pager.wire`) and its schema (here),
so the MCP tools' `outputSchema` and the OpenAPI components cannot drift from what is sent.
Field metadata (see `pager.domain.results`) adds keywords, renames and optional keys.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

import attrs

Schema = dict[str, Any]
#: How a nested class is written: inline (None) or as a reference the caller collects.
RefFor = Callable[[type], Schema] | None

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def wire_name(field: attrs.Attribute[Any]) -> str:
    """A field's key on the wire."""
    return str(field.metadata.get("wire", field.name))


def omits_none(field: attrs.Attribute[Any]) -> bool:
    """Whether a field's key is left out when it has no value."""
    return bool(field.metadata.get("omit_if_none", False))


def object_schema(cls: type, ref: RefFor = None) -> Schema:
    """The schema of attrs class `cls`: every key its JSON has, each required unless it may be
    left out, nothing else allowed; nested classes inline, or through `ref`."""
    hints = typing.get_type_hints(cls)
    properties: Schema = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        kind = hints[field.name]
        if omits_none(field):
            kind = without_none(kind)  # left out, never null
        else:
            required.append(wire_name(field))
        properties[wire_name(field)] = {
            **type_schema(kind, ref),
            **field.metadata.get("schema", {}),
        }
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def type_schema(kind: Any, ref: RefFor = None) -> Schema:
    """The schema of one annotation."""
    if kind is Any:
        return {}
    if kind is type(None):
        return {"type": "null"}
    if kind in _SCALARS:
        return {"type": _SCALARS[kind]}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"enum": [member.value for member in kind]}
    if isinstance(kind, type) and attrs.has(kind):
        return ref(kind) if ref is not None else object_schema(kind)
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, tuple) and (origin is list or args[-1:] == (Ellipsis,)):
        return {"type": "array", "items": type_schema(args[0], ref)}
    if origin is dict:
        return {"type": "object"}
    if origin in (Union, types.UnionType):
        return _union(args, ref)
    raise TypeError(f"no JSON Schema for {kind!r}")


def _union(args: tuple[Any, ...], ref: RefFor) -> Schema:
    options = [type_schema(arg, ref) for arg in args]
    nullable = {"type": "null"} in options
    rest = [option for option in options if option != {"type": "null"}]
    # A nullable scalar is one type list (["string", "null"]); a nullable object is `anyOf`,
    # the same whether the object is inline or a reference.
    if not nullable or len(rest) != 1:
        return {"anyOf": options}
    only = rest[0]
    if only.get("type") in (*_SCALARS.values(), "object") and "properties" not in only:
        return {**only, "type": [only["type"], "null"]}
    if "enum" in only:
        return {"enum": [*only["enum"], None]}
    return {"anyOf": options}


def without_none(kind: Any) -> Any:
    args = tuple(arg for arg in get_args(kind) if arg is not type(None))
    if get_origin(kind) not in (Union, types.UnionType) or not args:
        return kind
    return args[0] if len(args) == 1 else Union[args]  # noqa: UP007 - built from a tuple


def request_schema(cls: type, ref: RefFor = None) -> Schema:
    """The schema of request class `cls` (`pager.requests`): its fields by wire name, with
    their types, bounds (`check`), the domain's rules (`schema`) and defaults; required the
    fields without a default; nothing else allowed. Nested requests inline, or through `ref`."""
    hints = typing.get_type_hints(cls)
    inner: Callable[[type], Schema] = ref or request_schema
    properties: Schema = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if field.default is attrs.NOTHING:
            required.append(wire_name(field))
        keywords = {**field.metadata.get("check", {}), **field.metadata.get("schema", {})}
        shown = type_schema(hints[field.name], inner)
        if "items" in keywords:  # bounds of each item, beside its type
            shown["items"] = {**shown.get("items", {}), **keywords.pop("items")}
        if field.default not in (attrs.NOTHING, None):
            keywords["default"] = field.default
        properties[wire_name(field)] = {**shown, **keywords}
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema
