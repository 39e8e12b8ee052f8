"""What the two-tier view shows after each line of a scenario: the device pool and the host tier.

Read off the event log only (as every view is): the device side from the timeline snapshot (each
block's hash, ref count, whether it is free), the host side from the KV events whose ``medium`` is
"CPU" (a hash enters when its copy lands, leaves when the tier evicts it). Between two lines, the
blocks that *spilled* (entered the tier) and those *loaded back* (a request's cached tokens that
the device pool did not supply) are named, so a student can watch them go and come back. The player
draws the device pool; :func:`host_panel` gives it the host tier to draw below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.events import MEDIUM_GPU, BlockRemoved, BlockStored, BlocksTouched, RequestScheduled
from engine.hashing import BlockHash, short_hash
from engine.timeline import block_contents
from teaching.pages.playback import HostBlock, HostPanel
from teaching.scenarios.scenario import ScenarioRun


@dataclass
class DeviceBlock:
    block_id: int
    words: str  # the block's tokens as words, "" when it holds no hash
    ref_cnt: int


@dataclass
class TierView:
    line: str
    device: list[DeviceBlock]
    host: list[str]  # the tier's blocks as words, oldest store first
    spilled: list[str] = field(default_factory=list)
    evicted_from_host: list[str] = field(default_factory=list)
    loaded: dict[str, int] = field(default_factory=dict)  # request -> tokens loaded from the tier


def two_tier_views(run: ScenarioRun) -> list[TierView]:
    """One view per scenario line (after it ran)."""
    events = run.events
    contents = block_contents(events)

    def words(block_hash: BlockHash) -> str:
        return " ".join(run.token_text(t) for t in contents.get(block_hash, [])) or short_hash(block_hash)

    timeline = run.engine.timeline()
    host: dict[BlockHash, None] = {}
    views: list[TierView] = []
    touched: dict[str, int] = {}
    for span in run.spans:
        spilled, gone, loaded = [], [], {}
        for event in events[span.start:span.end]:
            if isinstance(event, BlockStored) and event.medium != MEDIUM_GPU:
                for h in event.block_hashes:
                    host[h] = None
                    spilled.append(words(h))
            elif isinstance(event, BlockRemoved) and event.medium != MEDIUM_GPU:
                for h in event.block_hashes:
                    host.pop(h, None)
                    gone.append(words(h))
            elif isinstance(event, BlocksTouched):
                touched[event.request_id] = len(event.block_ids) * run.block_size
            elif isinstance(event, RequestScheduled) and event.num_computed_tokens and \
                    event.num_computed_tokens > touched.get(event.request_id, 0) and event.request_id not in loaded:
                # admitted with more computed tokens than the device cache gave it: the rest came from the tier
                request = run.engine.get_request(event.request_id)
                if request.num_cached_tokens == event.num_computed_tokens:
                    loaded[event.request_id] = event.num_computed_tokens - touched.get(event.request_id, 0)
        snapshot = timeline.state_at(span.end)
        device = [DeviceBlock(b, words(held) if (held := snapshot.block_hash[b]) is not None else "", snapshot.ref_cnt[b])
                  for b in range(1, snapshot.num_blocks)]
        views.append(TierView(span.action.source, device, [words(h) for h in host], spilled, gone, loaded))
    return views


def host_panel(view: TierView) -> HostPanel:
    """The host tier after one line, for the player: its blocks (those that just spilled marked) and what moved."""
    spilled = set(view.spilled)
    notes = []
    if view.spilled:
        notes.append(f"Spilled to the host tier: {len(view.spilled)} block(s), " + ", ".join(view.spilled))
    if view.evicted_from_host:
        notes.append("Evicted from the host tier: " + ", ".join(view.evicted_from_host))
    notes += [f"Loaded back: {request_id} got {tokens} tokens from the host tier into fresh device blocks"
              for request_id, tokens in view.loaded.items()]
    return HostPanel([HostBlock(words, words in spilled) for words in view.host], notes)
