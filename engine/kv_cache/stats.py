"""Prefix cache statistics, counted the way vLLM counts them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class PrefixCacheStats:
    """Counts since start-up, plus a window of recent requests for the hit rate.

    ``queries`` and ``hits`` are in tokens. Requests admitted again after a preemption
    are counted apart (``preempted_*``): their hits are recomputation avoided, not reuse
    across requests, and mixing them in would flatter the hit rate.
    """

    window: int = 1000
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    _recent: deque = field(default_factory=deque, repr=False)

    def record(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
            return
        self.requests += 1
        self.queries += num_tokens
        self.hits += num_hits
        self._recent.append((num_tokens, num_hits))
        while len(self._recent) > self.window:
            self._recent.popleft()

    @property
    def hit_rate(self) -> float:
        """Token hit rate over the last ``window`` requests (0.0 before any request)."""
        queries = sum(q for q, _ in self._recent)
        return sum(h for _, h in self._recent) / queries if queries else 0.0

    def reset(self) -> None:
        self.requests = self.queries = self.hits = 0
        self.preempted_requests = self.preempted_queries = self.preempted_hits = 0
        self._recent.clear()
