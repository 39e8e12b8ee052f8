"""A second KV tier in host memory: vLLM's native KV offloading (``--kv-offloading-size``).

vLLM's OffloadingConnector writes every full prompt block to CPU memory as soon as it is computed
(write-through, not on eviction), so a block later evicted from the device pool can be loaded back
instead of recomputed. The pieces, each with vLLM's names:

* :mod:`engine.kv_offload.policies`: which host chunk goes when the tier is full (LRU or ARC).
* :mod:`engine.kv_offload.manager`: ``CPUOffloadingManager``, the tier's bookkeeping (lookups,
  pinned loads, pending stores, events).
* :mod:`engine.kv_offload.connector`: the scheduler side of the connector: what to look up, load
  and store at each step.
* :mod:`engine.kv_offload.config`: the tier's size (GiB or blocks) and policy.
"""

from engine.kv_offload.base import LookupResult, OffloadingEvent, ReqContext
from engine.kv_offload.config import KVOffloadingConfig
from engine.kv_offload.connector import OffloadingConnector, TransferPlan
from engine.kv_offload.manager import CPUOffloadingManager
from engine.kv_offload.policies import POLICIES, ARCCachePolicy, LRUCachePolicy

__all__ = [
    "POLICIES", "ARCCachePolicy", "CPUOffloadingManager", "KVOffloadingConfig", "LRUCachePolicy",
    "LookupResult", "OffloadingConnector", "OffloadingEvent", "ReqContext", "TransferPlan",
]
