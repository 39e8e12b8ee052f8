"""``BlockHashToBlockMap``: the prefix cache's hash table, hash -> physical block(s).

Block tables are append-only, so when a block becomes full and its hash is already
cached by another block (two requests with the same prompt in one batch, say), the new
block is *still* inserted, as a duplicate. A lookup returns the first inserted block that
is still there; ``pop(hash, block_id)`` removes exactly one block. To stay small in the
common case, a hash maps to a single block, and only becomes a dict when a duplicate
arrives.
"""

from __future__ import annotations

from engine.hashing import BlockHash
from engine.kv_cache.block import KVCacheBlock


class BlockHashToBlockMap:
    def __init__(self) -> None:
        self._cache: dict[BlockHash, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, key: BlockHash) -> KVCacheBlock | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        if isinstance(entry, KVCacheBlock):
            return entry
        return next(iter(entry.values()))

    def insert(self, key: BlockHash, block: KVCacheBlock) -> None:
        entry = self._cache.get(key)
        if entry is None:
            self._cache[key] = block
        elif isinstance(entry, KVCacheBlock):
            self._cache[key] = {entry.block_id: entry, block.block_id: block}
        else:
            entry[block.block_id] = block

    def pop(self, key: BlockHash, block_id: int) -> KVCacheBlock | None:
        """Remove one block under ``key``; returns it, or None if it was not there."""
        entry = self._cache.get(key)
        if entry is None:
            return None
        if isinstance(entry, KVCacheBlock):
            if entry.block_id != block_id:
                return None
            del self._cache[key]
            return entry
        block = entry.pop(block_id, None)
        if len(entry) == 1:
            self._cache[key] = next(iter(entry.values()))
        return block

    def blocks_for(self, key: BlockHash) -> list[KVCacheBlock]:
        entry = self._cache.get(key)
        if entry is None:
            return []
        return [entry] if isinstance(entry, KVCacheBlock) else list(entry.values())

    def items(self) -> list[tuple[BlockHash, list[KVCacheBlock]]]:
        return [(key, self.blocks_for(key)) for key in self._cache]

    def clear(self) -> None:
        self._cache.clear()

    def __len__(self) -> int:
        """Number of distinct hashes."""
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache
