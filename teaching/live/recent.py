"""Which replica each recent request went to, read from the replicas' ``BlockStored`` events.

Events carry no request id, but each ``BlockStored`` is one request's newly full blocks in one
engine step, hung under the last block it found cached (``parent_block_hash``). So a table of the
newest stores across replicas shows where requests landed and how much of each prompt the
replica already held (the blocks above the parent: prefix-cache hits, or the same request's
earlier chunk of a long prompt).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from teaching.live.state import BlockKey, LiveState, ReplicaState, StoreNote

Decode = Callable[[Sequence[int]], str]
RECENT_ROWS = 12


@dataclass(frozen=True)
class RecentStore:
    replica: str
    note: StoreNote
    prompt_start: str  # the first words of the cached prefix the blocks belong to
    cached_before: int | None  # blocks of the prefix already cached (None: the chain is gone)


def _cached_depth(replica: ReplicaState, parent: BlockKey | None) -> int | None:
    if parent is None:
        return 0
    if parent not in replica.blocks:
        return None
    return len(replica.prefix_of(parent))


def _words(replica: ReplicaState, note: StoreNote, decode: Decode | None, chars: int) -> str:
    key = note.parent if note.parent is not None and note.parent in replica.blocks else note.first
    if key not in replica.blocks:
        return "(evicted since)"
    root = replica.prefix_of(key)[0]
    ids = list(root.token_ids)
    text = " ".join(str(t) for t in ids[:8]) if decode is None else decode(ids)
    text = " ".join(text.replace("\n", " ↵ ").split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def recent_stores(state: LiveState, decode: Decode | None = None, rows: int = RECENT_ROWS,
                  chars: int = 40) -> list[RecentStore]:
    """The newest ``rows`` stores of every replica together, newest first."""
    notes = [(note, replica) for replica in state.replicas.values() for note in replica.stores]
    notes.sort(key=lambda pair: (pair[0].ts, pair[0].seq), reverse=True)
    found = []
    for note, replica in notes[:rows]:
        try:
            words = _words(replica, note, decode, chars)
        except Exception:  # a tokenizer that does not fit these ids
            words = _words(replica, note, None, chars)
        found.append(RecentStore(replica.name, note, words, _cached_depth(replica, note.parent)))
    return found


def recent_rows(stores: list[RecentStore]) -> list[dict[str, object]]:
    """The table the page shows."""
    return [{"when": time.strftime("%H:%M:%S", time.localtime(s.note.ts)), "replica": s.replica,
             "prompt starts": s.prompt_start,
             "blocks already cached": "?" if s.cached_before is None else s.cached_before,
             "new blocks stored": s.note.blocks, "batch": s.note.seq} for s in stores]
