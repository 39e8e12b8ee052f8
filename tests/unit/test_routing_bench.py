"""The routing benchmark's prediction side and the routing tour's bookkeeping, without servers.

``bench.routing.workload_trace`` must describe vLLM's ``prefix_repetition`` workload block for block
(one trace block per 16-token engine block), so ``prefixlab trace replay`` predicts the same hit
rates the replicas would count; the tour must interleave courses and count where each one landed.
"""

from __future__ import annotations

import json

from bench.routing import Workload, predicted, workload_trace
from teaching.live.metrics import parse_prometheus, server_metrics
from teaching.live.routing_tour import Landing, TourPass, tour_prompts
from teaching.traces.loader import TRACE_BLOCK_SIZE, parse_trace
from teaching.traces.replay import PreparedTrace

WORK = Workload(num_prompts=24, num_prefixes=3, prefix_len=64, suffix_len=16, output_len=24)


def test_the_workload_trace_has_one_block_per_engine_block_and_shared_prefixes():
    lines = [json.loads(line) for line in workload_trace(WORK).splitlines()]
    assert len(lines) == 24
    prefixes = {tuple(line["hash_ids"][:4]) for line in lines}  # 64 tokens = 4 blocks of 16
    assert len(prefixes) == 3
    suffixes = [line["hash_ids"][4] for line in lines]
    assert len(set(suffixes)) == 24 and all(len(line["hash_ids"]) == 5 for line in lines)
    prepared = PreparedTrace(parse_trace(workload_trace(WORK), "w"))
    # 80 prompt tokens + 24 output tokens = 7 engine blocks of 16, as the replica allocates them
    assert set(prepared.needed_blocks) == {7}
    assert all(line["input_length"] == 5 * TRACE_BLOCK_SIZE for line in lines)


def test_the_prediction_is_the_prefix_structure_replayed():
    trace = workload_trace(WORK)
    # a router that follows the cache misses each prefix once: (24 - 3) x 64 of 24 x 80 prompt tokens
    prefix = predicted(trace, replicas=4, router="prefix", capacity_blocks=0)
    assert abs(prefix.hit_rate - 21 * 64 / (24 * 80)) < 1e-9 and prefix.hit_low == prefix.hit_high
    round_robin = predicted(trace, replicas=4, router="round-robin", capacity_blocks=0)
    assert round_robin.hit_rate < prefix.hit_rate and round_robin.balance == 1.0
    # a pool that holds one prefix and a request thrashes under round robin
    assert predicted(trace, replicas=4, router="round-robin", capacity_blocks=7).hit_rate < round_robin.hit_rate
    # one real run of a random router is one draw: the prediction gives the seeds' range around the mean
    random = predicted(trace, replicas=4, router="random", capacity_blocks=7)
    assert random.hit_low < random.hit_rate < random.hit_high


def test_server_metrics_read_prompt_tokens_and_finished_requests():
    text = ('vllm:prompt_tokens_total{model_name="m"} 120\n'
            'vllm:request_success_total{model_name="m",finished_reason="length"} 3\n'
            'vllm:request_success_total{model_name="m",finished_reason="stop"} 2\n')
    seen = server_metrics(parse_prometheus(text))
    assert seen.prompt_tokens == 120 and seen.requests_finished == 5


def test_the_tour_interleaves_courses_and_counts_where_each_landed():
    prompts = tour_prompts(courses=3, students=2)
    assert [p.course for p in prompts] == ["biology", "history", "chemistry"] * 2
    assert len({p.question for p in prompts if p.course == "biology"}) == 2
    spread = TourPass("round_robin", tuple(Landing(p, i % 2, 100, 0) for i, p in enumerate(prompts)))
    assert spread.replicas_per_course() == {"biology": [0, 1], "history": [0, 1], "chemistry": [0, 1]}
    assert "6 system-prompt prefills for 3 courses" in spread.summary()
    together = TourPass("kv_aware", tuple(Landing(p, 0, 100, 0 if i < 3 else 80) for i, p in enumerate(prompts)))
    assert together.hit_rate == 240 / 600
    assert "3 system-prompt prefills" in together.summary() and "40%" in together.summary()
