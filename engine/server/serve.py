"""Build the engine, the KV-event publisher and the app, and run them under uvicorn.

The engine (scheduler, pool, sampler) lives here, beside the HTTP routes; its forward passes run in a
worker process (:class:`~engine.runtime.worker.WorkerExecutor`) that holds the weights and the KV
pages, as vLLM runs its engine core apart from its API server: uvicorn's threads then never hold the
GIL a pass needs. ``executor="in-process"`` keeps the model in this process instead.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.server.config import ServerConfig

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine

#: Where the forward passes run: a worker process (the default) or this process.
EXECUTORS = ("worker", "in-process")
#: The worker's page budget when ``num_blocks`` fixes the pool (CPU pages are committed as they are
#: written, so a large budget costs nothing until used; the pool takes only its blocks' rows).
FIXED_POOL_BUDGET_MIB = 8_192


def build_engine(engine_config: EngineConfig, executor: str = "worker", progress: Any = None) -> LLMEngine:
    """The server's engine, its passes run by ``executor`` (see :data:`EXECUTORS`)."""
    from engine.llm_engine import LLMEngine

    if executor not in EXECUTORS:
        raise PrefixLabError(f"Unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}.")
    # The offload tier copies K/V pages where they are: its engine keeps the model in this process.
    if executor == "in-process" or engine_config.backend == "simulator" or engine_config.kv_offloading is not None:
        return LLMEngine(engine_config, progress=progress)
    import torch

    from engine.runtime.batching import BatchedBackend, StepBatcher
    from engine.runtime.worker import WorkerExecutor

    budget = engine_config.kv_cache_memory_mib if engine_config.num_blocks is None else FIXED_POOL_BUDGET_MIB
    worker = WorkerExecutor(engine_config.model, engine_config.dtype, engine_config.device, budget, progress)
    # Here torch only samples a few rows a step: on one thread, its OpenMP threads never spin on the cores
    # the worker's pass needs (an argmax over 8 rows: 0.7 ms on one thread, 8 ms at the median on two,
    # measured on a busy 2-core machine).
    torch.set_num_threads(1)
    return LLMEngine(engine_config, backend=BatchedBackend(engine_config, StepBatcher(worker)))


def serve(config: ServerConfig, engine_config: EngineConfig, host: str, port: int, progress: Any = None,
          executor: str = "worker") -> int:
    import uvicorn

    from engine.server.app import create_app
    from engine.server.kv_publisher import KVEventPublisher

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        engine = build_engine(engine_config, executor, progress)
    except PrefixLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    publisher = None
    if config.kv_events.enabled:
        try:
            publisher = KVEventPublisher(config.kv_events)
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    app = create_app(config, engine, publisher)
    pool = engine.kv_cache_manager
    print(f"PrefixLab serving {config.served_model_name!r} on http://{host}:{port}/v1 "
          f"({pool.num_blocks} blocks x {pool.block_size} tokens"
          + (f"; offload tier of {engine.offloading.manager.num_chunks} blocks, {engine.offloading.manager.cache_policy}"
             if engine.offloading is not None else "") + ")", file=sys.stderr, flush=True)
    print(publisher.describe() if publisher else "KV events: off (see --kv-events-config)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
