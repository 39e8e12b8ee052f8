"""The real-model back end: loading, our own forward pass over a paged KV cache, sampling.

Module map (read in this order):

* ``loader``      find the weights (bundled GGUF -> cached safetensors, a folder, a hub id)
* ``kv_tensors``  the paged KV cache tensors and the slot mapping
* ``attention``   per-step attention metadata and paged attention
* ``layers``      RMSNorm, RoPE, activations, projections (stacked q/k/v)
* ``native``      the two C kernels of a decode step (``cpu_kernels.c``), built on first use
* ``host_memory`` activations' memory reused, unread weight pages handed back to the OS
* ``llama`` / ``gpt2``  the forward pass of each supported family
* ``sampler``     greedy / temperature / top-k / top-p with per-request RNGs
* ``weights``     ``ModelWeights``: the read-only half, shared by any number of engines
* ``packing``     one step's new tokens packed into a flat batch with its attention metadata
* ``runner``      ``ModelBackend``: one engine's KV pages and sampler; one forward pass per step

How passes run when many engines share one model (a worker process, merged passes, shared pages,
host tuning) is the runtime's business: :mod:`engine.runtime`.
"""

from engine.model.runner import ModelBackend
from engine.model.weights import ModelWeights

__all__ = ["ModelBackend", "ModelWeights"]
