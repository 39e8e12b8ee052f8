"""The HTTP routes: OpenAI's ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``,
plus ``/health``, ``/metrics``, vLLM's ``/reset_prefix_cache`` (teacher only) and vLLM's token
routes (:mod:`engine.server.token_routes`). What each request goes through is
:mod:`engine.server.handlers`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.llm_engine import LLMEngine
from engine.server.config import ServerConfig
from engine.server.handlers import TEACHER, APIError, Server, error_response
from engine.server.kv_publisher import KVEventPublisher
from engine.server.token_routes import add_token_routes

logger = logging.getLogger(__name__)

def create_app(config: ServerConfig, engine: LLMEngine, publisher: KVEventPublisher | None = None) -> FastAPI:
    server = Server(config, engine, publisher)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        server.loop.start()
        yield
        server.loop.stop()
        if publisher is not None:
            publisher.close()

    app = FastAPI(title="PrefixLab", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = server

    @app.exception_handler(APIError)
    async def on_api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(APIError(exc.status_code, str(exc.detail), "NotFoundError" if exc.status_code == 404
                                       else "invalid_request_error"))

    @app.exception_handler(Exception)
    async def on_bug(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("Unhandled error")
        return error_response(APIError(500, f"Internal error: {type(exc).__name__}", "internal_server_error"))

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(server.metrics.render(server.loop.gauges()),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models(request: Request) -> dict:
        server.identify(request)
        return {"object": "list", "data": [{
            "id": config.served_model_name, "object": "model", "created": int(time.time()), "owned_by": "prefixlab",
            "root": config.model, "max_model_len": getattr(engine.backend, "max_model_len", None),
        }]}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await server.generate(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await server.generate(request, chat=True)

    add_token_routes(app, server)

    @app.post("/reset_prefix_cache")
    async def reset_prefix_cache(request: Request) -> Response:
        _, role = server.identify(request)
        if role != TEACHER:
            raise APIError(403, "Only the teacher may reset the prefix cache (teacher key, or a local client "
                                "when the server has no keys).", "permission_error")
        if not await asyncio.wrap_future(server.loop.reset_prefix_cache()):
            raise APIError(409, "Requests are still running and hold blocks; retry when they finish.",
                           headers={"Retry-After": "1"})
        return Response(status_code=200)

    return app
