"""``SharedPages``: one KV page tensor for a whole server, one contiguous partition per engine.

Each engine (one per browser session) keeps its own pool, block ids and views, exactly as if it
owned its pages; only the memory behind them is one tensor, so that one forward pass can serve
every engine at once (:mod:`engine.runtime.batching`). A page here holds ONE token's K/V, because
engines may pick different block sizes: an engine with blocks of ``bs`` tokens gets a range of
``num_blocks * bs`` rows starting at its ``base``, and its block ``b`` is rows
``base + b * bs .. base + b * bs + bs - 1`` (:func:`physical_rows`).

Ranges are handed out first-fit from a list of free ranges and come back when the engine that
holds one is garbage. On the CPU the tensor lives in an anonymous memory map: the OS hands out
zeroed pages on first write, so the server's resident memory grows with the pages engines write,
not with the budget (``torch.zeros`` would write, and so commit, all of it at once).
"""

from __future__ import annotations

import mmap
import threading
import weakref

import torch

from engine.errors import PrefixLabError
from engine.model.kv_tensors import PagedKVCache
from engine.model.weights import ModelShape


def lazily_zeroed(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, object]:
    """A zero tensor whose memory is committed page by page as it is written (CPU), and its owner."""
    if device.type != "cpu":
        tensor = torch.zeros(shape, dtype=dtype, device=device)
        return tensor, tensor
    numel = 1
    for size in shape:
        numel *= size
    buffer = mmap.mmap(-1, numel * torch.empty((), dtype=dtype).element_size())
    return torch.frombuffer(buffer, dtype=dtype).view(shape), buffer


def physical_rows(block_ids: list[int], base: int, block_size: int) -> list[int]:
    """An engine's block table as rows of the shared pages (one token per row)."""
    return [base + b * block_size + offset for b in block_ids for offset in range(block_size)]


class SharedPages:
    """The server's KV memory: ``budget_mib`` MiB of one-token pages, split into per-engine ranges."""

    def __init__(self, weights: ModelShape, budget_mib: int, device: torch.device | None = None) -> None:
        """``device``: where the pages live, the weights' device by default; ``meta`` keeps only their
        shape, for a server whose passes (and so whose real pages) are in a worker process."""
        layers, kv_heads, head_dim = weights.kv_layout
        self.bytes_per_row = weights.kv_bytes_per_token
        self.num_rows = budget_mib * 2**20 // self.bytes_per_row
        shape = (2, layers, self.num_rows, 1, kv_heads, head_dim)
        self.data, self._memory = lazily_zeroed(shape, weights.dtype, device or weights.device)
        self.cache = PagedKVCache.over(self.data)  # block size 1: what a merged forward pass writes and reads
        self._free: list[tuple[int, int]] = [(0, self.num_rows)]  # (start, length), sorted, never adjacent
        self._lock = threading.Lock()

    @property
    def used_rows(self) -> int:
        with self._lock:
            return self.num_rows - sum(length for _, length in self._free)

    def _mib(self, rows: int) -> int:
        return -(-rows * self.bytes_per_row // 2**20)

    def reserve(self, num_blocks: int, block_size: int, owner: object) -> int:
        """Take a range for ``num_blocks`` blocks of ``block_size`` tokens until ``owner`` is garbage;
        returns its first row. Raises when no free range is that big."""
        rows = num_blocks * block_size
        with self._lock:
            for index, (start, length) in enumerate(self._free):
                if length >= rows:
                    self._free[index:index + 1] = [(start + rows, length - rows)] if length > rows else []
                    break
            else:
                used = self.num_rows - sum(length for _, length in self._free)
                raise PrefixLabError(
                    f"The server's KV memory is taken ({self._mib(used)} of {self._mib(self.num_rows)} MiB in use by "
                    f"other sessions; {self._mib(rows)} MiB were asked for). Pick a smaller KV pool, or try again "
                    "in a minute."
                )
        weakref.finalize(owner, self._release, start, rows)
        return start

    def partition(self, base: int, num_blocks: int, block_size: int) -> PagedKVCache:
        """One engine's range seen as its own pages: its block ``b`` is row ``b`` of this view."""
        rows = self.data[:, :, base:base + num_blocks * block_size]
        return PagedKVCache.over(rows.view(*self.data.shape[:2], num_blocks, block_size, *self.data.shape[4:]))

    def _release(self, start: int, rows: int) -> None:
        with self._lock:
            ranges = sorted([*self._free, (start, rows)])
            merged: list[tuple[int, int]] = []
            for begin, length in ranges:
                if merged and merged[-1][0] + merged[-1][1] == begin:
                    merged[-1] = (merged[-1][0], merged[-1][1] + length)
                else:
                    merged.append((begin, length))
            self._free = merged
