"""The prefix cache: blocks, the free queue, the hash table, the pool and its manager."""

from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.block_pool import FREE_POLICIES, BlockPool  # FREE_POLICIES: home is engine.vllm_versions
from engine.kv_cache.free_queue import FreeKVCacheBlockQueue
from engine.kv_cache.hash_map import BlockHashToBlockMap
from engine.kv_cache.manager import KVCacheManager, cdiv
from engine.kv_cache.stats import PrefixCacheStats

__all__ = [
    "FREE_POLICIES",
    "BlockHashToBlockMap",
    "BlockPool",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "KVCacheManager",
    "PrefixCacheStats",
    "cdiv",
]
