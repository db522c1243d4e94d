"""The one cattrs converter and the JSON shapes of SPEC §6/§8 (domain objects ↔ JSON)."""

from __future__ import annotations

import enum
from typing import Any, TypeVar, cast

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from pager.domain.errors import ErrorCode, PagerError
from pager.schema import omits_none, wire_name

T = TypeVar("T")


@attrs.frozen
class DeliveryRequest:
    kind: str
    url: str | None = None
    path: str | None = None


@attrs.frozen
class RegisterRequest:
    """The body of `POST /v1/register` (SPEC §6)."""

    workspace: str
    implementation: str
    session_name: str | None = None
    conversation_key: str | None = None
    delivery: DeliveryRequest | None = None
    force: bool = False
    resume_token: str | None = None


@attrs.frozen
class HookClaimRequest:
    """The body of `POST /v1/hook/claim`."""

    implementation: str
    conversation_key: str
    max_chars: int = 9000
    wait_s: float = 0.0  # long poll: answer as soon as mail waits, or after this long
    # The wrapper's session token from the hook's environment: binds a conversation the
    # broker does not know yet (a harness whose ids the wrapper cannot choose) to its session.
    session_token: str | None = None
    # A person typed a prompt into the harness (not a wake Pager caused): the identity's next
    # send starts a new chain (SPEC §8.1).
    prompted: bool = False
    # The harness process the hook runs under (`pid:start time`): commands its agent runs find
    # the session through it (SPEC §4.2, rule 2).
    harness: str | None = None


@attrs.frozen
class HookAckRequest:
    """The body of `POST /v1/hook/ack`."""

    agent_id: str
    tokens: list[str]


@attrs.frozen
class WakeOnRequest:
    """The body of `PUT /v1/agents/{id}/wake` (`pager wake on`); bounds are the domain's
    (`pager.domain.wake.check_settings`)."""

    command: list[str] | None = None
    max_runs_per_hour: int | None = None
    timeout_s: float | None = None


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

    converter.register_structure_hook(float, number)
    converter.register_structure_hook(int, whole)
    for kind in (str, bool):
        converter.register_structure_hook(kind, strict(kind))
    for cls in (DeliveryRequest, RegisterRequest, HookClaimRequest, HookAckRequest, WakeOnRequest):
        converter.register_structure_hook(
            cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True)
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


def structure(data: object, cls: type[T]) -> T:
    """Inbound JSON → attrs object, or `validation_failed` naming every problem."""
    if not isinstance(data, dict):
        raise PagerError(ErrorCode.VALIDATION_FAILED, "the request body must be a JSON object")
    try:
        return CONVERTER.structure(data, cls)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(_describe(exc))
        raise PagerError(ErrorCode.VALIDATION_FAILED, f"invalid request: {problems}") from None


def unstructure(value: object) -> Any:
    """Outbound attrs objects (e.g. `pager.domain.views`) → JSON-ready dicts and lists."""
    return CONVERTER.unstructure(value)


def _describe(exc: BaseException, path: str = "") -> list[str]:
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return [f"unknown field {path}{key!r}" for key in sorted(exc.extra_fields)]
    if isinstance(exc, cattrs.BaseValidationError):
        notes = cattrs.transform_error(exc)
        return notes or [str(exc)]
    return [f"{path}{exc}"]
