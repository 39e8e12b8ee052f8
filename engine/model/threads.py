"""How many CPU threads torch's kernels use: all cores on a quiet machine, one on a busy one.

A parallel kernel ends with every thread waiting for the slowest. When other processes keep the
cores busy, one of our threads is often descheduled and its partners wait a whole time slice for
it, for every one of the ~400 small kernels of a decode step. Measured on a 2-core machine at load
average ~20: a batch-1 decode step took 135-490 ms on 1 thread and 3300-4600 ms on 2. So the
runner checks the load now and then and uses one thread while others want the cores.

``PREFIXLAB_NUM_THREADS=N`` (or ``OMP_NUM_THREADS``) fixes the count instead (the benchmarks do,
so that the limits they measure and the engine use the same threads; ``prefixlab serve --threads N``
too, as vLLM binds its threads to the cores it is given).
"""

from __future__ import annotations

import os
import time

import torch

from engine.config import fixed_num_threads

__all__ = ["RECHECK_S", "ThreadPolicy", "fixed_num_threads", "threads_for_load"]

#: Seconds between two looks at the load average (it is itself a 1-minute average).
RECHECK_S = 2.0


def threads_for_load(load: float, cores: int) -> int:
    """All cores unless other processes want at least one of them (our own threads add up to
    ``cores`` to the load; anything beyond that is someone else's)."""
    return 1 if load >= cores + 1 else cores


class ThreadPolicy:
    def __init__(self, cores: int | None = None) -> None:
        """``cores``: the most threads to use (default: every core of the machine)."""
        self.fixed = fixed_num_threads()
        self.cores = cores or os.cpu_count() or 1
        self.checked_at = float("-inf")

    def apply(self) -> None:
        """Set torch's thread count for the next kernels (cheap: looks at the load every few seconds)."""
        now = time.monotonic()
        if now - self.checked_at < RECHECK_S:
            return
        self.checked_at = now
        wanted = self.fixed or threads_for_load(os.getloadavg()[0], self.cores)
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)
