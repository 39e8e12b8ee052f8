"""The OpenAI API's bodies, as far as PrefixLab speaks it.

Requests are pydantic models: the fields we honour are typed, unknown fields are ignored (as
vLLM does), and fields we *cannot* honour (``n > 1``, tools, logprobs, ...) are refused by
:func:`unsupported_fields` with a 400, never silently dropped. Responses are plain dicts in
the shape the ``openai`` client parses, built by the ``*_response`` / ``*_chunk`` helpers.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.request import RequestStatus


class StreamOptions(BaseModel):
    include_usage: bool = False


class SamplingFields(BaseModel):
    """Fields shared by both endpoints."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None  # vLLM's extension
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    cache_salt: str | None = Field(default=None, min_length=1)  # vLLM's extension
    ignore_eos: bool = False  # vLLM's extension: always generate max_tokens (benchmarks)
    user: str | None = None
    n: int = 1
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None


class CompletionRequest(SamplingFields):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = None
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    response_format: dict[str, Any] | None = None


def unsupported_fields(body: SamplingFields) -> list[str]:
    """What the request asks for that this engine cannot do (each becomes part of a 400)."""
    problems = []
    if body.n != 1:
        problems.append("n must be 1 (one choice per request)")
    if body.presence_penalty or body.frequency_penalty:
        problems.append("presence_penalty / frequency_penalty are not supported")
    if body.logit_bias:
        problems.append("logit_bias is not supported")
    if isinstance(body, CompletionRequest):
        if body.logprobs is not None:
            problems.append("logprobs is not supported")
        if body.echo:
            problems.append("echo is not supported")
        if body.best_of not in (None, 1):
            problems.append("best_of must be 1")
        if body.suffix:
            problems.append("suffix is not supported")
        if isinstance(body.prompt, list) and body.prompt and not isinstance(body.prompt[0], int):
            problems.append("send one prompt per request (a string or a list of token ids), not a batch")
    if isinstance(body, ChatCompletionRequest):
        if body.logprobs or body.top_logprobs:
            problems.append("logprobs is not supported")
        if body.tools or body.functions or body.tool_choice not in (None, "none"):
            problems.append("tools / function calling are not supported")
        if body.response_format and body.response_format.get("type") != "text":
            problems.append("response_format other than text is not supported")
    return problems


# -- responses --------------------------------------------------------------------------------
def error_body(message: str, status: int, err_type: str = "invalid_request_error", param: str | None = None) -> dict:
    """OpenAI's error shape, which the ``openai`` client turns into ``BadRequestError`` etc."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": status}}


def finish_reason(status: RequestStatus | None) -> str | None:
    """OpenAI's words for why a request ended."""
    return {
        RequestStatus.FINISHED_STOPPED: "stop",
        RequestStatus.FINISHED_LENGTH: "length",
        RequestStatus.FINISHED_ABORTED: "abort",
    }.get(status) if status else None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int, created_cache_tokens: int = 0) -> dict:
    """OpenAI's usage block with vLLM's ``created_cache_tokens`` (prompt tokens written to the prefix cache)."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "created_cache_tokens": created_cache_tokens},
    }


def completion_object(request_id: str, model: str, choice: dict, *, chat: bool, chunk: bool, usage_: dict | None) -> dict:
    """One response (or one streamed chunk) of either endpoint."""
    kind = "chat.completion" if chat else "text_completion"
    body: dict[str, Any] = {
        "id": request_id,
        "object": kind + (".chunk" if chunk and chat else ""),
        "created": int(time.time()),
        "model": model,
        "choices": [choice] if choice else [],
    }
    if usage_ is not None or not chunk:
        body["usage"] = usage_
    return body


def choice(text: str, reason: str | None, *, chat: bool, chunk: bool, first: bool = False) -> dict:
    if not chat:
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
    if chunk:
        delta: dict[str, Any] = {"content": text}
        if first:
            delta["role"] = "assistant"
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
    return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": reason}
