"""``KVCacheBlock``: the metadata of one physical KV block (the tensors live in the model runner)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.hashing import BlockHash


@dataclass(eq=False, slots=True)
class KVCacheBlock:
    """One physical block of ``block_size`` token slots.

    ``ref_cnt`` counts the live requests whose block tables hold this block. A block
    with ``ref_cnt == 0`` sits in the free queue, yet keeps its ``block_hash`` (and so
    stays hittable) until it is popped for reuse: that is what makes the cache lazy.
    ``prev_free_block`` / ``next_free_block`` thread the free queue through the blocks
    themselves, so removing one from the middle is O(1).
    """

    block_id: int
    ref_cnt: int = 0
    block_hash: BlockHash | None = None
    prev_free_block: KVCacheBlock | None = None
    next_free_block: KVCacheBlock | None = None
    is_null: bool = False

    def __repr__(self) -> str:
        short = self.block_hash.hex()[:8] if self.block_hash else None
        return f"KVCacheBlock(id={self.block_id}, ref={self.ref_cnt}, hash={short})"
