"""How big the host tier is and which policy evicts from it, as vLLM is told.

vLLM: ``--kv-offloading-size GiB`` (with ``--kv-offloading-backend native``) becomes the
OffloadingConnector with ``cpu_bytes_to_use = size * 2**30``; the number of host chunks is that
budget over the bytes of one block (all layers, K and V). The policy is the connector's
``eviction_policy`` extra config ("lru" by default, or "arc"). For the simulator, or to draw a
small tier in the lab, the size can be given in blocks instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.kv_offload.policies import POLICIES

GIB = 1 << 30


@dataclass(frozen=True)
class KVOffloadingConfig:
    size_gib: float | None = None
    num_blocks: int | None = None
    eviction_policy: str = "lru"

    def __post_init__(self) -> None:
        if (self.size_gib is None) == (self.num_blocks is None):
            raise ConfigError("Give the KV offloading tier a size in GiB or in blocks (exactly one of them).")
        if self.size_gib is not None and not self.size_gib > 0:
            raise ConfigError(f"--kv-offloading-size must be a positive number of GiB, got {self.size_gib!r}.")
        if self.num_blocks is not None and (isinstance(self.num_blocks, bool) or self.num_blocks < 1):
            raise ConfigError(f"The KV offloading tier needs at least 1 block, got {self.num_blocks!r}.")
        if self.eviction_policy not in POLICIES:
            raise ConfigError(
                f"Unknown KV offloading eviction policy {self.eviction_policy!r}; choose one of {sorted(POLICIES)}."
            )

    def num_chunks(self, bytes_per_block: int | None) -> int:
        """Host chunks (one device block each) this size buys."""
        if self.num_blocks is not None:
            return self.num_blocks
        assert self.size_gib is not None
        if not bytes_per_block:
            raise ConfigError("A tier size in GiB needs a model (bytes per block); give the simulator a size in blocks.")
        chunks = int(self.size_gib * GIB) // bytes_per_block
        if chunks < 1:
            raise ConfigError(f"--kv-offloading-size {self.size_gib} GiB holds no block of {bytes_per_block} bytes.")
        return chunks
