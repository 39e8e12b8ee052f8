"""``EngineConfig``: every knob of an engine in one place, validated up front."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.hashing import HASH_FUNCTIONS
from engine.vllm_versions import DEFAULT_VLLM_VERSION, VllmVersion, get_vllm_version

DEFAULT_MODEL = "smollm2-135m-instruct"
BACKENDS = ("model", "simulator")


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

    @property
    def version(self) -> VllmVersion:
        """The vLLM release whose rules this engine follows."""
        return get_vllm_version(self.vllm_version)
