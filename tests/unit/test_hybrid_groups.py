"""Hybrid KV cache groups: layer patterns, vLLM's grouping, window release, the hybrid hit search.

The exact agreement with vLLM 0.33 is the differential's job (tests/vllm/test_hybrid_differential.py);
these tests pin the rules a student reads in the lesson, with numbers small enough to check by hand.
"""

from __future__ import annotations

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.events import BlockRemoved, BlocksReleased, BlockStored
from engine.kv_cache.coordinator import HybridKVCacheCoordinator, UnitaryKVCacheCoordinator
from engine.kv_cache.grouped_manager import GroupedKVCacheManager
from engine.kv_cache.kv_cache_spec import (
    FullAttentionSpec,
    SlidingWindowSpec,
    kv_cache_groups_for_layers,
    layer_pattern_from_hf_config,
    parse_layer_pattern,
)
from engine.llm_engine import LLMEngine
from engine.request import Request, RequestStatus, SamplingParams

BS = 4


def make_request(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens, SamplingParams(max_tokens=100))


def admit(manager: GroupedKVCacheManager, request: Request, chunk: int | None = None) -> int:
    hits, num_hits = manager.get_computed_blocks(request)
    chunk = request.num_tokens - num_hits if chunk is None else chunk
    assert manager.allocate_slots(request, chunk, num_hits, hits) is not None
    request.status = RequestStatus.RUNNING
    request.num_computed_tokens = num_hits + chunk
    return num_hits


def test_layer_pattern_parsing_and_errors():
    assert parse_layer_pattern("sliding:8*2,full") == [8, 8, None]
    assert parse_layer_pattern(["full", "sliding:3"]) == [None, 3]
    for bad in ("", "sliding", "sliding:0", "full*0", "dense", "sliding:8*x"):
        with pytest.raises(ConfigError):
            parse_layer_pattern(bad)


def test_gemma3_like_pattern_gives_five_sliding_groups_then_one_full():
    groups = kv_cache_groups_for_layers(parse_layer_pattern("sliding:8*5,full"), BS)
    assert [g.kv_cache_spec for g in groups] == [SlidingWindowSpec(BS, 8)] * 5 + [FullAttentionSpec(BS)]
    assert [g.layer_names for g in groups][0] == ("layer.0",)
    # Close bucket sizes (4 and 3, under 1.5x): the larger is the group size, one group each.
    groups = kv_cache_groups_for_layers([8, None, 8, None, 8, None, 8], BS)
    assert [g.layer_names for g in groups] == [("layer.0", "layer.2", "layer.4", "layer.6"), ("layer.1", "layer.3", "layer.5")]
    # 3 and 2 are not close: groups of 2, the three sliding layers split as layers[i::2].
    groups = kv_cache_groups_for_layers([8, None, 8, None, 8], BS)
    assert [g.layer_names for g in groups] == [("layer.0", "layer.4"), ("layer.2",), ("layer.1", "layer.3")]


def test_model_configs_declare_their_windows():
    assert layer_pattern_from_hf_config({"num_hidden_layers": 2, "sliding_window": None}) is None
    assert layer_pattern_from_hf_config({"num_hidden_layers": 2, "sliding_window": 16}) == [16, 16]  # Mistral
    qwen = {"num_hidden_layers": 3, "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
    assert layer_pattern_from_hf_config(qwen) == [16, None, 16]
    assert layer_pattern_from_hf_config({"num_hidden_layers": 2, "sliding_window": 16, "use_sliding_window": False}) is None


def test_older_versions_refuse_windows_clearly():
    for version in ("0.25", "0.23"):
        with pytest.raises(ConfigError, match="0.33"):
            EngineConfig(backend="simulator", layer_pattern="sliding:8,full", vllm_version=version)
        EngineConfig(backend="simulator", layer_pattern="full*2", vllm_version=version)  # no window: fine
    with pytest.raises(ConfigError, match="simulator"):
        EngineConfig(backend="model", layer_pattern="sliding:8,full")


def test_a_window_releases_blocks_and_null_takes_their_place():
    manager = GroupedKVCacheManager.from_layer_pattern(32, BS, "full,sliding:8")
    request = make_request("a", list(range(20)))
    admit(manager, request)
    manager.take_events()
    # 20 computed tokens, window 8: tokens 0..12 are never attended again -> blocks 0-2 go back.
    assert manager.allocate_slots(request, 1) is not None
    full_ids, sliding_ids = manager.get_block_ids("a")
    assert 0 not in full_ids and sliding_ids[:3] == [0, 0, 0] and 0 not in sliding_ids[3:]
    released = [e for e in manager.take_events() if isinstance(e, BlocksReleased)]
    assert len(released) == 1 and released[0].group_idx == 1 and len(released[0].block_ids) == 3
    # They were cached, so they go to the tail of the free queue, still hittable.
    queue = [b.block_id for b in manager.block_pool.free_block_queue.get_all_free_blocks()]
    assert queue[-3:] == released[0].appended_block_ids


def test_sliding_window_hit_needs_only_the_window():
    manager = GroupedKVCacheManager.from_layer_pattern(64, BS, "sliding:8")
    assert isinstance(manager.coordinator, UnitaryKVCacheCoordinator)
    first = make_request("a", list(range(33)))
    admit(manager, first)
    manager.free(first)
    # Evict block 1's entry by hand: full attention would stop there, a window of 8 tokens
    # (2 blocks before the next token) still hits on the last cached run.
    key = next(k for k, blocks in manager.block_pool.cached_block_hash_to_block.items() if blocks[0].block_id == 2)
    manager.block_pool.cached_block_hash_to_block.pop(key, 2)
    second = make_request("b", list(range(33)))
    hits, num_hits = manager.get_computed_blocks(second)
    assert num_hits == 32
    assert [b.is_null for b in hits[0]] == [True] * 6 + [False] * 2


def test_hybrid_hit_is_cut_to_what_every_group_allows():
    manager = GroupedKVCacheManager.from_layer_pattern(64, BS, "full,sliding:8")
    assert isinstance(manager.coordinator, HybridKVCacheCoordinator)
    first = make_request("a", list(range(40)))
    admit(manager, first)
    manager.free(first)
    # Drop the sliding group's entries for blocks 6-8: its last complete run ends at block 5.
    pool = manager.block_pool
    sliding_keys = [k for k in pool.cached_block_hash_to_block._cache if k[-4:] == (1).to_bytes(4, "big")]
    second = make_request("b", list(range(40)))
    second.attach_hasher(manager.hasher, BS)
    for index in (6, 7, 8):
        key = second.block_hashes[index] + (1).to_bytes(4, "big")
        assert key in sliding_keys
        pool.cached_block_hash_to_block.pop(key, pool.cached_block_hash_to_block.get_one_block(key).block_id)
    hits, num_hits = manager.get_computed_blocks(second)
    assert num_hits == 6 * BS  # full attention alone would hit 9 blocks (36 tokens)
    assert len(hits[0]) == 6 and len(hits[1]) == 6 and hits[1][3].is_null


def test_events_name_group_and_spec_and_a_one_token_window_stores_nothing():
    manager = GroupedKVCacheManager.from_layer_pattern(32, BS, "full,sliding:1")
    admit(manager, make_request("a", list(range(9))))
    stored = [e for e in manager.take_events() if isinstance(e, BlockStored)]
    assert [(e.group_idx, e.kv_cache_spec_kind, e.kv_cache_spec_sliding_window) for e in stored] == [
        (0, "full_attention", None), (1, "sliding_window", 1)]
    assert len(stored[0].block_hashes) == 2
    assert stored[1].block_hashes == [] and stored[1].published()["extra_keys"] is None


def test_eviction_event_names_the_group():
    manager = GroupedKVCacheManager.from_layer_pattern(5, BS, "full,sliding:8")
    first = make_request("a", list(range(8)))
    admit(manager, first)
    manager.free(first)
    manager.take_events()
    admit(manager, make_request("b", [99] * 8))
    removed = [e for e in manager.take_events() if isinstance(e, BlockRemoved)]
    assert removed and {e.group_idx for e in removed} <= {0, 1}
    assert all(e.published()["group_idx"] == e.group_idx for e in removed)


def test_simulator_engine_runs_a_gemma3_like_pattern():
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=BS, num_blocks=96, layer_pattern="sliding:8*5,full"))
    prompt = list(range(30))
    for _ in range(2):
        outputs = engine.generate([prompt], SamplingParams(max_tokens=4))
        assert outputs[0].finished and len(outputs[0].token_ids) == 4
    manager = engine.kv_cache_manager
    assert manager.prefix_cache_stats.hits > 0
    assert any(isinstance(e, BlocksReleased) for e in manager.events.events)
    # The timeline still replays to the live pool's free queue.
    snapshot = engine.timeline().state_at(len(manager.events.events))
    assert snapshot.free_queue == [b.block_id for b in manager.block_pool.free_block_queue.get_all_free_blocks()]


def test_scenario_layers_setting():
    from teaching.scenarios.scenario import ScenarioError, parse_scenario, run_scenario

    assert parse_scenario("layers sliding:8*5,full\nrequest r: a b").layer_pattern == "sliding:8*5,full"
    with pytest.raises(ScenarioError, match="Line 1"):
        parse_scenario("layers sliding:x,full")
    with pytest.raises(ScenarioError, match="setting"):
        parse_scenario("request r: a b\nlayers full")
    run = run_scenario("blocks 20\nlayers sliding:8,full\nrequest r: a b c d e f g h i j | max_tokens=2\nrun")
    assert run.engine.kv_cache_manager.num_groups == 2


def test_the_sliding_window_lesson_claims_hold():
    """Lesson 12 says: with the window r2 gets nothing from the cache, without it all 16 tokens."""
    from pathlib import Path

    from teaching.lessons.loader import load_lessons
    from teaching.scenarios.scenario import parse_scenario, run_scenario

    lessons, errors = load_lessons(str(Path(__file__).resolve().parents[2] / "lessons"))
    assert not errors
    text = next(lesson for lesson in lessons if lesson.title.startswith("Sliding windows")).scenario.text
    assert run_scenario(text).engine.get_request("r2").num_cached_tokens == 0
    without = parse_scenario(text.replace("layers sliding:8,full", ""))
    assert run_scenario(without).engine.get_request("r2").num_cached_tokens == 16


def test_groups_view_shows_released_blocks_and_a_cut_hit():
    from teaching.pages.groups import groups_panel, groups_view
    from teaching.pages.playback import checked
    from teaching.scenarios.library import HYBRID_SLIDING_WINDOW
    from teaching.scenarios.scenario import Step, parse_scenario

    scenario = parse_scenario(HYBRID_SLIDING_WINDOW)
    line = [a.line_no for a in scenario.actions if isinstance(a, Step)][-1]
    view = groups_view(scenario, line)
    sliding, full = view.groups
    assert sliding.kind == "sliding_window" and full.kind == "full_attention"
    assert sliding.tables["r1"][:4] == [None] * 4 and None not in full.tables["r1"]
    assert sliding.released and not full.released
    r1 = next(h for h in view.hits if h.request_id == "r1")
    assert r1.per_group == [0, 12] and r1.agreed == 0
    # What the player gets: per-group titles, null where the window released, the hits (checked against the schema).
    panel = checked(groups_panel(view))
    sliding_table, full_table = panel["tables"]
    assert sliding_table["title"] == "Group 0 · sliding window of 8 tokens" and sliding_table["sliding"]
    assert full_table["title"] == "Group 1 · full attention" and not full_table["sliding"]
    assert dict(sliding_table["rows"])["r1"][:4] == [None] * 4 and None not in dict(full_table["rows"])["r1"]
    assert sliding_table["released"] == sliding.released
    assert ["r1", 16, [0, 12], 0] in panel["hits"]
    with pytest.raises(ValueError, match="layers"):
        groups_view("blocks 8\nrequest r: a b c d e\nrun", 3)


def test_wire_events_carry_the_group():
    from engine import kv_events

    manager = GroupedKVCacheManager.from_layer_pattern(32, BS, "full,sliding:8")
    admit(manager, make_request("a", list(range(9))))
    payload = kv_events.encode_batch(manager.take_events(), ts=0.0)
    assert payload is not None
    stored = [e for e in kv_events.decode_batch(payload).events if isinstance(e, kv_events.BlockStored)]
    assert [(e.group_idx, e.kv_cache_spec_kind, e.kv_cache_spec_sliding_window) for e in stored] == [
        (0, "full_attention", None), (1, "sliding_window", 8)]
