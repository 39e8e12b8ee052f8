"""The Production traces page's logic without widgets: pick a trace, bound the work, run it, keep it.

A trace is chosen among the shipped sample, the full traces beside the repository, or an
uploaded file. Uploads are validated like any trace, and the page refuses traces whose
curve would keep a shared server busy for minutes (the CLI has no such limit). The page keeps
one :class:`TracesPage` in session state: the replays it ran, per trace and setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from teaching.traces.curve import Curve, miss_ratio_curve
from teaching.traces.loader import TRACE_BLOCK_SIZE, Trace, TraceError, load_trace, parse_trace
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


#: Small traces replay as soon as they are picked; bigger ones wait for the button.
AUTO_RUN_BLOCKS = 20_000
#: What one router comparison is keyed by: trace, timing mode, replicas, blocks per replica, policy.
RouteSetting = tuple[str, str, int, int, str]


@dataclass
class TracesPage:
    """One browser's Production traces page: the replays it ran, kept per trace and setting, so a
    redraw (or a visit to another page and back) shows them without replaying."""

    mode: str = "sequential"  # teaching.traces.replay.MODES: one request at a time, or overlapping
    replicas: int = 4  # behind a router
    blocks_per_replica: int = 2_000
    policy: str = "vllm"  # the replicas' eviction policy
    curves: dict[tuple[str, str], Curve] = field(default_factory=dict)  # (trace key, mode) -> curve
    routes: dict[RouteSetting, dict[str, ReplayResult]] = field(default_factory=dict)

    def wants_curve(self, key: str, prepared: PreparedTrace, mode: str, asked: bool) -> bool:
        """Replay now: none kept for this trace and mode, and asked for (or the trace is small)."""
        return (key, mode) not in self.curves and (asked or prepared.trace.num_blocks <= AUTO_RUN_BLOCKS)

    def replay_curve(self, key: str, prepared: PreparedTrace, mode: str, progress: Progress | None = None) -> Curve:
        self.curves[(key, mode)] = run_curve(prepared, mode, progress=progress)
        return self.curves[(key, mode)]

    def route_setting(self, key: str) -> RouteSetting:
        """The router comparison the page's settings ask for, on trace ``key``."""
        return key, self.mode, self.replicas, self.blocks_per_replica, self.policy

    def route(self, setting: RouteSetting, prepared: PreparedTrace | None = None,
              progress: Progress | None = None) -> dict[str, ReplayResult] | None:
        """Every router's replay for ``setting``: run now when ``prepared`` is given, else the kept one."""
        if prepared is not None:
            _, mode, replicas, blocks, policy = setting
            self.routes[setting] = run_routers(prepared, policy, blocks, replicas, mode, progress=progress)
        return self.routes.get(setting)


def curve_rows(curve: Curve) -> list[dict[str, object]]:
    """Hit rate per capacity and policy, then the unbounded cache's ceiling."""
    rows: list[dict[str, object]] = []
    for i, blocks in enumerate(curve.capacities):
        row: dict[str, object] = {"capacity (tokens)": f"{blocks * TRACE_BLOCK_SIZE:,}", "blocks": blocks}
        row.update({POLICIES[p]: f"{curve.results[p][i].total.token_hit_rate:.1%}" for p in curve.results})
        rows.append(row)
    rows.append({"capacity (tokens)": "unbounded", "blocks": None,
                 **{POLICIES[p]: f"{curve.ceiling.total.token_hit_rate:.1%}" for p in curve.results}})
    return rows


def router_rows(results: dict[str, ReplayResult]) -> list[dict[str, object]]:
    """Each router's hit rate and how evenly it spread the requests and the prefill."""
    return [{
        "router": name, "hit rate": f"{r.total.token_hit_rate:.1%}",
        "requests per replica": " / ".join(str(c.requests) for c in r.replicas),
        "busiest / mean prefill": f"{r.load_balance()['computed_tokens_max_over_mean']:.2f}",
    } for name, r in results.items()]
