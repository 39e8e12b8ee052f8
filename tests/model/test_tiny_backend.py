"""The model back end on tiny models: bad input is refused clearly and the engine keeps serving."""

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import InvalidRequestError
from engine.model import ModelBackend
from tests.model.tiny_models import hf_greedy


@pytest.fixture
def engine(tiny_model_dirs):
    return LLMEngine(EngineConfig(model=tiny_model_dirs["llama"], block_size=4, num_blocks=40))


def still_serves(engine):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    out = engine.generate([prompt], SamplingParams(max_tokens=5))[0]
    assert out.token_ids == hf_greedy(engine.backend.hf_model, prompt, 5)


def test_reports_its_shape_and_kv_size(engine):
    backend = engine.backend
    assert backend.vocab_size == 128 and backend.max_model_len == 256
    assert backend.tokenizer is None  # weights-only folder: prompts are token ids
    assert backend.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4  # K+V x layers x kv heads x head dim x fp32
    assert backend.kv_cache_bytes == 40 * 4 * backend.kv_bytes_per_token


def test_num_blocks_comes_from_the_memory_budget(tiny_model_dirs):
    engine = LLMEngine(EngineConfig(model=tiny_model_dirs["llama"], block_size=16, kv_cache_memory_mib=1))
    assert engine.kv_cache_manager.num_blocks == 2**20 // (16 * engine.backend.kv_bytes_per_token)


@pytest.mark.parametrize("prompt, params, message", [
    ([1] * 300, SamplingParams(max_tokens=4), "context of 256"),
    ([1] * 200, SamplingParams(max_tokens=4), "whole pool holds 156"),
    ([], SamplingParams(max_tokens=4), "empty"),
    ("   ", SamplingParams(max_tokens=4), "empty"),
    ([1, 2, 500], SamplingParams(max_tokens=4), "vocabulary"),
])
def test_bad_requests_are_refused_and_the_engine_keeps_serving(engine, prompt, params, message):
    with pytest.raises(InvalidRequestError, match=message):
        engine.add_request(prompt, params)
    still_serves(engine)


@pytest.mark.parametrize("max_tokens", [0, -3])
def test_max_tokens_must_be_positive(engine, max_tokens):
    with pytest.raises(InvalidRequestError, match="max_tokens"):
        SamplingParams(max_tokens=max_tokens)
    still_serves(engine)


def test_text_needs_a_tokenizer(engine):
    with pytest.raises(InvalidRequestError, match="tokenizer"):
        engine.add_request("hello", SamplingParams(max_tokens=2))
    with pytest.raises(InvalidRequestError, match="chat template"):
        engine.add_request([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2))
    still_serves(engine)


def test_the_engine_never_calls_the_transformers_forward(engine):
    hf_model = engine.backend.hf_model
    expected = hf_greedy(hf_model, [7, 7, 8, 9, 10, 11], 6)

    def refuse(*args, **kwargs):
        raise AssertionError("the engine must run its own forward pass")

    hf_model.forward = refuse
    out = engine.generate([[7, 7, 8, 9, 10, 11]], SamplingParams(max_tokens=6))[0]
    assert out.token_ids == expected


def test_seeded_sampling_is_reproducible_whatever_shares_the_batch(tiny_model_dirs):
    def run(extra_prompts):
        engine = LLMEngine(EngineConfig(model=tiny_model_dirs["gpt2"], block_size=4, num_blocks=64))
        params = [SamplingParams(max_tokens=10, temperature=1.0, seed=42)]
        params += [SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9)] * len(extra_prompts)
        return engine.generate([[1, 2, 3, 4, 5]] + extra_prompts, params)[0].token_ids
    alone = run([])
    assert alone == run([[9, 9, 9], [4, 4, 4, 4, 4, 4]])
    assert alone != LLMEngine(EngineConfig(model=tiny_model_dirs["gpt2"], block_size=4, num_blocks=64)).generate(
        [[1, 2, 3, 4, 5]], SamplingParams(max_tokens=10, temperature=1.0, seed=43))[0].token_ids


def test_a_new_engine_on_shared_weights_starts_clean(tiny_model_dirs):
    config = EngineConfig(model=tiny_model_dirs["llama"], block_size=4, num_blocks=32)
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=7)
    first = LLMEngine(config)
    expected = first.generate([[1, 2, 3]], params)[0].token_ids
    abandoned = LLMEngine(config, backend=ModelBackend(config, weights=first.backend.weights))
    abandoned.add_request([1, 2, 3], params)  # req-0, left half done
    abandoned.step()
    abandoned.step()
    fresh = LLMEngine(config, backend=ModelBackend(config, weights=first.backend.weights))
    assert fresh.generate([[1, 2, 3]], params)[0].token_ids == expected
    assert fresh.backend.kv_cache_bytes == 32 * 4 * fresh.backend.kv_bytes_per_token
