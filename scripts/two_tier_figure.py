"""Render docs/offload-surface.png: the token hit rate over device x host capacity on the Mooncake sample.

    python -m scripts.two_tier_figure [FILE]    # default: the sample trace in data/traces

Replays the trace once per (device, host) pair through the real KVCacheManager and the engine's
CPUOffloadingManager (LRU), photographs the heatmap in Debian's chromium, and prints it as a table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scripts.trace_figures import photograph
from teaching.traces.loader import load_trace
from teaching.traces.replay import PreparedTrace
from teaching.traces.sources import SAMPLE_TRACE
from teaching.traces.two_tier import hit_rate_surface
from viz.two_tier import surface_figure, tokens_label

DEVICE = [32, 64, 128, 256, 512, 1024]
HOST = [0, 1024, 2048, 4096, 8192, 16384]


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE_TRACE
    prepared = PreparedTrace(load_trace(path))
    surface = hit_rate_surface(prepared, DEVICE, HOST)
    title = f"{path.stem}: {len(prepared.trace):,} requests, device pool x host tier (LRU)"
    photograph({"offload-surface": surface_figure(surface, title=title)})
    print("| host \\ device | " + " | ".join(tokens_label(d) for d in DEVICE) + " |")
    print("|---:|" + "---:|" * len(DEVICE))
    for host, row in zip(HOST, surface.results):
        print(f"| {tokens_label(host)} | " + " | ".join(f"{100 * c.token_hit_rate:.1f}%" for c in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
