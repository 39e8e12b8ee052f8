"""An engine owns its KV pages; weights are what engines share.

The bug this guards against: the Lessons page built a cache-on and a cache-off engine on one
``ModelBackend``; the second engine's ``allocate_kv_cache`` swapped in new pages under the
first, so both wrote the same pages. Once the cache-off engine's pool wrapped around, the
cache-on engine's prefix hits read K/V another prompt had written, and its greedy output
changed (``[3, 3, 3, 3]`` where a fresh engine says ``[5, 87, 106, 106]``).
"""

from __future__ import annotations

import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import ConfigError
from engine.model import ModelBackend
from engine.model.loader import load_model
from engine.model.weights import ModelWeights
from teaching.lessons.measure import MeasureSpec, engine_factory

PREFIX = [5, 9, 17, 3, 3, 40, 41, 42, 7, 8, 9, 10]  # 3 full blocks of 4
GREEDY = SamplingParams(max_tokens=4)


@pytest.fixture(scope="module")
def weights(tiny_model_dirs):
    return ModelWeights(load_model(tiny_model_dirs["llama"], torch.float32, torch.device("cpu")))


def engine_on(weights: ModelWeights, caching: bool) -> LLMEngine:
    config = EngineConfig(model="tiny", block_size=4, num_blocks=8, enable_prefix_caching=caching)
    return LLMEngine(config, backend=ModelBackend(config, weights=weights))


def test_cache_on_engine_keeps_its_pages_while_a_cache_off_engine_runs_beside_it(weights):
    on, off = engine_on(weights, True), engine_on(weights, False)
    on.generate([PREFIX + [1]], GREEDY)  # caches the 12-token prefix in on's pages
    for i in range(6):  # 7 usable blocks: the cache-off engine's pool wraps around several times
        off.generate([[60 + i] * 13], GREEDY)
    hit = on.generate([PREFIX + [2]], GREEDY)[0]
    assert hit.num_cached_tokens == 12  # the prefix really came from the cache
    assert hit.token_ids == engine_on(weights, True).generate([PREFIX + [2]], GREEDY)[0].token_ids


def test_a_back_end_serves_one_engine(weights):
    config = EngineConfig(model="tiny", block_size=4, num_blocks=8)
    backend = ModelBackend(config, weights=weights)
    LLMEngine(config, backend=backend)
    with pytest.raises(ConfigError, match="own ModelBackend"):
        LLMEngine(config, backend=backend)  # would write the first engine's pages


def test_lesson_measurement_engines_share_weights_not_pages(weights):
    handed_a_backend = ModelBackend(EngineConfig(model="tiny"), weights=weights)  # what the page used to pass
    for model in (weights, handed_a_backend):
        make_engine, _ = engine_factory(MeasureSpec("system", ("a", "b"), block_size=4), model)
        on, off = make_engine(True), make_engine(False)
        assert on.backend.weights is off.backend.weights is weights
        assert on.backend.kv_cache is not off.backend.kv_cache
        assert handed_a_backend.kv_cache is None  # its pages were never taken
