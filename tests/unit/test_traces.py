"""Production traces through the real KVCacheManager: loader errors, hit counts, policies, routers, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.hashing import BlockHash
from prefixlab.cli import main
from teaching.traces.curve import capacity_blocks
from teaching.traces.loader import MAX_TRACE_BYTES, TraceError, load_trace, parse_trace
from teaching.traces.policies import POLICIES, LeafEvictingBlockPool
from teaching.traces.replay import PreparedTrace, replay
from teaching.traces.sources import CONVERSATION, ROOT, SAMPLE_TRACE, shared_traces_dir

LINE = '{"timestamp": %s, "input_length": %d, "output_length": %d, "hash_ids": %s}'


def line(ts: float, length: int, ids: list[int], out: int = 10) -> str:
    return LINE % (ts, length, out, json.dumps(ids))


@pytest.fixture(scope="module")
def sample() -> PreparedTrace:
    return PreparedTrace(load_trace(SAMPLE_TRACE))


def direct_count(path) -> tuple[int, int, int]:
    """(requests, blocks, hit blocks) of an unbounded cache, counted from the raw file alone.

    A block is cached once an earlier request had it as a *full* block of its prompt; a
    request hits the longest run of cached blocks from its start, but never the block
    holding its last token. Prefixes are compared as tuples of ids, with no hashing.
    """
    rows = [json.loads(text) for text in open(path) if text.strip()]
    rows.sort(key=lambda r: r["timestamp"])
    seen: set[tuple[int, ...]] = set()
    blocks = hits = 0
    for row in rows:
        ids, length = row["hash_ids"], row["input_length"]
        blocks += len(ids)
        n = 0
        while n < (length - 1) // 512 and tuple(ids[: n + 1]) in seen:
            n += 1
        hits += n
        for i in range(length // 512):
            seen.add(tuple(ids[: i + 1]))
    return len(rows), blocks, hits


# -- loader ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ('{"timestamp": 0, "input_length": 5}', "line 1: Object missing required field `output_length`"),
    ("not json", "line 1: not a JSON object"),
    (LINE % (0, 0, 1, "[1]"), "line 1: Expected `int` >= 1 - at `$.input_length`"),
    (LINE % (0, 10, -1, "[1]"), "line 1: Expected `int` >= 0 - at `$.output_length`"),
    (LINE % (-5, 10, 1, "[1]"), "line 1: Expected `float` >= 0"),
    (LINE % (0, 10, 1, '["a"]'), "line 1: Expected `int`, got `str` - at `$.hash_ids[0]`"),
    (LINE % (0, 10, 1, "[]"), "line 1: Expected `array` of length >= 1"),
    (LINE % (0, 1000, 1, "[1]"), "line 1: 1 hash_ids for input_length 1000; blocks of 512 tokens need 2"),
    ("", "has no requests"),
])
def test_bad_lines_are_named_with_their_problem(text, message) -> None:
    with pytest.raises(TraceError) as info:
        parse_trace(text)
    assert message in str(info.value)


def test_every_bad_line_is_reported_and_good_ones_kept_in_time_order(tmp_path) -> None:
    good = [line(5, 600, [1, 2]), line(1, 100, [3])]
    with pytest.raises(TraceError, match=r"2 bad line\(s\)") as info:
        parse_trace("\n".join([good[0], "{", good[1], LINE % (0, 10, 1, "[1, 2]")]))
    assert "line 2:" in str(info.value) and "line 4:" in str(info.value)
    trace = parse_trace("\n".join(good) + "\n\n")
    assert [r.timestamp for r in trace.records] == [1, 5]  # sorted by arrival
    assert trace.num_blocks == 3 and trace.num_input_tokens == 700


def test_size_limits(tmp_path) -> None:
    with pytest.raises(TraceError, match="MiB; the limit is"):
        parse_trace(b" " * (MAX_TRACE_BYTES + 1))
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as handle:
        handle.truncate(MAX_TRACE_BYTES + 1)  # sparse: checked by size before reading
    with pytest.raises(TraceError, match="the limit is"):
        load_trace(big)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.jsonl")
    with pytest.raises(TraceError, match="Expected `array` of length <= 2048"):
        parse_trace(LINE % (0, 512 * 3000, 1, json.dumps(list(range(3000)))))


# -- hit counts -------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("mode", ["sequential", "overlap"])
def test_unbounded_cache_hits_what_a_direct_count_of_the_file_says(sample, policy, mode) -> None:
    requests, blocks, hits = direct_count(SAMPLE_TRACE)
    result = replay(sample, policy, 0, mode=mode).total
    assert (result.requests, result.blocks, result.hit_blocks, result.rejected) == (requests, blocks, hits, 0)
    assert hits > 0
    assert result.block_hit_rate == hits / blocks
    assert result.token_hit_rate == hits * 512 / sum(r.input_length for r in sample.trace.records)


def test_unbounded_full_conversation_trace_matches_the_direct_count() -> None:
    path = shared_traces_dir() / CONVERSATION
    if not path.exists():
        pytest.skip(f"the full conversation trace is not beside the repository ({path})")
    requests, blocks, hits = direct_count(path)
    result = replay(load_trace(path), "vllm", 0).total
    assert (result.requests, result.blocks, result.hit_blocks) == (requests, blocks, hits) == (12031, 288500, hits)


def test_last_token_block_and_partial_blocks_are_never_hit() -> None:
    trace = parse_trace("\n".join([line(0, 1024, [1, 2]), line(1, 1024, [1, 2]), line(2, 1030, [1, 2, 3]),
                                   line(3, 1100, [1, 2, 4]), line(4, 1600, [1, 2, 3, 5])]))
    for policy in POLICIES:
        result = replay(trace, policy, 0)
        # r1: block 2 holds its last token -> 1 hit; r2, r3: both full blocks; r4: its block 3 was
        # only a partial block in r2, so never cached -> 2 hits.
        assert result.total.hit_blocks == 0 + 1 + 2 + 2 + 2


# -- policies across capacities ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_curve(sample) -> dict[str, list[float]]:
    return {policy: [replay(sample, policy, blocks).total.token_hit_rate for blocks in capacity_blocks()]
            for policy in POLICIES}


@pytest.mark.parametrize("policy", list(POLICIES))
def test_hit_rate_rises_with_capacity(sample_curve, policy) -> None:
    rates = sample_curve[policy]
    assert all(a <= b for a, b in zip(rates, rates[1:])), rates
    assert rates[0] < rates[-1]


def test_belady_is_never_below_the_others(sample_curve) -> None:
    for i, best in enumerate(sample_curve["belady"]):
        assert all(best >= sample_curve[p][i] for p in POLICIES), (i, sample_curve)
    assert any(b > v for b, v in zip(sample_curve["belady"], sample_curve["vllm"]))  # and strictly above somewhere


def test_belady_bound_holds_on_a_longer_stretch_of_the_full_trace() -> None:
    path = shared_traces_dir() / CONVERSATION
    if not path.exists():
        pytest.skip(f"the full conversation trace is not beside the repository ({path})")
    prepared = PreparedTrace(load_trace(path).head(3000))
    for blocks in (50, 400, 3000):
        rates = {p: replay(prepared, p, blocks).total.hit_blocks for p in POLICIES}
        assert rates["belady"] >= max(rates.values()), (blocks, rates)


def test_leaf_pools_keep_whole_prefixes_and_classic_differs_from_vllm(sample) -> None:
    """After a replay with evictions, every cached block's parent is cached (radix, Belady)."""
    from teaching.traces.policies import make_manager

    for policy in ("radix", "belady"):
        manager = make_manager(policy, 301, belady=sample.belady)
        for index, request in enumerate(sample.requests):
            pool = manager.block_pool
            assert isinstance(pool, LeafEvictingBlockPool)
            if sample.needed_blocks[index] > 300:
                continue
            if policy == "belady":
                sample.belady.advance(index)
                pool.reprioritize(sample.eligible[index])
            hits, n = manager.get_computed_blocks(request)
            assert manager.allocate_slots(request, request.num_tokens + request.record.output_length - n, n, hits)
            manager.free(request)
        cached: set[BlockHash] = {h for h, _ in manager.block_pool.cached_block_hash_to_block.items()}
        parents = {chain[i]: chain[i - 1] for chain in sample.chains for i in range(1, len(chain))}
        assert cached and all(parents.get(h) in cached for h in cached if h in parents)
    # Where the rules differ: classic queues hashless blocks behind cached ones and loses some; with
    # overlapping requests, a lookup refreshes a radix node while vLLM's recency is the last free.
    assert replay(sample, "classic", 3771).total.hit_blocks < replay(sample, "vllm", 3771).total.hit_blocks
    overlap = {p: replay(sample, p, 3771, mode="overlap").total.hit_blocks for p in POLICIES}
    assert overlap["radix"] != overlap["vllm"] and overlap["belady"] >= max(overlap.values())


def test_the_least_recently_matched_leaf_goes_first() -> None:
    """Prefixes A=[1,2] and B=[3,4]; A is matched again; a new prefix C needs one cached block."""
    trace = parse_trace("\n".join([line(0, 1100, [1, 2, 10], 0), line(1, 1100, [3, 4, 11], 0),
                                   line(2, 1100, [1, 2, 12], 0), line(3, 1100, [5, 6, 13], 0),
                                   line(4, 1100, [1, 2, 14], 0)]))
    # 6 blocks: r3 takes the two hashless blocks and must evict one cached leaf: B's tail (4),
    # matched longest ago, not A's tail (2), which r4 then hits again.
    for policy in POLICIES:
        assert replay(trace, policy, 6).total.hit_blocks == 2 + 2, policy


def test_requests_bigger_than_the_pool_are_rejected_not_crashed(sample) -> None:
    result = replay(sample, "radix", 5).total
    assert result.rejected == sum(1 for n in sample.needed_blocks if n > 5) > 0
    assert result.requests == len(sample.requests)


# -- replicas -----------------------------------------------------------------------------------------
def test_routers_trade_hit_rate_for_balance(sample) -> None:
    runs = {router: replay(sample, "vllm", 1000, replicas=4, router=router)
            for router in ("random", "round-robin", "least-loaded", "prefix", "blend")}
    rr = runs["round-robin"]
    assert [c.requests for c in rr.replicas] == [125] * 4
    assert rr.load_balance()["requests_max_over_mean"] == 1.0
    # Every request shares block 0 (a system prompt): pure prefix routing piles them all on one replica.
    assert runs["prefix"].load_balance()["requests_max_over_mean"] == 4.0
    # The blend keeps the load even and still follows the cache: more hits than any oblivious router.
    assert runs["blend"].load_balance()["requests_max_over_mean"] < 1.1
    assert runs["blend"].total.hit_blocks > max(runs[r].total.hit_blocks for r in ("random", "round-robin",
                                                                                     "least-loaded"))
    for run in runs.values():
        assert sum(c.requests for c in run.replicas) == run.total.requests == 500
    assert replay(sample, "vllm", 1000, replicas=4, router="random", seed=1).replicas != runs["random"].replicas


# -- CLI ------------------------------------------------------------------------------------------------
def test_cli_prints_the_json(capsys) -> None:
    assert main(["trace", "replay", str(SAMPLE_TRACE), "--policy", "belady", "--capacity-blocks", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    requests, blocks, hits = direct_count(SAMPLE_TRACE)
    assert {k: out[k] for k in ("requests", "blocks", "hit_blocks")} == {
        "requests": requests, "blocks": blocks, "hit_blocks": hits}
    assert out["block_hit_rate"] == pytest.approx(hits / blocks) and 0 < out["token_hit_rate"] < 1


def test_cli_command_with_replicas_and_errors(tmp_path) -> None:
    command = [sys.executable, "-m", "prefixlab.cli", "trace", "replay", str(SAMPLE_TRACE), "--capacity-blocks", "300",
               "--replicas", "3", "--router", "blend", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    out = json.loads(done.stdout)
    assert out["router"] == "blend" and len(out["replicas"]) == 3 and out["requests"] == 500
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line(0, 10, [1]) + "\n{oops\n")
    done = subprocess.run([*command[:5], str(bad), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "line 2: not a JSON object" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([*command, "--policy", "belady"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "Belady needs" in done.stderr
