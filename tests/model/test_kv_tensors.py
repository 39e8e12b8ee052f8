"""The paged KV cache: slots follow the block table, and reads give back exactly what was written."""

import torch

from engine.model.attention import AttentionMetadata
from engine.model.kv_tensors import PagedKVCache, slot_mapping


def test_slot_mapping_follows_the_block_table():
    # Blocks 7 then 2, block size 4: positions 0..3 -> 28..31, positions 4..5 -> 8..9.
    assert slot_mapping([7, 2], 0, 6, 4) == [28, 29, 30, 31, 8, 9]
    assert slot_mapping([7, 2], 3, 5, 4) == [31, 8]


def test_read_gathers_a_context_scattered_over_blocks():
    cache = PagedKVCache(num_layers=2, num_blocks=8, block_size=4, n_kv_heads=2, head_dim=3, dtype=torch.float32, device="cpu")
    table = [5, 1, 6]
    k = torch.randn(10, 2, 3)
    v = torch.randn(10, 2, 3)
    cache[1].write(k, v, torch.tensor(slot_mapping(table, 0, 10, 4)))
    k_read, v_read = cache[1].read(torch.tensor(table), 10)
    assert torch.equal(k_read, k) and torch.equal(v_read, v)
    assert cache[0].k.abs().sum() == 0  # other layers untouched
    assert cache[1].k[2].abs().sum() == 0  # blocks outside the table untouched
    assert cache.nbytes == 2 * 2 * 8 * 4 * 2 * 3 * 4


def test_metadata_masks_a_chunk_after_a_prefix():
    meta = AttentionMetadata.build([([3, 4], 5, 3), ([9], 2, 1), ([1, 2], 0, 6)], block_size=4, device="cpu")
    assert meta.slot_mapping.tolist() == [17, 18, 19, 38, 4, 5, 6, 7, 8, 9]
    chunk, decode, prefill = meta.seqs
    assert (chunk.query_start, chunk.query_len, chunk.context_len) == (0, 3, 8)
    # Query at position 5 sees keys 0..5; at position 7 it sees all 8.
    assert chunk.mask.tolist()[0] == [True] * 6 + [False] * 2
    assert chunk.mask.tolist()[2] == [True] * 8
    assert decode.mask is None and not decode.is_causal and decode.block_table.tolist() == [9]
    assert prefill.mask is None and prefill.is_causal
