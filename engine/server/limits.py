"""Fairness between students: a per-client quota, and round-robin admission into the engine.

The quota bounds how much of the engine one client can hold at once (requests queued or
running); past it the client gets a 429 with ``Retry-After`` instead of a place in line.
Admission then takes one request per client in turn, so a client with four requests waiting
cannot push ahead of a client with one: first-come-first-served would let a burst from one
notebook delay the whole room.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Weight of the newest request in the running mean of request durations (for Retry-After).
DURATION_EWMA_WEIGHT = 0.2
MIN_RETRY_AFTER_S = 1


class ClientLimiter:
    """Counts each client's requests in flight; refuses the one over ``max_per_client``."""

    def __init__(self, max_per_client: int) -> None:
        self.max_per_client = max_per_client
        self.in_flight: dict[str, int] = {}
        self.mean_duration_s = 1.0
        self.rejected = 0
        self._lock = threading.Lock()

    def try_acquire(self, client: str) -> bool:
        with self._lock:
            count = self.in_flight.get(client, 0)
            if count >= self.max_per_client:
                self.rejected += 1
                return False
            self.in_flight[client] = count + 1
            return True

    def release(self, client: str, duration_s: float | None = None) -> None:
        with self._lock:
            count = self.in_flight.get(client, 0) - 1
            if count > 0:
                self.in_flight[client] = count
            else:
                self.in_flight.pop(client, None)
            if duration_s is not None:
                self.mean_duration_s += DURATION_EWMA_WEIGHT * (duration_s - self.mean_duration_s)

    def retry_after_s(self) -> int:
        """Whole seconds until one of the client's requests has likely finished."""
        return max(MIN_RETRY_AFTER_S, math.ceil(self.mean_duration_s))


class FairQueue(Generic[T]):
    """Per-client FIFO queues served round-robin: each :meth:`pop` moves on to the next client."""

    def __init__(self) -> None:
        self._queues: OrderedDict[str, deque[T]] = OrderedDict()

    def push(self, client: str, item: T) -> None:
        self._queues.setdefault(client, deque()).append(item)

    def pop(self) -> T | None:
        """The oldest item of the client whose turn it is; that client goes to the back."""
        if not self._queues:
            return None
        client, queue = next(iter(self._queues.items()))
        item = queue.popleft()
        del self._queues[client]
        if queue:
            self._queues[client] = queue  # re-inserted last: the next client is served first
        return item

    def remove(self, match: Callable[[T], bool]) -> T | None:
        """Take out the first item ``match`` accepts (an abort before admission)."""
        for client, queue in self._queues.items():
            for item in queue:
                if match(item):
                    queue.remove(item)
                    if not queue:
                        del self._queues[client]
                    return item
        return None

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())
