"""Eviction policies for trace replay, each inside the real ``KVCacheManager``.

* ``vllm``: vLLM 0.33's LRU free queue (hashless blocks to the head, hashed to the tail; the rule since 0.24).
* ``classic``: vLLM 0.23 (classic), every freed block to the tail.
* ``radix``: SGLang's RadixAttention: the cached prefixes form a tree; evict the *leaf*
  whose last use (a lookup that matched it, or its insertion) is oldest.
* ``belady``: Belady's offline optimum restricted to leaves: evict the leaf whose next use
  lies farthest in the future (the trace is known in advance). An upper bound for the others.

The last two are a :class:`LeafEvictingBlockPool`: the real ``BlockPool`` with one decision
changed, which free block to reuse. Blocks without a hash (partial or output blocks) are
still reused first, as in vLLM; among cached blocks only leaves of the prefix tree may go,
so the cache always holds whole prefixes.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, Protocol

from engine.errors import ConfigError
from engine.events import EventLog
from engine.hashing import BlockHash
from engine.kv_cache import BlockPool, KVCacheBlock, KVCacheManager
from engine.vllm_versions import FREE_POLICY_VERSIONS
from teaching.traces.loader import TRACE_BLOCK_SIZE

#: Policy name -> what it is, in the order figures and tables show them.
POLICIES: dict[str, str] = {
    "vllm": f"{FREE_POLICY_VERSIONS['vllm']} LRU",
    "classic": f"{FREE_POLICY_VERSIONS['classic']} LRU",
    "radix": "radix-tree LRU (SGLang)",
    "belady": "Belady optimum (leaves)",
}


class EvictionOrder(Protocol):
    """Ranks cached blocks by hash: the smallest priority is evicted first."""

    def priority(self, block_hash: BlockHash) -> float: ...

    def accessed(self, block_hash: BlockHash) -> None: ...


class RadixLRU:
    """SGLang's order: a node's last access time, refreshed by every match and insert."""

    def __init__(self) -> None:
        self._clock = itertools.count()
        self._last_access: dict[BlockHash, int] = {}

    def priority(self, block_hash: BlockHash) -> float:
        return self._last_access.get(block_hash, -1)

    def accessed(self, block_hash: BlockHash) -> None:
        self._last_access[block_hash] = next(self._clock)

    def forget(self, block_hash: BlockHash) -> None:
        self._last_access.pop(block_hash, None)


class BeladyNextUse:
    """The future, known in advance: which requests will *hit* each block hash.

    A block counts as used by a request only where that request could hit it (before its
    last token's block), so a block is kept exactly as long as keeping it can pay off.
    """

    def __init__(self, chains: Sequence[Sequence[BlockHash]], input_lengths: Sequence[int]) -> None:
        self.now = -1
        self._uses: dict[BlockHash, list[int]] = {}
        for index, (chain, length) in enumerate(zip(chains, input_lengths)):
            for block_hash in chain[: (length - 1) // TRACE_BLOCK_SIZE]:
                self._uses.setdefault(block_hash, []).append(index)

    def advance(self, index: int) -> None:
        """Request ``index`` is being served: its own uses are now in the past."""
        self.now = index

    def next_use(self, block_hash: BlockHash) -> float:
        uses = self._uses.get(block_hash)
        if not uses:
            return float("inf")
        position = bisect.bisect_right(uses, self.now)
        return uses[position] if position < len(uses) else float("inf")

    def priority(self, block_hash: BlockHash) -> float:
        return -self.next_use(block_hash)  # farthest next use = smallest = evicted first

    def accessed(self, block_hash: BlockHash) -> None:
        pass  # the future does not depend on the past


class LeafEvictingBlockPool(BlockPool):
    """The real pool, evicting only leaves of the prefix tree, in ``order``.

    The tree is kept on hashes: ``_parent`` of each cached hash and ``_num_children`` of
    each parent. A free cached block may be evicted when no cached hash hangs below it, or
    when another block holds the same hash (a duplicate). Candidates sit in a heap keyed by
    priority; entries are checked when popped (a stamp per block discards stale ones).
    """

    def __init__(self, num_blocks: int, enable_caching: bool = True, free_policy: str = "vllm",
                 events: EventLog | None = None, *, order: EvictionOrder) -> None:
        super().__init__(num_blocks, enable_caching, "vllm", events)  # hashless blocks go first
        self.order = order
        self._parent: dict[BlockHash, BlockHash | None] = {}
        self._num_children: dict[BlockHash, int] = {}
        self._heap: list[tuple[float, int, int]] = []  # (priority, stamp, block_id)
        self._stamp = [0] * num_blocks
        self._next_stamp = itertools.count(1)

    # -- the tree -----------------------------------------------------------------------------------
    def _is_evictable(self, block: KVCacheBlock) -> bool:
        block_hash = block.block_hash
        if block.ref_cnt != 0 or block_hash is None:
            return False
        if self._num_children.get(block_hash, 0) == 0:
            return True
        return len(self.cached_block_hash_to_block.blocks_for(block_hash)) > 1

    def _push(self, block: KVCacheBlock) -> None:
        """Offer a free block as a victim (checked again when popped)."""
        if self._is_evictable(block):
            stamp = next(self._next_stamp)
            self._stamp[block.block_id] = stamp
            assert block.block_hash is not None
            heapq.heappush(self._heap, (self.order.priority(block.block_hash), stamp, block.block_id))
            if len(self._heap) > 2 * self.num_blocks + 1024:
                self._compact()

    def _compact(self) -> None:
        """Drop stale heap entries, so memory follows the pool's size, not the trace's length."""
        stamps = self._stamp
        self._heap = [entry for entry in self._heap if entry[1] == stamps[entry[2]]]
        heapq.heapify(self._heap)

    def _push_hash(self, block_hash: BlockHash | None) -> None:
        if block_hash is not None:
            for block in self.cached_block_hash_to_block.blocks_for(block_hash):
                self._push(block)

    def reprioritize(self, block_hashes: Iterable[BlockHash]) -> None:
        """The order changed for these hashes (time passed one of their uses): re-rank them."""
        for block_hash in block_hashes:
            self._push_hash(block_hash)

    def _pop_victim(self) -> KVCacheBlock:
        while self._heap:
            priority, stamp, block_id = heapq.heappop(self._heap)
            block = self.blocks[block_id]
            if stamp != self._stamp[block_id] or not self._is_evictable(block):
                continue
            assert block.block_hash is not None
            current = self.order.priority(block.block_hash)
            if current != priority:  # ranked before its last use: rank it again
                self._push(block)
                continue
            return block
        raise RuntimeError("no evictable leaf although blocks are free: the prefix tree is inconsistent")

    # -- BlockPool hooks ----------------------------------------------------------------------------
    def _take_free_blocks(self, num_blocks: int, request_id: str | None) -> list[KVCacheBlock]:
        queue = self.free_block_queue
        if num_blocks > queue.num_free_blocks:
            raise ValueError(f"asked for {num_blocks} free blocks, only {queue.num_free_blocks} left")
        taken = []
        for _ in range(num_blocks):
            head = queue.fake_free_list_head.next_free_block
            # Hashless blocks sit at the head (vLLM's rule): nothing can hit them, reuse them first.
            block = head if head is not None and head.block_hash is None else self._pop_victim()
            queue.remove(block)
            # Evict now, so its parent can become a leaf for the next pick.
            self._maybe_evict_cached_block(block, request_id)
            taken.append(block)
        return taken

    def _maybe_evict_cached_block(self, block: KVCacheBlock, request_id: str | None = None) -> bool:
        block_hash = block.block_hash
        if not super()._maybe_evict_cached_block(block, request_id):
            return False
        assert block_hash is not None
        if block_hash in self.cached_block_hash_to_block:
            self._push_hash(block_hash)  # a duplicate left; the survivor may now be a leaf
            return True
        parent = self._parent.pop(block_hash, None)
        self._num_children.pop(block_hash, None)
        if isinstance(self.order, RadixLRU):
            self.order.forget(block_hash)
        if parent is not None and parent in self._num_children:
            self._num_children[parent] -= 1
            if self._num_children[parent] == 0:
                self._push_hash(parent)  # the parent just became a leaf
        return True

    def touch(self, blocks: Iterable[KVCacheBlock], request_id: str | None = None) -> None:
        block_list = list(blocks)
        for block in block_list:
            if block.block_hash is not None:
                self.order.accessed(block.block_hash)
        super().touch(block_list, request_id)

    def cache_full_blocks(self, blocks: list[KVCacheBlock], block_hashes: list[BlockHash], num_cached_blocks: int,
                          num_full_blocks: int, block_size: int, token_ids: list[int],
                          **metadata: Any) -> None:
        table = self.cached_block_hash_to_block
        new_hashes: list[tuple[BlockHash, BlockHash | None, bool]] = []
        for index in range(num_cached_blocks, num_full_blocks):
            block_hash = block_hashes[index]
            if block_hash in table:
                new_hashes.append((block_hash, None, True))
            else:
                new_hashes.append((block_hash, block_hashes[index - 1] if index > 0 else None, False))
        super().cache_full_blocks(blocks, block_hashes, num_cached_blocks, num_full_blocks, block_size, token_ids,
                                  **metadata)
        for block_hash, parent, duplicate in new_hashes:
            self.order.accessed(block_hash)
            if duplicate:
                self._push_hash(block_hash)  # the older copy may now be evictable
                continue
            self._parent[block_hash] = parent
            self._num_children.setdefault(block_hash, 0)
            if parent is not None and parent in self._num_children:
                self._num_children[parent] += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> tuple[list[int], list[int]]:
        block_list = list(ordered_blocks)
        to_head, to_tail = super().free_blocks(block_list)
        if to_tail:
            for block in block_list:
                if block.ref_cnt == 0:
                    self._push(block)
        return to_head, to_tail

    def reset_prefix_cache(self) -> bool:
        if not super().reset_prefix_cache():
            return False
        self._parent.clear()
        self._num_children.clear()
        self._heap.clear()
        return True


def make_manager(policy: str, num_blocks: int, *, belady: BeladyNextUse | None = None) -> KVCacheManager:
    """A real ``KVCacheManager`` of ``num_blocks`` (incl. the null block) with 512-token blocks."""
    if policy not in POLICIES:
        raise ConfigError(f"Unknown policy {policy!r}; choose one of {list(POLICIES)}.")
    common = dict(enable_events=False, hash_algo="sha256")
    if policy in ("vllm", "classic"):
        return KVCacheManager(num_blocks, TRACE_BLOCK_SIZE, vllm_version=policy, **common)  # type: ignore[arg-type]
    if policy == "radix":
        order: EvictionOrder = RadixLRU()
    else:
        if belady is None:
            raise ConfigError("Belady's policy needs the whole trace in advance (a BeladyNextUse).")
        order = belady
    return KVCacheManager(num_blocks, TRACE_BLOCK_SIZE, block_pool_cls=partial(LeafEvictingBlockPool, order=order),
                          **common)  # type: ignore[arg-type]
