"""The Live page's radix tree: unbranched runs become one edge, big caches fold into a bounded view."""

from __future__ import annotations

import time

from engine.kv_events import BlockRemoved, BlockStored
from teaching.live.radix import build_radix, distinct_start, top_view
from teaching.live.recent import recent_stores
from teaching.live.state import LiveState, ReplicaState

SIZE = 4


def store(replica: ReplicaState, hashes: list[int], parent: int | None, first_token: int = 0) -> None:
    tokens = [first_token + i for i in range(SIZE * len(hashes))]
    event = BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=SIZE,
                        lora_id=None, medium="GPU", lora_name=None)
    replica.apply(replica.batches, time.time(), [event])


def test_a_chain_is_one_edge_and_a_branch_splits_it() -> None:
    replica = ReplicaState("r")
    store(replica, [1, 2, 3, 4, 5], None)
    tree = build_radix(replica)
    assert [edge.keys for edge in tree.roots] == [[1, 2, 3, 4, 5]]
    store(replica, [6, 7], 3, first_token=100)  # a second prompt shares blocks 1..3, then parts
    tree = build_radix(replica)
    (root,) = tree.roots
    assert root.keys == [1, 2, 3] and root.start == 0 and root.subtree_blocks == 7 and root.leaves == 2
    assert [(c.keys, c.start) for c in root.children] == [([6, 7], 3), ([4, 5], 3)]  # equal sizes: newest first
    assert root.children[0].newest_seq == 1 and root.newest_seq == 1
    assert [e.keys for e in root.children[1].path()] == [[1, 2, 3], [4, 5]]
    assert tree.find(root.id) is root and tree.blocks == 7


def test_an_evicted_parent_leaves_an_orphan_root() -> None:
    replica = ReplicaState("r")
    store(replica, [1, 2, 3], None)
    replica.apply(replica.batches, time.time(), [BlockRemoved(block_hashes=[1], medium="GPU")])
    (root,) = build_radix(replica).roots
    assert root.keys == [2, 3] and root.orphan


def test_ten_thousand_blocks_in_one_chain_need_no_recursion() -> None:
    replica = ReplicaState("r")
    store(replica, list(range(1, 10_001)), None)
    tree = build_radix(replica)
    assert len(tree.by_id) == 1 and tree.roots[0].blocks == 10_000


def test_the_view_keeps_the_biggest_branches_and_counts_the_rest() -> None:
    replica = ReplicaState("r")
    store(replica, [1, 2], None)  # a shared system prompt
    for student in range(30):  # thirty students: student k's run has k + 1 blocks
        hashes = [1000 * (student + 1) + i for i in range(student + 1)]
        store(replica, hashes, 2, first_token=10 * student)
    tree = build_radix(replica)
    view = top_view(tree, max_edges=10, max_children=6)
    assert len(view.edges) <= 10
    root = tree.roots[0]
    drawn = [e for e in view.edges if e.parent is root]
    assert [e.blocks for e in drawn] == [30, 29, 28, 27, 26, 25]  # the six biggest
    (fold,) = [f for f in view.folds if f.parent is root]
    assert fold.edges == 24 and fold.blocks == sum(range(1, 25))
    assert view.blocks == len(replica.blocks) == 2 + sum(range(1, 31))
    # zooming into a branch draws it as the view's root
    zoomed = top_view(tree, drawn[0])
    assert zoomed.edges == [drawn[0]] and zoomed.blocks == 30 and not zoomed.folds


def test_siblings_are_labelled_from_where_they_differ() -> None:
    assert distinct_start([(1, 2, 3, 4), (1, 2, 9, 4)]) == 2
    assert distinct_start([(1, 2), (1, 2, 3)]) == 2
    assert distinct_start([(5,)]) == 0


def test_recent_stores_say_which_replica_and_what_was_cached_before() -> None:
    state = LiveState()
    store(state.replica("a"), [1, 2, 3], None)
    store(state.replica("b"), [7], None)
    store(state.replica("a"), [4], 3)
    rows = recent_stores(state)
    assert [(r.replica, r.note.blocks, r.cached_before) for r in rows] == [("a", 1, 3), ("b", 1, 0), ("a", 3, 0)]
