"""SPEC §7: vLLM's design-doc example, step by step, in both free policies."""

import pytest

from engine.events import BlockRemoved
from engine.kv_cache import KVCacheManager
from tests.unit.conftest import admit, decode, letters, make_request


def queue(m):
    return [b.block_id for b in m.block_pool.free_block_queue.get_all_free_blocks()]


def ids(blocks):
    return [b.block_id for b in blocks]


@pytest.mark.parametrize(
    "policy, queue4, queue5, new6, evicted6",
    [
        ("vllm", [5, 8, 9, 10, 4, 3], [7, 5, 8, 9, 10, 4, 3, 6, 2, 1], [7, 5, 8, 9, 10], []),
        ("classic", [8, 9, 10, 5, 4, 3], [8, 9, 10, 5, 4, 3, 7, 6, 2, 1], [8, 9, 10, 5, 4], [4]),
    ],
)
def test_design_doc_example(policy, queue4, queue5, new6, evicted6):
    m = KVCacheManager(11, 4, vllm_version=policy)
    # 1. Req0 prompt A..O (15 tokens): no hit; A-D, A-H, A-L cached; block 4 (MNO) partial.
    req0 = make_request("0", letters("ABCDEFGHIJKLMNO"))
    hits, new = admit(m, req0)
    assert hits == [] and ids(new) == [1, 2, 3, 4]
    assert [m.block_pool.blocks[i].block_hash is not None for i in (1, 2, 3, 4)] == [True, True, True, False]
    # 2. Req0 decodes P (block 4 full -> cached), then Q needs a new block.
    assert decode(m, req0, letters("P")[0]) == []
    assert m.block_pool.blocks[4].block_hash == req0.block_hashes[3]
    assert ids(decode(m, req0, letters("Q")[0])) == [5]
    # 3. Req1 prompt A..J k l m n (14 tokens): hits [1, 2], new [6, 7].
    req1 = make_request("1", letters("ABCDEFGHIJklmn"))
    hits, new = admit(m, req1)
    assert ids(hits) == [1, 2] and ids(new) == [6, 7]
    assert [m.block_pool.blocks[i].ref_cnt for i in (1, 2)] == [2, 2]
    # 4. Req0 decodes R and finishes.
    req0.append_output_token_ids(letters("R"))
    m.free(req0)
    assert queue(m) == queue4
    # 5. Req1 decodes o and finishes.
    req1.append_output_token_ids(letters("o"))
    m.free(req1)
    assert queue(m) == queue5
    # 6. Req2: A..L + 17 new tokens (29): hits [1, 2, 3].
    m.take_events()
    req2 = make_request("2", letters("ABCDEFGHIJKL") + list(range(200, 217)))
    hits, new = admit(m, req2)
    assert ids(hits) == [1, 2, 3] and ids(new) == new6
    evicted = [e.block_ids[0] for e in m.take_events() if isinstance(e, BlockRemoved)]
    assert evicted == evicted6
    # In vLLM mode the A-P block survives, still hittable.
    assert (m.block_pool.get_cached_block(req0.block_hashes[3]) is not None) == (policy == "vllm")
