"""The server's parts without HTTP: round-robin admission, quotas, metrics text, config parsing."""

from __future__ import annotations

import threading
import time

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import ConfigError
from engine.server.config import KVEventsConfig, ServerLimits
from engine.server.engine_loop import EngineLoop, Submission, Update
from engine.server.limits import ClientLimiter, FairQueue
from engine.server.metrics import Gauges, ServerMetrics


def test_fair_queue_takes_one_per_client_in_turn():
    queue: FairQueue[str] = FairQueue()
    for item in ["a1", "a2", "a3", "a4"]:
        queue.push("alice", item)
    queue.push("bob", "b1")
    queue.push("carol", "c1")
    queue.push("bob", "b2")
    order = [queue.pop() for _ in range(len(queue))]
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]
    assert queue.pop() is None


def test_fair_queue_remove():
    queue: FairQueue[str] = FairQueue()
    queue.push("alice", "a1")
    queue.push("bob", "b1")
    assert queue.remove(lambda item: item == "a1") == "a1"
    assert queue.remove(lambda item: item == "zz") is None
    assert [queue.pop(), queue.pop()] == ["b1", None]


def test_client_limiter_counts_per_client():
    limiter = ClientLimiter(2)
    assert limiter.try_acquire("a") and limiter.try_acquire("a")
    assert not limiter.try_acquire("a")
    assert limiter.try_acquire("b")
    limiter.release("a", duration_s=10.0)
    assert limiter.try_acquire("a")
    assert limiter.rejected == 1
    assert limiter.retry_after_s() >= 2  # the running mean moved towards 10 s


def test_engine_loop_admits_round_robin_across_clients():
    """One batch slot, four queued requests from alice then one from bob: bob goes second, not last."""
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=4, num_blocks=64))
    loop = EngineLoop(engine, ServerMetrics("sim"), max_running=1)
    order: list[str] = []
    done = threading.Event()

    def deliver_for(request_id: str):
        def deliver(update: Update) -> None:
            assert update.error is None
            if update.finished:
                order.append(request_id)
                if len(order) == 5:
                    done.set()
        return deliver

    submissions = [("alice", f"a{i}") for i in range(4)] + [("bob", "b0")]
    for client, request_id in submissions:  # all queued before the loop starts: a burst from alice
        loop.submit(Submission(request_id, client, [1, 2, 3, 4, 5], SamplingParams(max_tokens=2),
                               deliver=deliver_for(request_id)))
    loop.start()
    try:
        assert done.wait(30)
    finally:
        loop.stop()
    assert order == ["a0", "b0", "a1", "a2", "a3"]
    assert engine.scheduler.requests == {}  # finished requests are forgotten, not kept forever


def test_engine_loop_gathers_a_wave_of_replacements_into_one_step():
    """Three requests end in one step; their replacements arrive 50 ms apart: one step starts all three
    (a client holding three in flight), instead of a step for the first arrival alone."""
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=4, num_blocks=64))
    loop = EngineLoop(engine, ServerMetrics("sim"), gather_s=10.0)  # ends as soon as the wave is in
    steps: list[list[str]] = []
    take_step = engine.step

    def recorded_step():
        outputs = take_step()
        steps.append([out.request_id for out in outputs])
        return outputs

    engine.step = recorded_step  # type: ignore[method-assign]
    finished: list[str] = []

    def send_wave() -> None:
        for i in range(3):
            time.sleep(0.05)
            loop.submit(Submission(f"b{i}", f"client{i}", [9, 8, 7, i], SamplingParams(max_tokens=2),
                                   deliver=lambda update: None))

    def deliver_first(request_id: str):
        def deliver(update: Update) -> None:
            if update.finished:
                finished.append(request_id)
                if len(finished) == 3:
                    threading.Thread(target=send_wave).start()
        return deliver

    for i in range(3):
        loop.submit(Submission(f"a{i}", f"client{i}", [1, 2, 3, i], SamplingParams(max_tokens=2), deliver=deliver_first(f"a{i}")))
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while not any("b2" in step for step in steps) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        loop.stop()
    first_of_wave = next(step for step in steps if any(rid.startswith("b") for rid in step))
    assert sorted(first_of_wave) == ["b0", "b1", "b2"]


def test_engine_loop_refuses_long_prompts_and_bad_ids():
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=4, num_blocks=64))
    loop = EngineLoop(engine, ServerMetrics("sim"), max_prompt_tokens=8)
    errors: list[str | None] = []
    got = threading.Event()

    def deliver(update: Update) -> None:
        errors.append(update.error)
        if len(errors) == 2:
            got.set()

    loop.submit(Submission("long", "x", list(range(1, 10)), SamplingParams(max_tokens=2), deliver=deliver))
    loop.submit(Submission("bad", "x", [1, -2], SamplingParams(max_tokens=2), deliver=deliver))
    loop.start()
    try:
        assert got.wait(30)
    finally:
        loop.stop()
    assert "at most 8" in (errors[0] or "") and "negative" in (errors[1] or "")


def test_metrics_text_has_vllm_names_and_counters_survive_a_reset():
    metrics = ServerMetrics("m")
    metrics.observe_cache_stats(100, 40)
    metrics.observe_cache_stats(30, 10)  # the cache's own stats restarted (a reset): count on from there
    metrics.observe_first_token(0.07, 12)
    text = metrics.render(Gauges(running=2, waiting=1, kv_cache_usage=0.25))
    assert 'vllm:prefix_cache_queries_total{model_name="m",engine="0"} 130' in text
    assert 'vllm:prefix_cache_hits_total{model_name="m",engine="0"} 50' in text
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="0.08"} 1' in text
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="0.06"} 0' in text
    assert 'vllm:num_requests_running{model_name="m",engine="0"} 2' in text
    assert "# TYPE vllm:time_to_first_token_seconds histogram" in text


def test_kv_events_config_is_vllms_json():
    config = KVEventsConfig.from_json('{"enable_kv_cache_events": true, "endpoint": "tcp://*:5999", "topic": "kv"}')
    assert config.enabled and config.publisher == "zmq" and config.replay_endpoint is None
    assert not KVEventsConfig.from_json(None).enabled
    with pytest.raises(ConfigError, match="Unknown --kv-events-config keys"):
        KVEventsConfig.from_json('{"enable_kv_cache_event": true}')
    with pytest.raises(ConfigError, match="not valid JSON"):
        KVEventsConfig.from_json("{enable}")
    with pytest.raises(ConfigError):
        ServerLimits(max_tokens=0)
