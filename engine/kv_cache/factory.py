"""Which cache manager an engine gets: one group (the default) or several (a hybrid layer pattern)."""

from __future__ import annotations

from typing import cast

from engine.config import EngineConfig
from engine.kv_cache.grouped_manager import GroupedKVCacheManager
from engine.kv_cache.kv_cache_spec import kv_cache_groups_for_layers
from engine.kv_cache.manager import KVCacheManager


def build_kv_cache_manager(config: EngineConfig, num_blocks: int) -> KVCacheManager:
    """The single-group ``KVCacheManager``, or a ``GroupedKVCacheManager`` for a pattern with a window.

    The grouped manager answers the scheduler's calls with the same names (it is typed as the
    single-group one because the scheduler uses nothing else); a pattern of full attention only is
    one group, exactly as without a pattern.
    """
    settings = {"enable_caching": config.enable_prefix_caching, "hash_algo": config.hash_algo,
                "hash_seed": config.hash_seed, "vllm_version": config.version.name, "watermark": config.watermark,
                "enable_events": config.enable_events}  # what both managers take alike
    if config.has_sliding_window and config.layer_windows is not None:
        groups = kv_cache_groups_for_layers(config.layer_windows, config.block_size)
        return cast(KVCacheManager, GroupedKVCacheManager(num_blocks, groups, **settings))  # type: ignore[arg-type]
    return KVCacheManager(num_blocks, config.block_size, **settings)  # type: ignore[arg-type]
