"""The prefix probe: r1 really runs, r2's verdict is the engine's own lookup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError, InvalidRequestError
from engine.hashing import BlockHasher
from teaching.pages.prefix_probe import RequestSpec, parse_token_ids, probe_prefix_cache, replace_token

R1 = "the cat sat on the mat and then the cat ran off fast"
R2 = "the cat sat on the mat and then the dog ran off fast"


def test_hashes_are_the_engines_and_match_vllm() -> None:
    result = probe_prefix_cache(RequestSpec(list(range(16))), RequestSpec(list(range(16))), block_size=16)
    assert result.none_hash.hex().startswith("066b1e89") and result.none_hash.hex().endswith("d71198")
    assert result.cached.blocks[0].block_hash.hex() == "fe8fa5dda3210d0ca2031e37cbe3b001186773cd1c710beb2d45fcb51d434798"
    assert result.cached.blocks[0].parent_hash == result.none_hash


def test_lookup_stops_at_the_first_differing_block() -> None:
    result = probe_prefix_cache(RequestSpec(R1), RequestSpec(R2), block_size=4)
    assert result.lookup.request_id == "r2"
    assert result.lookup.first_miss_block_index == 2 and result.num_hit_blocks == 2
    assert result.first_diff_token == 9 and result.first_diff_block == 2
    assert [b.hit_block_id is not None for b in result.probe.blocks] == [True, True, False, False]
    assert [b.in_table for b in result.probe.blocks] == [True, True, False, False]
    assert result.probe.blocks[3].block_hash is None and not result.probe.blocks[3].is_full
    assert result.probe.tokens_text[9] == "dog" and result.cached.tokens_text[9] == "cat"
    # The table holds exactly r1's full blocks at the time of r2's lookup.
    assert set(result.hash_table) == {b.block_hash for b in result.cached.full_blocks}


def test_extra_keys_salt_on_block_zero_lora_on_every_block() -> None:
    result = probe_prefix_cache(RequestSpec(R1), RequestSpec(R1, cache_salt="s", lora_name="x"), block_size=4)
    keys = [b.extra_keys for b in result.probe.full_blocks]
    assert keys[0] == (("lora", "x", None), ("cache_salt", "s"))
    assert all(k == (("lora", "x", None),) for k in keys[1:])
    assert result.num_hit_blocks == 0 and result.first_diff_token is None and result.first_diff_block == 0


def test_blank_salt_and_lora_mean_none() -> None:
    result = probe_prefix_cache(RequestSpec(R1, "", ""), RequestSpec(R1, "", ""), block_size=4)
    assert result.probe.spec.cache_salt is None and result.probe.blocks[0].extra_keys is None
    assert result.num_hit_blocks == 3


def test_xxhash_default_seed_is_random_and_explained() -> None:
    result = probe_prefix_cache(RequestSpec(R1), RequestSpec(R1), hash_algo="xxhash")
    assert "random" in result.seed_reason and len(result.none_hash) == 16
    pinned = probe_prefix_cache(RequestSpec(R1), RequestSpec(R1), hash_algo="xxhash", hash_seed="42")
    assert pinned.none_hash == BlockHasher("xxhash", "42").none_hash


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"block_size": 0}, "block_size"), ({"hash_algo": "md5"}, "Unknown hash algorithm")],
)
def test_bad_settings_raise_clear_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        probe_prefix_cache(RequestSpec(R1), RequestSpec(R2), **kwargs)


def test_empty_prompt_names_the_request() -> None:
    with pytest.raises(InvalidRequestError, match="r2: The prompt is empty"):
        probe_prefix_cache(RequestSpec(R1), RequestSpec("   "))


def test_parse_token_ids() -> None:
    assert parse_token_ids(" 1, 2  3,4 ") == [1, 2, 3, 4]
    with pytest.raises(InvalidRequestError, match="Token 2 is 'x'"):
        parse_token_ids("1 2 x")
    with pytest.raises(InvalidRequestError, match="'-3'"):
        parse_token_ids("1 -3")
    with pytest.raises(InvalidRequestError, match="empty"):
        parse_token_ids("  ")


def test_replace_token() -> None:
    assert replace_token("a b c", 1, "z") == "a z c"
    assert replace_token([1, 2, 3], 2, 9) == [1, 2, 9]
    with pytest.raises(InvalidRequestError, match="outside the prompt"):
        replace_token("a b c", 3, "z")
    with pytest.raises(InvalidRequestError, match="one word"):
        replace_token("a b c", 0, "two words")


@settings(max_examples=40, deadline=None)
@given(
    a=st.lists(st.integers(0, 3), min_size=1, max_size=14),
    b=st.lists(st.integers(0, 3), min_size=1, max_size=14),
    block_size=st.integers(1, 5),
)
def test_hits_are_the_common_full_prefix_capped_by_the_last_token(a: list[int], b: list[int], block_size: int) -> None:
    result = probe_prefix_cache(RequestSpec(a), RequestSpec(b), block_size=block_size)
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    expected = min(common // block_size, (len(b) - 1) // block_size)
    assert result.num_hit_blocks == expected
    assert result.lookup.max_hit_blocks == (len(b) - 1) // block_size
