"""One student's Playground: the boxes' settings, the requests sent, and the session's own engine.

The page keeps one :class:`PlaygroundSession` in its session state and only draws it: a click
calls :meth:`~PlaygroundSession.send`, the script streams an answer with
:meth:`~PlaygroundSession.step`, Reset and Clear call :meth:`~PlaygroundSession.reset_cache` and
:meth:`~PlaygroundSession.clear`. Nothing here needs Streamlit, so it runs on the simulator in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from teaching import limits
from teaching.live.client import RequestResult
from teaching.pages.playground import CHAT, PRESETS, build_prompt

#: What the session's engine is built from: caching on, KV MiB, block size, free policy, hash algorithm.
EngineSettings = tuple[bool, int, int, str, str]
#: Builds an engine from a config and a KV budget in MiB (the app's shares the loaded model's weights).
BuildEngine = Callable[[EngineConfig, int], LLMEngine]


@dataclass(frozen=True)
class SentRequest:
    """A request this session sent: its id, the box it came from, and what the student typed."""

    id: str
    mode: str
    user: str


@dataclass
class PlaygroundSession:
    """The Playground's state and what a student can do to it (send, step, reset, clear)."""

    kv_mib: int  # this session's KV budget, one of teaching.limits.KV_CHOICES_MIB
    preset: str = "shared-system"
    mode: str = CHAT
    system: str = ""
    message: str = ""  # the chat box
    text: str = ""  # the raw-text box
    continue_chat: bool = False
    max_tokens: int = 24
    temperature: float = 0.0
    caching: bool = True
    next_input: int = 0  # the preset's input the boxes hold
    history: list[SentRequest] = field(default_factory=list)  # newest first
    chat: list[dict[str, str]] = field(default_factory=list)  # turns re-sent when continuing a chat
    pending: list[SentRequest] = field(default_factory=list)  # sent, still generating (one at a time)
    queue: list[str] = field(default_factory=list)  # the preset's later inputs, sent one by one
    error: str | None = None
    notice: str | None = None
    engine: LLMEngine | None = None
    engine_settings: EngineSettings | None = None
    class_results: list[tuple[str, RequestResult]] = field(default_factory=list)  # the class server's answers
    drawn: dict[str, Any] = field(default_factory=dict)  # a finished request's picture, drawn once (it never changes)

    def __post_init__(self) -> None:
        if not (self.message or self.text):
            self.load_preset(self.preset)

    # -- the boxes --------------------------------------------------------------------------------------
    def load_preset(self, name: str | None = None) -> None:
        """Copy a preset's first input (and its mode and system prompt) into the boxes."""
        self.preset = name or self.preset
        preset = PRESETS[self.preset]
        self.mode, self.system, self.continue_chat = preset.mode, preset.system, preset.continue_chat
        self.next_input, self.chat, self.error = 0, [], None
        self.fill_input(preset.inputs[0])

    def fill_input(self, text: str) -> None:
        if self.mode == CHAT:
            self.message = text
        else:
            self.text = text

    @property
    def current_text(self) -> str:
        return self.message if self.mode == CHAT else self.text

    def advance_preset(self, sent: str) -> None:
        """When the sent text was the preset's next input, put the one after it in the box."""
        inputs = PRESETS[self.preset].inputs
        if self.next_input < len(inputs) and sent == inputs[self.next_input]:
            self.next_input += 1
            if self.next_input < len(inputs):
                self.fill_input(inputs[self.next_input])

    def keep_drawn(self, shown: list[str]) -> None:
        """Forget the pictures of requests no longer shown: a session keeps a few figures, not one per request."""
        self.drawn = {request_id: figure for request_id, figure in self.drawn.items() if request_id in shown}

    # -- the engine -------------------------------------------------------------------------------------
    def engine_for(self, settings: EngineSettings, build: BuildEngine) -> LLMEngine:
        """This session's engine; rebuilt (empty pool, no requests) when ``settings`` changed or after Clear."""
        if self.engine is None or self.engine_settings != settings:
            caching, kv_mib, block_size, free_policy, hash_algo = settings
            config = EngineConfig(enable_prefix_caching=caching, block_size=block_size, vllm_version=free_policy,
                                  hash_algo=hash_algo)
            self.engine = None  # the old pool goes back to the shared budget first
            self.drawn = {}
            self.engine = build(config, kv_mib)
            self.engine_settings = settings
            self.history, self.chat, self.pending, self.queue = [], [], [], []
        return self.engine

    def send(self, text: str, engine: LLMEngine) -> bool:
        """Queue one request for ``text`` (the boxes' mode, system prompt and chat history apply); on
        success the preset moves on. A refusal is kept in :attr:`error` and the text stays in the box."""
        history = self.chat if self.mode == CHAT and self.continue_chat else []
        try:
            if self.pending:  # one request in flight per student: the model is shared
                raise PrefixLabError("Wait for the current answer to finish before sending another.")
            for name, typed in (("The prompt", text), ("The system prompt", self.system)):
                limits.check_size(name, len(typed), limits.MAX_PROMPT_CHARS, "characters")
            prompt = build_prompt(self.mode, text, self.system, history)
            params = SamplingParams(max_tokens=min(int(self.max_tokens), limits.MAX_GENERATE_TOKENS),
                                    temperature=float(self.temperature))
            request_id = engine.add_request(prompt, params)
        except PrefixLabError as exc:  # the engine's own words
            self.error = str(exc)
            return False
        self.error = None
        self.pending.append(SentRequest(request_id, self.mode, text))
        self.advance_preset(text)
        return True

    def send_rest(self, engine: LLMEngine) -> bool:
        """Send the box's input, then (one after another) every later input of the preset."""
        inputs = PRESETS[self.preset].inputs
        at = min(self.next_input, len(inputs) - 1)
        rest = list(inputs[self.next_input + 1:]) if self.current_text == inputs[at] else []
        sent = self.send(self.current_text, engine)
        if sent:
            self.queue = rest
        return sent

    @property
    def can_send_rest(self) -> bool:
        return self.next_input < len(PRESETS[self.preset].inputs) - 1

    def step(self, engine: LLMEngine) -> bool:
        """One forward pass for the oldest pending request; False once it is done, and then it has moved
        to :attr:`history` (an answer that failed is aborted, its error kept)."""
        item = self.pending[0]
        if not engine.get_request(item.id).is_finished:
            try:
                engine.step()  # one forward pass, shared with every other student generating now
                return True
            except (PrefixLabError, RuntimeError) as exc:
                engine.abort_request(item.id)
                # Blocks of the failed step may be in the prefix cache without their K/V: forget them.
                engine.reset_prefix_cache()
                self.error = f"{item.id} could not run: {exc}"
        self.pending.pop(0)
        self.history.insert(0, item)
        if item.mode == CHAT:
            turn = [{"role": "user", "content": item.user},
                    {"role": "assistant", "content": engine.output_of(item.id).text}]
            self.chat = (self.chat + turn) if self.continue_chat else turn
        return False

    def send_queued(self, engine: LLMEngine) -> bool:
        """After an answer: send the preset's next queued input, unless something went wrong."""
        if self.queue and self.error is None:
            return self.send(self.queue.pop(0), engine)
        self.queue = []
        return False

    def reset_cache(self, engine: LLMEngine) -> None:
        ok = engine.reset_prefix_cache()
        self.notice = ("Prefix cache cleared: every hash is gone, the next request computes all of its blocks."
                       if ok else "Reset refused: a request still holds blocks.")

    def clear(self) -> None:
        """Forget the engine: the next draw builds a fresh one with an empty pool."""
        self.engine, self.error, self.notice, self.drawn = None, None, None, {}
