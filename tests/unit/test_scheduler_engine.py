"""Scheduler (FCFS, budget, chunked prefill, preemption) and the simulator engine."""

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import ConfigError, InvalidRequestError, UnknownRequestError
from engine.events import RequestPreempted
from engine.request import Request


def sim(**kw) -> LLMEngine:
    return LLMEngine(EngineConfig(backend="simulator", **kw))


def test_chunked_prefill_respects_the_token_budget():
    e = sim(num_blocks=20, block_size=4, max_num_batched_tokens=5)
    rid = e.add_request(list(range(12)), SamplingParams(max_tokens=2))
    chunks = []
    while e.has_unfinished_requests():
        out = e.scheduler.schedule()
        chunks.append([(s.num_computed_tokens, s.num_new_tokens) for s in out.scheduled])
        e.scheduler.update_from_output(out, e.backend.execute(out))
    assert chunks == [[(0, 5)], [(5, 5)], [(10, 2)], [(12, 1)]]
    assert e.get_request(rid).num_output_tokens == 2


def test_fcfs_running_first_then_waiting_in_order():
    e = sim(num_blocks=40, block_size=4, max_num_batched_tokens=10)
    a = e.add_request(list(range(8)), SamplingParams(max_tokens=3))
    b = e.add_request(list(range(20, 28)), SamplingParams(max_tokens=3))
    first = e.scheduler.schedule()
    assert [(s.request_id, s.num_new_tokens) for s in first.scheduled] == [(a, 8), (b, 2)]
    e.scheduler.update_from_output(first, e.backend.execute(first))
    second = e.scheduler.schedule()
    assert [(s.request_id, s.num_new_tokens) for s in second.scheduled] == [(a, 1), (b, 6)]


def test_preemption_frees_the_last_running_request_and_it_recomputes():
    e = sim(num_blocks=5, block_size=2, max_num_batched_tokens=64)  # 4 usable blocks
    a = e.add_request([1, 2, 3], SamplingParams(max_tokens=4))
    b = e.add_request([9, 8, 7], SamplingParams(max_tokens=4), request_id="b")
    alone = sim(num_blocks=50, block_size=2)
    alone.add_request([9, 8, 7], SamplingParams(max_tokens=4), request_id="b")
    while alone.has_unfinished_requests():
        alone.step()
    while e.has_unfinished_requests():
        e.step()
    preempted = [ev.request_id for ev in e.kv_cache_manager.events.events if isinstance(ev, RequestPreempted)]
    assert preempted and preempted[0] == b
    rb = e.get_request(b)
    assert rb.num_preemptions >= 1
    assert e.output_of(b).token_ids == alone.output_of(b).token_ids  # same tokens after recompute
    assert e.output_of(a).finished and e.kv_cache_manager.usage == 0.0


def test_no_waiting_request_admitted_in_a_step_that_preempted():
    e = sim(num_blocks=5, block_size=2, max_num_batched_tokens=64)
    e.add_request([1, 2, 3], SamplingParams(max_tokens=4))
    e.add_request([4, 5, 6], SamplingParams(max_tokens=4))
    e.add_request([7], SamplingParams(max_tokens=1))
    while e.has_unfinished_requests():
        out = e.scheduler.schedule()
        if out.preempted:
            assert all(s.request.num_preemptions == 0 or s.request_id not in out.preempted for s in out.scheduled)
            assert all(e.scheduler.requests[s.request_id] in e.scheduler.running for s in out.scheduled)
            admitted = [s for s in out.scheduled if s.num_computed_tokens == 0 and s.request.num_output_tokens == 0]
            assert not admitted
        e.scheduler.update_from_output(out, e.backend.execute(out))


def test_a_batch_can_hit_blocks_cached_earlier_in_the_same_step():
    e = sim(num_blocks=20, block_size=4)
    e.add_request(list(range(9)))
    rid = e.add_request(list(range(9)))
    e.step()
    assert e.get_request(rid).num_cached_tokens == 8


def test_generate_returns_outputs_in_order_with_metrics():
    e = sim(num_blocks=30, block_size=4)
    outs = e.generate(["the cat sat on the mat today", "the cat sat on the rug"], SamplingParams(max_tokens=3))
    assert [len(o.token_ids) for o in outs] == [3, 3]
    assert all(o.finished and o.finish_reason == "finished (length)" for o in outs)
    assert outs[1].num_cached_tokens == 4 and outs[1].metrics.num_computed_prefill_tokens == 2
    assert outs[0].metrics.ttft is not None and outs[0].text


def test_scripted_output_and_stop_string():
    e = sim(num_blocks=30, block_size=4)
    tok = e.tokenizer
    script = tok.encode("P Q R S")
    rid = e.add_request("A B C", SamplingParams(max_tokens=10, stop=["R"]), scripted_output=script)
    while e.has_unfinished_requests():
        e.step()
    out = e.output_of(rid)
    assert out.text == "P Q " and out.finish_reason == "finished (stop)"


def test_stop_token_ids_finish_the_request():
    e = sim(num_blocks=30, block_size=4)
    rid = e.add_request([1, 2], SamplingParams(max_tokens=10, stop_token_ids=[42]), scripted_output=[5, 42, 6])
    while e.has_unfinished_requests():
        e.step()
    assert e.output_of(rid).token_ids == [5, 42]


@pytest.mark.parametrize(
    "prompt, params, match",
    [
        ([], None, "empty"),
        ("   ", None, "empty"),
        ([1, -2], None, "cannot be negative"),
        ([1, 2.5], None, "must be integers"),
        (list(range(100)), None, "whole pool holds"),
        ([1, 2], "max0", "max_tokens must be a positive integer"),
    ],
)
def test_engine_rejects_bad_requests_and_keeps_serving(prompt, params, match):
    e = sim(num_blocks=6, block_size=4)
    before = len(e.kv_cache_manager.events.events)
    with pytest.raises(InvalidRequestError, match=match):
        sp = SamplingParams(max_tokens=0) if params == "max0" else None
        e.add_request(prompt, sp)
    assert len(e.kv_cache_manager.events.events) == before and not e.has_unfinished_requests()
    assert e.generate([[1, 2, 3]], SamplingParams(max_tokens=2))[0].finished


def test_generate_checks_every_prompt_before_queueing_any():
    e = sim(num_blocks=6, block_size=4)
    with pytest.raises(InvalidRequestError):
        e.generate([[1, 2], list(range(100))])
    assert not e.scheduler.requests


def test_request_validation_and_unknown_ids():
    with pytest.raises(InvalidRequestError, match="empty"):
        Request("r", [])
    with pytest.raises(InvalidRequestError, match="not a string"):
        Request("r", "abc")
    e = sim(num_blocks=6, block_size=4)
    with pytest.raises(UnknownRequestError):
        e.abort_request("nope")
    e.add_request([1], request_id="x")
    with pytest.raises(InvalidRequestError, match="already in use"):
        e.add_request([1], request_id="x")


def test_engine_config_is_validated():
    with pytest.raises(ConfigError, match="backend"):
        EngineConfig(backend="gpu")
    with pytest.raises(ConfigError, match="num_blocks"):
        EngineConfig(backend="simulator", num_blocks=1)
    with pytest.raises(ConfigError, match="block_size"):
        EngineConfig(backend="simulator", block_size=0)


def test_timeline_scrubs_forward_and_backward():
    e = sim(num_blocks=8, block_size=2)
    e.generate([[1, 2, 3, 4, 5], [1, 2, 3, 4, 9]], SamplingParams(max_tokens=2))
    tl = e.timeline()
    tl.checkpoint_every = 4
    n = len(tl)
    forward = [tl.state_at(i).copy() for i in range(n + 1)]
    backward = [tl.state_at(i).copy() for i in range(n, -1, -1)][::-1]
    assert forward == backward
    assert forward[0].free_queue == list(range(1, 8)) and forward[-1].usage == 0.0
    evict_at = tl.find_next(0, {"touch"})
    assert evict_at is not None and tl.events[evict_at - 1].kind == "touch"
