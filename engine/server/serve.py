"""Build the engine, the KV-event publisher and the app, and run them under uvicorn."""

from __future__ import annotations

import logging
import sys

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.server.config import ServerConfig


def serve(config: ServerConfig, engine_config: EngineConfig, host: str, port: int, progress=None) -> int:
    import uvicorn

    from engine.llm_engine import LLMEngine
    from engine.server.app import create_app
    from engine.server.kv_publisher import KVEventPublisher

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        engine = LLMEngine(engine_config, progress=progress)
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
             if engine.offloading is not None else "")
          + (f"; KV events on {config.kv_events.endpoint}" if publisher else "") + ")", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
