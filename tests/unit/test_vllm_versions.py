"""Each rule of engine/vllm_versions.py, shown on the smallest case (the real wheels: tests/vllm/)."""

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError, InvalidRequestError
from engine.events import BlockRemoved, BlockStored
from engine.hashing import DEFAULT_SHA256_SEED, BlockHasher, external_block_hash
from engine.kv_cache import KVCacheManager
from engine.llm_engine import LLMEngine
from engine.request import RequestStatus, SamplingParams
from engine.vllm_versions import DEFAULT_VLLM_VERSION, VLLM_VERSIONS, get_vllm_version, version_choices
from tests.unit.conftest import admit, make_request


def queue(m):
    return [b.block_id for b in m.block_pool.free_block_queue.get_all_free_blocks()]


def test_versions_are_listed_with_labels_summaries_and_a_reason_per_rule():
    assert DEFAULT_VLLM_VERSION == "0.33"
    assert [name for name, _, _ in version_choices()] == ["0.23", "0.25", "0.33"]
    for version in VLLM_VERSIONS.values():
        assert version.label and version.summary
        assert all(why for _, _, why in version.rules())
    with pytest.raises(ConfigError, match="Unknown vllm_version"):
        get_vllm_version("0.99")


def test_engine_config_takes_a_version_and_reads_the_older_policy_names():
    assert EngineConfig(backend="simulator").version.name == "0.33"
    assert EngineConfig(backend="simulator", vllm_version="0.25").version.name == "0.25"
    assert EngineConfig(backend="simulator", vllm_version="classic").version.name == "0.23"
    assert EngineConfig(backend="simulator", vllm_version="vllm").version.name == "0.33"
    with pytest.raises(ConfigError, match="Unknown vllm_version"):
        EngineConfig(backend="simulator", vllm_version="1.0")
    with pytest.raises(ConfigError, match="Unknown vllm_version"):
        EngineConfig(backend="simulator", vllm_version="lifo")
    with pytest.raises(TypeError):
        EngineConfig(backend="simulator", free_policy="classic")  # type: ignore[call-arg]  (one knob only)
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=8, vllm_version="0.23"))
    assert engine.kv_cache_manager.version.name == "0.23" and engine.kv_cache_manager.block_pool.free_policy == "classic"


def test_watermark_counts_the_null_block_and_waits_for_a_running_request():
    m = KVCacheManager(10, 4, watermark=0.3)
    assert m.watermark_blocks == 3  # int(0.3 * 10), the null block included, as vLLM counts
    big = make_request("big", range(32))  # 8 of the 9 usable blocks
    assert m.allocate_slots(big, 32, has_scheduled_reqs=True) is None  # 8 + 3 > 9
    assert m.allocate_slots(big, 32, has_scheduled_reqs=False) is not None  # idle engine: the whole pool


def test_watermark_spares_running_requests_and_does_not_exist_in_0_23():
    m = KVCacheManager(10, 4, watermark=0.3)
    small = make_request("s", range(20))  # 5 blocks: 5 + 3 <= 9
    assert m.allocate_slots(small, 20) is not None
    small.status = RequestStatus.RUNNING
    small.num_computed_tokens = 20
    small.append_output_token_ids([1] * 13)  # 33 tokens: 4 more blocks, leaving none free
    assert m.allocate_slots(small, 13) is not None
    old = KVCacheManager(10, 4, watermark=0.3, vllm_version="0.23")
    assert old.watermark_blocks == 0
    assert old.allocate_slots(make_request("big", range(36)), 36) is not None  # all 9 blocks


def test_stats_skip_requests_that_cannot_read_the_cache():
    for version in VLLM_VERSIONS:
        off = KVCacheManager(10, 4, enable_caching=False, vllm_version=version)
        admit(off, make_request("a", range(9)))
        assert off.prefix_cache_stats.requests == 0 and off.prefix_cache_stats.queries == 0
        on = KVCacheManager(10, 4, vllm_version=version)
        admit(on, make_request("p", range(9), prompt_logprobs=2))
        assert on.prefix_cache_stats.queries == 0
        admit(on, make_request("b", range(9)))
        assert (on.prefix_cache_stats.requests, on.prefix_cache_stats.queries, on.prefix_cache_stats.hits) == (1, 9, 8)


@pytest.mark.parametrize(("version", "queries"), [("0.23", 18), ("0.25", 18), ("0.33", 9)])
def test_stats_count_every_lookup_up_to_0_25_and_each_admission_from_0_33(version, queries):
    m = KVCacheManager(4, 4, vllm_version=version)  # 3 usable blocks
    hog = make_request("hog", range(100, 108))
    admit(m, hog)  # 2 blocks
    late = make_request("late", range(9))  # needs 3
    hits, n = m.get_computed_blocks(late)
    assert m.allocate_slots(late, 9 - n, n, hits) is None  # a lookup that could not be scheduled
    m.free(hog)
    admit(m, late)  # looked up again, admitted
    assert m.prefix_cache_stats.queries - 8 == queries


def test_prompt_logprobs_is_a_sampling_param():
    params = SamplingParams(prompt_logprobs=0)
    assert make_request("x", [1, 2], prompt_logprobs=None).skip_reading_prefix_cache is False
    request = make_request("y", [1, 2])
    request.sampling_params = params
    assert request.skip_reading_prefix_cache and request.prompt_logprobs == 0
    with pytest.raises(InvalidRequestError, match="prompt_logprobs"):
        SamplingParams(prompt_logprobs=-1)


def test_extra_keys_are_plain_before_0_33_and_tagged_from_it():
    def first_block_keys(version):
        return BlockHasher("sha256", "s", version).extra_keys(0, lora_name="math", lora_path="/m", cache_salt="salt")

    assert first_block_keys("0.25") == first_block_keys("0.23") == ("math", "salt")
    assert first_block_keys("0.33") == (("lora", "math", "/m"), ("cache_salt", "salt"))
    tokens = list(range(8))
    old, new = BlockHasher("sha256", "s", "0.25"), BlockHasher("sha256", "s", "0.33")
    assert old.hash_request(tokens, 4, lora_name="m") != new.hash_request(tokens, 4, lora_name="m")
    assert old.hash_request(tokens, 4) == new.hash_request(tokens, 4)  # no extra keys: same digests


def test_none_hash_seed_per_version(monkeypatch):
    assert BlockHasher("sha256", vllm_version="0.33").seed == DEFAULT_SHA256_SEED
    a, b = BlockHasher("sha256", vllm_version="0.25"), BlockHasher("sha256", vllm_version="0.25")
    assert a.seed is None and len(a.none_hash) == 32 and a.none_hash != b.none_hash and "random" in a.seed_reason
    assert len(BlockHasher("xxhash", vllm_version="0.25").none_hash) == 32  # raw bytes, not a digest
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    assert BlockHasher("sha256", vllm_version="0.25").none_hash == BlockHasher("sha256", vllm_version="0.33").none_hash


def test_kv_events_publish_what_vllm_publishes():
    m = KVCacheManager(3, 4)  # 2 usable blocks
    a = make_request("a", range(5), lora_name="math", lora_path="/m", lora_id=3, cache_salt="s")
    admit(m, a)
    stored = [e for e in m.take_events() if isinstance(e, BlockStored)]
    assert len(stored) == 1
    fields = stored[0].published()
    assert fields["block_hashes"] == [external_block_hash(a.block_hashes[0])]
    assert 0 <= fields["block_hashes"][0] < 2**64
    assert fields["block_hashes"][0] == int.from_bytes(a.block_hashes[0][-8:], "big")  # the digest's low 64 bits
    assert (fields["lora_id"], fields["lora_name"], fields["medium"]) == (3, "math", "GPU")
    assert fields["extra_keys"] == [("math", "s")]  # untagged on the wire, even in 0.33
    assert (fields["group_idx"], fields["kv_cache_spec_kind"]) == (0, "full_attention")
    m.free(a)
    admit(m, make_request("b", range(100, 108)))  # evicts a's block
    removed = [e for e in m.take_events() if isinstance(e, BlockRemoved)]
    assert removed[0].published()["block_hashes"] == [external_block_hash(a.block_hashes[0])]


def test_scheduler_applies_the_watermark_only_once_a_request_runs():
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=11, block_size=4, watermark=0.5))
    first = engine.add_request(list(range(24)), SamplingParams(max_tokens=1))  # 6 of 10 blocks: idle engine, no reserve
    second = engine.add_request(list(range(100, 108)), SamplingParams(max_tokens=1))  # 2 more: 6 + 2 + 5 > 10
    engine.step()
    assert engine.get_request(first).num_cached_tokens == 0 and engine.get_request(first).is_finished
    assert not engine.get_request(second).is_finished  # held back while `first` ran
    engine.step()
    assert engine.get_request(second).is_finished
