"""Greedy output of our paged engine == transformers' ``generate``, token for token.

Whatever the scheduler does (caching on or off, prefixes shared or not, prompts chunked, requests
batched together or preempted and recomputed), the tokens must not change.
"""

from __future__ import annotations

import random

import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from tests.model.tiny_models import hf_greedy

FAMILIES = ["llama", "qwen2", "gpt2"]
MAX_TOKENS = 12


def prompts_with_shared_prefixes(seed: int = 1) -> list[list[int]]:
    """Five prompts: three share a 37-token prefix then diverge, one is a prefix of another, one is unrelated."""
    rng = random.Random(seed)
    shared = [rng.randrange(128) for _ in range(37)]
    return [
        shared + [rng.randrange(128) for _ in range(9)],
        shared + [rng.randrange(128) for _ in range(21)],
        shared[:20],
        shared + [5, 6, 7],
        [rng.randrange(128) for _ in range(30)],
    ]


def engine_for(folder: str, **overrides) -> LLMEngine:
    return LLMEngine(EngineConfig(model=folder, block_size=4, num_blocks=overrides.pop("num_blocks", 128), **overrides))


def assert_matches_transformers(engine: LLMEngine, prompts: list[list[int]], outputs) -> None:
    for prompt, out in zip(prompts, outputs):
        assert out.token_ids == hf_greedy(engine.backend.hf_model, prompt, MAX_TOKENS), f"prompt of {len(prompt)} tokens"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("caching", [True, False], ids=["cache-on", "cache-off"])
def test_batched_prompts_match(tiny_model_dirs, family, caching):
    engine = engine_for(tiny_model_dirs[family], enable_prefix_caching=caching)
    prompts = prompts_with_shared_prefixes()
    outputs = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert_matches_transformers(engine, prompts, outputs)
    # All five prefilled in the first step together, then decoded together.
    assert engine.scheduler.step_count == MAX_TOKENS


@pytest.mark.parametrize("family", FAMILIES)
def test_later_requests_hit_the_cache_and_still_match(tiny_model_dirs, family):
    engine = engine_for(tiny_model_dirs[family])
    prompts = prompts_with_shared_prefixes()
    first = engine.generate(prompts[:1], SamplingParams(max_tokens=MAX_TOKENS))
    rest = engine.generate(prompts[1:4], SamplingParams(max_tokens=MAX_TOKENS))
    assert_matches_transformers(engine, prompts[:4], first + rest)
    assert [o.num_cached_tokens for o in rest] == [36, 16, 36]  # whole 4-token blocks of the shared prefix (never the last token)
    for out in rest:
        assert out.metrics.num_computed_prefill_tokens == len(out.prompt_token_ids) - out.num_cached_tokens


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("caching", [True, False], ids=["cache-on", "cache-off"])
def test_chunked_prefill_matches(tiny_model_dirs, family, caching):
    engine = engine_for(tiny_model_dirs[family], max_num_batched_tokens=7, enable_prefix_caching=caching)
    prompts = prompts_with_shared_prefixes()
    outputs = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert_matches_transformers(engine, prompts, outputs)
    assert engine.scheduler.step_count > 20  # prompts really were cut into chunks


@pytest.mark.parametrize("family", FAMILIES)
def test_preemption_and_recompute_match(tiny_model_dirs, family):
    # 15 usable blocks of 4 tokens = 60 slots, far less than the five requests need together.
    engine = engine_for(tiny_model_dirs[family], num_blocks=16)
    prompts = [p[:30] for p in prompts_with_shared_prefixes(seed=3)]
    outputs = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert sum(o.metrics.num_preemptions for o in outputs) > 0
    assert_matches_transformers(engine, prompts, outputs)


@pytest.mark.parametrize("family", FAMILIES)
def test_prefill_logits_on_a_cached_prefix_match_a_full_prefill(tiny_model_dirs, family):
    engine = engine_for(tiny_model_dirs[family])
    prompts = prompts_with_shared_prefixes()
    engine.generate(prompts[:1], SamplingParams(max_tokens=1))
    rid = engine.add_request(prompts[1], SamplingParams(max_tokens=1))
    engine.step()
    assert engine.output_of(rid).num_cached_tokens == 36
    cached_logits = engine.backend.last_logits[rid]
    with torch.inference_mode():
        full = engine.backend.hf_model(torch.tensor([prompts[1]])).logits[0, -1]
    torch.testing.assert_close(cached_logits, full, atol=1e-4, rtol=0)


def decode_behind_shared_prefixes(folder: str) -> tuple[LLMEngine, list[list[int]], list]:
    """One prompt, then three decoding together behind its cached prefix: the engine, all four prompts
    and their outputs."""
    engine = engine_for(folder)
    prompts = prompts_with_shared_prefixes()
    later = [prompts[1], prompts[3], prompts[1][:40] + [9, 9]]
    first = engine.generate(prompts[:1], SamplingParams(max_tokens=MAX_TOKENS))
    rest = engine.generate(later, SamplingParams(max_tokens=MAX_TOKENS))
    return engine, [prompts[0], *later], first + rest


@pytest.mark.parametrize("family", FAMILIES)
def test_decodes_sharing_a_prefix_read_it_once_and_still_match(tiny_model_dirs, family, monkeypatch):
    """Requests decoding behind one cached prefix take the shared-context path, and the tokens hold (the
    PyTorch decode paths: the reference of the CPU kernel, and what GPUs and other dtypes run)."""
    from engine.model import attention, runner

    monkeypatch.setattr(runner, "kernels_for", lambda device, dtype: False)
    calls = []
    real = attention.shared_context_attention
    monkeypatch.setattr(attention, "shared_context_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    engine, prompts, outputs = decode_behind_shared_prefixes(tiny_model_dirs[family])
    assert calls, "the shared-context decode path never ran"
    assert_matches_transformers(engine, prompts, outputs)


@pytest.mark.parametrize("family", FAMILIES)
def test_decodes_on_the_cpu_kernel_still_match(tiny_model_dirs, family, monkeypatch):
    """The same requests with their decodes attended by the CPU kernel (pages read in place)."""
    from engine.model import native

    if not native.kernels_for("cpu", torch.float32):
        pytest.skip("the CPU kernels did not build here (no C compiler)")
    calls = []
    real = native.paged_decode_attention
    monkeypatch.setattr(native, "paged_decode_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    engine, prompts, outputs = decode_behind_shared_prefixes(tiny_model_dirs[family])
    assert calls, "the CPU kernel never ran"
    assert_matches_transformers(engine, prompts, outputs)
