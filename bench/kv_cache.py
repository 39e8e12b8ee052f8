"""Cache operations are O(1) per block: time per allocate+free as the pool grows.

For pools of 1k, 10k, 100k and 1M blocks, times one request of 1,024 tokens (64 blocks of
16) going through lookup -> allocate_slots -> free, many times, with a pool that is warm
(every op also evicts cached blocks once the pool has cycled). Prints the time per op for
each size and the ratio largest / smallest, measured side by side in one run; then the
hashing throughput of each algorithm. Run: ``python -m bench.kv_cache [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from engine.hashing import HASH_FUNCTIONS, BlockHasher
from engine.kv_cache import KVCacheManager
from engine.request import Request

TOKENS = 1024
BLOCK_SIZE = 16


def make_requests(n: int, manager: KVCacheManager, first: int = 0) -> list[Request]:
    """Distinct 1,024-token prompts, hashed up front so the timing is cache work only."""
    requests = []
    for i in range(first, first + n):
        request = Request(f"r{i}", [i] + list(range(TOKENS - 1)))
        request.attach_hasher(manager.hasher, manager.block_size)
        requests.append(request)
    return requests


class PoolUnderTest:
    """One warm pool: every block carries a hash, so each allocation evicts 64 cached blocks."""

    def __init__(self, num_blocks: int) -> None:
        # xxhash only makes the warm-up quicker; hashing is not part of the timed work.
        self.manager = KVCacheManager(num_blocks, BLOCK_SIZE, hash_algo="xxhash", hash_seed="bench", enable_events=False)
        self.next_id = 0
        self.run(num_blocks // (TOKENS // BLOCK_SIZE) + 1)

    def run(self, ops: int) -> float:
        """Seconds per lookup + allocate_slots + free, over ``ops`` fresh requests."""
        requests = make_requests(ops, self.manager, first=self.next_id)
        self.next_id += ops
        start = time.perf_counter()
        for request in requests:
            hits, num_hit = self.manager.get_computed_blocks(request)
            self.manager.allocate_slots(request, request.num_tokens - num_hit, num_hit, hits)
            self.manager.free(request)
        return (time.perf_counter() - start) / ops


def hashing_throughput(algo: str, seconds: float) -> float:
    hasher = BlockHasher(algo, seed="bench")
    tokens = list(range(TOKENS))
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        hasher.hash_request(tokens, BLOCK_SIZE)
        done += TOKENS
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (for CI smoke runs)")
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000, 1_000_000]
    ops, repeats = (30, 3) if args.quick else (100, 9)

    print(f"allocate + free of one {TOKENS}-token request ({TOKENS // BLOCK_SIZE} blocks of {BLOCK_SIZE})\n")
    print("| pool (blocks) | time per op (µs) | µs per block |")
    print("|---:|---:|---:|")
    pools = {size: PoolUnderTest(size) for size in sizes}
    # The pools' million long-lived objects would make every full GC pass O(heap), which is
    # the interpreter's cost, not the cache's: keep them out of the collector's scans.
    gc.collect()
    gc.freeze()
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats):  # interleaved, so drift on a shared machine hits every size alike
        for size in sizes:
            samples[size].append(pools[size].run(ops))
    times = {size: statistics.median(values) for size, values in samples.items()}
    for size in sizes:
        print(f"| {size:,} | {times[size] * 1e6:,.1f} | {times[size] * 1e6 / (TOKENS // BLOCK_SIZE):.2f} |")
    ratio = times[sizes[-1]] / times[sizes[0]]
    print(f"\nratio largest / smallest pool: {ratio:.2f}  (goal <= 1.5: time per op stays flat)\n")

    print("| hash algorithm | tokens/s |")
    print("|---|---:|")
    for algo in HASH_FUNCTIONS:
        print(f"| {algo} | {hashing_throughput(algo, 0.3 if args.quick else 1.0):,.0f} |")


if __name__ == "__main__":
    main()
