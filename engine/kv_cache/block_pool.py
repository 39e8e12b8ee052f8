"""``BlockPool``: owns every physical block, the free queue and the hash table.

The three rules a student should take away live here:

* **Eviction is lazy.** Freeing a block does not forget its contents; it only puts the
  block in the free queue. The hash is dropped when the block is *popped for reuse*
  (:meth:`get_new_blocks`), and only then is the cached prefix really gone.
* **A hit does not refresh recency.** :meth:`touch` just takes a free block out of the
  queue; its place in the LRU order is decided when it is freed again.
* **Free order decides eviction order** (:meth:`free_blocks`): in ``vllm`` mode (vLLM
  >= 0.24) blocks without a hash go to the *head* (they can never be hit, so reuse them
  first; with caching off that is every block) and hashed blocks to the *tail*; in
  ``classic`` mode (vLLM <= 0.23) every block goes to the tail.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.errors import ConfigError
from engine.events import AllBlocksCleared, BlockRemoved, BlocksAllocated, BlockStored, BlocksTouched, EventLog
from engine.hashing import BlockHash
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.free_queue import FreeKVCacheBlockQueue
from engine.kv_cache.hash_map import BlockHashToBlockMap
from engine.vllm_versions import FREE_POLICIES


class BlockPool:
    def __init__(
        self,
        num_blocks: int,
        enable_caching: bool = True,
        free_policy: str = "vllm",
        events: EventLog | None = None,
    ) -> None:
        if not isinstance(num_blocks, int) or num_blocks < 2:
            raise ConfigError(
                f"num_blocks must be at least 2 (block 0 is the reserved null block), got {num_blocks!r}."
            )
        if free_policy not in FREE_POLICIES:
            raise ConfigError(f"Unknown free policy {free_policy!r}; choose one of {list(FREE_POLICIES)}.")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.free_policy = free_policy
        self.events = events if events is not None else EventLog(enabled=False)
        self.blocks = [KVCacheBlock(block_id=i) for i in range(num_blocks)]
        # Block 0 is the null block: a placeholder id that is never allocated or freed.
        self.null_block = self.blocks[0]
        self.null_block.is_null = True
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks[1:])
        self.cached_block_hash_to_block = BlockHashToBlockMap()

    # -- lookup ---------------------------------------------------------------------------------
    def get_cached_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        return self.cached_block_hash_to_block.get_one_block(block_hash)

    # -- allocation -------------------------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int, request_id: str | None = None) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` from the head of the free queue, evicting their cached contents."""
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"cannot get {num_blocks} blocks, only {self.get_num_free_blocks()} are free")
        blocks = self._take_free_blocks(num_blocks, request_id)
        # Log in the order things happen: the blocks leave the free queue for the request,
        # then each one that still held a cached prefix loses it.
        if blocks:
            self.events.emit(BlocksAllocated(request_id or "", [b.block_id for b in blocks]))
        for block in blocks:
            self._maybe_evict_cached_block(block, request_id)
            assert block.ref_cnt == 0, f"free block {block.block_id} had ref_cnt {block.ref_cnt}"
            block.ref_cnt = 1
        return blocks

    def _take_free_blocks(self, num_blocks: int, request_id: str | None) -> list[KVCacheBlock]:
        """Which free blocks to reuse: vLLM's rule is the head of the free queue.

        The one place an eviction order is decided; a subclass may choose other victims
        (the trace replay's radix-tree LRU and Belady's optimum do).
        """
        return self.free_block_queue.popleft_n(num_blocks)

    def _maybe_evict_cached_block(self, block: KVCacheBlock, request_id: str | None = None) -> bool:
        """Forget a reused block's old contents: out of the hash table, hash cleared."""
        block_hash = block.block_hash
        if block_hash is None:
            return False
        self.cached_block_hash_to_block.pop(block_hash, block.block_id)
        block.block_hash = None
        self.events.emit(BlockRemoved([block_hash], block_ids=[block.block_id], request_id=request_id))
        return True

    def touch(self, blocks: Iterable[KVCacheBlock], request_id: str | None = None) -> None:
        """Take hit blocks for a request: free ones leave the queue; every ref count rises."""
        block_list = list(blocks)
        revived: list[int] = []
        for block in block_list:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
                revived.append(block.block_id)
            block.ref_cnt += 1
        if block_list:
            self.events.emit(BlocksTouched(request_id or "", [b.block_id for b in block_list], revived))

    # -- caching ----------------------------------------------------------------------------------
    def cache_full_blocks(
        self,
        blocks: list[KVCacheBlock],
        block_hashes: list[BlockHash],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        token_ids: list[int],
        *,
        request_id: str | None = None,
        lora_name: str | None = None,
        lora_id: int | None = None,
        extra_keys: list[tuple | None] | None = None,
    ) -> None:
        """Give blocks ``[num_cached_blocks, num_full_blocks)`` their hashes and insert them.

        ``extra_keys`` (one entry per block of that range, as events publish them) and the
        LoRA fields only travel into the ``BlockStored`` event.

        A block whose hash is already in the table is inserted as a duplicate: it cannot be
        swapped for the cached one, because the request's block table is append-only.
        """
        if num_cached_blocks >= num_full_blocks:
            return
        stored_ids: list[int] = []
        stored_hashes: list[BlockHash] = []
        stored_keys: list[tuple | None] = []
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block.is_null:
                continue
            assert block.block_hash is None, f"block {block.block_id} is already cached"
            block.block_hash = block_hashes[index]
            self.cached_block_hash_to_block.insert(block.block_hash, block)
            stored_ids.append(block.block_id)
            stored_hashes.append(block.block_hash)
            stored_keys.append(None if extra_keys is None else extra_keys[index - num_cached_blocks])
        if stored_ids:
            parent = block_hashes[num_cached_blocks - 1] if num_cached_blocks > 0 else None
            self.events.emit(
                BlockStored(
                    block_hashes=stored_hashes,
                    parent_block_hash=parent,
                    token_ids=list(token_ids[num_cached_blocks * block_size : num_full_blocks * block_size]),
                    block_size=block_size,
                    lora_name=lora_name,
                    lora_id=lora_id,
                    extra_keys=stored_keys,
                    block_ids=stored_ids,
                    request_id=request_id,
                )
            )

    # -- freeing ------------------------------------------------------------------------------------
    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> tuple[list[int], list[int]]:
        """Drop one reference from each block; blocks reaching 0 re-enter the free queue.

        ``ordered_blocks`` comes in eviction-preference order (the manager passes a
        request's blocks tail first). Returns the ids sent to the head and to the tail.
        """
        to_head: list[KVCacheBlock] = []
        to_tail: list[KVCacheBlock] = []
        for block in ordered_blocks:
            if block.is_null:
                continue
            if block.ref_cnt <= 0:
                raise ValueError(f"block {block.block_id} freed more often than it was taken")
            block.ref_cnt -= 1
            if block.ref_cnt > 0:
                continue
            # With caching off every block is hashless, so "vllm" sends them all to the head.
            if self.free_policy == "vllm" and block.block_hash is None:
                to_head.append(block)  # can never be hit: reuse it first
            else:
                to_tail.append(block)  # may be hit later: evict it last
        self.free_block_queue.prepend_n(to_head)
        self.free_block_queue.append_n(to_tail)
        return [b.block_id for b in to_head], [b.block_id for b in to_tail]

    # -- whole-cache operations -------------------------------------------------------------------
    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash. Only legal when no request holds a block."""
        num_used = self.num_blocks - 1 - self.get_num_free_blocks()
        if num_used > 0:
            return False
        self.cached_block_hash_to_block.clear()
        for block in self.blocks:
            block.block_hash = None
        self.events.emit(AllBlocksCleared())
        return True

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of usable blocks held by requests (free-but-cached blocks count as free)."""
        return 1.0 - self.get_num_free_blocks() / (self.num_blocks - 1)
