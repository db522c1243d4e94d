"""Each engine spells a shared statement's parameters its own way (pager/store/_sql.py): the
template marks them structurally, each dialect says how it writes one, and nothing rewrites a
statement's text to turn one engine's spelling into the other's."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import pager.store
from pager.store._dialect import SQLITE, dialect_of
from pager.store._sql import QMARK, Sql, sql
from pager.store.pg._batch import BatchConn
from pager.store.pg._conn import PgConn
from pager.store.pg._dialect import POSTGRESQL, PSYCOPG

STORE = Path(pager.store.__file__).parent


def _store_modules() -> Iterator[ModuleType]:
    for info in pkgutil.walk_packages([str(STORE)], prefix="pager.store."):
        yield importlib.import_module(info.name)


def test_each_dialect_spells_positional_and_named_parameters() -> None:
    positional = sql("SELECT a FROM t WHERE b = {} AND c > {}")
    assert str(positional) == "SELECT a FROM t WHERE b = ? AND c > ?"
    assert positional.spelled(PSYCOPG) == "SELECT a FROM t WHERE b = %s AND c > %s"
    named = sql("SELECT * FROM d WHERE due <= {now} AND {now} > 0 LIMIT {most}")
    assert str(named) == "SELECT * FROM d WHERE due <= :now AND :now > 0 LIMIT :most"
    assert named.spelled(PSYCOPG) == (
        "SELECT * FROM d WHERE due <= %(now)s AND %(now)s > 0 LIMIT %(most)s"
    )
    assert (positional.arity, named.arity, named.names) == (2, 2, ("now", "most"))


def test_a_literal_percent_is_psycopgs_to_escape_and_a_cast_is_text() -> None:
    statement = sql("SELECT now()::text WHERE name LIKE 'a%' AND x = {}")
    assert str(statement) == "SELECT now()::text WHERE name LIKE 'a%' AND x = ?"
    assert statement.spelled(PSYCOPG) == "SELECT now()::text WHERE name LIKE 'a%%' AND x = %s"
    assert str(sql("SELECT '{{}}'")) == "SELECT '{}'"


def test_a_statement_is_parsed_and_spelled_once() -> None:
    template = "SELECT 1 FROM t WHERE spelled_once = {}"
    statement = sql(template)
    assert sql(template) is statement
    assert statement.spelled(PSYCOPG) is statement.spelled(PSYCOPG)


@pytest.mark.parametrize(
    ("template", "wrong"),
    [
        ("SELECT a FROM t WHERE b = ?", "not SQLite's '?'"),
        ("SELECT a FROM t WHERE b = :b", "not SQLite's ':'"),
        ("SELECT {0}", "is `{}` or `{name}`"),
        ("SELECT {a!r}", "is `{}` or `{name}`"),
        ("SELECT {a:>3}", "is `{}` or `{name}`"),
        ("SELECT {a}, {}", "all positional or all named"),
    ],
)
def test_a_template_in_another_spelling_is_refused_by_name(template: str, wrong: str) -> None:
    with pytest.raises(ValueError, match=wrong.replace("(", r"\(").replace("{", r"\{")):
        Sql(template)


def test_each_engine_speaks_its_own_dialect() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        assert dialect_of(conn) is SQLITE
        assert conn.execute(sql("SELECT {} + {}"), (1, 2)).fetchone() == (3,)
    finally:
        conn.close()
    assert (SQLITE.spelling, POSTGRESQL.spelling) == (QMARK, PSYCOPG)
    assert (PgConn.dialect, BatchConn.dialect) == (POSTGRESQL, POSTGRESQL)


def test_no_store_module_rewrites_sql_text() -> None:
    """No module of the store imports `re` (the old adapter turned SQLite's `?`/`:name` into
    psycopg's by regex), and the translation function is gone."""
    offenders = []
    for path in sorted(STORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            ) + ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if "re" in names:
                offenders.append(str(path.relative_to(STORE)))
            if isinstance(node, ast.FunctionDef) and node.name == "to_psycopg":
                offenders.append(f"{path.relative_to(STORE)}: to_psycopg")
    assert offenders == []


def _templates(module: ModuleType) -> Iterator[tuple[str, str]]:
    """Each `sql(...)` of `module` whose template is known without running it: a literal, or
    an f-string over the module's constants (where: its line)."""
    source = Path(module.__file__ or "").read_text()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "sql"):
            continue
        try:
            template = eval(  # the store's own constants build the template
                compile(ast.Expression(node.args[0]), module.__name__, "eval"),
                dict(vars(module)),
            )
        except NameError:
            continue  # built from a call's values: checked when it runs (`Sql` refuses)
        yield f"{module.__name__}:{node.lineno}", template


def _marks(text: str, starts: tuple[str, ...]) -> int:
    """The parameter marks of a statement's text outside its quoted strings."""
    count, quote, at = 0, "", 0
    while at < len(text):
        char = text[at]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif any(text.startswith(mark, at) for mark in starts):
            named = text[at + 1 : at + 2]
            count += char != ":" or ((named.isalpha() or named == "_") and text[at - 1] != ":")
        at += 1
    return count


def test_every_shared_statement_renders_for_both_dialects_with_its_parameters() -> None:
    """Walk the statements of every store module: each renders in both spellings with as many
    parameter marks as its template has parameters (a leftover `?`, `:name` or `%s` of one
    engine's spelling would count differently, or be refused)."""
    walked = 0
    for module in _store_modules():
        for where, template in _templates(module):
            statement = sql(template)
            fields = template.count("{}") if not statement.names else None
            sqlite_marks = _marks(str(statement), ("?", ":"))
            psycopg_marks = _marks(statement.spelled(PSYCOPG), ("%s", "%("))
            assert sqlite_marks == psycopg_marks, where
            if fields is not None:
                assert fields == statement.arity == sqlite_marks, where
            walked += 1
    assert walked > 150  # the walk reached the store's statements
