"""A replica's cached blocks as a radix tree: one edge per unbranched run of blocks.

The events give a forest of blocks (each points to its parent). At 10,000 blocks that forest is
mostly long chains: a prompt's blocks follow one another with no branch until two prompts part.
Drawing every block is unreadable, so the Live page draws *runs*: a :class:`RadixEdge` holds the
blocks from one branching point (or a root) down to the next, with their count. Then
:func:`top_view` keeps the biggest branches within a budget of drawn edges and folds the rest
into one "+N more" entry per parent, so a view stays bounded however big the cache gets.

Pure: built from :class:`teaching.live.state.ReplicaState` alone, in O(blocks), no recursion
(a single 10,000-block chain is one edge, not 10,000 stack frames).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from teaching.live.state import BlockKey, ReplicaState

#: Drawn edges per view (the rest is folded); each parent shows at most this many children.
MAX_VIEW_EDGES = 120
MAX_CHILDREN = 12
#: A branch holding less than this share of the view's blocks is folded: it would be a sliver too
#: thin to label (zoom in to see it; the share is of the zoomed branch then).
MIN_SHARE = 0.03


@dataclass
class RadixEdge:
    """One unbranched run of cached blocks, in chain order, and what hangs below it."""

    keys: list[BlockKey]
    start: int  # position of the run's first block in its prompt (0 = first block), as far as cached
    parent: RadixEdge | None = field(default=None, repr=False)
    children: list[RadixEdge] = field(default_factory=list, repr=False)
    subtree_blocks: int = 0  # this run's blocks and every block below it
    leaves: int = 0  # cached prefixes that end in this subtree
    newest_seq: int = -1  # the newest batch that stored a block of this subtree
    orphan: bool = False  # a root whose parent block was evicted (its start is unknown: drawn as 0)

    @property
    def id(self) -> str:
        """Stable while the run's first block stays cached (a hash names it, never a position)."""
        first = self.keys[0]
        return f"e{first:x}" if isinstance(first, int) else "e" + first.hex()  # an id, never shown

    @property
    def blocks(self) -> int:
        return len(self.keys)

    @property
    def end(self) -> int:
        return self.start + len(self.keys)

    def path(self) -> list[RadixEdge]:
        """The edges from a root down to this one."""
        edges: list[RadixEdge] = []
        edge: RadixEdge | None = self
        while edge is not None:
            edges.append(edge)
            edge = edge.parent
        return edges[::-1]


@dataclass
class RadixTree:
    """Every root edge (biggest subtree first) and an index by edge id."""

    roots: list[RadixEdge]
    by_id: dict[str, RadixEdge]
    blocks: int

    def edges(self) -> list[RadixEdge]:
        return list(self.by_id.values())

    def find(self, edge_id: str | None) -> RadixEdge | None:
        return self.by_id.get(edge_id) if edge_id else None


def build_radix(replica: ReplicaState) -> RadixTree:
    """The radix tree of ``replica``'s cached blocks (children sorted biggest first)."""
    blocks = replica.blocks
    children: dict[BlockKey | None, list[BlockKey]] = {}
    for key, block in blocks.items():
        above = block.parent if block.parent is not None and block.parent in blocks else None
        children.setdefault(above, []).append(key)
    by_id: dict[str, RadixEdge] = {}
    roots: list[RadixEdge] = []
    order: list[RadixEdge] = []  # parents before children: walked backwards to sum subtrees
    stack: list[tuple[BlockKey, RadixEdge | None, int]] = [(key, None, 0) for key in children.get(None, [])]
    while stack:
        first, parent, start = stack.pop()
        keys = [first]
        below = children.get(first, [])
        while len(below) == 1:  # unbranched: the run goes on
            keys.append(below[0])
            below = children.get(below[0], [])
        edge = RadixEdge(keys, start, parent)
        if parent is None:
            edge.orphan = blocks[first].parent is not None
            roots.append(edge)
        else:
            parent.children.append(edge)
        by_id[edge.id] = edge
        order.append(edge)
        stack.extend((child, edge, edge.end) for child in below)
    for edge in reversed(order):
        newest = max(blocks[key].stored_seq for key in edge.keys)
        edge.subtree_blocks = len(edge.keys) + sum(child.subtree_blocks for child in edge.children)
        edge.leaves = sum(child.leaves for child in edge.children) or 1
        edge.newest_seq = max([newest] + [child.newest_seq for child in edge.children])
        edge.children.sort(key=_size_order)
    roots.sort(key=_size_order)
    return RadixTree(roots, by_id, len(blocks))


def _size_order(edge: RadixEdge) -> tuple[int, int]:
    return (-edge.subtree_blocks, -edge.newest_seq)


@dataclass(frozen=True)
class Fold:
    """Branches not drawn under ``parent`` (None: roots), counted."""

    parent: RadixEdge | None
    edges: int
    blocks: int

    @property
    def id(self) -> str:
        return f"more-{self.parent.id if self.parent else 'roots'}"


@dataclass
class View:
    """What one picture draws: edges (parents before children) and the folds beside them."""

    root: RadixEdge | None  # the zoomed-into edge, or None for the whole cache
    edges: list[RadixEdge]
    folds: list[Fold]
    blocks: int  # blocks under the view's root (all cached blocks when not zoomed)

    @property
    def drawn_blocks(self) -> int:
        return sum(edge.blocks for edge in self.edges)


def top_view(tree: RadixTree, root: RadixEdge | None = None, *, max_edges: int = MAX_VIEW_EDGES,
             max_children: int = MAX_CHILDREN, min_share: float = MIN_SHARE) -> View:
    """The biggest branches first, within ``max_edges``; every branch left out is counted in a fold.

    Greedy by subtree size: the biggest undrawn branch is drawn next, so whatever is cut holds
    fewer blocks than anything drawn at its level. Each parent draws at most ``max_children``,
    and no branch under ``min_share`` of the view's blocks.
    """
    tops = [root] if root is not None else tree.roots
    total = root.subtree_blocks if root is not None else tree.blocks
    smallest = min_share * total
    drawn: list[RadixEdge] = []
    drawn_ids: set[str] = set()
    counter = 0  # ties break in tree order
    heap: list[tuple[int, int, RadixEdge]] = []
    for edge in tops[:max_children]:
        if edge.subtree_blocks >= smallest or edge is root:
            heap.append((-edge.subtree_blocks, counter, edge))
            counter += 1
    heapq.heapify(heap)
    while heap and len(drawn) < max_edges:
        _, _, edge = heapq.heappop(heap)
        drawn.append(edge)
        drawn_ids.add(edge.id)
        for child in edge.children[:max_children]:
            if child.subtree_blocks >= smallest:
                heapq.heappush(heap, (-child.subtree_blocks, counter, child))
                counter += 1
    folds: list[Fold] = []
    for parent, kids in [(None if root is None else root.parent, tops)] + [(e, e.children) for e in drawn]:
        left = [kid for kid in kids if kid.id not in drawn_ids]
        if left:
            folds.append(Fold(parent, len(left), sum(kid.subtree_blocks for kid in left)))
    return View(root, drawn, folds, total)


def distinct_start(tokens: list[tuple[int, ...]]) -> int:
    """How many leading tokens every sibling run shares (labels skip them, so siblings differ)."""
    if len(tokens) < 2:
        return 0
    shortest = min(len(t) for t in tokens)
    for index in range(shortest):
        if len({t[index] for t in tokens}) > 1:
            return index
    return shortest
