"""Send a request to a class server (vLLM or ``prefixlab serve``) with the real ``openai`` client.

Streaming gives the time to first token as the client sees it; ``stream_options.include_usage``
asks for the final usage chunk, whose ``prompt_tokens_details.cached_tokens`` says how many prompt
tokens the server's prefix cache served (vLLM reports it with ``--enable-prompt-tokens-details``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from engine.errors import PrefixLabError
from engine.llm_engine import Prompt

#: Limits on what one click may ask of a shared server.
MAX_PROMPT_CHARS = 20_000
MAX_TOKENS_LIMIT = 512
REQUEST_TIMEOUT_S = 120.0
#: vLLM ignores the key unless started with --api-key; the client insists on one.
DEFAULT_API_KEY = "EMPTY"


class ClassServerError(PrefixLabError):
    """The server could not be reached or refused the request; the message is the server's reason."""


@dataclass(frozen=True)
class RequestResult:
    """One request as the client saw it: the text, TTFT and what the prefix cache saved."""

    text: str
    ttft_s: float | None
    total_s: float
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    model: str
    sent_at: float = field(default_factory=time.time)

    @property
    def hit(self) -> bool:
        return bool(self.cached_tokens)


def v1_url(base_url: str) -> str:
    """``http://host:8000`` or ``http://host:8000/v1`` -> the ``/v1`` URL the client wants."""
    base = base_url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ClassServerError(f"{base_url!r} is not an http(s) URL (e.g. http://teacher-laptop:8000)")
    return base if base.endswith("/v1") else base + "/v1"


def make_client(base_url: str, api_key: str | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=v1_url(base_url), api_key=api_key or DEFAULT_API_KEY, timeout=timeout_s, max_retries=0)


def served_model(client: Any) -> str:
    """The first model the server lists (a class server serves one)."""
    import openai

    try:
        models = client.models.list().data
    except openai.OpenAIError as exc:
        raise ClassServerError(f"cannot list the server's models: {exc}") from None
    if not models:
        raise ClassServerError("the server lists no model")
    return str(models[0].id)


def _check_limits(prompt_chars: int, max_tokens: int) -> None:
    if prompt_chars > MAX_PROMPT_CHARS:
        raise ClassServerError(f"the prompt is longer than {MAX_PROMPT_CHARS:,} characters")
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise ClassServerError(f"max tokens must be between 1 and {MAX_TOKENS_LIMIT}")


def _stream(base_url: str, api_key: str | None, model: str | None, create: Any) -> RequestResult:
    """Run one streaming request (``create(client, model)`` opens the stream) and time it."""
    import openai

    client = make_client(base_url, api_key)
    name = model or served_model(client)
    started = time.perf_counter()
    ttft: float | None = None
    pieces: list[str] = []
    usage: Any = None
    try:
        for chunk in create(client, name):
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = (choice.delta.content if hasattr(choice, "delta") else choice.text) or ""
                if delta and ttft is None:
                    ttft = time.perf_counter() - started
                pieces.append(delta)
    except openai.APIStatusError as exc:
        raise ClassServerError(f"the server refused the request ({exc.status_code}): {exc.message}") from None
    except openai.OpenAIError as exc:
        raise ClassServerError(f"cannot reach {base_url}: {exc}") from None
    details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
    return RequestResult(
        text="".join(pieces), ttft_s=ttft, total_s=time.perf_counter() - started,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        cached_tokens=getattr(details, "cached_tokens", None) if details is not None else None,
        completion_tokens=getattr(usage, "completion_tokens", None), model=name)


def send_chat(base_url: str, messages: list[dict[str, str]], *, max_tokens: int = 32, temperature: float = 0.0,
              model: str | None = None, api_key: str | None = None, cache_salt: str | None = None) -> RequestResult:
    """Stream one chat completion; raises :class:`ClassServerError` with the server's words on failure."""
    _check_limits(sum(len(m.get("content", "")) for m in messages), max_tokens)
    extra = {"cache_salt": cache_salt} if cache_salt else None
    return _stream(base_url, api_key, model, lambda client, name: client.chat.completions.create(
        model=name, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
        stream_options={"include_usage": True}, extra_body=extra))


def send_text(base_url: str, prompt: str, *, max_tokens: int = 32, temperature: float = 0.0,
              model: str | None = None, api_key: str | None = None) -> RequestResult:
    """Stream one plain completion (raw text, no chat template)."""
    _check_limits(len(prompt), max_tokens)
    return _stream(base_url, api_key, model, lambda client, name: client.completions.create(
        model=name, prompt=prompt, max_tokens=max_tokens, temperature=temperature, stream=True,
        stream_options={"include_usage": True}))


def send_prompt(base_url: str, prompt: Prompt, *, max_tokens: int = 32, temperature: float = 0.0) -> RequestResult:
    """What the Playground builds (:func:`teaching.pages.playground.build_prompt`): raw text or chat messages."""
    if not prompt:
        raise ClassServerError("the prompt is empty")
    if isinstance(prompt, str):
        return send_text(base_url, prompt, max_tokens=max_tokens, temperature=temperature)
    if not all(isinstance(m, dict) for m in prompt):
        raise ClassServerError("a class server takes text or chat messages, not token ids")
    return send_chat(base_url, [m for m in prompt if isinstance(m, dict)], max_tokens=max_tokens,
                     temperature=temperature)


@dataclass
class RequestTally:
    """The running tally the Live page shows: requests, hits, tokens saved, TTFT of each."""

    results: list[RequestResult] = field(default_factory=list)

    def add(self, result: RequestResult) -> None:
        self.results.append(result)

    @property
    def hits(self) -> int:
        return sum(result.hit for result in self.results)

    @property
    def tokens_saved(self) -> int:
        return sum(result.cached_tokens or 0 for result in self.results)

    @property
    def prompt_tokens(self) -> int:
        return sum(result.prompt_tokens or 0 for result in self.results)

    def rows(self) -> list[dict[str, object]]:
        return [{"#": index + 1, "TTFT (ms)": None if r.ttft_s is None else round(r.ttft_s * 1000),
                 "prompt tokens": r.prompt_tokens, "cached (saved)": r.cached_tokens,
                 "generated": r.completion_tokens, "answer": r.text[:80]}
                for index, r in enumerate(self.results)]
