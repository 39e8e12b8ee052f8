"""``EngineConfig``: every knob of an engine in one place, validated up front."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from engine.errors import ConfigError
from engine.hashing import HASH_FUNCTIONS
from engine.kv_offload.config import KVOffloadingConfig
from engine.vllm_versions import DEFAULT_VLLM_VERSION, VllmVersion, get_vllm_version, require_sliding_window_rules

DEFAULT_MODEL = "smollm2-135m-instruct"
BACKENDS = ("model", "simulator")
#: Environment variables that fix the forward passes' CPU thread count, first found wins
#: (:mod:`engine.model.threads`); ``prefixlab serve --threads`` sets the first.
NUM_THREADS_VARIABLES = ("PREFIXLAB_NUM_THREADS", "OMP_NUM_THREADS")


def fixed_num_threads(env: Mapping[str, str] = os.environ) -> int | None:
    """A thread count the user chose, if any (read without torch: a process decides before torch loads)."""
    for name in NUM_THREADS_VARIABLES:
        value = env.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


@dataclass
class EngineConfig:
    """How to build an :class:`~engine.llm_engine.LLMEngine`.

    ``backend="model"`` runs a real causal LM; ``backend="simulator"`` runs the same
    scheduler and cache with no model (tokens come from a seeded generator or a script).
    ``num_blocks=None`` sizes the pool from a memory budget (``kv_cache_memory_mib`` on
    CPU, ``gpu_memory_utilization`` on CUDA) for the model, or 64 blocks for the simulator.
    ``vllm_version`` ("0.33", "0.25" or "0.23") picks every rule that differs between vLLM
    releases (:mod:`engine.vllm_versions`); the older spellings "vllm" (the default) and "classic"
    (0.23) still read.
    ``layer_pattern`` names the model's attention layers, e.g. ``"sliding:512*5,full"`` (Gemma-3
    like); with a sliding window the cache has several KV cache groups as vLLM 0.33 forms them
    (:mod:`engine.kv_cache.kv_cache_spec`). Hybrid patterns run on the simulator only.
    """

    model: str = DEFAULT_MODEL
    backend: str = "model"
    block_size: int = 16
    num_blocks: int | None = None
    enable_prefix_caching: bool = True
    vllm_version: str = DEFAULT_VLLM_VERSION
    hash_algo: str = "sha256"
    hash_seed: str | None = None
    device: str = "auto"
    dtype: str | None = None  # None: bf16 on CUDA, fp32 on CPU
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    watermark: float = 0.0
    kv_cache_memory_mib: int = 256
    gpu_memory_utilization: float = 0.5
    enable_events: bool = True
    seed: int = 0
    layer_pattern: str | None = None
    #: vLLM's ``--kv-offloading-size`` (GiB of host memory for the offload tier); None: no tier.
    kv_offloading_size: float | None = None
    #: The tier's size in blocks instead of GiB (the simulator, small lab tiers).
    kv_offloading_num_blocks: int | None = None
    #: The tier's eviction policy, vLLM's ``eviction_policy``: "lru" or "arc".
    kv_offloading_policy: str = "lru"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"Unknown backend {self.backend!r}; choose one of {list(BACKENDS)}.")
        if isinstance(self.block_size, bool) or not isinstance(self.block_size, int) or self.block_size < 1:
            raise ConfigError(f"block_size must be an integer >= 1, got {self.block_size!r}.")
        if self.num_blocks is not None and (not isinstance(self.num_blocks, int) or self.num_blocks < 2):
            raise ConfigError(f"num_blocks must be at least 2 (block 0 is reserved), got {self.num_blocks!r}.")
        self.version  # noqa: B018  (validates vllm_version)
        if self.hash_algo not in HASH_FUNCTIONS:
            raise ConfigError(f"Unknown hash algorithm {self.hash_algo!r}; choose one of {sorted(HASH_FUNCTIONS)}.")
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ConfigError("max_num_batched_tokens and max_num_seqs must be at least 1.")
        self.kv_offloading  # noqa: B018  (validates the tier's size and policy)
        if self.has_sliding_window:
            require_sliding_window_rules(self.version.name)
            if self.backend != "simulator":
                raise ConfigError(
                    "A layer pattern with sliding windows runs on the simulator (backend='simulator'): "
                    "the model back end keeps one block table for all layers."
                )
            if self.kv_offloading is not None:
                raise ConfigError("The KV offloading tier works with one KV cache group; drop the sliding-window "
                                  "layer pattern or the tier.")

    @property
    def layer_windows(self) -> list[int | None] | None:
        """Each layer's sliding window (None = full attention), or None without a pattern."""
        if self.layer_pattern is None:
            return None
        from engine.kv_cache.kv_cache_spec import parse_layer_pattern

        return parse_layer_pattern(self.layer_pattern)

    @property
    def has_sliding_window(self) -> bool:
        windows = self.layer_windows
        return windows is not None and any(w is not None for w in windows)

    @property
    def kv_offloading(self) -> KVOffloadingConfig | None:
        """The offload tier's settings, or ``None`` when it is off (the default)."""
        if self.kv_offloading_size is None and self.kv_offloading_num_blocks is None:
            return None
        if self.kv_offloading_size is not None and self.kv_offloading_num_blocks is not None:
            raise ConfigError("Give the KV offloading tier a size in GiB or in blocks, not both.")
        return KVOffloadingConfig(self.kv_offloading_size, self.kv_offloading_num_blocks, self.kv_offloading_policy)

    @property
    def version(self) -> VllmVersion:
        """The vLLM release whose rules this engine follows."""
        return get_vllm_version(self.vllm_version)
