"""The two-tier trace replay: device alone equals the one-tier replay; a host tier only adds hits."""

from __future__ import annotations

from teaching.traces.loader import load_trace
from teaching.traces.replay import PreparedTrace, replay
from teaching.traces.sources import SAMPLE_TRACE
from teaching.traces.two_tier import hit_rate_surface, replay_two_tier
from viz.two_tier import surface_figure


def sample(n: int = 200) -> PreparedTrace:
    return PreparedTrace(load_trace(SAMPLE_TRACE).head(n))


def test_no_host_tier_is_the_one_tier_replay():
    prepared = sample()
    for device in (48, 300):
        assert replay_two_tier(prepared, device, 0).token_hit_rate == replay(prepared, "vllm", device).total.token_hit_rate


def test_a_host_tier_finds_what_the_small_device_lost_and_never_beats_the_ceiling():
    prepared = sample()
    alone, tiered = replay_two_tier(prepared, 48, 0), replay_two_tier(prepared, 48, 4096)
    assert tiered.host_hit_tokens > 0 and tiered.token_hit_rate > alone.token_hit_rate
    assert tiered.token_hit_rate <= replay(prepared, "vllm", 0).total.token_hit_rate  # unbounded device


def test_surface_figure_has_one_cell_per_pair():
    surface = hit_rate_surface(sample(60), [48, 96], [0, 1024, 4096])
    fig = surface_figure(surface)
    assert len(fig.data[0].z) == 3 and len(fig.data[0].z[0]) == 2
