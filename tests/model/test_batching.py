"""Many engines, one forward pass: session engines on shared pages, their steps merged by a StepBatcher.

Each engine keeps its own pool, block ids and sampler; only the page memory and the forward pass
are shared. So whatever runs beside it, an engine must generate exactly what it generates alone.
"""

from __future__ import annotations

import gc
import threading
import time

import psutil
import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import PrefixLabError
from engine.model import ModelBackend
from engine.model.loader import load_model
from engine.model.weights import ModelWeights
from engine.runtime.batching import BatchedBackend, StepBatcher, Submission
from engine.runtime.executor import InProcessExecutor
from engine.runtime.shared_pages import SharedPages
from tests.model.tiny_models import hf_greedy

GREEDY = SamplingParams(max_tokens=8)
PROMPTS = [[5, 9, 17, 3, 3, 40, 41, 42, 7, 8, 9], [5, 9, 17, 3, 99, 2], [11] * 23, [1, 2, 3], [60, 61, 62, 63, 64, 65, 66]]
BLOCK_SIZES = [4, 4, 8, 3, 16]  # engines may pick different block sizes and still share a pass


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def weights(request, tiny_model_dirs):
    return ModelWeights(load_model(tiny_model_dirs[request.param], torch.float32, torch.device("cpu")))


def batched_engine(batcher: StepBatcher, block_size: int = 4, kv_mib: int = 1, caching: bool = True) -> LLMEngine:
    config = EngineConfig(model="tiny", block_size=block_size, kv_cache_memory_mib=kv_mib, enable_prefix_caching=caching)
    return LLMEngine(config, backend=BatchedBackend(config, batcher))


def backend_of(engine: LLMEngine) -> BatchedBackend:
    assert isinstance(engine.backend, BatchedBackend)
    return engine.backend


def alone(weights: ModelWeights, prompt: list[int], block_size: int, params: SamplingParams = GREEDY) -> list[int]:
    config = EngineConfig(model="tiny", block_size=block_size, num_blocks=64)
    return LLMEngine(config, backend=ModelBackend(config, weights=weights)).generate([prompt], params)[0].token_ids


def in_threads(jobs: list) -> list:
    """Run ``jobs`` (no-argument callables) at once, one thread each; their results in order."""
    results: list = [None] * len(jobs)
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        try:
            start.wait(timeout=10)
            results[i] = jobs[i]()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a session hung"
    if errors:
        raise errors[0]
    return results


def test_engines_generating_at_once_get_what_each_gets_alone(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    engines = [batched_engine(batcher, bs) for bs in BLOCK_SIZES]
    outputs = in_threads([lambda e=e, p=p: e.generate([p], GREEDY)[0].token_ids for e, p in zip(engines, PROMPTS)])
    for prompt, block_size, output in zip(PROMPTS, BLOCK_SIZES, outputs):
        assert output == alone(weights, prompt, block_size) == hf_greedy(weights.hf_model, prompt, GREEDY.max_tokens)


def test_greedy_rows_come_back_as_tokens_and_drawn_rows_as_logits_each_to_its_engine(weights):
    """A pass hands a greedy row its argmax and only the rows that draw at random their logits: engines
    that mix both, merged in one pass, still each draw exactly what they draw alone."""
    drawn = SamplingParams(max_tokens=8, temperature=0.8, top_k=20, seed=7)
    params = [GREEDY, drawn, GREEDY, drawn, drawn]
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    engines = [batched_engine(batcher, bs) for bs in BLOCK_SIZES]
    outputs = in_threads([lambda e=e, p=p, sp=sp: e.generate([p], sp)[0].token_ids
                          for e, p, sp in zip(engines, PROMPTS, params)])
    for prompt, block_size, sp, output in zip(PROMPTS, BLOCK_SIZES, params, outputs):
        assert output == alone(weights, prompt, block_size, sp)
    assert all(not backend_of(e).last_logits for e, sp in zip(engines, params) if sp is GREEDY)  # no logits sent


def steps_held_back(batcher: StepBatcher, jobs: list) -> list:
    """Run ``jobs`` in threads while the model looks busy, so that every step is waiting before a pass starts."""
    with batcher._cond:
        batcher._running = True
    threads_done: list = []
    runner = threading.Thread(target=lambda: threads_done.append(in_threads(jobs)))
    runner.start()
    deadline = time.monotonic() + 10
    while len(batcher._pending) < len(jobs) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(batcher._pending) == len(jobs)
    with batcher._cond:
        batcher._running = False
        batcher._cond.notify_all()
    runner.join(timeout=60)
    assert threads_done, "the sessions did not finish"
    return threads_done[0]


def test_one_forward_pass_serves_every_waiting_session(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    engines = [batched_engine(batcher, bs) for bs in BLOCK_SIZES]
    for engine, prompt in zip(engines, PROMPTS):
        engine.add_request(prompt, SamplingParams(max_tokens=1))
    steps_held_back(batcher, [engine.step for engine in engines])
    assert (batcher.num_passes, batcher.num_steps) == (1, len(engines))  # five prefills, one pass
    for engine, prompt, block_size in zip(engines, PROMPTS, BLOCK_SIZES):
        assert engine.output_of("req-0").token_ids == alone(weights, prompt, block_size, SamplingParams(max_tokens=1))


def test_a_pass_takes_steps_in_order_up_to_its_token_cap(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8), max_tokens=30)
    engines = [batched_engine(batcher) for _ in range(3)]
    for engine, length in zip(engines, (20, 20, 5)):
        engine.add_request(list(range(1, length + 1)), SamplingParams(max_tokens=1))
    steps_held_back(batcher, [engine.step for engine in engines])
    # 20 + 20 > 30: the second prefill waits for the next pass, and the third (in line behind it) with it.
    assert (batcher.num_passes, batcher.num_steps) == (2, 3)


def test_a_first_token_goes_before_the_decodes(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    decoding = [batched_engine(batcher) for _ in range(2)]
    for engine in decoding:
        engine.add_request([1, 2, 3, 4, 5], GREEDY)
        engine.step()  # prefilled: its next steps are decodes
    new = batched_engine(batcher)
    new.add_request([9, 8, 7, 6, 5, 4], GREEDY)
    # The three sessions' next steps, waiting in arrival order (the decodes came first).
    parts = [Submission(engine.scheduler.schedule().scheduled, backend_of(engine).base, 4) for engine in (*decoding, new)]
    batcher._pending.extend(parts)
    assert batcher._take() == [parts[2]]  # the first token, in a pass of its own
    assert batcher._take() == parts[:2]


def test_sessions_with_the_same_request_ids_keep_their_own_pages(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    first, second = batched_engine(batcher), batched_engine(batcher)
    prefix = [5, 9, 17, 3, 3, 40, 41, 42, 7, 8, 9, 10]  # 3 full blocks of 4
    first.generate([prefix + [1]], GREEDY)  # req-0 in the first engine: its prefix is cached in its pages
    first_pages, second_pages = backend_of(first).kv_cache, backend_of(second).kv_cache
    assert first_pages is not None and second_pages is not None
    assert first_pages.data.abs().sum() > 0
    assert second_pages.data.abs().sum() == 0  # nothing was written into the other's partition
    # Now both engines run "req-1" at once: a different prompt in the second engine, on the same block ids.
    second.generate([[70, 71, 72]], GREEDY)  # req-0 of the second engine
    hit, other = in_threads([lambda: first.generate([prefix + [2]], GREEDY)[0],
                             lambda: second.generate([[80] * 12 + [2]], GREEDY)[0]])
    assert hit.request_id == other.request_id == "req-1"
    assert hit.num_cached_tokens == 12  # the first engine's prefix came from its own pages, untouched
    assert hit.token_ids == alone(weights, prefix + [2], 4)
    assert other.num_cached_tokens == 0 and other.token_ids == alone(weights, [80] * 12 + [2], 4)


def test_a_failed_pass_reaches_every_waiting_session_and_the_next_pass_runs(weights, monkeypatch):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8))
    engines = [batched_engine(batcher) for _ in range(2)]
    for engine in engines:
        engine.add_request([1, 2, 3, 4, 5], GREEDY)

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory in the forward pass")

    monkeypatch.setattr(weights.model, "forward", broken)

    def step(engine: LLMEngine) -> str:
        try:
            engine.step()
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert steps_held_back(batcher, [lambda e=e: step(e) for e in engines]) == [
        "The shared forward pass failed: out of memory in the forward pass"] * 2
    monkeypatch.undo()
    for engine in engines:
        engine.abort_request("req-0")
        # The failed step's full block was already in the prefix cache, its K/V never written: forget it
        # (what the Playground does after an error), or the next request would hit garbage.
        assert engine.reset_prefix_cache()
        assert engine.generate([[1, 2, 3, 4, 5]], GREEDY)[0].token_ids == alone(weights, [1, 2, 3, 4, 5], 4)


def test_a_step_waits_for_the_model_at_most_its_timeout(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=8), timeout_s=0.2)
    engine = batched_engine(batcher)
    engine.add_request([1, 2, 3], GREEDY)
    with batcher._cond:
        batcher._running = True  # a pass that never ends
    with pytest.raises(PrefixLabError, match="too busy"):
        engine.step()
    assert not batcher._pending


def test_the_budget_is_shared_and_comes_back_when_an_engine_is_dropped(weights):
    batcher = StepBatcher(InProcessExecutor(weights, budget_mib=2))
    pages = batcher.pages
    first, second = batched_engine(batcher, kv_mib=1), batched_engine(batcher, kv_mib=1)
    assert pages.used_rows == pages.num_rows
    with pytest.raises(PrefixLabError, match=r"KV memory is taken \(2 of 2 MiB in use"):
        batched_engine(batcher, kv_mib=1)
    first_base = backend_of(first).base
    del first
    gc.collect()
    third = batched_engine(batcher, kv_mib=1)  # first fit: the freed range
    assert backend_of(third).base == first_base != backend_of(second).base
    assert third.generate([[1, 2, 3]], GREEDY)[0].token_ids == alone(weights, [1, 2, 3], 4)


def test_the_budget_is_not_committed_until_pages_are_written(weights):
    process = psutil.Process()
    before = process.memory_info().rss
    pages = SharedPages(weights, budget_mib=1_024)
    assert pages.data.numel() * pages.data.element_size() >= 2**30 - 2**20
    assert process.memory_info().rss - before < 64 * 2**20
