"""The free queue and the hash table on their own."""

import pytest

from engine.kv_cache import BlockHashToBlockMap, FreeKVCacheBlockQueue, KVCacheBlock


def ids(blocks):
    return [b.block_id for b in blocks]


def make_queue(n=5):
    blocks = [KVCacheBlock(i) for i in range(n)]
    return blocks, FreeKVCacheBlockQueue(blocks)


def test_queue_operations_keep_head_to_tail_order():
    blocks, q = make_queue()
    assert ids(q.get_all_free_blocks()) == [0, 1, 2, 3, 4] and q.num_free_blocks == 5
    assert q.popleft().block_id == 0
    q.remove(blocks[2])  # from the middle, O(1)
    assert ids(q.get_all_free_blocks()) == [1, 3, 4]
    q.append(blocks[0])
    q.prepend_n([blocks[2]])
    assert ids(q.get_all_free_blocks()) == [2, 1, 3, 4, 0]
    assert ids(q.popleft_n(2)) == [2, 1]
    assert q.num_free_blocks == 3


def test_prepend_n_keeps_the_given_order_at_the_head():
    blocks, q = make_queue(3)
    popped = q.popleft_n(3)
    q.append(popped[2])
    q.prepend_n([popped[0], popped[1]])
    assert ids(q.get_all_free_blocks()) == [0, 1, 2]


def test_queue_refuses_misuse():
    blocks, q = make_queue(2)
    with pytest.raises(ValueError):
        q.append(blocks[0])  # already linked
    q.popleft_n(2)
    with pytest.raises(ValueError):
        q.popleft()
    with pytest.raises(ValueError):
        q.remove(blocks[0])
    with pytest.raises(ValueError):
        q.popleft_n(1)


def test_hash_map_keeps_duplicates_and_returns_first_inserted():
    m = BlockHashToBlockMap()
    b1, b2, b3 = KVCacheBlock(1), KVCacheBlock(2), KVCacheBlock(3)
    m.insert(b"h", b1)
    m.insert(b"h", b2)
    m.insert(b"h", b3)
    assert len(m) == 1 and m.get_one_block(b"h") is b1
    assert m.pop(b"h", 2) is b2
    assert m.get_one_block(b"h") is b1
    assert m.pop(b"h", 1) is b1
    assert m.get_one_block(b"h") is b3
    assert m.pop(b"h", 99) is None  # only that block, never another
    assert m.pop(b"h", 3) is b3 and len(m) == 0 and m.get_one_block(b"h") is None
