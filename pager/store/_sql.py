"""A statement's text with its parameters marked, spelled by each engine its own way.

The store's statements shared by both engines are templates whose parameters are Python
format fields: `{}` for a positional one, `{name}` for a named one (a literal brace is
written `{{` or `}}`). Each engine's dialect says how it spells a parameter (its `Spelling`):
SQLite's `?` and `:name` (`QMARK`, here, since an `Sql` is SQLite's text as it is),
psycopg's `%s` and `%(name)s` (pager/store/pg/_dialect.py). The template is parsed once,
when the statement is made, and each spelling of it is kept on the statement: running one
costs a dictionary lookup, never a rewrite of its text.
"""

from __future__ import annotations

from functools import lru_cache
from string import Formatter


class Spelling:
    """How an engine's driver writes a statement's parameters and its literal text."""

    def parameter(self, name: str | None) -> str:
        """The mark of a parameter: positional (`name` None) or named."""
        raise NotImplementedError

    def literal(self, text: str) -> str:
        """The statement's own text between parameters, as the driver must be given it."""
        return text


class QmarkSpelling(Spelling):
    """SQLite's (the `sqlite3` module's): `?` and `:name`; the text as it is."""

    def parameter(self, name: str | None) -> str:
        return "?" if name is None else f":{name}"

    def literal(self, text: str) -> str:
        """The text as it is; one holding a `?` or `:name` of its own (outside a quoted
        string) is refused: SQLite would take it for a parameter, and it has no escape."""
        quote = ""
        for at, char in enumerate(text):
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "?" or (char == ":" and _names_after(text, at)):
                raise ValueError(
                    "a statement's template marks its parameters `{}` or `{name}`, not"
                    f" SQLite's {char!r}: {text!r}"
                )
        return text


def _names_after(text: str, at: int) -> bool:
    """Whether the `:` at `at` starts a name (`:name`), not a cast (`::type`)."""
    follows = text[at + 1 : at + 2]
    return (follows.isalpha() or follows == "_") and text[at - 1 : at] != ":"


QMARK = QmarkSpelling()


class Sql(str):
    """A shared statement: its value is SQLite's spelling (an `sqlite3.Connection` takes it
    as it is); another engine asks for its own with `spelled`. Made by `sql`."""

    template: str
    #: The named parameters' names, in order of first use (empty for positional ones).
    names: tuple[str, ...]
    #: How many parameters the statement takes: its marks (positional) or its names.
    arity: int
    _pieces: _Pieces
    _spellings: dict[Spelling, str]

    def __new__(cls, template: str) -> Sql:
        pieces = _parse(template)
        statement = super().__new__(cls, _spell(pieces, QMARK))
        statement.template = template
        named = [name for _, name in pieces if name]
        statement.names = tuple(dict.fromkeys(named))
        statement.arity = len(statement.names) if named else sum(name == "" for _, name in pieces)
        statement._pieces = pieces
        statement._spellings = {QMARK: str(statement)}
        return statement

    def spelled(self, spelling: Spelling) -> str:
        """The statement's text with `spelling`'s marks (kept: spelled once per engine)."""
        text = self._spellings.get(spelling)
        if text is None:
            text = self._spellings[spelling] = _spell(self._pieces, spelling)
        return text

    def __repr__(self) -> str:
        return f"sql({self.template!r})"


#: A template cut at its parameters: each literal text with the name of the parameter that
#: follows it ("" positional, None after the last text).
_Pieces = tuple[tuple[str, str | None], ...]


def _parse(template: str) -> _Pieces:
    pieces: list[tuple[str, str | None]] = []
    for text, name, spec, conversion in Formatter().parse(template):
        if name is not None and (spec or conversion or name.isdigit()):
            raise ValueError(
                f"a statement's parameter is `{{}}` or `{{name}}`, not {{{name}...}}: {template!r}"
            )
        pieces.append((text, name))
    if not pieces or pieces[-1][1] is not None:
        pieces.append(("", None))
    kinds = {name == "" for _, name in pieces if name is not None}
    if len(kinds) > 1:
        raise ValueError(f"a statement's parameters are all positional or all named: {template!r}")
    return tuple(pieces)


def _spell(pieces: _Pieces, spelling: Spelling) -> str:
    return "".join(
        spelling.literal(text) + ("" if name is None else spelling.parameter(name or None))
        for text, name in pieces
    )


@lru_cache(maxsize=4096)
def sql(template: str) -> Sql:
    """The statement of `template` (see the module's docstring); one object per template, so
    a statement written inline is parsed and spelled once, however often it runs."""
    return Sql(template)


def qualified(columns: str, table: str) -> str:
    """`columns` (a comma-separated list of a table's columns) as read from the row named
    `table` in a statement: each written `table.column`."""
    return ", ".join(f"{table}.{column.strip()}" for column in columns.split(","))


def column_count(columns: str) -> int:
    """How many columns a comma-separated list of them names (where a row read through a
    join moves on to the next table's)."""
    return len(columns.split(","))
