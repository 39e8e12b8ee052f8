"""Greedy output with the KV offloading tier == transformers', across evictions and reloads.

A small device pool makes each prompt evict the last; the tier keeps their blocks in host memory,
so coming back to a prompt loads its pages from the host tensor into fresh device blocks instead
of recomputing them. The tokens must not change, with the tier on or off, for every family.
"""

from __future__ import annotations

import random

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from tests.model.tiny_models import hf_greedy

FAMILIES = ["llama", "qwen2", "gpt2"]
MAX_TOKENS = 6


def prompts(seed: int = 3) -> list[list[int]]:
    rng = random.Random(seed)
    a = [rng.randrange(128) for _ in range(41)]
    b = [rng.randrange(128) for _ in range(41)]
    return [a, b, a, b, a[:30] + [rng.randrange(128) for _ in range(7)]]


def run(folder: str, tier_blocks: int | None, policy: str = "lru") -> tuple[LLMEngine, list]:
    engine = LLMEngine(EngineConfig(model=folder, block_size=4, num_blocks=14,
                                    kv_offloading_num_blocks=tier_blocks, kv_offloading_policy=policy))
    outs = [engine.generate([p], SamplingParams(max_tokens=MAX_TOKENS))[0] for p in prompts()]
    return engine, outs


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_reloaded_prefixes_match_transformers(tiny_model_dirs, family, policy):
    engine, outs = run(tiny_model_dirs[family], 64, policy)
    stats = engine.offloading.stats
    assert stats.loaded_blocks > 0 and stats.external_hits > 0
    assert all(o.num_cached_tokens > 0 for o in outs[2:])  # every revisit found its prefix somewhere
    for prompt, out in zip(prompts(), outs):
        assert out.token_ids == hf_greedy(engine.backend.hf_model, prompt, MAX_TOKENS)


@pytest.mark.parametrize("family", FAMILIES)
def test_tier_off_recomputes_and_gives_the_same_tokens(tiny_model_dirs, family):
    _, on = run(tiny_model_dirs[family], 64)
    engine, off = run(tiny_model_dirs[family], None)
    assert engine.offloading is None
    assert [o.token_ids for o in on] == [o.token_ids for o in off]
    assert sum(o.num_cached_tokens for o in on) > sum(o.num_cached_tokens for o in off)


def test_the_loaded_pages_are_the_ones_attended(tiny_model_dirs):
    """Zero the host copy after the first two prompts: the reloads then read zeros and the tokens change."""
    folder = tiny_model_dirs["llama"]
    engine = LLMEngine(EngineConfig(model=folder, block_size=4, num_blocks=14, kv_offloading_num_blocks=64))
    ps = prompts()
    for p in ps[:2]:
        engine.generate([p], SamplingParams(max_tokens=MAX_TOKENS))
    engine.backend.host_kv_cache.data.zero_()
    out = engine.generate([ps[2]], SamplingParams(max_tokens=MAX_TOKENS))[0]
    assert engine.offloading.stats.loaded_blocks > 0
    assert out.token_ids != hf_greedy(engine.backend.hf_model, ps[2], MAX_TOKENS)


def test_merged_passes_refuse_the_tier_with_a_message(tiny_model_dirs):
    import torch

    from engine.errors import ConfigError
    from engine.model.loader import load_model
    from engine.model.weights import ModelWeights
    from engine.runtime.batching import BatchedBackend, StepBatcher
    from engine.runtime.executor import InProcessExecutor

    weights = ModelWeights(load_model(tiny_model_dirs["llama"], torch.float32, torch.device("cpu")))
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    config = EngineConfig(model="tiny", block_size=4, kv_cache_memory_mib=1, kv_offloading_num_blocks=8)
    with pytest.raises(ConfigError, match="not available with merged passes"):
        LLMEngine(config, backend=BatchedBackend(config, batcher))
