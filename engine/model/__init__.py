"""The real-model back end: loading, our own forward pass over a paged KV cache, sampling.

Module map (read in this order):

* ``loader``      find the weights (bundled GGUF -> cached safetensors, a folder, a hub id)
* ``kv_tensors``  the paged KV cache tensors and the slot mapping
* ``attention``   per-step attention metadata and paged attention
* ``layers``      RMSNorm, RoPE, activations
* ``llama`` / ``gpt2``  the forward pass of each supported family
* ``sampler``     greedy / temperature / top-k / top-p with per-request RNGs
* ``runner``      ``ModelBackend``: one forward pass per engine step
"""

import os

# OpenMP threads that finish early spin while waiting for the others. On a small shared machine
# (2 cores, other processes busy) a spinning thread steals the core its partner needs, and small
# matmuls, like a decode step's, get 10-50x slower. Sleeping instead costs microseconds. This only
# takes effect if torch is not imported yet; set OMP_WAIT_POLICY yourself to choose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from engine.model.runner import ModelBackend  # noqa: E402  (after the setting above)

__all__ = ["ModelBackend"]
