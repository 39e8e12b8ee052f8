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

from engine.model.runner import ModelBackend

__all__ = ["ModelBackend"]
