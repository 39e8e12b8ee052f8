"""End-to-end checks on the real default model, SmolLM2-135M-Instruct (converted from its GGUF once)."""

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from tests.model.tiny_models import hf_greedy

pytestmark = pytest.mark.slow

SYSTEM = (
    "You are a patient tutor who explains how large language model inference engines work. "
    "You answer in short, plain sentences and you always mention the key-value cache when it matters. "
) * 3


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(EngineConfig())


def test_shape_of_the_default_model(engine):
    backend = engine.backend
    assert backend.kv_bytes_per_token == 2 * 30 * 3 * 64 * 4 == 46080
    assert backend.kv_cache_bytes <= 256 * 2**20
    assert backend.eos_token_ids == {2}


def test_greedy_matches_transformers_generate(engine):
    prompts = [
        "The capital of France is",
        "def fibonacci(n):",
        [{"role": "user", "content": "Name three colours of the rainbow."}],
    ]
    outputs = engine.generate(prompts, SamplingParams(max_tokens=20))
    for out in outputs:
        assert out.token_ids == hf_greedy(engine.backend.hf_model, out.prompt_token_ids, 20)
    assert "<|im_end|>" not in outputs[2].text and outputs[2].text.strip()


def test_a_cache_hit_skips_prefill_work_and_keeps_the_answer(engine):
    def chat(question):
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]

    first = engine.generate([chat("What is a block table?")], SamplingParams(max_tokens=8))[0]
    second = engine.generate([chat("Why does prefix caching help?")], SamplingParams(max_tokens=8))[0]
    prompt_len = len(second.prompt_token_ids)
    assert first.metrics.num_computed_prefill_tokens == len(first.prompt_token_ids)
    assert second.num_cached_tokens >= 96  # the system prompt's full blocks
    assert second.metrics.num_computed_prefill_tokens == prompt_len - second.num_cached_tokens
    assert second.token_ids == hf_greedy(engine.backend.hf_model, second.prompt_token_ids, 8)


def test_lesson_measurement_shares_the_weights_and_agrees_cache_on_and_off(engine):
    from teaching.lessons.measure import MeasureSpec, measure_ttft

    spec = MeasureSpec(SYSTEM, ("What is a block?", "What is a hash?", "What is eviction?"), repeats=1)
    rows = measure_ttft(spec, engine.backend.weights)  # no second copy of the model
    assert rows[0].cached_tokens == 0 and all(r.cached_tokens >= 16 for r in rows[1:])
    assert all(r.first_token_on == r.first_token_off is not None for r in rows)  # own pages: same greedy token
    assert engine.backend.kv_cache is not None  # the engine's own pages were never touched
