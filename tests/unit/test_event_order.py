"""Events are logged in the order things happen: a block is popped for a request, then evicted."""

from __future__ import annotations

import pytest

from engine.events import BlockRemoved
from teaching.scenarios.describe import describe_event
from teaching.scenarios.library import BUILTIN_SCENARIOS
from teaching.scenarios.scenario import parse_scenario, run_scenario


@pytest.mark.parametrize("policy", ["vllm", "classic"])
@pytest.mark.parametrize("key", list(BUILTIN_SCENARIOS))
def test_an_evicted_block_already_belongs_to_the_request_that_reuses_it(key: str, policy: str) -> None:
    run = run_scenario(parse_scenario(BUILTIN_SCENARIOS[key]), policy)
    timeline = run.timeline()
    for index, event in enumerate(run.events):
        if not isinstance(event, BlockRemoved):
            continue
        before = timeline.state_at(index)  # the state the student sees while reading this event
        for block_id in event.block_ids:
            assert block_id not in before.free_queue, f"block {block_id} evicted while still in the free queue"
            assert block_id in before.block_tables.get(event.request_id or "", []), (
                f"'{describe_event(event)}' shown before {event.request_id}'s table holds block {block_id}"
            )


def test_design_doc_classic_eviction_reads_after_the_allocation() -> None:
    run = run_scenario(parse_scenario(BUILTIN_SCENARIOS["design-doc"]), "classic")
    kinds = [e.kind for e in run.events]
    evict = kinds.index("evicted")
    assert kinds[evict - 1] == "allocate"
