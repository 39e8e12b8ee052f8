"""The server's forward passes in a worker process: the same tokens, clear errors, nothing left behind.

The server's sessions keep their engines (pools, schedulers, samplers) and the StepBatcher; only the
merged pass runs in the worker, which holds the weights and the real KV pages.
"""

from __future__ import annotations

import signal

import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import PrefixLabError
from engine.model import ModelBackend
from engine.model.loader import load_model
from engine.model.weights import ModelWeights
from engine.runtime.batching import BatchedBackend, StepBatcher
from engine.runtime.huge_pages import HUGE_PAGES_TUNABLE
from engine.runtime.worker import WorkerExecutor
from tests.model.test_batching import BLOCK_SIZES, PROMPTS, in_threads
from tests.model.tiny_models import hf_greedy

GREEDY = SamplingParams(max_tokens=8)


@pytest.fixture(scope="module")
def worker(tiny_model_dirs):
    worker = WorkerExecutor(tiny_model_dirs["llama"], "float32", "cpu", budget_mib=8)
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def local(tiny_model_dirs):
    """The same model in this process: the oracle's weights."""
    return ModelWeights(load_model(tiny_model_dirs["llama"], torch.float32, torch.device("cpu")))


def batcher_on(worker: WorkerExecutor) -> StepBatcher:
    return StepBatcher(worker)  # rows handed out here (worker.pages is shape-only), pages there


def engine_on(batcher: StepBatcher, block_size: int) -> LLMEngine:
    config = EngineConfig(model="tiny", block_size=block_size, kv_cache_memory_mib=1)
    return LLMEngine(config, backend=BatchedBackend(config, batcher))


def test_sessions_through_the_worker_generate_what_transformers_does(worker, local):
    batcher = batcher_on(worker)
    engines = [engine_on(batcher, bs) for bs in BLOCK_SIZES]
    outputs = in_threads([lambda e=e, p=p: e.generate([p], GREEDY)[0].token_ids for e, p in zip(engines, PROMPTS)])
    for prompt, output in zip(PROMPTS, outputs):
        assert output == hf_greedy(local.hf_model, prompt, GREEDY.max_tokens)
    # A second request on the same prompt hits its cached blocks: their K/V really are in the worker's pages.
    again = engines[0].generate([PROMPTS[0]], GREEDY)[0]
    assert again.num_cached_tokens > 0
    assert again.token_ids == outputs[0]


def test_the_server_side_model_describes_the_worker_model_and_holds_no_pages(worker, local):
    model = worker.model
    assert (model.kv_layout, model.kv_bytes_per_token, model.vocab_size, model.max_model_len, model.eos_token_ids,
            model.dtype, model.device) == (local.kv_layout, local.kv_bytes_per_token, local.vocab_size,
                                           local.max_model_len, local.eos_token_ids, local.dtype, local.device)
    assert batcher_on(worker).pages.data.device.type == "meta"
    engine = engine_on(batcher_on(worker), 4)
    assert engine.backend.kv_cache_bytes > 0  # what the session's pool takes of the budget, as shown on the page
    config = EngineConfig(model="tiny", block_size=4, num_blocks=8)
    with pytest.raises(RuntimeError, match="worker process"):  # no forward pass on this side
        LLMEngine(config, backend=ModelBackend(config, weights=model)).generate([PROMPTS[0]], GREEDY)


def test_a_pass_that_times_out_never_hands_its_late_answer_to_the_next(worker, local):
    batcher = batcher_on(worker)
    batcher.timeout_s = 0.0  # no pass answers at once
    with pytest.raises(RuntimeError, match="did not answer"):
        engine_on(batcher, 4).generate([PROMPTS[3]], GREEDY)
    batcher.timeout_s = 60.0
    assert engine_on(batcher, 4).generate([PROMPTS[4]], GREEDY)[0].token_ids == hf_greedy(local.hf_model, PROMPTS[4], 8)


def test_a_model_that_cannot_load_is_reported_in_the_loaders_words(tmp_path):
    with pytest.raises(PrefixLabError, match="no config.json"):
        WorkerExecutor(str(tmp_path), None, "cpu", budget_mib=8)


def test_a_worker_that_dies_fails_the_step_at_once_and_one_that_is_closed_exits(tiny_model_dirs):
    worker = WorkerExecutor(tiny_model_dirs["llama"], "float32", "cpu", budget_mib=8)
    engine = engine_on(batcher_on(worker), 4)
    assert engine.generate([PROMPTS[1]], GREEDY)[0].token_ids
    worker.process.send_signal(signal.SIGKILL)
    with pytest.raises(RuntimeError, match="model process stopped"):
        engine.generate([PROMPTS[2]], GREEDY)

    second = WorkerExecutor(tiny_model_dirs["llama"], "float32", "cpu", budget_mib=8)
    second.close()  # the worker sees its socket close and exits by itself
    assert second.process.returncode == 0


def test_the_worker_runs_with_mallocs_huge_pages(worker):
    environ = open(f"/proc/{worker.process.pid}/environ", "rb").read().split(b"\0")
    tunables = next(v for v in environ if v.startswith(b"GLIBC_TUNABLES=")).decode()
    assert HUGE_PAGES_TUNABLE in tunables.split("=", 1)[1].split(":")
