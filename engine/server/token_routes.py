"""The routes of :mod:`engine.server.render`: ``/tokenize``, ``/detokenize`` and the render pair.

They cost the engine a tokenizer call, never a forward pass, so they take no quota slot; they still
check the key (a student may tokenize; the server's keys still apply). Tokenizing runs on the engine
thread through :meth:`EngineLoop.run`, the one thread that uses the tokenizer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request

from engine.errors import PrefixLabError
from engine.llm_engine import Prompt
from engine.server import protocol, render
from engine.server.handlers import APIError, Server

T = TypeVar("T")


async def on_engine(server: Server, work: Callable[[], T]) -> T:
    """Run tokenizer work on the engine thread; a refusal (empty prompt, no template...) becomes a 400."""
    try:
        return await asyncio.wrap_future(server.loop.run(work))
    except PrefixLabError as exc:
        raise APIError(400, str(exc)) from None
    except (ValueError, TypeError, KeyError) as exc:  # e.g. the chat template refusing a conversation
        raise APIError(400, f"Cannot tokenize this prompt: {exc}") from None


def hf_tokenizer(server: Server) -> Any:
    tokenizer = server.engine.tokenizer
    if tokenizer is None:
        raise APIError(400, "This model has no tokenizer: it takes token ids only.")
    return tokenizer.hf_tokenizer


def check_prompt_length(server: Server, token_ids: list[int]) -> None:
    limit = server.limits.max_prompt_tokens
    if len(token_ids) > limit:
        raise APIError(400, f"The prompt has {len(token_ids)} tokens; this server accepts at most {limit} per request.")


def add_token_routes(app: FastAPI, server: Server) -> None:
    engine = server.engine
    max_model_len = getattr(engine.backend, "max_model_len", None)

    def token_strs(ids: list[int], wanted: bool | None) -> list[str] | None:
        return list(hf_tokenizer(server).convert_ids_to_tokens(ids)) if wanted else None

    @app.post("/tokenize")
    async def tokenize(request: Request) -> dict:
        server.identify(request)
        data = await server.read_json(request)
        if "messages" in data:
            chat = server.validate(data, render.TokenizeChatRequest)
            problems = render.tokenize_chat_problems(chat)
            if problems:
                raise APIError(400, "Unsupported request: " + "; ".join(problems) + ".")
            messages = render.chat_prompt(chat.messages)
            if chat.add_generation_prompt and not chat.continue_final_message and not chat.add_special_tokens \
                    and not chat.chat_template_kwargs:
                ids = await on_engine(server, lambda: engine.tokenize(messages))  # what a chat request runs
            else:
                tok = hf_tokenizer(server)

                def templated() -> list[int]:
                    out = tok.apply_chat_template(messages, add_generation_prompt=chat.add_generation_prompt,
                                                  continue_final_message=chat.continue_final_message, tokenize=False,
                                                  **(chat.chat_template_kwargs or {}))
                    return list(tok.encode(out, add_special_tokens=chat.add_special_tokens))

                ids = await on_engine(server, templated)
            return render.tokenize_response(ids, max_model_len, token_strs(ids, chat.return_token_strs))
        body = server.validate(data, render.TokenizeCompletionRequest)
        if body.add_special_tokens:
            ids = await on_engine(server, lambda: engine.tokenize(body.prompt) if body.prompt else [])
        else:
            tok = hf_tokenizer(server)
            ids = await on_engine(server, lambda: list(tok.encode(body.prompt, add_special_tokens=False)))
        return render.tokenize_response(ids, max_model_len, token_strs(ids, body.return_token_strs))

    @app.post("/detokenize")
    async def detokenize(request: Request) -> dict:
        server.identify(request)
        body = server.validate(await server.read_json(request), render.DetokenizeRequest)
        vocab = engine.backend.vocab_size
        bad = [t for t in body.tokens if t < 0 or (vocab is not None and t >= vocab)]
        if bad:
            raise APIError(400, f"Token id {bad[0]} is outside the model's vocabulary (size {vocab}).")
        tok = hf_tokenizer(server)
        text = await on_engine(server, lambda: tok.decode(body.tokens))
        return {"prompt": text}

    @app.post("/v1/completions/render")
    async def render_completion(request: Request) -> list[dict]:
        server.identify(request)
        body: protocol.CompletionRequest = await server.parse(request, protocol.CompletionRequest)
        max_tokens = server.sampling_params(body, server.limits.default_completion_max_tokens).max_tokens
        prompt: Prompt = body.prompt  # type: ignore[assignment]  # batches were refused by parse()
        ids = await on_engine(server, lambda: engine.tokenize(prompt))
        check_prompt_length(server, ids)
        return [render.generate_request(protocol.new_id("cmpl"), ids, body, max_tokens, server.config.served_model_name)]

    @app.post("/v1/chat/completions/render")
    async def render_chat(request: Request) -> dict:
        server.identify(request)
        body: protocol.ChatCompletionRequest = await server.parse(request, protocol.ChatCompletionRequest)
        max_tokens = server.sampling_params(body, server.limits.max_tokens).max_tokens
        messages = render.chat_prompt(body.messages)
        ids = await on_engine(server, lambda: engine.tokenize(messages))
        check_prompt_length(server, ids)
        return render.generate_request(protocol.new_id("chatcmpl"), ids, body, max_tokens,
                                       server.config.served_model_name)
