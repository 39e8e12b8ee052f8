"""The routing tour on two real replicas behind vLLM's real router: round robin spreads every course's
system prompt over both replicas; kv_aware keeps each course on one replica and serves it from there.

Three courses' chats, interleaved, from empty caches under each policy (``teaching.live.routing_tour``).
Skips without ``vllm-router``.
"""

from __future__ import annotations

import pytest

from engine.server.cluster import Cluster, ClusterConfig, find_router, router_missing_message
from teaching.live.routing_tour import run_tour
from tests.live.class_process import free_run
from tests.live.conftest import ROOT
from tests.ports import for_worker

pytestmark = pytest.mark.slow


def test_the_tour_shows_round_robin_spreading_and_kv_aware_keeping_each_course_together(tmp_path):
    binary = find_router()
    if binary is None:
        pytest.skip(router_missing_message())
    http = free_run(for_worker(range(8220, 8240, 4)), 4)
    events = free_run(for_worker(range(5720, 5740, 4)), 4)
    config = ClusterConfig(replicas=2, policy="round_robin", port=http, router_port=http + 2, events_port=events,
                           replay_port=events + 2, num_blocks=256)
    cluster = Cluster(config, tmp_path)
    said: list[str] = []
    try:
        cluster.start_replicas(env={"PYTHONPATH": str(ROOT)})
        spread, together = run_tour(cluster, said.append, courses=3, students=2, delay_s=0.0, binary=binary)
    finally:
        cluster.stop()
    assert cluster.alive() == []

    assert spread.policy == "round_robin" and together.policy == "kv_aware"
    # round robin: 3 courses interleaved over 2 replicas, so each course's two chats land on different replicas
    assert all(replicas == [0, 1] for replicas in spread.replicas_per_course().values()), said
    # kv_aware: each course's second chat goes where its system prompt is cached, and is served from there
    assert all(len(replicas) == 1 for replicas in together.replicas_per_course().values()), said
    seconds = together.landings[3:]
    assert all(landing.cached_tokens >= 32 for landing in seconds), said
    assert together.hit_rate > spread.hit_rate, said
    assert any("kv_aware:" in line and "3 system-prompt prefills for 3 courses" in line for line in said), said
