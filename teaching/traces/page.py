"""The Production traces page's logic without widgets: pick a trace, bound the work, run it.

A trace is chosen among the shipped sample, the full traces beside the repository, or an
uploaded file. Uploads are validated like any trace, and the page refuses traces whose
curve would keep a shared server busy for minutes (the CLI has no such limit).
"""

from __future__ import annotations

from pathlib import Path

from teaching.traces.curve import Curve, miss_ratio_curve
from teaching.traces.loader import Trace, TraceError, load_trace, parse_trace
from teaching.traces.policies import POLICIES
from teaching.traces.replay import PreparedTrace, Progress, ReplayResult, replay
from teaching.traces.routing import ROUTERS

#: Most block lookups in a trace the page replays (the full conversation trace has ~290k).
MAX_PAGE_BLOCKS = 400_000
#: Largest upload the page accepts, in bytes (the full conversation trace is ~3 MB).
MAX_UPLOAD_BYTES = 8 * 1024 * 1024
#: Replicas the page lets a student simulate.
MAX_PAGE_REPLICAS = 8
#: Routers on the page, in the order shown.
PAGE_ROUTERS = list(ROUTERS)


def check_page_size(trace: Trace) -> Trace:
    if trace.num_blocks > MAX_PAGE_BLOCKS:
        raise TraceError(f"{trace.name} has {trace.num_blocks:,} block lookups; this page replays at most "
                         f"{MAX_PAGE_BLOCKS:,}. Use `prefixlab trace curve FILE` for bigger traces.")
    return trace


def load_file(path: Path) -> Trace:
    return check_page_size(load_trace(path))


def load_upload(name: str, data: bytes) -> Trace:
    if len(data) > MAX_UPLOAD_BYTES:
        raise TraceError(f"{name} is {len(data) / 2**20:.1f} MiB; uploads are limited to "
                         f"{MAX_UPLOAD_BYTES // 2**20} MiB here.")
    return check_page_size(parse_trace(data, name))


def run_curve(prepared: PreparedTrace, mode: str, progress: Progress | None = None) -> Curve:
    """Every policy at every capacity of the default grid (10^4 .. 10^8 tokens)."""
    return miss_ratio_curve(prepared, list(POLICIES), mode=mode, progress=progress)


def run_routers(prepared: PreparedTrace, policy: str, capacity_blocks: int, replicas: int, mode: str,
                progress: Progress | None = None) -> dict[str, ReplayResult]:
    """The same trace over ``replicas`` engines under each router."""
    results = {}
    for i, router in enumerate(PAGE_ROUTERS):
        if progress:
            progress(i / len(PAGE_ROUTERS), f"router {router}")
        results[router] = replay(prepared, policy, capacity_blocks, mode=mode, replicas=replicas, router=router)
    return results
