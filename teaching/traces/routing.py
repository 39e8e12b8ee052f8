"""Routers: which replica serves the next request of a trace.

Cache-oblivious routers spread load (``random``, ``round-robin``, ``least-loaded``);
``prefix`` sends a request where the longest part of its prompt is already cached;
``blend`` scores both, as cache-aware routers do (a prefix-match fraction against a load
fraction, weighted). A replica's *load* is the number of requests it holds that have not
finished (running or waiting) when the new one arrives.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from engine.errors import ConfigError
from engine.hashing import BlockHash

#: Router name -> what it does.
ROUTERS: dict[str, str] = {
    "random": "uniformly at random (seeded)",
    "round-robin": "in turn",
    "least-loaded": "fewest unfinished requests",
    "prefix": "longest cached prefix (ties: least loaded)",
    "blend": "weighted prefix match and load",
}
#: Weight of the prefix match in ``blend`` (the rest goes to load).
DEFAULT_PREFIX_WEIGHT = 0.5


class RoutedReplica(Protocol):
    routed: int

    def load(self, now: float) -> int: ...

    def cached_prefix_blocks(self, chain: Sequence[BlockHash]) -> int: ...


Router = Callable[[int, Sequence[BlockHash], Sequence[RoutedReplica], float], int]


def make_router(name: str, *, seed: int = 0, prefix_weight: float = DEFAULT_PREFIX_WEIGHT) -> Router:
    """A function ``(request index, its hit-eligible chain, replicas, now) -> replica index``."""
    if name not in ROUTERS:
        raise ConfigError(f"Unknown router {name!r}; choose one of {list(ROUTERS)}.")
    if not 0.0 <= prefix_weight <= 1.0:
        raise ConfigError(f"The prefix weight must be in [0, 1], got {prefix_weight}.")
    rng = random.Random(seed)

    def least_loaded_key(replicas: Sequence[RoutedReplica], now: float) -> Callable[[int], tuple[int, int, int]]:
        loads = [r.load(now) for r in replicas]
        return lambda i: (loads[i], replicas[i].routed, i)

    def route(index: int, chain: Sequence[BlockHash], replicas: Sequence[RoutedReplica], now: float) -> int:
        n = len(replicas)
        if name == "random":
            return rng.randrange(n)
        if name == "round-robin":
            return index % n
        by_load = least_loaded_key(replicas, now)
        if name == "least-loaded":
            return min(range(n), key=by_load)
        matched = [r.cached_prefix_blocks(chain) for r in replicas]
        if name == "prefix":
            return min(range(n), key=lambda i: (-matched[i], *by_load(i)))
        loads = [r.load(now) for r in replicas]
        top = max(loads) + 1
        length = max(1, len(chain))

        def score(i: int) -> float:
            return prefix_weight * matched[i] / length + (1 - prefix_weight) * (1 - loads[i] / top)

        return max(range(n), key=lambda i: (score(i), -replicas[i].routed, -i))

    return route
