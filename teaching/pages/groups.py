"""What a hybrid model's KV cache groups hold after a scenario line: the data the groups view draws.

For each group: its spec, each live request's block table in that group (``None`` where the
window released a block and the null block stands), and the blocks the window has released so
far. For each request: how many prompt tokens each group alone would serve if the prompt came
again now, and what the hybrid hit search agrees on (a hit one group allows and another does not).
:func:`groups_panel` hands it to the player (``teaching.pages.playback.GroupsPanel``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.events import BlocksReleased
from engine.kv_cache.grouped_manager import GroupedKVCacheManager
from teaching.lessons.answers import engine_state_after
from teaching.pages.playback import GroupHit, GroupsPanel, GroupTable
from teaching.scenarios.scenario import Scenario, parse_scenario


@dataclass(frozen=True)
class GroupState:
    group_idx: int
    kind: str  # "full_attention" or "sliding_window"
    sliding_window: int | None
    tables: dict[str, list[int | None]]  # live request -> block ids, None = released (null block)
    released: list[int]  # block ids this group's window gave back so far, in order


@dataclass(frozen=True)
class HitState:
    request_id: str
    num_prompt_tokens: int
    per_group: list[int]  # tokens each group alone would serve now
    agreed: int  # what every group allows together (the hybrid hit search)


@dataclass(frozen=True)
class GroupsView:
    line_no: int
    block_size: int
    groups: list[GroupState]
    hits: list[HitState] = field(default_factory=list)
    num_free_blocks: int = 0


def groups_view(scenario: Scenario | str, line_no: int) -> GroupsView:
    """The groups after ``line_no`` (0 = before any action). Raises ValueError for a one-group scenario."""
    if isinstance(scenario, str):
        scenario = parse_scenario(scenario)
    state = engine_state_after(scenario, line_no)
    engine = state.run.engine
    manager = engine.kv_cache_manager
    if not isinstance(manager, GroupedKVCacheManager):
        raise ValueError("This scenario has one KV cache group: add a 'layers' line with a sliding window.")
    coordinator = manager.coordinator
    released: dict[int, list[int]] = {i: [] for i in range(coordinator.num_groups)}
    for event in manager.events.events:
        if isinstance(event, BlocksReleased):
            released[event.group_idx].extend(event.block_ids)
    live = [rid for rid in engine.scheduler.requests if rid in manager.req_to_blocks]
    groups = []
    for index, group in enumerate(coordinator.kv_cache_groups):
        spec = group.kv_cache_spec
        tables = {
            rid: [None if b.is_null else b.block_id for b in manager.get_blocks(rid)[index]] for rid in live
        }
        groups.append(GroupState(index, spec.kind, spec.sliding_window, tables, released[index]))
    hits = []
    for rid, request in engine.scheduler.requests.items():
        if not request.block_hashes:
            continue
        max_length = request.num_prompt_tokens - 1
        per_group = []
        for index, group in enumerate(coordinator.kv_cache_groups):
            manager_cls = type(coordinator.single_type_managers[index])
            _, length = manager_cls.find_longest_cache_hit(
                request.block_hashes, max_length, [index], coordinator.block_pool, group.kv_cache_spec
            )
            per_group.append(length)
        _, agreed = coordinator.find_longest_cache_hit(request.block_hashes, max_length)
        hits.append(HitState(rid, request.num_prompt_tokens, per_group, agreed))
    return GroupsView(line_no, manager.block_size, groups, hits, manager.block_pool.get_num_free_blocks())


def group_title(group: GroupState) -> str:
    kind = f"sliding window of {group.sliding_window} tokens" if group.kind == "sliding_window" else "full attention"
    return f"Group {group.group_idx} · {kind}"


def groups_panel(view: GroupsView) -> GroupsPanel:
    """The groups as the player draws them under the pool."""
    tables = [GroupTable(g.group_idx, group_title(g), g.kind == "sliding_window", list(g.tables.items()), g.released)
              for g in view.groups]
    hits = [GroupHit(h.request_id, h.num_prompt_tokens, h.per_group, h.agreed) for h in view.hits]
    return GroupsPanel(tables, hits, view.num_free_blocks)
