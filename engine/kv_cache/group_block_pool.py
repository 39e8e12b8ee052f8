"""``GroupedBlockPool``: one pool and one free queue shared by every KV cache group.

The pool of a hybrid model is the single-group :class:`~engine.kv_cache.block_pool.BlockPool`
with one change to the hash table: its key is the block hash *and* the group
(``block_hash + group_id`` as 4 big-endian bytes, vLLM's ``BlockHashWithGroupId``). The same
tokens cached by the full-attention group and by a sliding-window group are two entries in two
different physical blocks, and a lookup asks for one group (or several groups of one spec) at a
time. A block's ``block_hash`` holds that key, so an eviction knows which group lost the entry.

It also follows vLLM 0.33's event rules for groups: ``BlockStored`` names the group and its spec
and is published for every call that covered new full blocks, even when the group stored none of
them (a sliding window that can never be hit); ``BlockRemoved`` names the group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.events import BlockRemoved, BlockStored, BlocksTouched, EventLog
from engine.hashing import BlockHash
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.block_pool import BlockPool

GROUP_ID_BYTES = 4


def make_block_hash_with_group_id(block_hash: BlockHash, group_id: int) -> bytes:
    """The hash-table key of one group's block: the hash with the group id appended."""
    return block_hash + group_id.to_bytes(GROUP_ID_BYTES, "big", signed=False)


def get_block_hash(key: bytes) -> BlockHash:
    return key[:-GROUP_ID_BYTES]


def get_group_id(key: bytes) -> int:
    return int.from_bytes(key[-GROUP_ID_BYTES:], "big", signed=False)


class GroupedBlockPool(BlockPool):
    """A :class:`BlockPool` whose hash table is keyed by (block hash, group)."""

    def __init__(
        self,
        num_blocks: int,
        enable_caching: bool = True,
        free_policy: str = "vllm",
        events: EventLog | None = None,
        group_metadata: Sequence[tuple[str, int | None]] = (),
    ) -> None:
        super().__init__(num_blocks, enable_caching, free_policy, events)
        #: (spec kind, sliding window) per group, as BlockStored publishes them.
        self.group_metadata = tuple(group_metadata)

    def get_cached_blocks(self, block_hash: BlockHash, group_ids: Sequence[int]) -> list[KVCacheBlock] | None:
        """The cached block of each group in ``group_ids``, or ``None`` if any group misses."""
        found: list[KVCacheBlock] = []
        for group_id in group_ids:
            block = self.cached_block_hash_to_block.get_one_block(make_block_hash_with_group_id(block_hash, group_id))
            if block is None:
                return None
            found.append(block)
        return found

    def _maybe_evict_cached_block(self, block: KVCacheBlock, request_id: str | None = None) -> bool:
        key = block.block_hash
        if key is None:
            return False
        self.cached_block_hash_to_block.pop(key, block.block_id)
        block.block_hash = None
        self.events.emit(
            BlockRemoved([get_block_hash(key)], block_ids=[block.block_id], request_id=request_id, group_idx=get_group_id(key))
        )
        return True

    def touch(self, blocks: Iterable[KVCacheBlock], request_id: str | None = None) -> None:
        """As the single-group pool, but the null block (a window's placeholder) is left alone."""
        real = [block for block in blocks if not block.is_null]
        revived: list[int] = []
        for block in real:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
                revived.append(block.block_id)
            block.ref_cnt += 1
        if real:
            self.events.emit(BlocksTouched(request_id or "", [b.block_id for b in real], revived))

    def cache_group_blocks(
        self,
        blocks: list[KVCacheBlock],
        block_hashes: list[BlockHash],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        token_ids: list[int],
        group_id: int,
        *,
        block_mask: list[bool] | None = None,
        request_id: str | None = None,
        lora_name: str | None = None,
        lora_id: int | None = None,
        extra_keys: Sequence[tuple | None] = (),
    ) -> None:
        """Give blocks ``[num_cached_blocks, num_full_blocks)`` of one group their keys.

        Null blocks and blocks the mask rules out are skipped (they could never serve a hit).
        ``extra_keys`` has one entry per block of the range (untagged, as events carry them).
        """
        if num_cached_blocks >= num_full_blocks:
            return
        stored_ids: list[int] = []
        stored_hashes: list[BlockHash] = []
        stored_keys: list[tuple | None] = []
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block.is_null or (block_mask is not None and not block_mask[index - num_cached_blocks]):
                continue
            assert block.block_hash is None, f"block {block.block_id} is already cached"
            key = make_block_hash_with_group_id(block_hashes[index], group_id)
            block.block_hash = key
            self.cached_block_hash_to_block.insert(key, block)
            stored_ids.append(block.block_id)
            stored_hashes.append(block_hashes[index])
            stored_keys.append(extra_keys[index - num_cached_blocks] if extra_keys else None)
        kind, window = self.group_metadata[group_id] if group_id < len(self.group_metadata) else ("full_attention", None)
        self.events.emit(
            BlockStored(
                block_hashes=stored_hashes,
                parent_block_hash=block_hashes[num_cached_blocks - 1] if num_cached_blocks > 0 else None,
                token_ids=list(token_ids[num_cached_blocks * block_size : num_full_blocks * block_size]),
                block_size=block_size,
                lora_name=lora_name,
                lora_id=lora_id,
                extra_keys=stored_keys or None,  # vLLM publishes None, not [], when nothing was stored
                block_ids=stored_ids,
                request_id=request_id,
                group_idx=group_id,
                kv_cache_spec_kind=kind,
                kv_cache_spec_sliding_window=window,
            )
        )
