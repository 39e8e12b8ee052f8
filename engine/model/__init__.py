"""The real-model back end: loading, our own forward pass over a paged KV cache, sampling.

Module map (read in this order):

* ``loader``      find the weights (bundled GGUF -> cached safetensors, a folder, a hub id)
* ``kv_tensors``  the paged KV cache tensors and the slot mapping
* ``attention``   per-step attention metadata and paged attention
* ``layers``      RMSNorm, RoPE, activations, projections (packed weights)
* ``host_memory`` activations' memory reused, unread weight pages handed back to the OS
* ``llama`` / ``gpt2``  the forward pass of each supported family
* ``sampler``     greedy / temperature / top-k / top-p with per-request RNGs
* ``weights``     ``ModelWeights``: the read-only half, shared by any number of engines
* ``packing``     one step's new tokens packed into a flat batch with its attention metadata
* ``runner``      ``ModelBackend``: one engine's KV pages and sampler; one forward pass per step
* ``shared_pages`` one page tensor for a server, a partition per engine (one budget for all)
* ``batching``    ``StepBatcher``: many engines' steps merged into one forward pass
* ``worker``      that merged pass in a process of its own (a server's page scripts keep the GIL busy)
"""

import os


def machine_is_busy() -> bool:
    """More runnable processes than cores right now (1-minute load average)."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:
        return False


# OpenMP threads that finish early spin while waiting for the others. On an idle machine that is
# the fast choice (a cached-prefix step took 117 ms spinning vs 170 ms sleeping on 2 cores). On a
# busy one a spinning thread steals the core its partner needs and small matmuls, like a decode
# step's, get 10-50x slower; sleeping then wins. So: sleep only when the machine is already busy.
# This only takes effect if torch is not imported yet; set OMP_WAIT_POLICY yourself to choose.
if machine_is_busy():
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from engine.model.runner import ModelBackend  # noqa: E402  (after the setting above)
from engine.model.weights import ModelWeights  # noqa: E402

__all__ = ["ModelBackend", "ModelWeights"]
