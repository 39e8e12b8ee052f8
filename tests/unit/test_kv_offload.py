"""The KV offloading tier (vLLM's native CPU offloading) on the simulator: no model, fast."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.events import BlockRemoved, BlockStored
from engine.kv_offload import CPUOffloadingManager, LookupResult, ReqContext
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams

A = list(range(1, 34))      # 8 full blocks of 4 + 1 token
B = list(range(100, 133))


def run(prompts, **tier):
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=10, block_size=4, **tier))
    cached = [engine.generate([p], SamplingParams(max_tokens=2))[0].num_cached_tokens for p in prompts]
    return engine, cached


def test_tier_off_by_default_and_evicted_prefix_is_recomputed():
    engine, cached = run([A, B, A])
    assert engine.offloading is None and engine.scheduler.connector is None
    assert cached == [0, 0, 0]


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_evicted_prefix_comes_back_from_the_tier(policy):
    engine, cached = run([A, B, A, B], kv_offloading_num_blocks=16, kv_offloading_policy=policy)
    assert cached == [0, 0, 32, 32]
    stats = engine.offloading.stats
    assert stats.external_hits == 64 and stats.tokens_by_source["external_kv_transfer"] == 64
    cpu = [e for e in engine.kv_cache_manager.events.events if getattr(e, "medium", None) == "CPU"]
    assert cpu and all(isinstance(e, BlockStored) for e in cpu)  # room for all: nothing left the tier


def test_a_small_tier_evicts_and_says_so():
    engine, cached = run([A, B, A], kv_offloading_num_blocks=8)
    assert cached == [0, 0, 0]  # B's blocks pushed A's out of the tier
    removed = [e for e in engine.kv_cache_manager.events.events if isinstance(e, BlockRemoved) and e.medium == "CPU"]
    assert sum(len(e.block_hashes) for e in removed) == 16  # B pushed A out, then A pushed B out


def test_size_must_be_given_once_and_policy_known():
    with pytest.raises(ConfigError):
        EngineConfig(backend="simulator", kv_offloading_size=1.0, kv_offloading_num_blocks=4)
    with pytest.raises(ConfigError, match="eviction policy"):
        EngineConfig(backend="simulator", kv_offloading_num_blocks=4, kv_offloading_policy="fifo")
    with pytest.raises(ConfigError, match="needs a model"):
        LLMEngine(EngineConfig(backend="simulator", kv_offloading_size=1.0))


def test_pending_store_is_hit_pending_then_hit_and_pinned_chunks_are_not_evicted():
    manager = CPUOffloadingManager(2, "lru")
    ctx = ReqContext("r")
    out = manager.prepare_store([b"a", b"b"], ctx)
    assert out is not None and out.chunk_ids == [0, 1]
    assert manager.lookup(b"a") is LookupResult.HIT_PENDING
    assert manager.prepare_store([b"c"], ReqContext("s")) is None  # nothing idle to evict
    manager.complete_store([b"a", b"b"])
    assert manager.lookup(b"a") is LookupResult.HIT
    manager.prepare_load([b"a"], ReqContext("t"))
    out = manager.prepare_store([b"c"], ReqContext("u"))
    assert out is not None and out.evicted_keys == [b"b"]  # a is pinned by its load


def test_lru_finishing_request_refreshes_its_prefix_tail_to_head():
    manager = CPUOffloadingManager(3, "lru")
    ctx = ReqContext("r")
    for i, key in enumerate([b"x", b"y", b"z"]):
        ctx.set_offload_key_position(key, 4 * (i + 1))
    manager.prepare_store([b"x", b"y", b"z"], ctx)
    manager.complete_store([b"x", b"y", b"z"])
    manager.on_request_finished(ctx)
    assert manager.policy.order() == [b"z", b"y", b"x"]  # the head block is the most recent


def test_live_state_keeps_the_tier_apart_from_the_device_pool():
    from engine import kv_events
    from teaching.live.state import ReplicaState

    engine, _ = run([A, B, A], kv_offloading_num_blocks=16)
    state = ReplicaState("r")
    batch = kv_events.decode_batch(kv_events.encode_batch(engine.kv_cache_manager.events.events))
    state.apply(0, 0.0, batch.events)
    assert len(state.host_blocks) == 16 and state.block_size == 4  # the tier's events never touch the pool's view
