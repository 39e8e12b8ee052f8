"""``prefixlab trace replay|curve``: production traces through the real prefix cache, from a shell.

``replay`` prints one run's counts (``--json`` for the machine-readable form);
``curve`` prints the miss-ratio curve as a Markdown table (policies x capacities).
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.errors import PrefixLabError
from teaching.traces.loader import TRACE_BLOCK_SIZE, load_trace
from teaching.traces.policies import POLICIES
from teaching.traces.replay import DEFAULT_TPOT_MS, MODES, PreparedTrace, replay
from teaching.traces.routing import DEFAULT_PREFIX_WEIGHT, ROUTERS


def add_trace_parser(commands: argparse._SubParsersAction) -> None:
    trace = commands.add_parser("trace", help="replay a Mooncake-format trace through the real prefix cache")
    sub = trace.add_subparsers(dest="trace_command", required=True)
    rep = sub.add_parser("replay", help="one policy at one capacity; prints hit counts")
    rep.add_argument("file", help="a JSON-lines trace (timestamp, input_length, output_length, hash_ids)")
    rep.add_argument("--policy", choices=list(POLICIES), default="vllm")
    rep.add_argument("--capacity-blocks", type=int, default=0,
                     help=f"usable {TRACE_BLOCK_SIZE}-token blocks per replica; 0 = unbounded (default)")
    rep.add_argument("--replicas", type=int, default=1)
    rep.add_argument("--router", choices=list(ROUTERS), default="round-robin")
    rep.add_argument("--prefix-weight", type=float, default=DEFAULT_PREFIX_WEIGHT, help="blend router's prefix weight")
    rep.add_argument("--seed", type=int, default=0, help="for the random router")
    rep.add_argument("--json", action="store_true", help="print one JSON object")
    for p in (rep, cur := sub.add_parser("curve", help="every policy at 8 capacities (10^4..10^8 tokens)")):
        p.add_argument("--mode", choices=list(MODES), default="sequential",
                       help="sequential: one request at a time (default); overlap: timestamps + output lengths")
        p.add_argument("--tpot-ms", type=float, default=DEFAULT_TPOT_MS,
                       help="overlap mode: decode ms per output token (how long a request holds its blocks)")
    cur.add_argument("file")


def run_trace(args: argparse.Namespace) -> int:
    try:
        prepared = PreparedTrace(load_trace(args.file))
        if args.trace_command == "curve":
            return _curve(prepared, args)
        result = replay(prepared, args.policy, args.capacity_blocks, mode=args.mode, replicas=args.replicas,
                        router=args.router, tpot_ms=args.tpot_ms, seed=args.seed, prefix_weight=args.prefix_weight)
    except PrefixLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = result.as_json()
    if args.json:
        print(json.dumps(out))
        return 0
    for key, value in out.items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


def _curve(prepared: PreparedTrace, args: argparse.Namespace) -> int:
    from teaching.traces.curve import miss_ratio_curve

    curve = miss_ratio_curve(prepared, mode=args.mode,
                             progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr, flush=True))
    print("| capacity (tokens) | " + " | ".join(POLICIES.values()) + " |")
    print("|---:|" + "---:|" * len(POLICIES))
    for i, blocks in enumerate(curve.capacities):
        rates = " | ".join(f"{curve.results[p][i].total.token_hit_rate:.1%}" for p in POLICIES)
        print(f"| {blocks * TRACE_BLOCK_SIZE:,} | {rates} |")
    print(f"| unbounded (ceiling) | {curve.ceiling.total.token_hit_rate:.1%} |")
    return 0
