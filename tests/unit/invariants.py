"""Invariants that must hold for a KVCacheManager after *any* operation."""

from collections import Counter

from engine.kv_cache import KVCacheManager
from engine.timeline import Timeline


def check_invariants(m: KVCacheManager) -> None:
    pool = m.block_pool
    holders = Counter(block.block_id for blocks in m.req_to_blocks.values() for block in blocks)
    free = pool.free_block_queue.get_all_free_blocks()
    free_ids = [b.block_id for b in free]

    # Ref counts equal the number of live block tables holding each block.
    for block in pool.blocks[1:]:
        assert block.ref_cnt == holders[block.block_id], f"block {block.block_id}"
    assert 0 not in holders and pool.null_block.ref_cnt == 0
    # The free queue is exactly the blocks with ref 0, each once, never the null block.
    assert len(free_ids) == len(set(free_ids)) == pool.get_num_free_blocks()
    assert set(free_ids) == {b.block_id for b in pool.blocks[1:] if b.ref_cnt == 0}
    # No block both free and in a table (follows from the two above, but say it plainly).
    assert not set(free_ids) & set(holders)
    # Every hashed block is in the map under its own hash, and the map holds nothing else.
    hashed = {b.block_id for b in pool.blocks if b.block_hash is not None}
    mapped = set()
    for key, blocks in pool.cached_block_hash_to_block.items():
        for block in blocks:
            assert block.block_hash == key
            mapped.add(block.block_id)
    assert hashed == mapped
    # Usage is consistent with the queue.
    assert abs(m.usage - (1 - len(free_ids) / (pool.num_blocks - 1))) < 1e-12


def check_timeline_matches(m: KVCacheManager) -> None:
    """Replaying the event log from scratch must rebuild the manager's exact state."""
    state = Timeline(m.num_blocks, m.events.events).state_at(len(m.events.events))
    pool = m.block_pool
    assert state.free_queue == [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
    assert state.ref_cnt == [b.ref_cnt for b in pool.blocks]
    assert state.block_hash == [b.block_hash for b in pool.blocks]
    assert {k: v for k, v in state.block_tables.items()} == {r: [b.block_id for b in bl] for r, bl in m.req_to_blocks.items()}
    assert state.hash_table == {k: [b.block_id for b in v] for k, v in pool.cached_block_hash_to_block.items()}
