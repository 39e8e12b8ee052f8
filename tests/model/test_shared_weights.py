"""One loaded model, many engines: the app shares weights across sessions, never KV pools."""

from __future__ import annotations

import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend
from engine.model.loader import load_model

PROMPTS = [[5, 9, 17, 3, 3, 40, 41, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1], [5, 9, 17, 3, 99, 2]]


def test_engines_share_weights_but_not_kv_pools(tiny_model_dirs):
    config = EngineConfig(model=tiny_model_dirs["llama"], num_blocks=32, block_size=4)
    loaded = load_model(config.model, torch.float32, torch.device("cpu"))
    first = LLMEngine(config, backend=ModelBackend(config, loaded=loaded))
    second = LLMEngine(config, backend=ModelBackend(config, loaded=loaded))

    assert first.backend.hf_model is second.backend.hf_model is loaded.hf_model
    assert first.backend.kv_cache is not second.backend.kv_cache
    assert first.backend.kv_cache_bytes == second.backend.kv_cache_bytes > 0

    params = SamplingParams(max_tokens=6)
    own = LLMEngine(config).generate(PROMPTS, params)  # loads its own copy: the reference
    shared_a = first.generate(PROMPTS, params)
    shared_b = second.generate(PROMPTS, params)
    assert [o.token_ids for o in shared_a] == [o.token_ids for o in shared_b] == [o.token_ids for o in own]
    # The second engine's cache is its own: nothing it ran before, so no hits on its first prompt.
    assert shared_b[0].num_cached_tokens == 0


def test_shared_model_sets_device_and_dtype(tiny_model_dirs):
    config = EngineConfig(model=tiny_model_dirs["llama"], num_blocks=8, block_size=4, dtype="bf16")
    loaded = load_model(config.model, torch.float32, torch.device("cpu"))
    backend = ModelBackend(config, loaded=loaded)
    assert backend.dtype == torch.float32  # the weights win over the config
    assert backend.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4  # K+V, 2 layers, 2 kv heads, head_dim 16, fp32
