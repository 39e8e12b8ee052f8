"""Replay seeded traces on vLLM 0.33's CPUOffloadingManager (LRU and ARC) and on ours; compare every operation.

Run inside the core venv (vLLM's pure-Python core importable) with the repository root on
``PYTHONPATH``::

    python -m tests.vllm.offload_differential --traces 40 --ops 150 --seed 0

Both managers get the same calls in the same order, the way the OffloadingConnector issues them:
requests with prefix-sharing chains of block hashes (positions set as the connector sets them),
lookups, loads pinned and completed, stores offered a slice at a time and completed (or failed),
finished requests, touches and cache resets. After each call the runner compares the call's
result (lookup results, chunk ids, keys to store, evicted keys, refusals), the events, the
chunk pool (free chunks, each resident key's chunk id and ref count) and the policy's order
(LRU: every resident key by rank plus the evictable set; ARC: T1, T2, B1, B2 and the target).
It prints one JSON line of counts and exits 1 at the first difference. ``--break RULE`` breaks
one of our rules on purpose, to show the comparison catches it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from vllm.v1.kv_offload.base import LookupResult as VllmLookup
from vllm.v1.kv_offload.base import ReqContext as VllmContext
from vllm.v1.kv_offload.base import make_offload_key
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager as VllmManager

from engine.kv_offload import policies
from engine.kv_offload.base import ReqContext
from engine.kv_offload.manager import CPUOffloadingManager

BLOCK = 16


class Mismatch(AssertionError):
    pass


def short(value: Any) -> Any:
    """Keys as 8 hex digits, so a divergence reads at a glance."""
    if isinstance(value, bytes):
        return value.hex()[:8]
    if isinstance(value, (list, tuple, set)):
        return [short(v) for v in value]
    return value


def vkey(key: bytes) -> bytes:
    return make_offload_key(key, 0)


def break_rule(rule: str) -> None:
    """Break one rule of ours on purpose (the comparison must notice)."""
    if rule == "lru-head-first":  # refresh a finished request head to tail: its head is evicted first
        def head_first(self, keys, insertion_only, reused, req_context):
            self._refresh(list(keys))
        policies.LRUCachePolicy.on_request_finished = head_first  # type: ignore[method-assign]
    elif rule == "arc-store-is-reuse":  # promote stored chunks to T2 as if a store were a second use
        original = policies.ARCCachePolicy.on_request_finished

        def store_is_reuse(self, keys, insertion_only, reused, req_context):
            original(self, keys, set(), set(reused) | set(insertion_only), req_context)
        policies.ARCCachePolicy.on_request_finished = store_is_reuse  # type: ignore[method-assign]
    elif rule:
        raise SystemExit(f"unknown rule {rule!r}")


class Trace:
    def __init__(self, seed: int, policy: str) -> None:
        self.rng = random.Random(seed)
        self.policy = policy
        self.capacity = self.rng.randint(3, 24)
        self.ours = CPUOffloadingManager(self.capacity, policy, enable_events=True)
        self.theirs = VllmManager(self.capacity, policy, enable_events=True)
        # A few shared stems, so requests share prefixes as conversations do.
        self.stems = [[self.rng.randbytes(32) for _ in range(self.rng.randint(1, 8))] for _ in range(4)]
        self.active: dict[str, tuple[list[bytes], ReqContext, Any]] = {}
        self.loads: list[tuple[str, list[bytes]]] = []
        self.stores: list[tuple[str, list[bytes]]] = []
        self.next_id = 0
        self.ops = 0
        self.evictions = 0
        self.counts: dict[str, int] = {}

    # -- comparison ---------------------------------------------------------------------------
    def fail(self, what: str, ours: Any, theirs: Any) -> None:
        raise Mismatch(f"{self.policy} op {self.ops}: {what}: ours={short(ours)!r} vllm={short(theirs)!r}")

    def same(self, what: str, ours: Any, theirs: Any) -> None:
        if ours != theirs:
            self.fail(what, ours, theirs)

    def check_state(self) -> None:
        o, t = self.ours, self.theirs
        self.same("free chunks", o.num_free_chunks, t._get_num_free_chunks())
        self.same("evictable chunks", o._num_evictable, t._num_evictable_cache_chunks)
        tp = t._policy
        if self.policy == "lru":
            ours_chunks = {k: (c.chunk_id, c.ref_cnt) for k, c in o.policy.chunks.items()}
            theirs_chunks = {k[:-4]: (c.chunk_id, c.ref_cnt) for k, c in tp.chunks.items()}
            self.same("chunks", ours_chunks, theirs_chunks)
            order = [k[:-4] for _, k in sorted((r, k) for k, r in tp._ranks.items())]
            self.same("LRU order", o.policy.order(), order)
            self.same("evictable", o.policy.evictable, {k[:-4] for k in tp._evictable})
        else:
            for name in ("t1", "t2"):
                self.same(name, [(k, c.chunk_id, c.ref_cnt) for k, c in getattr(o.policy, name).items()],
                          [(k[:-4], c.chunk_id, c.ref_cnt) for k, c in getattr(tp, name).items()])
            for name in ("b1", "b2"):
                self.same(name, list(getattr(o.policy, name)), [k[:-4] for k in getattr(tp, name)])
            self.same("target_t1_size", o.policy.target_t1_size, tp.target_t1_size)
        ours_events = [(e.removed, list(e.keys)) for e in o.take_events()]
        theirs_events = [(e.removed, [k[:-4] for k in e.keys]) for e in t.take_events()
                         if not getattr(e, "metadata_only", False)]
        self.same("events", ours_events, theirs_events)

    # -- operations -----------------------------------------------------------------------------
    def new_request(self) -> None:
        stem = self.rng.choice(self.stems)
        keys = stem[: self.rng.randint(0, len(stem))] + [self.rng.randbytes(32) for _ in range(self.rng.randint(0, 6))]
        if not keys:
            keys = [self.rng.randbytes(32)]
        rid = f"r{self.next_id}"
        self.next_id += 1
        ours, theirs = ReqContext(rid), VllmContext(req_id=rid)
        for i, key in enumerate(keys):
            ours.set_offload_key_position(key, (i + 1) * BLOCK)
            theirs.set_offload_key_position(vkey(key), (i + 1) * BLOCK)
        self.ours.on_new_request(ours)
        self.theirs.on_new_request(theirs)
        self.active[rid] = (keys, ours, theirs)

    def pick(self) -> tuple[str, list[bytes], ReqContext, Any]:
        rid = self.rng.choice(sorted(self.active))
        keys, ours, theirs = self.active[rid]
        return rid, keys, ours, theirs

    def lookup_and_load(self) -> None:
        rid, keys, ours, theirs = self.pick()
        start = self.rng.randint(0, len(keys) - 1)
        hits = []
        for key in keys[start:]:
            a, b = self.ours.lookup(key, ours), self.theirs.lookup(vkey(key), theirs)
            self.same("lookup", a.name, b.name)
            if b is not VllmLookup.HIT:
                break
            hits.append(key)
        if hits and self.rng.random() < 0.7:
            a_ids = self.ours.prepare_load(hits, ours)
            b_ids = [int(x) for x in self.theirs.prepare_load([vkey(k) for k in hits], theirs).block_ids]
            self.same("load chunk ids", a_ids, b_ids)
            self.loads.append((rid, hits))

    def store(self) -> None:
        rid, keys, ours, theirs = self.pick()
        start = self.rng.randint(0, len(keys) - 1)
        offered = keys[start : self.rng.randint(start + 1, len(keys))]
        a = self.ours.prepare_store(offered, ours)
        b = self.theirs.prepare_store([vkey(k) for k in offered], theirs)
        if a is None or b is None:
            self.same("store refused", a is None, b is None)
            return
        self.same("keys to store", a.keys_to_store, [k[:-4] for k in b.keys_to_store])
        self.same("store chunk ids", a.chunk_ids, [int(x) for x in b.store_spec.block_ids])
        self.same("evicted", a.evicted_keys, [k[:-4] for k in b.evicted_keys])
        self.evictions += len(a.evicted_keys)
        if a.keys_to_store:
            self.stores.append((rid, a.keys_to_store))

    def complete(self) -> None:
        jobs = self.stores if (self.stores and (not self.loads or self.rng.random() < 0.6)) else self.loads
        if not jobs:
            return
        rid, keys = jobs.pop(self.rng.randrange(len(jobs)))
        ours, theirs = self.contexts[rid]
        if jobs is self.stores:
            success = self.rng.random() < 0.9
            self.ours.complete_store(keys, ours, success=success)
            self.theirs.complete_store([vkey(k) for k in keys], theirs, success=success)
        else:
            self.ours.complete_load(keys, ours)
            self.theirs.complete_load([vkey(k) for k in keys], theirs)

    def finish(self) -> None:
        rid, _, ours, theirs = self.pick()
        del self.active[rid]
        self.ours.on_request_finished(ours)
        self.theirs.on_request_finished(theirs)

    def touch(self) -> None:
        _, keys, ours, theirs = self.pick()
        some = keys[: self.rng.randint(1, len(keys))]
        self.ours.touch(some, ours)
        self.theirs.touch([vkey(k) for k in some], theirs)

    def reset(self) -> None:
        self.ours.reset_cache()
        self.theirs.reset_cache()
        self.loads.clear()
        self.stores.clear()

    def run(self, num_ops: int) -> None:
        self.contexts: dict[str, tuple[ReqContext, Any]] = {}
        for _ in range(num_ops):
            self.ops += 1
            if len(self.active) < 2:
                op = "new_request"
            else:
                op = self.rng.choices(
                    ["new_request", "lookup_and_load", "store", "complete", "finish", "touch", "reset"],
                    [14, 20, 30, 26, 10, 3, 0.5])[0]
            getattr(self, op)()
            for rid, (_, ours, theirs) in self.active.items():
                self.contexts[rid] = (ours, theirs)
            self.counts[op] = self.counts.get(op, 0) + 1
            self.check_state()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=40)
    parser.add_argument("--ops", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--break", dest="broken", default="")
    args = parser.parse_args()
    break_rule(args.broken)
    totals: dict[str, Any] = {"traces": 0, "operations": 0, "evictions": 0, "divergences": 0, "ops": {}}
    for policy in ("lru", "arc"):
        for i in range(args.traces):
            trace = Trace(args.seed * 100_003 + i, policy)
            try:
                trace.run(args.ops)
            except Mismatch as exc:
                totals["divergences"] = 1
                totals["first_divergence"] = str(exc)
                print(json.dumps(totals))
                return 1
            totals["traces"] += 1
            totals["operations"] += trace.ops
            totals["evictions"] += trace.evictions
            for op, n in trace.counts.items():
                totals["ops"][op] = totals["ops"].get(op, 0) + n
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
