"""``ModelBackend``: the model runner of one engine. One :meth:`execute` = one forward pass over the step.

It reads shared :class:`~engine.model.weights.ModelWeights` (borrowed from a transformers model,
whose own ``forward`` it never calls) and owns what the engine writes: its paged KV cache and its
sampler. Per step it packs the new tokens of every scheduled request, prefill chunks and decodes
alike, into one flat batch, runs our forward pass, and samples a token for each request whose
chunk reached the end of its known tokens.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.config import EngineConfig
from engine.errors import ConfigError, InvalidRequestError
from engine.model.gpt2 import GPT2Forward
from engine.model.host_kv import HostKVCache
from engine.model.kv_tensors import PagedKVCache
from engine.model.llama import LlamaForward
from engine.model.loader import LoadedModel, Progress, load_model
from engine.model.native import kernels_for
from engine.model.packing import pack_step
from engine.model.sampler import Sampler
from engine.model.threads import ThreadPolicy
from engine.model.weights import ModelShape, ModelWeights, context_length, model_forward  # noqa: F401  (re-exported)
from engine.scheduler import ScheduledRequest, SchedulerOutput

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


def load_weights(config: EngineConfig, progress: Progress | None = None) -> ModelWeights:
    """Load ``config.model`` on ``config.device`` in ``config.dtype``, ready to be shared by engines."""
    device = pick_device(config.device)
    return ModelWeights(load_model(config.model, pick_dtype(config.dtype, device), device, progress))


class ModelBackend:
    """The model side of ONE engine: shared, read-only weights plus this engine's own KV pages.

    Pass ``weights`` (or the older ``loaded``) to reuse weights already in memory, e.g. one model
    per app server and one engine per browser session; otherwise ``config.model`` is loaded here.
    The KV pages are allocated once, by the engine that owns this back end; a second engine on
    the same back end is refused, since it would write the first one's pages.
    """

    def __init__(self, config: EngineConfig, progress: Progress | None = None, *,
                 weights: ModelShape | None = None, loaded: LoadedModel | None = None) -> None:
        self.config = config
        if weights is None:
            weights = ModelWeights(loaded) if loaded is not None else load_weights(config, progress)
        self.weights: ModelShape = weights  # weights elsewhere (a worker process): the runtime runs the passes
        self.device, self.dtype = weights.device, weights.dtype  # the weights decide, not the config
        self.decode_kernel = kernels_for(self.device, self.dtype)  # decodes attended by the CPU kernel
        self.tokenizer = weights.tokenizer
        self.eos_token_ids = weights.eos_token_ids
        self.vocab_size = weights.vocab_size
        self.max_model_len = weights.max_model_len
        self.sampler = Sampler(config.seed)
        self.threads = ThreadPolicy() if self.device.type == "cpu" else None
        self.kv_cache: PagedKVCache | None = None
        self.host_kv_cache: HostKVCache | None = None  # the offload tier's pages, when it is on
        #: Logits of the last step's sampled rows, per request (for lessons and tests).
        self.last_logits: dict[str, torch.Tensor] = {}

    @property
    def local_weights(self) -> ModelWeights:
        """The weights, when they are in this process (not in a :mod:`~engine.runtime.worker`)."""
        if not isinstance(self.weights, ModelWeights):
            raise RuntimeError("This model's weights live in a worker process: its passes run through the runtime's executor.")
        return self.weights

    @property
    def model(self) -> LlamaForward | GPT2Forward:
        """Our forward pass over the weights."""
        return self.local_weights.model

    @property
    def hf_model(self) -> Any:
        """The transformers model the weights were borrowed from (the tests' oracle)."""
        return self.local_weights.hf_model

    # -- KV memory ------------------------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        return self.weights.kv_bytes_per_token

    @property
    def num_blocks(self) -> int:
        """How many blocks the KV memory budget buys (block 0 included, as the pool reserves it)."""
        if self.device.type == "cuda":
            total = torch.cuda.get_device_properties(self.device).total_memory
            in_use = torch.cuda.memory_allocated(self.device)  # weights and other engines' pages
            budget = total * self.config.gpu_memory_utilization - in_use - CUDA_ACTIVATION_HEADROOM
        else:
            budget = self.config.kv_cache_memory_mib * 2**20
        return self.blocks_in(int(budget))

    def blocks_in(self, budget_bytes: int) -> int:
        """Blocks of ``config.block_size`` tokens that ``budget_bytes`` of KV memory hold (at least 2)."""
        return max(2, budget_bytes // (self.kv_bytes_per_token * self.config.block_size))

    @property
    def kv_cache_bytes(self) -> int:
        return 0 if self.kv_cache is None else self.kv_cache.nbytes

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """Allocate this engine's pages, once. Block ``b`` of the engine's pool is row ``b`` here."""
        if self.kv_cache is not None:
            raise ConfigError(
                "This ModelBackend already holds the KV pages of another engine; a second engine on it "
                "would overwrite them. Give each engine its own ModelBackend on shared ModelWeights."
            )
        layers, kv_heads, head_dim = self.weights.kv_layout
        self.kv_cache = PagedKVCache(layers, num_blocks, block_size, kv_heads, head_dim, self.dtype, self.device)

    def allocate_host_kv_cache(self, num_chunks: int) -> None:
        """Host pages for the KV offloading tier (after :meth:`allocate_kv_cache`)."""
        if self.kv_cache is None:
            raise RuntimeError("allocate_kv_cache() must run before allocate_host_kv_cache().")
        self.host_kv_cache = HostKVCache(self.kv_cache, num_chunks)

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
        plan = scheduler_output.kv_transfers
        if plan is not None and self.host_kv_cache is not None:
            self.host_kv_cache.load(plan.loads)  # hits from the tier, before the pass reads them
        packed = pack_step(scheduled, self.kv_cache.block_size, self.device, decode_kernel=self.decode_kernel)
        logits = self.local_weights.logits(packed, self.kv_cache)
        if plan is not None and self.host_kv_cache is not None:
            self.host_kv_cache.store(plan.stores)  # blocks this pass completed
        return self.sample(scheduled, logits) if logits.shape[0] else {}

    def sample(self, scheduled: list[ScheduledRequest], logits: torch.Tensor) -> dict[str, int]:
        """A token for each request of ``scheduled`` that samples (``logits``: their rows, in order), drawn by
        this engine's own sampler (request ids repeat across engines; each engine's RNGs are its own)."""
        sampling = [item for item in scheduled if item.samples_token]
        ids = [item.request_id for item in sampling]
        tokens = self.sampler(logits, ids, [item.request.sampling_params for item in sampling])
        self.last_logits = dict(zip(ids, logits))
        return dict(zip(ids, tokens))

    def preferred_num_blocks(self) -> int | None:
        return self.num_blocks

    def set_script(self, request_id: str, token_ids: list[int]) -> None:
        raise InvalidRequestError("Scripted outputs only work on the simulator back end: a model samples its own.")

    def forget(self, request_id: str) -> None:
        self.sampler.forget(request_id)  # last_logits is replaced next step, so it stays bounded
