"""Replay seeded random traces with hybrid layer patterns on vLLM 0.33's coordinator and on ours.

Run inside the vLLM 0.33 core venv, with the repository root on ``PYTHONPATH``::

    python -m tests.vllm.hybrid_differential --traces 50 --seed 0

Each trace draws a layer pattern (full attention with one or two sliding windows, Gemma-3-like
five-to-one, sliding only, full only), windows of 1 to 8 blocks (sometimes not a whole number of
blocks, once in a while a single token), a pool size, a block size, caching on or off and a
watermark. vLLM forms its KV cache groups from the layer specs with its own planner; ours from the
pattern; the groups must agree. Then both caches get the same operations in the scheduler's order
(look up, allocate with chunked prefill, decode, preempt, finish, reset), and after every operation
the runner compares: each request's block table per group, every block's ref count and hash key
(block hash + group), the free queue head to tail, the hash table (so each group's entries), each
lookup's hit blocks per group and hit length, the prefix-cache stats, and the KV events encoded by
vLLM's own classes and encoder on both sides, byte for byte.

``--break RULE`` patches one of our sliding-window rules first (the run must then diverge; the
test uses it to show the comparison catches a wrong rule). It prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

import msgspec
import torch
from vllm.distributed import kv_events as vllm_kv_events
from vllm.utils.hashing import get_hash_fn_by_name
from vllm.v1.core import kv_cache_utils
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager
from vllm.v1.core.kv_cache_planning import _get_kv_cache_groups_uniform_page_size
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, SlidingWindowSpec
from vllm.v1.request import RequestStatus as VllmStatus

from engine.events import KV_EVENT_TYPES
from engine.kv_cache import single_type_manager
from engine.kv_cache.grouped_manager import GroupedKVCacheManager
from engine.kv_cache.kv_cache_spec import kv_cache_groups_for_layers
from engine.request import RequestStatus
from engine.vllm_versions import get_vllm_version
from tests.vllm.differential import STATS_FIELDS, Counts, Mismatch, Pair, Trace, TraceConfig

MAX_MODEL_LEN = 100_000
VERSION = "0.33"
#: Names of the layer mixes the traces draw from.
MIXES = ("full+sliding", "sliding*2+full", "full+two-windows", "gemma3", "sliding-only", "full-only")


def layer_windows(mix: str, rng: random.Random, block_size: int) -> list[int | None]:
    """Per-layer windows (None = full attention) for one mix, windows of 1-8 blocks."""

    def window() -> int:
        blocks = rng.randint(1, 8)
        roll = rng.random()
        if roll < 0.05:
            return 1  # a single token: the group can never be hit
        if roll < 0.3:
            return max(1, blocks * block_size - rng.randrange(block_size))  # not a whole number of blocks
        return blocks * block_size

    w = window()
    if mix == "full+sliding":
        return [None, w]
    if mix == "sliding*2+full":
        return [w, w, None]
    if mix == "full+two-windows":
        return [w, None, window()]
    if mix == "gemma3":
        return [w] * 5 + [None]
    if mix == "sliding-only":
        return [w, w]
    return [None, None]


def vllm_spec(window: int | None, block_size: int) -> Any:
    common = dict(block_size=block_size, num_kv_heads=1, head_size=8, dtype=torch.float32)
    return FullAttentionSpec(**common) if window is None else SlidingWindowSpec(**common, sliding_window=window)


class HybridTrace(Trace):
    """The single-group trace's operations, on several groups."""

    def __init__(self, cfg: TraceConfig, windows: list[int | None], rng: random.Random, counts: Counts) -> None:
        self.version = get_vllm_version(VERSION)
        self.cfg, self.rng, self.counts = cfg, rng, counts
        hash_fn = get_hash_fn_by_name(cfg.hash_algo)
        kv_cache_utils.init_none_hash(hash_fn)
        self.block_hasher = kv_cache_utils.get_request_block_hasher(cfg.block_size, hash_fn)
        layer_specs = {f"layer.{i}": vllm_spec(w, cfg.block_size) for i, w in enumerate(windows)}
        if len(set(layer_specs.values())) > 1:
            their_groups = _get_kv_cache_groups_uniform_page_size(layer_specs)
        else:  # one spec: vLLM puts every layer in one group
            their_groups = [KVCacheGroupSpec(list(layer_specs), next(iter(layer_specs.values())))]
        ours_groups = kv_cache_groups_for_layers(windows, cfg.block_size)
        ours_shape = [(list(g.layer_names), g.kv_cache_spec.sliding_window) for g in ours_groups]
        theirs_shape = [(list(g.layer_names), getattr(g.kv_cache_spec, "sliding_window", None)) for g in their_groups]
        self.check(ours_shape == theirs_shape, f"groups for {windows}: {ours_shape} vs {theirs_shape}")
        self.num_groups = len(ours_groups)
        kv_config = KVCacheConfig(num_blocks=cfg.num_blocks, kv_cache_tensors=[], kv_cache_groups=their_groups)
        self.theirs = VllmKVCacheManager(
            kv_config, max_model_len=MAX_MODEL_LEN, scheduler_block_size=cfg.block_size,
            hash_block_size=cfg.block_size, enable_caching=cfg.enable_caching, log_stats=True,
            enable_kv_cache_events=True, watermark=cfg.watermark,
        )
        self.ours = GroupedKVCacheManager(  # type: ignore[assignment]
            cfg.num_blocks, ours_groups, enable_caching=cfg.enable_caching, hash_algo=cfg.hash_algo,
            vllm_version=VERSION, watermark=cfg.watermark, max_model_len=MAX_MODEL_LEN,
        )
        self.pairs: dict[str, Pair] = {}
        self.stats = dict.fromkeys(STATS_FIELDS, 0)
        self.prefixes = [[rng.randrange(40) for _ in range(rng.randrange(1, 5 * cfg.block_size))] for _ in range(3)]
        self.next_id = 0
        self.encoder = msgspec.msgpack.Encoder()

    def compare(self, where: str) -> None:
        ours_pool, theirs_pool = self.ours.block_pool, self.theirs.block_pool
        for block, other in zip(ours_pool.blocks[1:], theirs_pool.blocks[1:]):
            self.check(block.ref_cnt == other.ref_cnt, f"{where}: ref_cnt of block {block.block_id}: {block.ref_cnt} vs {other.ref_cnt}")
            self.check(block.block_hash == other.block_hash, f"{where}: hash key of block {block.block_id}")
        ours_queue = [b.block_id for b in ours_pool.free_block_queue.get_all_free_blocks()]
        theirs_queue = [b.block_id for b in theirs_pool.free_block_queue.get_all_free_blocks()]
        self.check(ours_queue == theirs_queue, f"{where}: free queue {ours_queue} vs {theirs_queue}")
        ours_table = {key: [b.block_id for b in blocks] for key, blocks in ours_pool.cached_block_hash_to_block.items()}
        theirs_table = {}
        for key, entry in theirs_pool.cached_block_hash_to_block._cache.items():
            theirs_table[key] = [entry.block_id] if isinstance(entry, kv_cache_utils.KVCacheBlock) else list(entry)
        self.check(ours_table == theirs_table, f"{where}: hash table")
        for rid, pair in self.pairs.items():
            if pair.allocated and not pair.finished:
                ours_ids = list(self.ours.get_block_ids(rid))
                theirs_ids = [list(ids) for ids in self.theirs.get_block_ids(rid)]
                self.check(ours_ids == theirs_ids, f"{where}: block tables of {rid}: {ours_ids} vs {theirs_ids}")
        self.drain_stats()
        ours_stats = {name: getattr(self.ours.prefix_cache_stats, name) for name in STATS_FIELDS}
        self.check(ours_stats == self.stats, f"{where}: stats {ours_stats} vs {self.stats}")
        self.compare_events(where)
        self.counts.null_slots += sum(b.is_null for p in self.pairs.values() if p.allocated and not p.finished
                                      for blocks in self.ours.get_blocks(p.ours.request_id) for b in blocks)

    def compare_events(self, where: str) -> None:
        theirs = self.theirs.take_events()
        ours = [e for e in self.ours.take_events() if isinstance(e, KV_EVENT_TYPES)]
        as_vllm = [getattr(vllm_kv_events, type(e).__name__)(**e.published()) for e in ours]
        ours_bytes = self.encoder.encode(vllm_kv_events.KVEventBatch(ts=0.0, events=as_vllm))
        theirs_bytes = self.encoder.encode(vllm_kv_events.KVEventBatch(ts=0.0, events=theirs))
        self.check(ours_bytes == theirs_bytes, f"{where}: KV events\n ours:   {as_vllm}\n theirs: {theirs}")
        self.counts.events += len(theirs)
        self.counts.evictions += sum(isinstance(e, vllm_kv_events.BlockRemoved) for e in theirs)
        self.counts.sliding_stored += sum(
            isinstance(e, vllm_kv_events.BlockStored) and e.kv_cache_spec_kind == "sliding_window" for e in theirs
        )

    def count_window_cuts(self, pair: Pair, num_hits: int) -> None:
        """Count lookups where the full-attention groups alone would have hit more than all groups agree on."""
        coordinator = self.ours.coordinator
        full_ids = [i for i, g in enumerate(coordinator.kv_cache_groups) if g.kv_cache_spec.sliding_window is None]
        if not full_ids or len(full_ids) == coordinator.num_groups or not self.ours.prefix_cache_lookup_enabled(pair.ours):
            return
        _, full_hit = single_type_manager.FullAttentionManager.find_longest_cache_hit(
            pair.ours.block_hashes, pair.ours.num_tokens - 1, full_ids, coordinator.block_pool,
            coordinator.kv_cache_groups[full_ids[0]].kv_cache_spec,
        )
        self.counts.hits_cut_by_a_window += full_hit > num_hits
        self.counts.sliding_hits += num_hits > 0

    def run(self, num_ops: int) -> None:
        """The single-group trace's mix, with fewer resets (they would empty the cache too often)."""
        for index in range(num_ops):
            running, waiting = self.running(), self.waiting()
            roll = self.rng.random()
            if roll < 0.03 and (running or waiting):
                kind = "reset"
                self.reset()
            elif roll < 0.3 or not (running or waiting):
                kind, pair = "admit", self.new_request()
                self.admit(pair)
            elif (roll < 0.4 and waiting) or not running:
                kind, pair = "readmit", self.rng.choice(waiting)
                self.admit(pair)
            elif roll < 0.78:
                kind = "step"
                self.step(self.rng.choice(running))
            elif roll < 0.92:
                kind = "finish"
                self.finish(self.rng.choice(running))
            else:
                kind = "preempt"
                self.preempt(self.rng.choice(running))
            self.counts.op(kind)
            self.compare(f"op {index} ({kind})")

    def admit(self, pair: Pair) -> None:
        rid = pair.ours.request_id
        hits, num_hits = self.ours.get_computed_blocks(pair.ours)
        result = self.theirs.get_computed_blocks(pair.theirs)
        their_blocks, their_num = result[0], result[1]
        ours_ids = [[b.block_id for b in group] for group in hits]
        theirs_ids = [[b.block_id for b in group] for group in their_blocks.blocks]
        self.check(ours_ids == theirs_ids and num_hits == their_num,
                   f"admit {rid}: computed blocks {ours_ids} ({num_hits}) vs {theirs_ids} ({their_num})")
        self.count_window_cuts(pair, num_hits)
        remaining = pair.ours.num_tokens - num_hits
        chunk = remaining if self.rng.random() < 0.5 else self.rng.randrange(1, remaining + 1)
        has_scheduled = bool(self.running()) if self.rng.random() < 0.8 else self.rng.random() < 0.5
        ours = self.ours.allocate_slots(pair.ours, chunk, num_hits, hits, has_scheduled_reqs=has_scheduled)
        theirs = self.theirs.allocate_slots(pair.theirs, chunk, their_num, their_blocks, has_scheduled_reqs=has_scheduled)
        self.check((ours is None) == (theirs is None), f"admit {rid}: allocated? ours {ours is not None}, vLLM {theirs is not None}")
        if ours is None:
            self.counts.watermark_refusals += bool(self.ours.watermark_blocks and has_scheduled)
            return
        self.check([[b.block_id for b in g] for g in ours] == [list(ids) for ids in theirs.get_block_ids()], f"admit {rid}: new blocks")
        self.theirs.record_prefix_cache_stats(pair.theirs, their_num)  # vLLM's scheduler does this at admission
        self.counts.hit_tokens += num_hits
        pair.allocated = True
        for request, status in ((pair.ours, RequestStatus.RUNNING), (pair.theirs, VllmStatus.RUNNING)):
            request.status = status
            request.num_computed_tokens = num_hits + chunk

    def step(self, pair: Pair) -> None:
        ours_req, theirs_req = pair.ours, pair.theirs
        if ours_req.num_computed_tokens >= ours_req.num_tokens:
            token = self.rng.choice([self.rng.randrange(40), ours_req.all_token_ids[-1]])
            ours_req.append_output_token_ids(token)
            theirs_req.append_output_token_ids(token)
        remaining = ours_req.num_tokens - ours_req.num_computed_tokens
        chunk = remaining if self.rng.random() < 0.6 else self.rng.randrange(1, remaining + 1)
        ours = self.ours.allocate_slots(ours_req, chunk)
        theirs = self.theirs.allocate_slots(theirs_req, chunk)
        self.check((ours is None) == (theirs is None), f"step {ours_req.request_id}: allocated?")
        if ours is None:
            self.preempt(pair)
            return
        self.check([[b.block_id for b in g] for g in ours] == [list(ids) for ids in theirs.get_block_ids()],
                   f"step {ours_req.request_id}: new blocks")
        ours_req.num_computed_tokens += chunk
        theirs_req.num_computed_tokens += chunk


BREAKS = {
    # The window's edge off by one token: one block too many released.
    "skip-one-more": lambda: setattr(
        single_type_manager.SlidingWindowManager, "get_num_skipped_tokens",
        lambda self, n: max(0, n - self.sliding_window + 2),
    ),
    # A hit needs the whole window cached, not the window before the next token.
    "window-blocks": lambda: setattr(
        single_type_manager.SlidingWindowManager, "contiguous_blocks_for_hit",
        staticmethod(lambda window, block_size: -(-window // block_size)),
    ),
    # Released blocks left in the table instead of the null block (nothing freed).
    "no-release": lambda: setattr(
        single_type_manager.SlidingWindowManager, "remove_skipped_blocks", lambda self, rid, n: [],
    ),
}


def random_config(rng: random.Random) -> tuple[TraceConfig, str, list[int | None]]:
    block_size = rng.choice([1, 2, 4, 4, 8, 16])
    mix = rng.choice(MIXES)
    windows = layer_windows(mix, rng, block_size)
    cfg = TraceConfig(
        num_blocks=rng.randrange(8, 81),
        block_size=block_size,
        hash_algo=rng.choice(("sha256", "sha256_cbor", "xxhash")),
        enable_caching=rng.random() < 0.8,
        watermark=rng.choice([0.0, 0.0, 0.05, 0.1]),
        env_seed="0",
    )
    return cfg, mix, windows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50)
    parser.add_argument("--ops", type=int, default=120, help="operations per trace")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--break", dest="broken", choices=sorted(BREAKS), default=None)
    args = parser.parse_args(argv)
    import os

    import vllm

    if vllm.__version__ != get_vllm_version(VERSION).wheel:
        print(json.dumps({"error": f"this venv has vLLM {vllm.__version__}, not {get_vllm_version(VERSION).wheel}"}))
        return 2
    os.environ["PYTHONHASHSEED"] = "0"
    if args.broken:
        BREAKS[args.broken]()
    counts = Counts()
    extra = {"null_slots": 0, "sliding_stored": 0, "hits_cut_by_a_window": 0, "sliding_hits": 0}
    for name, value in extra.items():
        setattr(counts, name, value)
    mixes: dict[str, int] = {}
    windows_seen: set[int] = set()
    for index in range(args.traces):
        rng = random.Random(f"hybrid/{args.seed}/{index}")
        cfg, mix, windows = random_config(rng)
        mixes[mix] = mixes.get(mix, 0) + 1
        windows_seen.update(w for w in windows if w is not None)
        counts.caching_off_traces += not cfg.enable_caching
        counts.watermark_traces += cfg.watermark > 0
        try:
            HybridTrace(cfg, windows, rng, counts).run(args.ops)
        except Mismatch as exc:
            print(json.dumps({"error": f"trace {index} {mix} {windows} {cfg}: {exc}", **counts.__dict__}))
            return 1
        counts.traces += 1
    print(json.dumps({"vllm": vllm.__version__, **counts.__dict__, "mixes": mixes,
                      "windows": sorted(windows_seen)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
