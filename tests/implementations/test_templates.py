"""Launch templates: the fixed placeholder set, literal braces, clear refusals."""

from __future__ import annotations

import re

import pytest

from pager.implementations.templates import PLACEHOLDERS, TemplateError, placeholders, render

VALUES = {name: f"<{name}>" for name in PLACEHOLDERS}


def test_render_fills_every_placeholder() -> None:
    """Each placeholder of the fixed set is replaced by its value, anywhere in the string."""
    for name in PLACEHOLDERS:
        assert render(f"a{{{name}}}b", VALUES) == f"a<{name}>b"
    assert (
        render('mcp_servers.pager.url="{mcp_url}"', VALUES) == 'mcp_servers.pager.url="<mcp_url>"'
    )


def test_render_doubled_braces_are_literal() -> None:
    """`{{` and `}}` stand for literal braces and are not placeholders."""
    assert placeholders('{{"a": "{token}"}}') == ("token",)
    assert render('{{"a": "{token}"}}', {"token": "t"}) == '{"a": "t"}'


def test_placeholders_unknown_name_is_refused_with_a_hint() -> None:
    """An unknown name is refused, suggesting the close one and listing the known set."""
    with pytest.raises(TemplateError, match=r"unknown placeholder \{tokn\}") as caught:
        placeholders("Bearer {tokn}")
    message = str(caught.value)
    assert "did you mean {token}?" in message
    assert all(f"{{{name}}}" in message for name in PLACEHOLDERS)


@pytest.mark.parametrize("template", ["{", "}", "a { b", "{ {url}", "{url}}x}"])
def test_placeholders_lone_brace_is_refused(template: str) -> None:
    """A brace that is neither a placeholder nor doubled is an error."""
    with pytest.raises(TemplateError, match=re.escape("write {{ or }} for a literal brace")):
        placeholders(template)


@pytest.mark.parametrize("template", ["{}", "{url!r}", "{url.x}", "{URL}", "{argv0}"])
def test_placeholders_format_syntax_is_not_supported(template: str) -> None:
    """Only bare names of the fixed set work: no conversions, attributes or other spellings."""
    with pytest.raises(TemplateError, match="unknown placeholder"):
        placeholders(template)


def test_render_missing_value_names_the_placeholder() -> None:
    """Rendering without a value for a used placeholder fails and says which."""
    with pytest.raises(TemplateError, match=r"no value for placeholder \{agent_id\}"):
        render("{url} {agent_id}", {"url": "u"})
