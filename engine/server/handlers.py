"""What one request goes through: its key, body and quota checked, its exchange with the engine loop.

A handler checks everything it can before a request costs the engine anything (key, body,
model name, unsupported fields, sampling values, the client's quota), hands the request to
the engine loop, then relays updates: all at once, or as server-sent events. Whatever ends
the exchange early (the client hangs up, the timeout fires) aborts the request, so its
blocks go back to the pool at once. The routes themselves are :mod:`engine.server.app`'s.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from engine.errors import InvalidRequestError
from engine.llm_engine import LLMEngine, Prompt
from engine.request import SamplingParams
from engine.server import protocol
from engine.server.config import ServerConfig
from engine.server.engine_loop import EngineLoop, Submission, Update
from engine.server.kv_publisher import KVEventPublisher
from engine.server.limits import ClientLimiter
from engine.server.metrics import ServerMetrics
from engine.server.salt import SaltBinder

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # a request body bigger than this is refused before it is parsed
GREEDY_BELOW_TEMPERATURE = 1e-5  # vLLM's epsilon: a smaller temperature means greedy
TEACHER, STUDENT = "teacher", "student"
ModelT = TypeVar("ModelT", bound=BaseModel)


class APIError(Exception):
    """Any refusal: becomes an OpenAI-style error body with this status."""

    def __init__(self, status: int, message: str, err_type: str = "invalid_request_error",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.err_type, self.headers = status, message, err_type, headers


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(protocol.error_body(exc.message, exc.status, exc.err_type), exc.status, headers=exc.headers)


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


class Server:
    """The state the routes share: one engine loop, one limiter, one set of metrics."""

    def __init__(self, config: ServerConfig, engine: LLMEngine, publisher: KVEventPublisher | None = None) -> None:
        self.config = config
        self.limits = config.limits
        self.engine = engine
        self.publisher = publisher
        self.metrics = ServerMetrics(config.served_model_name)
        if config.kv_cache_metrics_sample is not None:
            self.metrics.enable_residency()
        self.limiter = ClientLimiter(config.limits.max_concurrent_per_client)
        self.loop = EngineLoop(engine, self.metrics, publisher, max_prompt_tokens=config.limits.max_prompt_tokens,
                               kv_cache_metrics_sample=config.kv_cache_metrics_sample)
        self.salts = SaltBinder(config.cache_salt_policy)

    # -- who is asking ---------------------------------------------------------------------------------
    def identify(self, request: Request) -> tuple[str, str]:
        """(client id for quotas, role). With keys configured, the key is the identity."""
        header = request.headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else None
        if self.config.requires_key:
            if key and key == self.config.teacher_key:
                return f"key:{key}", TEACHER
            if key and key in self.config.student_keys:
                return f"key:{key}", STUDENT
            raise APIError(401, "Missing or unknown API key: send 'Authorization: Bearer <your key>'.",
                           "authentication_error")
        host = request.client.host if request.client else "unknown"
        try:
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
        return f"addr:{host}", TEACHER if local else STUDENT

    # -- what is asked -------------------------------------------------------------------------------------
    async def read_json(self, request: Request) -> dict:
        """The body as a JSON object, size-checked before it is parsed."""
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise APIError(413, f"The request body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}.")
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise APIError(400, f"The request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise APIError(400, "The request body must be a JSON object.")
        return data

    def validate(self, data: dict, model: type[ModelT]) -> ModelT:
        """``data`` as ``model``; a bad field and a model this server does not serve become 400 / 404."""
        try:
            body = model.model_validate(data)
        except ValidationError as exc:
            details = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
            raise APIError(400, f"Invalid request: {details}") from None
        name = getattr(body, "model", None)
        if name is not None and name != self.config.served_model_name:
            raise APIError(404, f"The model `{name}` does not exist; this server serves "
                                f"`{self.config.served_model_name}`.", "NotFoundError")
        return body

    async def parse(self, request: Request, model: type[protocol.SamplingFields]) -> Any:
        body = self.validate(await self.read_json(request), model)
        problems = protocol.unsupported_fields(body)
        if problems:
            raise APIError(400, "Unsupported request: " + "; ".join(problems) + ".")
        return body

    def sampling_params(self, body: protocol.SamplingFields, default_max_tokens: int) -> SamplingParams:
        max_tokens = body.max_tokens
        if isinstance(body, protocol.ChatCompletionRequest) and body.max_completion_tokens is not None:
            max_tokens = body.max_completion_tokens
        if max_tokens is None:
            max_tokens = default_max_tokens
        if max_tokens > self.limits.max_tokens:
            raise APIError(400, f"max_tokens={max_tokens} is over this server's limit of {self.limits.max_tokens}.")
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        if len(stop) > self.limits.max_stop_strings:
            raise APIError(400, f"At most {self.limits.max_stop_strings} stop strings, got {len(stop)}.")
        temperature = 1.0 if body.temperature is None else body.temperature
        if temperature < 0:
            raise APIError(400, f"temperature must be >= 0, got {temperature}.")
        try:
            return SamplingParams(
                max_tokens=max_tokens,
                temperature=temperature if temperature >= GREEDY_BELOW_TEMPERATURE else 0.0,
                top_p=1.0 if body.top_p is None else body.top_p,
                top_k=body.top_k or 0,
                seed=body.seed,
                stop=[s for s in stop if s],
                ignore_eos=body.ignore_eos,
            )
        except InvalidRequestError as exc:
            raise APIError(400, str(exc)) from None

    # -- one generation ----------------------------------------------------------------------------------------
    async def generate(self, request: Request, chat: bool) -> Response:
        client, role = self.identify(request)
        if chat:
            chat_body: protocol.ChatCompletionRequest = await self.parse(request, protocol.ChatCompletionRequest)
            body: protocol.SamplingFields = chat_body
            prompt: Prompt = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
                              for m in chat_body.messages]
            params = self.sampling_params(body, self.limits.max_tokens)
        else:
            completion: protocol.CompletionRequest = await self.parse(request, protocol.CompletionRequest)
            body = completion
            prompt = completion.prompt  # type: ignore[assignment]  # batches were refused above
            params = self.sampling_params(body, self.limits.default_completion_max_tokens)

        if not self.limiter.try_acquire(client):
            self.metrics.observe_rejection("client_quota")
            wait = self.limiter.retry_after_s()
            raise APIError(429, f"Too many requests in flight from you (limit {self.limiter.max_per_client}); "
                                f"retry in {wait} s.", "rate_limit_error", headers={"Retry-After": str(wait)})
        exchange = Exchange(self, request, client, chat)
        try:
            first = await exchange.start(prompt, params, self.salts.salt_for(client, role == TEACHER, body.cache_salt))
        except BaseException:
            exchange.close()
            raise
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(exchange.stream(first, params.stop, include_usage), media_type="text/event-stream")
        try:
            return JSONResponse(await exchange.collect(first))
        finally:
            exchange.close()


class Exchange:
    """One request's life on the HTTP side: submit, wait for updates, abort if it ends early."""

    def __init__(self, server: Server, request: Request, client: str, chat: bool) -> None:
        self.server = server
        self.request = request
        self.client = client
        self.chat = chat
        self.request_id = protocol.new_id("chatcmpl" if chat else "cmpl")
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.started = time.perf_counter()
        self.deadline = self.started + server.limits.request_timeout_s
        self.finished = False
        self.closed = False
        self._disconnect: asyncio.Task | None = None

    async def start(self, prompt: Prompt, params: SamplingParams, cache_salt: str | None) -> Update:
        """Submit, and wait for the first token (or the engine's refusal, which becomes a 400)."""
        loop = asyncio.get_running_loop()
        self._disconnect = asyncio.create_task(self._wait_disconnect())
        # A hang-up ends the exchange even if no handler is waiting (e.g. a stream never started).
        self._disconnect.add_done_callback(lambda task: None if task.cancelled() else self.close())
        self.server.loop.submit(Submission(
            self.request_id, self.client, prompt, params,
            deliver=lambda u: self._deliver(loop, u), cache_salt=cache_salt,
        ))
        try:
            first = await self.next()
        except TimeoutError:
            raise APIError(408, "The request waited past this server's "
                                f"{self.server.limits.request_timeout_s:g} s limit and was dropped.", "timeout") from None
        except ConnectionError:
            raise APIError(499, "The client closed the connection.") from None
        if first.error is not None:
            raise APIError(400, first.error)
        return first

    def _deliver(self, loop: asyncio.AbstractEventLoop, update: Update) -> None:
        loop.call_soon_threadsafe(self.updates.put_nowait, update)

    async def _wait_disconnect(self) -> None:
        while (await self.request.receive())["type"] != "http.disconnect":
            pass

    async def next(self) -> Update:
        """The next update; raises ``TimeoutError`` past the deadline, ``ConnectionError`` on hang-up."""
        assert self._disconnect is not None
        getter = asyncio.ensure_future(self.updates.get())
        done, _ = await asyncio.wait({getter, self._disconnect}, timeout=max(0.0, self.deadline - time.perf_counter()),
                                     return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            if self._disconnect in done:
                raise ConnectionError("client disconnected")
            raise TimeoutError
        update = getter.result()
        self.finished = update.finished
        return update

    def close(self) -> None:
        """Abort in the engine if unfinished (frees its blocks) and give the client its slot back."""
        if self.closed:
            return
        self.closed = True
        if not self.finished:
            self.server.loop.abort(self.request_id)
        if self._disconnect is not None:
            self._disconnect.cancel()
        self.server.limiter.release(self.client, time.perf_counter() - self.started)

    def usage(self, last: Update) -> dict:
        return protocol.usage(last.num_prompt_tokens, last.num_output_tokens, last.num_cached_tokens,
                              last.num_created_cache_tokens)

    async def collect(self, first: Update) -> dict:
        last = first
        try:
            while not last.finished:
                last = await self.next()
        except TimeoutError:
            raise APIError(408, f"The request ran past this server's {self.server.limits.request_timeout_s:g} s "
                                "limit and was stopped.", "timeout") from None
        except ConnectionError:
            raise APIError(499, "The client closed the connection.") from None
        choice = protocol.choice(last.text, last.finish_reason, chat=self.chat, chunk=False)
        return protocol.completion_object(self.request_id, self.server.config.served_model_name, choice,
                                          chat=self.chat, chunk=False, usage_=self.usage(last))

    async def stream(self, first: Update, stops: list[str], include_usage: bool) -> AsyncIterator[str]:
        """Server-sent events: text deltas, the finish reason, optional usage, then ``[DONE]``."""
        model = self.server.config.served_model_name
        hold = max((len(s) for s in stops), default=1) - 1  # a stop string may still be forming
        sent = 0
        update = first
        try:
            while True:
                end = len(update.text)
                if not update.finished:  # keep back half-decoded characters and a possible stop string
                    end = max(sent, len(update.text.rstrip("\ufffd")) - hold)
                delta = update.text[sent:end]
                if delta or update.finished:
                    choice = protocol.choice(delta, update.finish_reason, chat=self.chat, chunk=True, first=sent == 0)
                    yield sse(protocol.completion_object(self.request_id, model, choice, chat=self.chat, chunk=True,
                                                         usage_=None))
                    sent = end
                if update.finished:
                    break
                update = await self.next()
            if include_usage:
                yield sse(protocol.completion_object(self.request_id, model, {}, chat=self.chat, chunk=True,
                                                     usage_=self.usage(update)))
        except TimeoutError:
            limit = self.server.limits.request_timeout_s
            yield sse(protocol.error_body(f"The request ran past this server's {limit:g} s limit and was stopped.",
                                          408, "timeout"))
        except ConnectionError:
            return  # nobody is listening; close() aborts the request
        finally:
            self.close()
        yield sse("[DONE]")
