"""How the engine uses the host's memory: freed activations are kept for reuse, unread weights handed back.

Both are process-wide, best-effort tweaks for glibc Linux; elsewhere they do nothing. (Huge pages for
the weights: :mod:`engine.runtime.huge_pages`, set when a process starts.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch

#: glibc ``mallopt`` parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks up to this size come from the heap and are reused (glibc's largest allowed value on 64-bit).
HEAP_BLOCKS_UP_TO = 32 * 2**20
#: Freed heap memory kept (not returned to the kernel) up to this much.
KEEP_FREED = 512 * 2**20
#: ``madvise`` advice asking Linux to reclaim pages now (file pages are read again on next use,
#: anonymous ones go to swap or stay): data is never lost, whatever memory the tensor lives in.
MADV_PAGEOUT = 21
PAGE = 4096


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once (a lookup runs ``ldconfig``: ~1 ms, and a load hands back ~200 tensors)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


def reuse_freed_activations() -> None:
    """Keep freed activation memory in the heap instead of giving it back to the kernel.

    torch has no caching allocator on CPU: every step allocates its activations afresh. By
    default glibc serves blocks over 128 KiB with fresh pages from the kernel and returns them
    on free; the kernel zeroes a page on its first touch. A 1,000-token prefill's activations
    (~6 MB each) then fault in 1,500 pages per op: measured here, SiLU took 1.1 ms per layer
    instead of 0.55 ms. Costs at most the largest step's activations in resident memory.
    """
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO)
        libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREED)


def hand_back_pages(tensor: torch.Tensor) -> None:
    """Let the OS take back the resident pages of a CPU tensor we keep but no longer read.

    The HF model's weights are mapped from the safetensors file; once packed (see
    :class:`~engine.model.layers.Projection`), our forward pass never reads them again, yet the
    pages read while packing would stay in this process's resident memory (~0.4 GB for the
    default model). Only the tests' oracle reads them again, from the file.
    """
    libc = _libc()
    if tensor.device.type != "cpu" or libc is None:
        return
    start = -(-tensor.data_ptr() // PAGE) * PAGE  # whole pages inside the tensor only
    end = (tensor.data_ptr() + tensor.numel() * tensor.element_size()) // PAGE * PAGE
    if end > start:
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_PAGEOUT)
