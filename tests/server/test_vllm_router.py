"""Two real ``prefixlab serve`` replicas behind vLLM's real router (``vllm-router --policy kv_aware``).

The router subscribes to both replicas' KV events and asks a replica to render each request into
token ids; it must then send a request to the replica that caches its prefix. Each prefix is first
cached on one replica directly (the router's load balancing alone would not put it there), then
sent through the router: it has to land on that replica. Skips when the ``vllm-router`` package is
not installed (see :func:`engine.server.cluster.find_router`).
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest
from openai import OpenAI

from engine.server.cluster import Cluster, ClusterConfig, find_router, router_missing_message
from tests.live.class_process import free_run
from tests.ports import for_worker

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HTTP_BASES = for_worker(range(int(os.environ.get("PREFIXLAB_TEST_ROUTER_PORT", "8860")), 8900, 4))
EVENT_BASES = for_worker(range(6460, 6500, 4))


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines if line and not line.startswith("#")}


def prompt_tokens(url: str) -> float:
    return next(v for k, v in metrics(url).items() if k.startswith("vllm:prompt_tokens_total"))


def long_prefix(name: str) -> str:
    return " ".join(f"{name} note {i}: a replica keeps the KV blocks of the prompts it has seen, block by block."
                    for i in range(8))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    binary = find_router()
    if binary is None:
        pytest.skip(router_missing_message())
    http = free_run(HTTP_BASES, 4)
    events = free_run(EVENT_BASES, 2)
    config = ClusterConfig(replicas=2, policy="kv_aware", port=http, router_port=http + 2, events_port=events,
                           replay_port=events + 2, num_blocks=400)
    running = Cluster(config, tmp_path_factory.mktemp("router"))
    try:
        running.start_replicas(env={"PYTHONPATH": str(ROOT)})
        running.start_router(binary)
        time.sleep(1.0)  # the router's subscribers connect
        yield running
    finally:
        running.stop()


def test_kv_aware_sends_each_prefix_to_the_replica_that_caches_it(cluster):
    config = cluster.config
    replicas = config.replica_list()
    model = cluster.served_model()
    direct = [OpenAI(base_url=r.url + "/v1", api_key="none", max_retries=0, timeout=300) for r in replicas]
    routed = OpenAI(base_url=config.router_url + "/v1", api_key="none", max_retries=0, timeout=300)
    # Opposite replicas for neighbouring prefixes: a router that ignores the cache cannot get them all right.
    homes = {"Alpha": 1, "Bravo": 0, "Charlie": 1, "Delta": 0}
    for name, home in homes.items():
        direct[home].completions.create(model=model, prompt=long_prefix(name) + " Warm up.", max_tokens=1)
    time.sleep(1.0)  # the BlockStored events reach the router

    landed: dict[str, list[int]] = {}
    for round_ in range(2):
        for name in homes:
            before = [prompt_tokens(r.url) for r in replicas]
            answer = routed.completions.create(model=model, prompt=long_prefix(name) + f" Question {round_}?",
                                               max_tokens=1)
            after = [prompt_tokens(r.url) for r in replicas]
            served = [k for k in range(len(replicas)) if after[k] > before[k]]
            assert len(served) == 1, (name, before, after)
            landed.setdefault(name, []).append(served[0])
            assert answer.usage.prompt_tokens_details.cached_tokens > 0, (name, served)
    assert landed == {name: [home, home] for name, home in homes.items()}

    router = metrics(f"http://{config.client_host}:{config.metrics_port}")
    inputs = {k: v for k, v in router.items() if k.startswith("vllm_router_kv_routing_inputs_total")}
    assert sum(v for k, v in inputs.items() if 'result="render"' in k) >= 2 * len(homes), inputs
    assert not any('result="render_unavailable"' in k and v for k, v in inputs.items()), inputs
