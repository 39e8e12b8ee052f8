"""The offload tier's memory: K/V pages in host RAM, one chunk per device block.

Shaped like the device pages (``[K or V, layer, chunk, block_size, kv heads, head dim]``), so a
store copies device block ``b`` into chunk ``c`` whole, every layer at once, and a load copies it
back into a free device block. On CUDA the host tensor is pinned, so the copies can use DMA.
"""

from __future__ import annotations

import torch

from engine.model.kv_tensors import PagedKVCache


class HostKVCache:
    def __init__(self, device_cache: PagedKVCache, num_chunks: int) -> None:
        shape = list(device_cache.data.shape)
        shape[2] = num_chunks
        pin = device_cache.data.device.type == "cuda"
        self.data = torch.zeros(shape, dtype=device_cache.data.dtype, device="cpu", pin_memory=pin)
        self.device_cache = device_cache

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def store(self, pairs: list[tuple[int, int]]) -> None:
        """Device block -> host chunk, for each ``(device block, host chunk)``."""
        if not pairs:
            return
        blocks = torch.tensor([b for b, _ in pairs], device=self.device_cache.data.device)
        chunks = torch.tensor([c for _, c in pairs])
        self.data[:, :, chunks] = self.device_cache.data[:, :, blocks].to("cpu")

    def load(self, pairs: list[tuple[int, int]]) -> None:
        """Host chunk -> device block, for each ``(host chunk, device block)``."""
        if not pairs:
            return
        chunks = torch.tensor([c for c, _ in pairs])
        device = self.device_cache.data.device
        blocks = torch.tensor([b for _, b in pairs], device=device)
        self.device_cache.data[:, :, blocks] = self.data[:, :, chunks].to(device, non_blocking=True)
