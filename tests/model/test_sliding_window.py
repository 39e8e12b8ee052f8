"""A model whose config declares a sliding window: our paged forward pass honours it, token for token.

Tiny randomly initialised Qwen2 (``layer_types``: layer 0 full attention, layer 1 a window of 5
tokens) and Mistral (every layer a window of 6) models, checked against transformers' own greedy
``generate``. Prompts are longer than the windows, prefixes are shared (cached-prefix chunks),
requests are chunked and batched (windowed decode masks, padded and shared-context). The same
model with its window taken out generates other tokens, so the window is really exercised.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.kv_cache.kv_cache_spec import layer_pattern_from_hf_config
from tests.model.tiny_models import COMMON, hf_greedy

MAX_TOKENS = 12


def windowed_config(family: str):
    from transformers import MistralConfig, Qwen2Config

    shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1)
    if family == "qwen2":
        return Qwen2Config(**shape, use_sliding_window=True, sliding_window=5, max_window_layers=1,
                           rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                           architectures=["Qwen2ForCausalLM"], **COMMON)
    return MistralConfig(**shape, sliding_window=6, architectures=["MistralForCausalLM"], **COMMON)


@pytest.fixture(scope="module")
def windowed_dirs(tmp_path_factory) -> dict[str, str]:
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("windowed-models")
    dirs = {}
    for family in ("qwen2", "mistral"):
        torch.manual_seed(3)
        model = AutoModelForCausalLM.from_config(windowed_config(family), dtype=torch.float32)
        folder = Path(root / family)
        model.save_pretrained(folder)
        dirs[family] = str(folder)
    return dirs


def prompts(seed: int = 2) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(128) for _ in range(23)]
    return [shared + [rng.randrange(128) for _ in range(7)], shared + [rng.randrange(128) for _ in range(13)],
            [rng.randrange(128) for _ in range(18)], shared[:9]]


@pytest.mark.parametrize("family", ["qwen2", "mistral"])
def test_windowed_model_matches_transformers(windowed_dirs, family):
    engine = LLMEngine(EngineConfig(model=windowed_dirs[family], block_size=4, num_blocks=128, max_num_batched_tokens=16))
    hf_model = engine.backend.hf_model
    windows = layer_pattern_from_hf_config(hf_model.config)
    assert windows == ([None, 5] if family == "qwen2" else [6, 6])
    batch = prompts()
    first = engine.generate(batch[:1], SamplingParams(max_tokens=MAX_TOKENS))  # fills the cache
    rest = engine.generate(batch[1:], SamplingParams(max_tokens=MAX_TOKENS))  # hits it, chunked, batched
    assert engine.kv_cache_manager.prefix_cache_stats.hits > 0
    for prompt, out in zip(batch, first + rest):
        assert out.token_ids == hf_greedy(hf_model, prompt, MAX_TOKENS), f"prompt of {len(prompt)} tokens"


@pytest.mark.parametrize("family", ["qwen2", "mistral"])
def test_the_window_changes_the_tokens(windowed_dirs, family):
    """Without its window the same weights generate something else: the test above can fail."""
    from transformers import AutoModelForCausalLM

    with_window = AutoModelForCausalLM.from_pretrained(windowed_dirs[family], dtype=torch.float32)
    config = windowed_config(family)
    if family == "qwen2":
        config.layer_types = ["full_attention"] * config.num_hidden_layers
    config.sliding_window = None
    without = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    without.load_state_dict(with_window.state_dict())
    assert any(hf_greedy(with_window, p, MAX_TOKENS) != hf_greedy(without, p, MAX_TOKENS) for p in prompts())
    # And ours with the window switched off follows the windowless model, not the windowed one.
    engine = LLMEngine(EngineConfig(model=windowed_dirs[family], block_size=4, num_blocks=128))
    forward = engine.backend.model
    saved = forward.layer_windows
    forward.layer_windows = [None] * len(saved)  # the weights (and so this object) are shared: restore below
    p = next(p for p in prompts() if hf_greedy(with_window, p, MAX_TOKENS) != hf_greedy(without, p, MAX_TOKENS))
    try:
        out = engine.generate([p], SamplingParams(max_tokens=MAX_TOKENS))[0]
    finally:
        forward.layer_windows = saved
    assert out.token_ids == hf_greedy(without, p, MAX_TOKENS) != hf_greedy(with_window, p, MAX_TOKENS)
