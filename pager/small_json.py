"""`json.dumps` and `json.loads` with their defaults, without importing the `json` package.

`import json` imports `re` (its pure-Python fallbacks compile patterns at import), which is a
third of what a quick command (`pager send`, `pager status`, the hook) imports. The work is
done by json's own C accelerator, `_json`, called here as `json.dumps` and `json.loads` call
it, so the text is the same to the byte: ASCII-only output (`\\uXXXX` escapes, surrogate pairs
above U+FFFF, lone surrogates escaped as themselves), `", "` and `": "` separators, NaN and
Infinity allowed. Without `_json` (a Python built without it) this is `json` itself.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_WHITESPACE = " \t\n\r"  # JSON's white space: what json.loads skips around the value


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class _Context:
    """The settings `_json.make_scanner` reads, as `json.JSONDecoder()` holds them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_encode: Callable[[object, int], list[str]] | None = None
_scan: Callable[[str, int], tuple[Any, int]] | None = None


def dumps(value: object) -> str:
    """`json.dumps(value)`."""
    global _encode
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(value)
    if isinstance(value, str):
        return str(_json.encode_basestring_ascii(value))
    if _encode is None:  # json.JSONEncoder().iterencode(value, _one_shot=True)'s encoder
        try:
            _encode = _json.make_encoder(
                {}, _unserializable, _json.encode_basestring_ascii, None, ": ", ", ", False,
                False, True,
            )  # fmt: skip
        except TypeError:  # a CPython whose private signature differs: json itself
            import json

            return json.dumps(value)
    return "".join(_encode(value, 0))


def loads(data: bytes | str) -> Any:
    """`json.loads(data)` of UTF-8 (or ASCII) JSON; ValueError (json's JSONDecodeError, from
    json itself, imported then) when it is not JSON."""
    global _scan
    if isinstance(data, bytes):
        if b"\x00" in data[:4]:  # UTF-16 or -32, which json.loads detects: none of ours
            import json

            return json.loads(data)
        data = data.decode("utf-8-sig" if data[:3] == b"\xef\xbb\xbf" else "utf-8", "surrogatepass")
    if _json is None:  # pragma: no cover
        import json

        return json.loads(data)
    if _scan is None:
        try:
            _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # (any object)
        except TypeError:  # a CPython whose private signature differs: json itself
            import json

            return json.loads(data)
    start = len(data) - len(data.lstrip(_WHITESPACE))
    try:
        value, end = _scan(data, start)
        if not data[end:].strip(_WHITESPACE):
            return value
    except (StopIteration, SystemError):
        pass  # not JSON: the C scanner's own error needs json.decoder loaded (SystemError)
    import json  # json's own error, with its message and position (ValueError)

    return json.loads(data)
