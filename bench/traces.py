"""Trace replay speed and memory, beside the cache's own O(1) figures, in one run.

Replays a Mooncake trace (the full conversation trace when it sits beside the repository,
else the shipped sample) through the real ``KVCacheManager`` under every policy, and prints:

* seconds per replay (pool building apart) and µs per block lookup, at a capacity that
  evicts and at 10^6 blocks;
* ``bench/kv_cache.py``'s lookup + allocate + free per block, measured in the same run, and
  the ratio (trace replay µs per lookup / cache µs per block);
* resident memory (RSS) after building and replaying a 10^6-block pool, per policy;
* the whole miss-ratio curve (4 policies x 8 capacities) with ``--curve``.

Run: ``python -m bench.traces [--quick] [--curve] [FILE]``. The machine is shared: read the
ratios, and the load average printed with them.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from pathlib import Path

import psutil

from bench.kv_cache import BLOCK_SIZE, TOKENS, PoolUnderTest
from teaching.traces.curve import miss_ratio_curve
from teaching.traces.loader import load_trace
from teaching.traces.policies import POLICIES
from teaching.traces.replay import PreparedTrace, replay
from teaching.traces.sources import CONVERSATION, SAMPLE_TRACE, shared_traces_dir

EVICTING_CAPACITY = 14_056  # blocks: ~7.2M tokens, where the conversation trace evicts a lot
BIG_POOL = 1_000_000


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", help="a trace (default: the full conversation trace, else the sample)")
    parser.add_argument("--quick", action="store_true", help="one repeat, no 10^6-block pools")
    parser.add_argument("--curve", action="store_true", help="also time the whole 4 x 8 miss-ratio curve")
    args = parser.parse_args()
    full = shared_traces_dir() / CONVERSATION
    path = Path(args.file) if args.file else full if full.exists() else SAMPLE_TRACE
    repeats = 1 if args.quick else 3

    print(f"trace: {path.name}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    start = time.perf_counter()
    prepared = PreparedTrace(load_trace(path))
    trace = prepared.trace
    print(f"{len(trace):,} requests, {trace.num_blocks:,} block lookups; load + validate + chain hashes: "
          f"{time.perf_counter() - start:.2f} s\n")
    gc.collect()
    gc.freeze()  # the trace's long-lived objects: keep them out of every GC pass (as bench/kv_cache does)

    kv_sizes = [1_000, 100_000]
    kv_pools = {size: PoolUnderTest(size) for size in kv_sizes}
    kv_samples: dict[int, list[float]] = {size: [] for size in kv_sizes}
    capacities = [EVICTING_CAPACITY] + ([] if args.quick else [BIG_POOL])
    times: dict[tuple[str, int], list[float]] = {}
    builds: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):  # interleaved, so drift on a shared machine hits every row alike
        for size in kv_sizes:
            kv_samples[size].append(kv_pools[size].run(30) / (TOKENS // BLOCK_SIZE))
        for policy in POLICIES:
            for capacity in capacities:
                result = replay(prepared, policy, capacity, trim=capacity != BIG_POOL)
                times.setdefault((policy, capacity), []).append(result.seconds - result.build_seconds)
                builds.setdefault((policy, capacity), []).append(result.build_seconds)
    kv = {size: statistics.median(v) * 1e6 for size, v in kv_samples.items()}
    print(f"bench/kv_cache.py, same run: lookup + allocate + free of one {TOKENS}-token request, per block: "
          + ", ".join(f"{kv[s]:.2f} µs ({s:,}-block pool)" for s in kv_sizes) + "\n")
    print("| policy | pool (blocks) | build pool (s) | replay (s) | µs per block lookup | × cache µs per block |")
    print("|---|---:|---:|---:|---:|---:|")
    for (policy, capacity), values in times.items():
        seconds = statistics.median(values)
        per = seconds / trace.num_blocks * 1e6
        print(f"| {policy} | {capacity:,} | {statistics.median(builds[(policy, capacity)]):.2f} | {seconds:.2f} | "
              f"{per:.1f} | {per / kv[kv_sizes[0]]:.1f} |")

    if not args.quick:
        print(f"\nmemory: RSS after a replay with a {BIG_POOL:,}-block pool (each built fresh)\n")
        print("| policy | RSS before (MiB) | RSS after (MiB) | bytes per pool block |")
        print("|---|---:|---:|---:|")
        for policy in POLICIES:
            gc.collect()
            before = rss_mib()
            result = replay(prepared, policy, BIG_POOL, trim=False)
            after = rss_mib()
            print(f"| {policy} | {before:.0f} | {after:.0f} | {(after - before) * 2**20 / BIG_POOL:.0f} |")
            del result

    if args.curve:
        start = time.perf_counter()
        miss_ratio_curve(prepared)
        print(f"\nwhole curve (4 policies x 8 capacities + the unbounded run): {time.perf_counter() - start:.1f} s")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
