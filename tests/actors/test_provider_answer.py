"""What a delivery address's answer says was taken (actors/provider.py `refused_tokens`): only
the tokens a 2xx answer names as accepted; everything else comes back to the queue."""

from __future__ import annotations

from actors.provider import refused_tokens

TOKENS = ["clm_a", "clm_b", "clm_c"]


def test_a_2xx_answer_naming_some_tokens_refuses_the_others() -> None:
    raw = b'{"accepted": ["clm_b", "clm_zz", 7]}'  # a token not pushed, a non-string: ignored
    assert refused_tokens(TOKENS, 200, raw) == ("clm_a", "clm_c")
    assert refused_tokens(TOKENS, 202, b'{"accepted": ["clm_a", "clm_b", "clm_c"]}') == ()


def test_anything_but_an_explicit_acceptance_refuses_them_all() -> None:
    accepted_all = b'{"accepted": ["clm_a", "clm_b", "clm_c"]}'
    assert refused_tokens(TOKENS, 500, accepted_all) == tuple(TOKENS)  # not 2xx
    assert refused_tokens(TOKENS, 200, b"ok") == tuple(TOKENS)  # not JSON
    assert refused_tokens(TOKENS, 200, b'["clm_a"]') == tuple(TOKENS)  # not an object
    assert refused_tokens(TOKENS, 204, b"") == tuple(TOKENS)  # says nothing
