"""Block hashes: chaining, extra keys, seeds, and byte-identity with vLLM's digests."""

import hashlib
import pickle

import cbor2
import pytest
import xxhash

from engine.errors import ConfigError
from engine.hashing import DEFAULT_SHA256_SEED, HASH_FUNCTIONS, BlockHasher, block_extra_keys

# Check values from the SPEC (computed by vLLM with algo sha256, seed "vllm-none-hash").
VLLM_NONE_HASH_PREFIX = "066b1e89"
VLLM_NONE_HASH_SUFFIX = "d71198"
VLLM_BLOCK0_0_15 = "fe8fa5dda3210d0ca2031e37cbe3b001186773cd1c710beb2d45fcb51d434798"


@pytest.fixture(autouse=True)
def no_env_seed(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)


def test_sha256_check_values_match_vllm():
    h = BlockHasher("sha256")
    assert h.seed == DEFAULT_SHA256_SEED
    assert h.none_hash.hex().startswith(VLLM_NONE_HASH_PREFIX)
    assert h.none_hash.hex().endswith(VLLM_NONE_HASH_SUFFIX)
    assert h.hash_block(None, list(range(16))).hex() == VLLM_BLOCK0_0_15
    assert h.hash_request(list(range(16)), 16)[0].hex() == VLLM_BLOCK0_0_15


def _reference(algo: str, obj) -> bytes:
    """vLLM's serialise+digest recipe for each algorithm, spelled out independently."""
    data = cbor2.dumps(obj, canonical=True) if algo.endswith("cbor") else pickle.dumps(obj, protocol=5)
    return hashlib.sha256(data).digest() if algo.startswith("sha256") else xxhash.xxh3_128_digest(data)


@pytest.mark.parametrize("algo", sorted(HASH_FUNCTIONS))
@pytest.mark.parametrize(
    "extra",
    [None, (("lora", "math", "/adapters/math"),), (("cache_salt", "s3cret"),), (("lora", "a", None), ("cache_salt", "x"))],
)
def test_each_algorithm_hashes_the_vllm_tuple(algo, extra):
    h = BlockHasher(algo, seed="fixed")
    assert h.none_hash == _reference(algo, "fixed")
    assert len(h.none_hash) == (32 if algo.startswith("sha256") else 16)
    parent = h.hash_block(None, [1, 2, 3, 4])
    assert parent == _reference(algo, (h.none_hash, (1, 2, 3, 4), None))
    assert h.hash_block(parent, [5, 6, 7, 8], extra) == _reference(algo, (parent, (5, 6, 7, 8), extra))


def test_only_full_blocks_are_hashed_and_chained():
    h = BlockHasher()
    hashes = h.hash_request(list(range(10)), 4)
    assert len(hashes) == 2  # tokens 8, 9 form a partial block: never hashed
    assert hashes[1] == h.hash_block(hashes[0], [4, 5, 6, 7])


def test_chain_makes_a_block_hash_stand_for_its_whole_prefix():
    h = BlockHasher()
    a = h.hash_request([1, 2, 3, 4, 9, 9, 9, 9], 4)
    b = h.hash_request([7, 2, 3, 4, 9, 9, 9, 9], 4)
    assert a[1] != b[1]  # same tokens in block 1, different prefix


def test_extra_keys_lora_on_every_block_salt_on_first_only():
    assert block_extra_keys(0) is None
    assert block_extra_keys(0, lora_name="math", lora_path="/p") == (("lora", "math", "/p"),)
    assert block_extra_keys(3, lora_name="math") == (("lora", "math", None),)
    assert block_extra_keys(0, cache_salt="s") == (("cache_salt", "s"),)
    assert block_extra_keys(1, cache_salt="s") is None
    assert block_extra_keys(0, lora_name="m", cache_salt="s") == (("lora", "m", None), ("cache_salt", "s"))


def test_salt_changes_every_hash_of_the_chain():
    h = BlockHasher()
    plain = h.hash_request(list(range(12)), 4)
    salted = h.hash_request(list(range(12)), 4, cache_salt="tenant-a")
    assert all(p != s for p, s in zip(plain, salted))
    assert salted[0] == h.hash_block(None, [0, 1, 2, 3], (("cache_salt", "tenant-a"),))
    assert salted[1] == h.hash_block(salted[0], [4, 5, 6, 7], None)


def test_seed_resolution(monkeypatch):
    assert BlockHasher("sha256").seed_reason.startswith("fixed")
    x1, x2 = BlockHasher("xxhash"), BlockHasher("xxhash")
    assert x1.seed != x2.seed and "random" in x1.seed_reason  # secret per process
    assert BlockHasher("xxhash", seed="abc").none_hash == BlockHasher("xxhash", seed="abc").none_hash
    monkeypatch.setenv("PYTHONHASHSEED", "42")
    assert BlockHasher("xxhash_cbor").seed == "42"
    assert BlockHasher("sha256", seed="given").seed == "given"


def test_two_hashers_coexist_in_one_process():
    a, b = BlockHasher("sha256"), BlockHasher("sha256_cbor", seed="other")
    assert a.none_hash != b.none_hash
    assert a.hash_block(None, [1]) == BlockHasher("sha256").hash_block(None, [1])


def test_unknown_algorithm_is_a_clear_error():
    with pytest.raises(ConfigError, match="Unknown hash algorithm 'md5'"):
        BlockHasher("md5")
    with pytest.raises(ValueError, match="block_size"):
        BlockHasher().hash_request([1, 2], 0)
