"""The Live page's icicle of runs: bounded, labels that tell siblings apart, values Plotly accepts."""

from __future__ import annotations

import time

from engine.kv_events import BlockStored
from teaching.live.radix import build_radix, top_view
from teaching.live.state import ReplicaState
from viz.live_tree import branch_choices, clip_words, icicle_figure

SIZE = 8


def store(replica: ReplicaState, hashes: list[int], parent: int | None, tokens: list[int]) -> None:
    event = BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=SIZE,
                        lora_id=None, medium="GPU", lora_name=None)
    replica.apply(replica.batches, time.time(), [event])


def words(ids: list[int]) -> str:
    return " ".join(f"w{i}" for i in ids)


def class_replica(students: int = 40) -> ReplicaState:
    replica = ReplicaState("replica-0")
    store(replica, [1, 2], None, list(range(16)))
    for s in range(students):  # every student's first block starts with the same six tokens
        store(replica, [100 + s, 1000 + s], 2, [50, 51, 52, 53, 54, 55, 500 + s, 9] + [9] * 8)
    return replica


def test_labels_are_own_words_with_block_count_and_siblings_differ() -> None:
    replica = class_replica()
    view = top_view(build_radix(replica), max_edges=20, min_share=0)
    fig = icicle_figure(replica, view, words, label_chars=24)
    trace = fig.data[0]
    labels = dict(zip(trace.ids, trace.labels))
    students = [labels[e.id] for e in view.edges if e.parent is not None]
    assert len(students) == len(set(students)) > 1  # not cut to a shared prefix
    assert all(label.endswith(" · 2") and label.startswith("…") and "w50" not in label for label in students)
    assert labels[view.edges[0].id].startswith("w0 w1")
    assert any(label.startswith("+") for label in trace.labels)  # the folded students
    # branchvalues="total": a parent is never smaller than its drawn children
    value = dict(zip(trace.ids, trace.values))
    for node, parent in zip(trace.ids, trace.parents):
        if parent:
            kids = [value[k] for k, p in zip(trace.ids, trace.parents) if p == parent]
            assert sum(kids) <= value[parent], node
    assert fig.layout.uniformtext.mode == "hide"  # a label that does not fit is hidden, never overlapped


def test_labels_escape_markup_and_clip_at_words() -> None:
    replica = ReplicaState("r")
    store(replica, [1], None, list(range(8)))
    fig = icicle_figure(replica, top_view(build_radix(replica)), lambda ids: '<a href="x">link</a>')
    assert "<a" not in fig.data[0].labels[1] and "&lt;a" in fig.data[0].labels[1]
    assert clip_words("one two three four five", 12) == "one two…"


def test_branch_choices_are_the_biggest_branching_runs() -> None:
    replica = class_replica(5)
    tree = build_radix(replica)
    (choice,) = branch_choices(replica, tree.edges(), words)
    assert choice[0] == tree.roots[0].id and "12 blocks" in choice[1]


def test_the_history_chart_keeps_its_legend_and_titles_off_the_ticks() -> None:
    from viz.live import cache_history_figure

    replica = class_replica(3)
    fig = cache_history_figure(replica)
    assert fig.layout.legend.y >= 1 and fig.layout.legend.yanchor == "bottom"  # above the plot, not on the x title
    assert fig.layout.xaxis.title.standoff and fig.layout.yaxis.title.standoff
    assert fig.layout.xaxis.automargin and fig.layout.yaxis.automargin


def test_siblings_with_the_same_words_are_told_apart_by_hash() -> None:
    replica = ReplicaState("r")
    for first in (0xA1 << 56, 0xB2 << 56, 0xC3 << 56):  # the same tokens after three evicted prefixes
        store(replica, [first], first - 1, list(range(8)))
    fig = icicle_figure(replica, top_view(build_radix(replica), min_share=0), words)
    runs = [label for label in fig.data[0].labels[1:]]
    assert len(runs) == 3 and len(set(runs)) == 3 and all("#" in label for label in runs)
