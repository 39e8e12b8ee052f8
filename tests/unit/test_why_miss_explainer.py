"""Plain-English verdicts: each names the rule that really stopped the lookup."""

from __future__ import annotations

import pytest

from teaching.pages.prefix_probe import RequestSpec, probe_prefix_cache
from teaching.pages.why_miss import explain

BASE = "the cat sat on the mat and then the cat ran off fast"


def verdict(r1: RequestSpec, r2: RequestSpec, block_size: int = 4):  # type: ignore[no-untyped-def]
    return explain(probe_prefix_cache(r1, r2, block_size=block_size))


def test_differing_token() -> None:
    e = verdict(RequestSpec(BASE), RequestSpec(BASE.replace("the cat ran", "the dog ran")))
    assert e.headline.startswith("r2 would hit 2 blocks (8 of its 13 tokens): block 2 differs at token 9 ('cat' vs 'dog')")
    assert any("First differing token: token 9 in block 2" in r for r in e.reasons)
    assert any("(13 - 1) // 4 = 3 blocks" in r for r in e.reasons)
    assert any("Block 3 (token 12) is partial" in r for r in e.reasons)


def test_salt() -> None:
    e = verdict(RequestSpec(BASE, cache_salt="alice"), RequestSpec(BASE, cache_salt="bob"))
    assert "hit 0 blocks" in e.headline and "cache salt differs ('alice' vs 'bob')" in e.headline
    assert any("block 0's extra keys only" in r for r in e.reasons)


def test_lora() -> None:
    e = verdict(RequestSpec(BASE), RequestSpec(BASE, lora_name="sql"))
    assert "hit 0 blocks" in e.headline and "LoRA adapter differs (none vs 'sql')" in e.headline
    assert any("every block's extra keys" in r for r in e.reasons)


def test_last_token_rule() -> None:
    prompt = "a b c d e f g h"
    e = verdict(RequestSpec(prompt), RequestSpec(prompt))
    assert "hit 1 block (4 of its 8 tokens)" in e.headline
    assert "last token (token 7)" in e.headline and "always recomputed" in e.headline


def test_r1_partial_block_was_never_cached() -> None:
    e = verdict(RequestSpec("a b c d e f"), RequestSpec("a b c d e f g h i j"))
    assert "hit 1 block" in e.headline and "block 1 was partial in r1" in e.headline


def test_partial_tail_of_r2() -> None:
    e = verdict(RequestSpec("a b c d e f g h"), RequestSpec("a b c d e f g h i j"))
    assert "hit 2 blocks" in e.headline and "partial block" in e.headline


@pytest.mark.parametrize("r2", ["a", "a b c"])
def test_too_short_to_hit(r2: str) -> None:
    e = verdict(RequestSpec("a b c d"), RequestSpec(r2))
    assert "hit 0 blocks" in e.headline and "no block can hit" in e.headline


def test_last_token_block_that_also_differs_is_not_called_a_match() -> None:
    """r2 differs in its last token: the verdict must not say every block matches."""
    e = verdict(RequestSpec("a b c d e f g h i j k l"), RequestSpec("a b c d e f g h i j k X"))
    assert "every full block matches" not in e.headline
    assert e.headline.startswith("r2 would hit 2 blocks (8 of its 12 tokens): blocks 0-1 match")
    assert "Block 2 also differs at token 11 ('l' vs 'X')" in e.headline
    assert any("First differing token: token 11 in block 2" in r for r in e.reasons)
