"""``FreeKVCacheBlockQueue``: the free blocks in eviction order, as a doubly linked list.

Head = next block to reuse (evict); tail = most recently freed. The links live in the
blocks (``prev_free_block`` / ``next_free_block``) and two sentinel blocks bound the list,
so every operation is O(1) per block with no special cases for an empty list. A Python
``deque`` could not remove a block from the middle in O(1), which a cache hit on a
free block needs.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.kv_cache.block import KVCacheBlock


class FreeKVCacheBlockQueue:
    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = 0
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.append_n(blocks)

    def _link_between(self, block: KVCacheBlock, prev: KVCacheBlock, nxt: KVCacheBlock) -> None:
        if block.prev_free_block is not None or block.next_free_block is not None:
            raise ValueError(f"block {block.block_id} is already in the free queue")
        block.prev_free_block, block.next_free_block = prev, nxt
        prev.next_free_block = block
        nxt.prev_free_block = block
        self.num_free_blocks += 1

    def popleft(self) -> KVCacheBlock:
        """Take the head block (the least useful one)."""
        first = self.fake_free_list_head.next_free_block
        if first is self.fake_free_list_tail or first is None:
            raise ValueError("no free blocks left")
        self.remove(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        if n > self.num_free_blocks:
            raise ValueError(f"asked for {n} free blocks, only {self.num_free_blocks} left")
        return [self.popleft() for _ in range(n)]

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink a block from anywhere in the queue (a cache hit on a free block)."""
        prev, nxt = block.prev_free_block, block.next_free_block
        if prev is None or nxt is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        prev.next_free_block = nxt
        nxt.prev_free_block = prev
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put a block at the tail: it will be reused last."""
        self._link_between(block, self.fake_free_list_tail.prev_free_block, self.fake_free_list_tail)  # type: ignore[arg-type]

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        for block in blocks:
            self.append(block)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put blocks at the head, keeping their order: ``blocks[0]`` becomes the new head."""
        for block in reversed(blocks):
            self._link_between(block, self.fake_free_list_head, self.fake_free_list_head.next_free_block)  # type: ignore[arg-type]

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every free block, head -> tail (O(n); for views and tests)."""
        out: list[KVCacheBlock] = []
        block = self.fake_free_list_head.next_free_block
        while block is not None and block is not self.fake_free_list_tail:
            out.append(block)
            block = block.next_free_block
        return out

    def __len__(self) -> int:
        return self.num_free_blocks
