"""Play a trace through real ``KVCacheManager`` replicas and count what the prefix cache hit.

Two ways to pass time (``mode``):

* ``sequential`` (the default): one request at a time. It is looked up, gets blocks for its
  input and output, and is freed before the next arrives. The cache is then shaped only by
  the policy and the capacity, which is what a miss-ratio curve compares.
* ``overlap``: requests arrive at their timestamps and hold their blocks until they finish,
  ``output_length * tpot_ms`` later (no preemption: a request reserves its input and output
  blocks when admitted). When the pool is full, arrivals wait in FCFS order.

A request needing more blocks than the whole pool can never run: it is counted as
``rejected`` (its lookups count, with no hit). Capacity counts usable blocks (the null
block comes on top); ``0`` means unbounded (a pool that never evicts).
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property

from engine.errors import ConfigError
from engine.hashing import BlockHash
from engine.kv_cache import KVCacheManager, cdiv
from teaching.traces.loader import TRACE_BLOCK_SIZE, Trace
from teaching.traces.policies import POLICIES, BeladyNextUse, LeafEvictingBlockPool, make_manager
from teaching.traces.routing import DEFAULT_PREFIX_WEIGHT, make_router
from teaching.traces.trace_request import TraceRequest, chain_hashes

MODES = ("sequential", "overlap")
#: Decode time per output token in ``overlap`` mode (ms): sets how long a request holds its blocks.
DEFAULT_TPOT_MS = 30.0
#: Points in a time series along the trace.
SERIES_POINTS = 400
#: Most replicas one replay may simulate.
MAX_REPLICAS = 64
#: Largest pool one replay may build (blocks): ~10^6 blocks take about a second and ~200 MB.
MAX_CAPACITY_BLOCKS = 4_000_000

Progress = Callable[[float, str], None]


class PreparedTrace:
    """A trace with its chained hashes and requests, built once and replayed many times."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.chains = chain_hashes(trace)
        self.requests = [TraceRequest(f"t{i}", record, chain)
                         for i, (record, chain) in enumerate(zip(trace.records, self.chains))]
        self.needed_blocks = [cdiv(r.input_length + r.output_length, TRACE_BLOCK_SIZE) for r in trace.records]
        #: The part of each chain a request could hit (never its last token's block).
        self.eligible = [chain[: (r.input_length - 1) // TRACE_BLOCK_SIZE]
                         for r, chain in zip(trace.records, self.chains)]

    @cached_property
    def belady(self) -> BeladyNextUse:
        return BeladyNextUse(self.chains, [r.input_length for r in self.trace.records])

    def unbounded_blocks(self) -> int:
        """A pool no replay can fill: every block every request would ever hold."""
        return sum(self.needed_blocks)


@dataclass
class Counts:
    """What the cache did with the requests one replica (or all of them) served."""

    requests: int = 0
    blocks: int = 0  # block lookups: every hash_id of every request
    hit_blocks: int = 0
    input_tokens: int = 0
    rejected: int = 0

    @property
    def hit_tokens(self) -> int:
        return self.hit_blocks * TRACE_BLOCK_SIZE

    @property
    def block_hit_rate(self) -> float:
        return self.hit_blocks / self.blocks if self.blocks else 0.0

    @property
    def token_hit_rate(self) -> float:
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def computed_tokens(self) -> int:
        """Prefill work left after the cache: input tokens not hit."""
        return self.input_tokens - self.hit_tokens

    def as_dict(self) -> dict[str, int | float]:
        return {**asdict(self), "block_hit_rate": self.block_hit_rate, "token_hit_rate": self.token_hit_rate}


@dataclass
class SeriesPoint:
    """The cache along the trace: after request ``request`` (1-based), over the last window."""

    request: int
    time_s: float
    hit_rate: float  # token hit rate over the window
    usage: float  # fraction of usable blocks held by requests (vLLM's KV usage)
    cached: float  # fraction of usable blocks holding a cached prefix block


@dataclass
class ReplayResult:
    policy: str
    capacity_blocks: int  # usable blocks per replica; 0 = unbounded
    mode: str
    total: Counts
    replicas: list[Counts]
    router: str | None = None
    series: list[SeriesPoint] = field(default_factory=list)
    seconds: float = 0.0
    build_seconds: float = 0.0  # of ``seconds``: building the pools

    @property
    def capacity_tokens(self) -> int:
        return self.capacity_blocks * TRACE_BLOCK_SIZE

    def load_balance(self) -> dict[str, float]:
        """max / mean over replicas of requests served and of prefill tokens computed (1.0 = even)."""
        def ratio(values: list[int]) -> float:
            mean = sum(values) / len(values)
            return max(values) / mean if mean else 1.0
        return {"requests_max_over_mean": ratio([c.requests for c in self.replicas]),
                "computed_tokens_max_over_mean": ratio([c.computed_tokens for c in self.replicas])}

    def as_json(self) -> dict[str, object]:
        """The CLI's JSON: the issue's five keys first, then the settings and details."""
        t = self.total
        out: dict[str, object] = {
            "requests": t.requests, "blocks": t.blocks, "hit_blocks": t.hit_blocks,
            "block_hit_rate": t.block_hit_rate, "token_hit_rate": t.token_hit_rate,
            "rejected": t.rejected, "policy": self.policy, "capacity_blocks": self.capacity_blocks,
            "mode": self.mode, "seconds": round(self.seconds, 3),
        }
        if len(self.replicas) > 1:
            out["router"] = self.router
            out["replicas"] = [c.as_dict() for c in self.replicas]
            out["load_balance"] = self.load_balance()
        return out


class Replica:
    """One engine's cache: a real manager, its waiting queue and its unfinished requests."""

    def __init__(self, manager: KVCacheManager, belady: BeladyNextUse | None) -> None:
        self.manager = manager
        self.belady = belady
        self.counts = Counts()
        self.waiting: deque[int] = deque()
        self.finishes: list[float] = []  # finish times of admitted, unfinished requests (heap)
        self.routed = 0

    def load(self, now: float) -> int:
        while self.finishes and self.finishes[0] <= now:
            heapq.heappop(self.finishes)
        return len(self.finishes) + len(self.waiting)

    def cached_prefix_blocks(self, chain: Sequence[BlockHash]) -> int:
        pool = self.manager.block_pool
        for matched, block_hash in enumerate(chain):
            if pool.get_cached_block(block_hash) is None:
                return matched
        return len(chain)


class _Simulation:
    def __init__(self, prepared: PreparedTrace, policy: str, capacity_blocks: int, mode: str, replicas: int,
                 router: str, tpot_ms: float, seed: int, prefix_weight: float, trim: bool = True) -> None:
        if policy not in POLICIES:
            raise ConfigError(f"Unknown policy {policy!r}; choose one of {list(POLICIES)}.")
        if mode not in MODES:
            raise ConfigError(f"Unknown mode {mode!r}; choose one of {list(MODES)}.")
        if not isinstance(capacity_blocks, int) or not 0 <= capacity_blocks <= MAX_CAPACITY_BLOCKS:
            raise ConfigError(f"capacity must be 0 (unbounded) to {MAX_CAPACITY_BLOCKS:,} blocks, got {capacity_blocks!r}.")
        if not 1 <= replicas <= MAX_REPLICAS:
            raise ConfigError(f"replicas must be 1 to {MAX_REPLICAS}, got {replicas}.")
        if tpot_ms <= 0:
            raise ConfigError(f"tpot_ms must be > 0, got {tpot_ms}.")
        if policy == "belady" and replicas > 1 and router in ("prefix", "blend"):
            raise ConfigError("Belady needs each replica's future in advance, which a cache-aware router only "
                              "decides on the way; use random, round-robin or least-loaded with belady.")
        self.prepared = prepared
        self.mode = mode
        self.tpot_s = tpot_ms / 1000.0
        self.route = make_router(router, seed=seed, prefix_weight=prefix_weight)
        # A pool bigger than every block the trace could ever hold never evicts, under any policy,
        # so the pool stops there (same counts, less to build); usage is still per nominal capacity.
        bound = min(prepared.unbounded_blocks(), MAX_CAPACITY_BLOCKS)
        usable = (min(capacity_blocks, bound) if trim else capacity_blocks) if capacity_blocks else bound
        self.usable = usable
        self.capacity = capacity_blocks or bound
        records = prepared.trace.records
        self.assignment: list[int] | None = None
        if policy == "belady" and replicas > 1:
            # Cache-oblivious routing does not depend on the cache: route first, then give each
            # replica the future of exactly the requests it will serve.
            self.assignment = self._preroute(replicas)
        self.replicas = []
        build_start = time.perf_counter()
        for r in range(replicas):
            belady = None
            if policy == "belady":
                if self.assignment is None:
                    belady = prepared.belady
                else:
                    belady = BeladyNextUse([chain if a == r else [] for chain, a in zip(prepared.chains, self.assignment)],
                                           [rec.input_length for rec in records])
            self.replicas.append(Replica(make_manager(policy, usable + 1, belady=belady), belady))
        self.build_seconds = time.perf_counter() - build_start
        self.finishing: list[tuple[float, int, int]] = []  # (time, request, replica)
        self.series: list[SeriesPoint] = []
        self.window = max(1, len(records) // SERIES_POINTS)
        self._window_hits = self._window_tokens = 0
        self.done = 0

    def _preroute(self, n: int) -> list[int]:
        """Run the router on load alone (no cache) to fix each request's replica up front."""
        fake = [Replica.__new__(Replica) for _ in range(n)]
        for r in fake:
            r.waiting, r.finishes, r.routed = deque(), [], 0
        out = []
        for i, record in enumerate(self.prepared.trace.records):
            now = record.timestamp / 1000.0
            chosen = self.route(i, (), fake, now)
            fake[chosen].routed += 1
            heapq.heappush(fake[chosen].finishes, now + record.output_length * self.tpot_s)
            out.append(chosen)
        return out

    # -- one request ---------------------------------------------------------------------------------
    def _admit(self, index: int, replica: Replica, now: float) -> bool:
        """Look up and allocate; False (nothing changed) when the pool has no room yet."""
        prepared = self.prepared
        request = prepared.requests[index]
        manager = replica.manager
        if replica.belady is not None:
            replica.belady.advance(index)
            pool = manager.block_pool
            assert isinstance(pool, LeafEvictingBlockPool)
            pool.reprioritize(prepared.eligible[index])
        hits, num_hit_tokens = manager.get_computed_blocks(request)
        record = request.record
        total = record.input_length + record.output_length
        if manager.allocate_slots(request, total - num_hit_tokens, num_hit_tokens, hits) is None:
            return False
        self._count(replica, index, len(hits))
        return True

    def _count(self, replica: Replica, index: int, hit_blocks: int, rejected: bool = False) -> None:
        record = self.prepared.trace.records[index]
        counts = replica.counts
        counts.requests += 1
        counts.blocks += len(record.hash_ids)
        counts.hit_blocks += hit_blocks
        counts.input_tokens += record.input_length
        counts.rejected += rejected
        self._window_hits += hit_blocks * TRACE_BLOCK_SIZE
        self._window_tokens += record.input_length
        self.done += 1
        if self.done % self.window == 0 or self.done == len(self.prepared.requests):
            pool = replica.manager.block_pool
            self.series.append(SeriesPoint(
                request=self.done, time_s=record.timestamp / 1000.0,
                hit_rate=self._window_hits / self._window_tokens if self._window_tokens else 0.0,
                usage=sum(r.manager.usage for r in self.replicas) * self.usable / self.capacity / len(self.replicas),
                cached=len(pool.cached_block_hash_to_block) / self.capacity,
            ))
            self._window_hits = self._window_tokens = 0

    def _too_big(self, index: int) -> bool:
        return self.prepared.needed_blocks[index] > self.usable

    # -- time ----------------------------------------------------------------------------------------
    def _admit_waiting(self, r: int, now: float) -> None:
        replica = self.replicas[r]
        while replica.waiting:
            index = replica.waiting[0]
            if not self._admit(index, replica, now):
                return  # FCFS: the head waits for room, and so does everyone behind it
            replica.waiting.popleft()
            finish = now + self.prepared.trace.records[index].output_length * self.tpot_s
            heapq.heappush(replica.finishes, finish)
            heapq.heappush(self.finishing, (finish, index, r))

    def _finish_until(self, now: float) -> None:
        while self.finishing and self.finishing[0][0] <= now:
            when, index, r = heapq.heappop(self.finishing)
            self.replicas[r].manager.free(self.prepared.requests[index])
            self._admit_waiting(r, when)

    def run(self, progress: Progress | None = None) -> None:
        records = self.prepared.trace.records
        step = max(1, len(records) // 50)
        for index, record in enumerate(records):
            now = record.timestamp / 1000.0
            if self.mode == "overlap":
                self._finish_until(now)
            r = self.assignment[index] if self.assignment else self.route(
                index, self.prepared.eligible[index], self.replicas, now)
            replica = self.replicas[r]
            replica.routed += 1
            if self._too_big(index):
                self._count(replica, index, 0, rejected=True)
            elif self.mode == "sequential":
                admitted = self._admit(index, replica, now)
                assert admitted, "an empty pool that fits the request must admit it"
                replica.manager.free(self.prepared.requests[index])
                heapq.heappush(replica.finishes, now + record.output_length * self.tpot_s)  # load for routers
            else:
                replica.waiting.append(index)
                self._admit_waiting(r, now)
            if progress and index % step == 0:
                progress(index / len(records), f"request {index:,} of {len(records):,}")
        if self.mode == "overlap":
            self._finish_until(float("inf"))
            assert all(not r.waiting for r in self.replicas), "requests left waiting after every finish"


def replay(prepared: PreparedTrace | Trace, policy: str = "vllm", capacity_blocks: int = 0, *,
           mode: str = "sequential", replicas: int = 1, router: str = "round-robin",
           tpot_ms: float = DEFAULT_TPOT_MS, seed: int = 0, prefix_weight: float = DEFAULT_PREFIX_WEIGHT,
           progress: Progress | None = None, trim: bool = True) -> ReplayResult:
    """Replay a whole trace under one policy and capacity (per replica); see the module doc.

    ``seconds`` covers the whole replay; ``build_seconds`` the part spent building the pools.

    ``trim=False`` builds the whole pool asked for even where the trace cannot fill it (same
    counts; for measuring the memory of big pools).
    """
    if isinstance(prepared, Trace):
        prepared = PreparedTrace(prepared)
    start = time.perf_counter()
    sim = _Simulation(prepared, policy, capacity_blocks, mode, replicas, router, tpot_ms, seed, prefix_weight, trim)
    sim.run(progress)
    total = Counts()
    for replica in sim.replicas:
        for name in ("requests", "blocks", "hit_blocks", "input_tokens", "rejected"):
            setattr(total, name, getattr(total, name) + getattr(replica.counts, name))
    return ReplayResult(policy, capacity_blocks, mode, total, [r.counts for r in sim.replicas],
                        router if replicas > 1 else None, sim.series, time.perf_counter() - start,
                        sim.build_seconds)
