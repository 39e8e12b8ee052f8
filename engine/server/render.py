"""vLLM's token endpoints: ``/tokenize``, ``/detokenize`` and the scale-out render routes.

A router that routes by prefix cache (vLLM's ``vllm-router --policy kv_aware``) must know a
prompt's token ids before it picks a replica, since the replicas' KV events name blocks of
token ids. It asks a worker to *render* the request: ``/v1/completions/render`` answers a list
of vLLM ``GenerateRequest`` objects (one per prompt), ``/v1/chat/completions/render`` one object,
each carrying ``token_ids`` and the request's sampling parameters. The ids must be exactly those
the engine would compute for the same request, so rendering goes through the engine's own
tokenizer and chat template, on the engine thread (the tokenizer is not shared across threads).

Request and response fields follow vLLM's (``vllm/entrypoints/serve/tokenize/protocol.py`` and
``vllm/entrypoints/scale_out/token_in_token_out/protocol.py``); what PrefixLab cannot honour is
refused with a 400 rather than ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.server import protocol

#: vLLM's defaults for fields a render answer always carries (``vllm.SamplingParams``).
VLLM_SAMPLING_DEFAULTS: dict[str, Any] = {
    "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
    "min_p": 0.0, "min_tokens": 0, "logprobs": None, "prompt_logprobs": None, "stop_token_ids": [],
    "skip_special_tokens": True, "spaces_between_special_tokens": True, "include_stop_str_in_output": False,
    "detokenize": True, "output_kind": 0,
}


class TokenizeCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool | None = False


class TokenizeChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[protocol.ChatMessage] = Field(min_length=1)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    return_token_strs: bool | None = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    tools: list[Any] | None = None


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    tokens: list[int] = Field(max_length=1 << 20)


def chat_prompt(messages: list[protocol.ChatMessage]) -> list[dict[str, str]]:
    """The engine's view of a conversation: plain-text messages; vLLM's ``developer`` is a system turn."""
    return [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in messages]


def tokenize_chat_problems(body: TokenizeChatRequest) -> list[str]:
    problems = []
    if body.continue_final_message and body.add_generation_prompt:
        problems.append("cannot set both `continue_final_message` and `add_generation_prompt` to true")
    if body.chat_template is not None:
        problems.append("a per-request chat_template is not supported (the model's own template is used)")
    if body.tools:
        problems.append("tools are not supported")
    return problems


def tokenize_response(token_ids: list[int], max_model_len: int | None, token_strs: list[str] | None) -> dict:
    """vLLM's ``TokenizeResponse``."""
    return {"count": len(token_ids), "max_model_len": max_model_len or 0, "tokens": token_ids,
            "token_strs": token_strs}


def sampling_params_dict(body: protocol.SamplingFields, max_tokens: int) -> dict[str, Any]:
    """The request's sampling settings under vLLM's ``SamplingParams`` field names."""
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    return {
        **VLLM_SAMPLING_DEFAULTS,
        "temperature": 1.0 if body.temperature is None else body.temperature,
        "top_p": 1.0 if body.top_p is None else body.top_p,
        "top_k": body.top_k or 0,
        "seed": body.seed,
        "stop": stop,
        "ignore_eos": body.ignore_eos,
        "max_tokens": max_tokens,
    }


def generate_request(request_id: str, token_ids: list[int], body: protocol.SamplingFields, max_tokens: int,
                     model: str) -> dict[str, Any]:
    """vLLM's ``GenerateRequest``: what the worker would run for this request, as token ids."""
    return {
        "request_id": request_id,
        "token_ids": token_ids,
        "token_offsets": None,
        "features": None,
        "content_parts": None,
        "sampling_params": sampling_params_dict(body, max_tokens),
        "model": body.model or model,
        "stream": bool(body.stream),
        "stream_options": body.stream_options.model_dump() if body.stream and body.stream_options else None,
        "cache_salt": body.cache_salt,
        "priority": 0,
        "kv_transfer_params": None,
    }
