"""/metrics for the offload tier and vLLM's block residency histograms, from a simulator engine's events."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from engine.server.metrics import Gauges, ServerMetrics
from engine.server.residency import KVCacheResidency


def test_external_hits_and_residency_reach_the_text_format():
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=10, block_size=4, kv_offloading_num_blocks=16))
    residency, metrics = KVCacheResidency(sample_rate=1.0, seed=0), ServerMetrics("m")
    metrics.enable_residency()
    a, b = list(range(1, 34)), list(range(100, 133))
    for step, prompt in enumerate((a, b, a)):
        engine.generate([prompt], SamplingParams(max_tokens=2))
        metrics.observe_evictions(residency.observe(engine.kv_cache_manager.take_events(), now=10.0 * (step + 1)))
    stats = engine.offloading.stats
    metrics.observe_external(stats.external_queries, stats.external_hits, stats.tokens_by_source)
    text = metrics.render(Gauges(0, 0, 0.0))
    assert 'vllm:external_prefix_cache_hits_total{model_name="m",engine="0"} 32' in text
    assert 'vllm:prompt_tokens_by_source_total{model_name="m",engine="0",source="external_kv_transfer"} 32' in text
    lifetimes = metrics.residency["vllm:kv_block_lifetime_seconds"]
    # B's prefill evicted A's blocks 10 s after they were allocated; A's return evicted B's.
    assert lifetimes.count > 0 and lifetimes.sum == 10.0 * lifetimes.count
    assert "vllm:kv_block_idle_before_evict_seconds_count" in text and "vllm:kv_block_reuse_gap_seconds_bucket" in text


def test_tier_off_exports_nothing_new():
    text = ServerMetrics("m").render(Gauges(0, 0, 0.0))
    assert "external_prefix_cache" not in text and "kv_block_lifetime" not in text
