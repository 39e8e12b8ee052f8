"""One test per rule of SPEC §2-§4 (block pool and KV cache manager)."""

import pytest

from engine.errors import ConfigError, RequestStateError, UnknownRequestError
from engine.events import AllBlocksCleared, BlockRemoved, BlockStored, BlocksTouched, CacheLookup
from engine.kv_cache import KVCacheManager
from engine.request import RequestStatus
from tests.unit.conftest import admit, decode, make_request


def queue(m):
    return [b.block_id for b in m.block_pool.free_block_queue.get_all_free_blocks()]


def test_null_block_is_reserved_and_initial_queue_is_1_to_n():
    m = KVCacheManager(11, 4)
    assert m.block_pool.blocks[0].is_null
    assert queue(m) == list(range(1, 11))
    assert m.block_pool.get_num_free_blocks() == 10 and m.usage == 0.0


def test_last_token_is_always_recomputed():
    m = KVCacheManager(20, 4)
    admit(m, make_request("a", range(8)))
    same = make_request("b", range(8))  # 2 full blocks, both cached
    hits, n = m.get_computed_blocks(same)
    assert len(hits) == 1 and n == 4  # (8 - 1) // 4 = 1
    lookup = [e for e in m.take_events() if isinstance(e, CacheLookup)][-1]
    assert lookup.stop_reason == "the last token is always recomputed"


def test_partial_tail_block_is_never_cached():
    m = KVCacheManager(20, 4)
    admit(m, make_request("a", range(6)))
    assert [m.block_pool.blocks[i].block_hash is not None for i in m.get_block_ids("a")] == [True, False]
    assert len(m.block_pool.cached_block_hash_to_block) == 1


def test_lookup_stops_at_first_miss_and_changes_nothing():
    m = KVCacheManager(20, 4)
    admit(m, make_request("a", list(range(12)) + [99]))
    before = (queue(m), [b.ref_cnt for b in m.block_pool.blocks])
    probe = make_request("b", [0, 1, 2, 3, 9, 9, 9, 9, 8, 9, 10, 11, 5])
    hits, n = m.get_computed_blocks(probe)
    assert [b.block_id for b in hits] == [1] and n == 4  # block 2 matches again, but the chain broke
    assert (queue(m), [b.ref_cnt for b in m.block_pool.blocks]) == before
    lookup = [e for e in m.take_events() if isinstance(e, CacheLookup)][-1]
    assert lookup.first_miss_block_index == 1 and lookup.stop_reason == "miss"


def test_freed_block_stays_hittable_until_popped():
    m = KVCacheManager(4, 4)  # 3 usable blocks
    a = make_request("a", range(9))
    admit(m, a)
    m.free(a)
    hits, _ = m.get_computed_blocks(make_request("b", range(9)))
    assert [b.block_id for b in hits] == [1, 2]  # lazy eviction: still there
    admit(m, make_request("c", range(100, 109)))  # needs all 3 blocks: evicts everything
    assert len(m.block_pool.cached_block_hash_to_block) == 2  # only c's own blocks
    assert m.get_computed_blocks(make_request("d", range(9))) == ([], 0)


def test_touch_does_not_refresh_recency_free_does():
    m = KVCacheManager(6, 2, vllm_version="0.23")
    a, b = make_request("a", [1, 2, 3]), make_request("b", [7, 8, 9])
    admit(m, a)
    admit(m, b)
    m.free(a)  # queue: 5, then a's blocks tail first: 2, 1
    m.free(b)
    assert queue(m) == [5, 2, 1, 4, 3]
    c = make_request("c", [1, 2, 3])
    admit(m, c)  # hits block 1: it leaves the queue; its later position comes from the next free
    assert 1 not in queue(m)
    m.free(c)
    assert queue(m)[-1] == 1


def test_hit_blocks_that_are_free_count_against_capacity():
    m = KVCacheManager(4, 4)  # 3 usable
    a = make_request("a", range(9))
    admit(m, a)
    m.free(a)
    b = make_request("b", list(range(8)) + [50, 51, 52, 53, 54])  # hits 2 free blocks, needs 2 more
    hits, n = m.get_computed_blocks(b)
    assert len(hits) == 2
    assert m.allocate_slots(b, b.num_tokens - n, n, hits) is None
    assert queue(m) == [3, 2, 1] and all(x.ref_cnt == 0 for x in m.block_pool.blocks)
    assert "b" not in m.req_to_blocks and m.prefix_cache_stats.requests == 1


def test_allocation_without_lookup_attaches_the_hasher():
    m = KVCacheManager(10, 4)
    req = make_request("a", range(8))
    assert req.block_hashes == []
    assert len(m.allocate_slots(req, 8)) == 2
    assert len(req.block_hashes) == 2 and len(m.block_pool.cached_block_hash_to_block) == 2
    req.append_output_token_ids([1, 2, 3, 4])
    assert len(req.block_hashes) == 3  # the request extends its own chain


def test_prompt_exactly_filling_the_pool_is_legal():
    m = KVCacheManager(5, 4)
    new = m.allocate_slots(make_request("a", range(16)), 16)
    assert len(new) == 4 and m.block_pool.get_num_free_blocks() == 0 and m.usage == 1.0


def test_duplicate_full_block_is_inserted_and_lookup_returns_first():
    m = KVCacheManager(10, 4)
    a, b = make_request("a", range(5)), make_request("b", range(5))
    m.allocate_slots(a, 5)  # no lookups: both compute block 0 (same batch)
    m.allocate_slots(b, 5)
    (h, blocks), = [(k, v) for k, v in m.block_pool.cached_block_hash_to_block.items()]
    assert [x.block_id for x in blocks] == [1, 3]
    assert m.block_pool.get_cached_block(h).block_id == 1
    m.free(a)
    m.allocate_slots(make_request("c", range(50, 78)), 28)  # takes every free block: evicts block 1 only
    assert m.block_pool.get_cached_block(h).block_id == 3


def test_block_stored_is_one_event_per_call_with_vllm_fields():
    m = KVCacheManager(10, 4)
    m.take_events()
    m.allocate_slots(make_request("a", range(9), lora_name="math"), 9)
    stored = [e for e in m.take_events() if isinstance(e, BlockStored)]
    assert len(stored) == 1
    e = stored[0]
    assert e.block_ids == [1, 2] and e.parent_block_hash is None and e.token_ids == list(range(8))
    assert e.block_size == 4 and e.lora_name == "math" and e.medium == "GPU"


def test_vllm_policy_prepends_hashless_and_appends_hashed():
    m = KVCacheManager(10, 4)
    a = make_request("a", range(6))
    admit(m, a)  # blocks 1 (hashed), 2 (partial)
    m.free(a)
    assert queue(m) == [2, 3, 4, 5, 6, 7, 8, 9, 1]


@pytest.mark.parametrize(("version", "expected"), [
    ("0.33", [2, 1, 3, 4, 5, 6, 7, 8, 9]),  # every block is hashless: all prepended (tail first)
    ("0.25", [2, 1, 3, 4, 5, 6, 7, 8, 9]),
    ("0.23", [3, 4, 5, 6, 7, 8, 9, 2, 1]),  # classic: all appended
])
def test_with_caching_off_free_order_follows_the_version(version, expected):
    m = KVCacheManager(10, 4, enable_caching=False, vllm_version=version)
    a = make_request("a", range(6))
    admit(m, a)
    assert m.block_pool.blocks[1].block_hash is None
    m.free(a)
    assert queue(m) == expected
    assert m.get_computed_blocks(make_request("b", range(6))) == ([], 0)


def test_prompt_logprobs_requests_skip_reading_but_still_write():
    m = KVCacheManager(10, 4)
    admit(m, make_request("a", range(9)))
    req = make_request("b", range(9), prompt_logprobs=1)
    assert m.get_computed_blocks(req) == ([], 0)
    m.allocate_slots(req, 9)
    assert m.block_pool.blocks[m.get_block_ids("b")[0]].block_hash is not None


def test_reset_prefix_cache_only_when_idle():
    m = KVCacheManager(10, 4)
    a = make_request("a", range(9))
    admit(m, a)
    assert m.reset_prefix_cache() is False
    assert len(m.block_pool.cached_block_hash_to_block) == 2
    m.free(a)
    m.take_events()
    assert m.reset_prefix_cache() is True
    assert len(m.block_pool.cached_block_hash_to_block) == 0
    assert all(b.block_hash is None for b in m.block_pool.blocks)
    assert any(isinstance(e, AllBlocksCleared) for e in m.take_events())


def test_watermark_applies_to_waiting_requests_only():
    m = KVCacheManager(11, 4, watermark=0.2)  # keep 2 of 10 blocks back for running requests
    waiting = make_request("w", range(36))  # needs 9 blocks
    assert m.allocate_slots(waiting, 36) is None
    small = make_request("s", range(32))  # 8 blocks: exactly at the watermark
    assert m.allocate_slots(small, 32) is not None
    small.status = RequestStatus.RUNNING
    small.num_computed_tokens = 32
    small.append_output_token_ids([1])
    assert m.allocate_slots(small, 1) is not None  # running: may dip into the reserve


def test_usage_and_stats():
    m = KVCacheManager(11, 4)
    admit(m, make_request("a", range(8)))
    admit(m, make_request("b", list(range(8)) + [1]))
    assert m.usage == pytest.approx(3 / 10)
    s = m.prefix_cache_stats
    assert (s.requests, s.queries, s.hits) == (2, 17, 8)
    assert s.hit_rate == pytest.approx(8 / 17)


def test_free_releases_blocks_in_reverse_order():
    m = KVCacheManager(10, 2, vllm_version="0.23")
    a = make_request("a", range(6))
    admit(m, a)
    m.free(a)
    assert queue(m)[-3:] == [3, 2, 1]


def test_eviction_emits_block_removed_with_the_old_hash():
    m = KVCacheManager(3, 2)
    a = make_request("a", range(4))
    admit(m, a)
    old = list(a.block_hashes)
    m.free(a)
    m.take_events()
    admit(m, make_request("b", range(10, 14)))
    removed = [e for e in m.take_events() if isinstance(e, BlockRemoved)]
    assert [e.block_hashes[0] for e in removed] == [old[1], old[0]]  # tail of a's chain first


def test_touch_event_lists_revived_blocks():
    m = KVCacheManager(10, 4)
    a = make_request("a", range(9))
    admit(m, a)
    m.free(a)
    m.take_events()
    admit(m, make_request("b", range(9)))
    touched = [e for e in m.take_events() if isinstance(e, BlocksTouched)][0]
    assert touched.block_ids == [1, 2] and touched.revived_block_ids == [1, 2]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_blocks=1, block_size=4), "num_blocks must be at least 2"),
        (dict(num_blocks=10, block_size=0), "block_size"),
        (dict(num_blocks=10, block_size=4, hash_algo="md5"), "Unknown hash algorithm"),
        (dict(num_blocks=10, block_size=4, vllm_version="lifo"), "Unknown vllm_version"),
    ],
)
def test_constructor_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        n, bs = kwargs.pop("num_blocks"), kwargs.pop("block_size")
        KVCacheManager(n, bs, **kwargs)


def snapshot(m):
    return (
        queue(m),
        [(b.ref_cnt, b.block_hash) for b in m.block_pool.blocks],
        {k: list(v) for k, v in m.req_to_blocks.items()},
        len(m.block_pool.cached_block_hash_to_block),
    )


def test_bad_calls_raise_clear_errors_and_change_nothing():
    m = KVCacheManager(10, 4)
    a = make_request("a", range(9))
    admit(m, a)
    before = snapshot(m)
    with pytest.raises(UnknownRequestError, match="'ghost' holds no blocks"):
        m.free("ghost")
    with pytest.raises(KeyError):
        m.get_block_ids("ghost")
    done = make_request("done", range(3))
    done.status = RequestStatus.FINISHED_STOPPED
    with pytest.raises(RequestStateError, match="finished"):
        m.allocate_slots(done, 3)
    with pytest.raises(ValueError):
        m.allocate_slots(make_request("x", range(3)), 3, 4, [])  # hit tokens without hit blocks
    assert snapshot(m) == before
    m.free(a)
    with pytest.raises(UnknownRequestError):
        m.free(a)  # double free


def test_get_block_ids_returns_plain_ints_and_reset_returns_bool():
    m = KVCacheManager(10, 4)
    admit(m, make_request("a", range(5)))
    ids = m.get_block_ids("a")
    assert type(ids) is list and all(type(i) is int for i in ids)
    assert type(m.reset_prefix_cache()) is bool


def test_decode_caches_blocks_as_they_fill():
    m = KVCacheManager(10, 4)
    a = make_request("a", range(3))
    admit(m, a)
    decode(m, a, 7)
    assert m.block_pool.blocks[1].block_hash == a.block_hashes[0]
