"""Per-type KV cache managers: one block table per request for one KV cache group.

``FullAttentionManager`` keeps every block until the request ends, and a hit is the longest run
of cached blocks from the start. ``SlidingWindowManager`` differs in two rules (vLLM 0.33's
``single_type_kv_cache_manager.py``):

* **A window releases blocks.** Tokens before ``num_computed_tokens - sliding_window + 1`` are
  never attended again, so whole blocks of them go back to the pool (tail first within the
  range) and the null block takes their place in the block table.
* **A hit needs only the window.** Scanning from the right, the first run of
  ``ceil((sliding_window - 1) / block_size)`` cached blocks ends the search; the blocks before the
  run are null in the hit. With fewer cached blocks, only a run from the very start counts.

Both managers share one :class:`~engine.kv_cache.group_block_pool.GroupedBlockPool`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.events import BlocksFreed, BlocksReleased
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.group_block_pool import GroupedBlockPool
from engine.kv_cache.kv_cache_spec import FullAttentionSpec, KVCacheSpec, SlidingWindowSpec
from engine.request import Request


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class SingleTypeKVCacheManager:
    """The block tables of one KV cache group: allocation, caching, release."""

    def __init__(
        self,
        kv_cache_spec: KVCacheSpec,
        block_pool: GroupedBlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
    ) -> None:
        self.kv_cache_spec = kv_cache_spec
        self.block_size = kv_cache_spec.block_size
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self.kv_cache_group_id = kv_cache_group_id
        self.null_block = block_pool.null_block
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        #: Blocks of each running request already in the hash table (nulls included).
        self.num_cached_block: dict[str, int] = {}

    # -- rules a subclass changes ---------------------------------------------------------------
    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens no later token attends to (full attention: none)."""
        return 0

    def block_mask(self, start_block: int, end_block: int) -> list[bool] | None:
        """Which newly full blocks may ever serve a hit (``None``: all of them)."""
        return None

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: Sequence[bytes],
        max_length: int,
        group_ids: list[int],
        block_pool: GroupedBlockPool,
        kv_cache_spec: KVCacheSpec,
    ) -> tuple[list[list[KVCacheBlock]], int]:
        raise NotImplementedError

    # -- allocation -------------------------------------------------------------------------------
    def get_num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, new_computed_blocks: Sequence[KVCacheBlock], total_computed_tokens: int
    ) -> int:
        """Blocks this group must take from the free queue to hold ``num_tokens`` slots.

        Hit blocks that sit in the free queue count too: touching them takes them out of it.
        Hit blocks a window skips (they will be null in the table) count for nothing.
        """
        num_required_blocks = cdiv(num_tokens, self.block_size)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            return max(num_required_blocks - num_req_blocks, 0)
        num_skipped_blocks = self.get_num_skipped_tokens(total_computed_tokens) // self.block_size
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        num_new_blocks = max(num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks), 0)
        num_skipped_new_computed = max(0, num_skipped_blocks - num_req_blocks)
        num_evictable = sum(
            1 for block in new_computed_blocks[num_skipped_new_computed:] if block.ref_cnt == 0 and not block.is_null
        )
        return num_new_blocks + num_evictable

    def add_local_computed_blocks(
        self, request_id: str, new_computed_blocks: Sequence[KVCacheBlock], num_computed_tokens: int
    ) -> None:
        """A newly admitted request takes its hits: skipped ones become null, the rest are touched."""
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        assert not req_blocks
        num_skipped_blocks = self.get_num_skipped_tokens(num_computed_tokens) // self.block_size
        kept = list(new_computed_blocks[num_skipped_blocks:]) if num_skipped_blocks > 0 else list(new_computed_blocks)
        if self.enable_caching:
            self.block_pool.touch(kept, request_id)
        req_blocks.extend([self.null_block] * num_skipped_blocks)
        req_blocks.extend(kept)
        self.num_cached_block[request_id] = len(req_blocks)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        num_new_blocks = cdiv(num_tokens, self.block_size) - len(req_blocks)
        if num_new_blocks <= 0:
            return []
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks, request_id)
        req_blocks.extend(new_blocks)
        return new_blocks

    # -- caching ----------------------------------------------------------------------------------
    def cache_blocks(self, request: Request, num_tokens: int, extra_keys_for: Callable[[int], tuple | None]) -> None:
        """Insert the request's blocks that are full of known tokens into the hash table.

        ``extra_keys_for(i)`` is block ``i``'s extra keys as events publish them.
        """
        request_id = request.request_id
        num_cached_blocks = self.num_cached_block.get(request_id, 0)
        num_full_blocks = min(num_tokens, len(request.block_hashes) * self.block_size) // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        self.block_pool.cache_group_blocks(
            self.req_to_blocks[request_id], request.block_hashes, num_cached_blocks, num_full_blocks,
            self.block_size, request.all_token_ids, self.kv_cache_group_id,
            block_mask=self.block_mask(num_cached_blocks, num_full_blocks), request_id=request_id,
            lora_name=request.lora_name, lora_id=request.lora_id,
            extra_keys=[extra_keys_for(i) for i in range(num_cached_blocks, num_full_blocks)],
        )
        self.num_cached_block[request_id] = num_full_blocks

    # -- release ----------------------------------------------------------------------------------
    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """The request's blocks without its leading nulls; its bookkeeping is gone."""
        blocks = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        start = 0
        while start < len(blocks) and blocks[start].is_null:
            start += 1
        return blocks[start:]

    def free(self, request_id: str) -> list[KVCacheBlock]:
        """Release the blocks tail first, so the prefix outlives the suffix. Returns them in that order."""
        ordered = list(reversed(self.pop_blocks_for_free(request_id)))
        to_head, to_tail = self.block_pool.free_blocks(ordered)
        self.block_pool.events.emit(BlocksFreed(request_id, [b.block_id for b in ordered], to_head, to_tail))
        return ordered

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> list[KVCacheBlock]:
        """Give back the blocks wholly before the window; the null block takes their place.

        Walks from the last skipped block down and stops at the first null (released earlier).
        Returns the released blocks in the order they were freed.
        """
        num_skipped_tokens = self.get_num_skipped_tokens(num_computed_tokens)
        if num_skipped_tokens <= 0:
            return []
        blocks = self.req_to_blocks.setdefault(request_id, [])
        last = min(num_skipped_tokens // self.block_size, len(blocks))
        freed: list[KVCacheBlock] = []
        for index in range(last - 1, -1, -1):
            if blocks[index].is_null:
                break
            freed.append(blocks[index])
            blocks[index] = self.null_block
        if freed:
            to_head, to_tail = self.block_pool.free_blocks(freed)
            self.block_pool.events.emit(
                BlocksReleased(request_id, self.kv_cache_group_id, [b.block_id for b in freed], to_head, to_tail)
            )
        return freed


class FullAttentionManager(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: Sequence[bytes],
        max_length: int,
        group_ids: list[int],
        block_pool: GroupedBlockPool,
        kv_cache_spec: KVCacheSpec,
    ) -> tuple[list[list[KVCacheBlock]], int]:
        """The longest run of blocks cached for every group in ``group_ids``, from the start."""
        block_size = kv_cache_spec.block_size
        hits: list[list[KVCacheBlock]] = [[] for _ in group_ids]
        for block_hash in block_hashes[: max_length // block_size]:
            cached = block_pool.get_cached_blocks(block_hash, group_ids)
            if cached is None:
                break
            for group_hits, block in zip(hits, cached):
                group_hits.append(block)
        return hits, len(hits[0]) * block_size


class SlidingWindowManager(SingleTypeKVCacheManager):
    def __init__(self, kv_cache_spec: SlidingWindowSpec, block_pool: GroupedBlockPool, enable_caching: bool,
                 kv_cache_group_id: int) -> None:
        super().__init__(kv_cache_spec, block_pool, enable_caching, kv_cache_group_id)
        self.sliding_window = kv_cache_spec.sliding_window

    @staticmethod
    def contiguous_blocks_for_hit(sliding_window: int, block_size: int) -> int:
        """Cached blocks in a row that make a hit: the window before the next token."""
        return cdiv(sliding_window - 1, block_size)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """The next token (at index ``num_computed_tokens``) sees only the last ``sliding_window``."""
        return max(0, num_computed_tokens - self.sliding_window + 1)

    def block_mask(self, start_block: int, end_block: int) -> list[bool] | None:
        """Cache every block, unless a hit needs no block at all (a window of one token):
        then no block can ever serve a hit, and none is cached."""
        if self.contiguous_blocks_for_hit(self.sliding_window, self.block_size) >= 1:
            return None
        return [False] * (end_block - start_block)

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: Sequence[bytes],
        max_length: int,
        group_ids: list[int],
        block_pool: GroupedBlockPool,
        kv_cache_spec: KVCacheSpec,
    ) -> tuple[list[list[KVCacheBlock]], int]:
        """Scan right to left for the first run of cached blocks as long as the window needs."""
        assert isinstance(kv_cache_spec, SlidingWindowSpec)
        block_size = kv_cache_spec.block_size
        needed = cls.contiguous_blocks_for_hit(kv_cache_spec.sliding_window, block_size)
        max_num_blocks = max_length // block_size
        hits: list[list[KVCacheBlock]] = [[block_pool.null_block] * max_num_blocks for _ in group_ids]
        run = 0
        found = False
        for index in range(max_num_blocks - 1, -1, -1):
            cached = block_pool.get_cached_blocks(block_hashes[index], group_ids)
            if cached is None:
                run = 0
                continue
            for group_hits, block in zip(hits, cached):
                group_hits[index] = block
            run += 1
            if run >= needed:
                for group_hits in hits:
                    del group_hits[index + run :]
                found = True
                break
        if not found:
            # Fewer cached blocks than the window needs: only a run from the start is a hit.
            for group_hits in hits:
                del group_hits[run:]
        return hits, len(hits[0]) * block_size


def manager_for_spec(
    kv_cache_spec: KVCacheSpec, block_pool: GroupedBlockPool, enable_caching: bool, kv_cache_group_id: int
) -> SingleTypeKVCacheManager:
    if isinstance(kv_cache_spec, SlidingWindowSpec):
        return SlidingWindowManager(kv_cache_spec, block_pool, enable_caching, kv_cache_group_id)
    if isinstance(kv_cache_spec, FullAttentionSpec):
        return FullAttentionManager(kv_cache_spec, block_pool, enable_caching, kv_cache_group_id)
    raise TypeError(f"no manager for {kv_cache_spec!r}")
