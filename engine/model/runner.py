"""``ModelBackend``: the model runner. One :meth:`execute` = one forward pass over the whole step.

It owns the weights (borrowed from a transformers model, whose own ``forward`` it never calls),
the paged KV cache and the sampler. Per step it packs the new tokens of every scheduled request,
prefill chunks and decodes alike, into one flat batch, runs our forward pass, and samples a
token for each request whose chunk reached the end of its known tokens.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.config import EngineConfig
from engine.errors import ConfigError, InvalidRequestError
from engine.model.attention import AttentionMetadata
from engine.model.gpt2 import GPT2Forward
from engine.model.kv_tensors import PagedKVCache
from engine.model.llama import LlamaForward
from engine.model.loader import LoadedModel, Progress, load_model
from engine.model.sampler import Sampler
from engine.model.threads import ThreadPolicy
from engine.model.tokenizer import TextTokenizer
from engine.scheduler import SchedulerOutput

#: Activations and allocator slack kept free on CUDA besides weights and KV (bytes).
CUDA_ACTIVATION_HEADROOM = 512 * 2**20
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device='cuda' was asked for but no CUDA GPU is available; use 'auto' or 'cpu'.")
    return torch.device(name)


def pick_dtype(name: str | None, device: torch.device) -> torch.dtype:
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise ConfigError(f"Unknown dtype {name!r}; choose one of {sorted(DTYPES)}.")
    return DTYPES[name]


def model_forward(hf_model: Any, max_model_len: int) -> LlamaForward | GPT2Forward:
    """Our forward pass for the model's architecture (the loader already checked it is supported)."""
    if hf_model.config.model_type == "gpt2":
        return GPT2Forward(hf_model, max_model_len)
    return LlamaForward(hf_model, max_model_len)


def context_length(config: Any) -> int:
    """Longest sequence the model handles; a sliding window, when used, caps it (we attend fully)."""
    length = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 2048
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True):
        length = min(length, window)
    return length


class ModelBackend:
    """Pass ``loaded`` to share weights already in memory (e.g. one model per app server, one
    engine and KV pool per browser session); otherwise ``config.model`` is loaded here.
    A shared model is only read, never written: each backend has its own KV cache and sampler.
    """

    def __init__(self, config: EngineConfig, progress: Progress | None = None, *, loaded: LoadedModel | None = None) -> None:
        self.config = config
        self.device = pick_device(config.device)
        self.dtype = pick_dtype(config.dtype, self.device)
        if loaded is None:
            loaded = load_model(config.model, self.dtype, self.device, progress)
        else:
            self.device = next(loaded.hf_model.parameters()).device  # the weights decide, not the config
            self.dtype = next(loaded.hf_model.parameters()).dtype
        self.hf_model = loaded.hf_model  # kept for its weights (and as the tests' oracle)
        self.tokenizer = None if loaded.tokenizer is None else TextTokenizer(loaded.tokenizer)
        self.eos_token_ids = loaded.eos_token_ids
        self.vocab_size = self.hf_model.config.vocab_size
        self.max_model_len = context_length(self.hf_model.config)
        self.model = model_forward(self.hf_model, self.max_model_len)
        self.sampler = Sampler(config.seed)
        self.threads = ThreadPolicy() if self.device.type == "cpu" else None
        self.kv_cache: PagedKVCache | None = None
        #: Logits of the last step's sampled rows, per request (for lessons and tests).
        self.last_logits: dict[str, torch.Tensor] = {}

    # -- KV memory ------------------------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer: 2 x layers x kv_heads x head_dim x bytes per element."""
        m = self.model
        return 2 * m.num_layers * m.num_kv_heads * m.head_dim * torch.empty((), dtype=self.dtype).element_size()

    @property
    def num_blocks(self) -> int:
        """How many blocks the KV memory budget buys (block 0 included, as the pool reserves it)."""
        if self.device.type == "cuda":
            total = torch.cuda.get_device_properties(self.device).total_memory
            in_use = torch.cuda.memory_allocated(self.device) - self.kv_cache_bytes  # weights; old pages get replaced
            budget = total * self.config.gpu_memory_utilization - in_use - CUDA_ACTIVATION_HEADROOM
        else:
            budget = self.config.kv_cache_memory_mib * 2**20
        return max(2, int(budget) // (self.kv_bytes_per_token * self.config.block_size))

    @property
    def kv_cache_bytes(self) -> int:
        return 0 if self.kv_cache is None else self.kv_cache.nbytes

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """(Re)allocate the pages. Called by each engine built on this back end: it starts clean."""
        m = self.model
        self.kv_cache = None  # free the old pages first, or both would be held at once
        self.sampler = Sampler(self.config.seed)  # request ids restart at req-0 in a new engine
        self.last_logits = {}
        self.kv_cache = PagedKVCache(m.num_layers, num_blocks, block_size, m.num_kv_heads, m.head_dim, self.dtype, self.device)

    # -- text ----------------------------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        if self.tokenizer is None or not self.tokenizer.chat_template:
            raise InvalidRequestError("This model has no chat template: send plain text instead of messages.")
        return self.tokenizer.apply_chat_template(messages)

    # -- one step --------------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute(self, scheduler_output: SchedulerOutput) -> dict[str, int]:
        if self.kv_cache is None:
            raise RuntimeError("allocate_kv_cache() must run before execute().")
        if self.threads is not None:
            self.threads.apply()
        scheduled = scheduler_output.scheduled
        token_ids: list[int] = []
        positions: list[int] = []
        chunks = []
        for item in scheduled:
            start = item.num_computed_tokens
            token_ids += item.token_ids
            positions += range(start, start + item.num_new_tokens)
            chunks.append((item.block_ids, start, item.num_new_tokens))
        meta = AttentionMetadata.build(chunks, self.kv_cache.block_size, self.device)
        input_ids = torch.tensor(token_ids, dtype=torch.long, device=self.device)
        hidden = self.model.forward(input_ids, torch.tensor(positions, device=self.device), meta, self.kv_cache)

        # Only the last new token of a request that reached its end needs logits (the vocab matmul
        # is the biggest one in a small model, so skipping the others matters).
        sampling = [(item, seq) for item, seq in zip(scheduled, meta.seqs) if item.samples_token]
        if not sampling:
            return {}
        rows = torch.tensor([seq.query_end - 1 for _, seq in sampling], device=self.device)
        logits = self.model.compute_logits(hidden[rows]).float()
        ids = [item.request_id for item, _ in sampling]
        tokens = self.sampler(logits, ids, [item.request.sampling_params for item, _ in sampling])
        self.last_logits = dict(zip(ids, logits))
        return dict(zip(ids, tokens))

    def forget(self, request_id: str) -> None:
        self.sampler.forget(request_id)  # last_logits is replaced next step, so it stays bounded
