"""The Playground's logic without Streamlit: presets, prompts, and one request seen as blocks.

Everything here is a plain function over an :class:`~engine.llm_engine.LLMEngine` (real model
or simulator) and its event log, so the page stays thin and these rules are unit-testable
without loading a model.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.events import BlocksAllocated, BlocksFreed, BlocksTouched, Event
from engine.hashing import short_hash
from engine.llm_engine import LLMEngine, Prompt

CHAT, TEXT = "chat", "text"

TUTOR = (
    "You are PrefixLab's tutor, a patient teacher who explains how large language model serving engines work. "
    "You answer in two or three short, plain sentences. You like concrete examples with numbers. "
    "Key ideas you may use: a prompt is split into tokens; tokens are grouped into fixed-size blocks; "
    "the key-value (KV) cache stores the attention keys and values of every token; a block of KV is reused "
    "when another request starts with exactly the same tokens; each full block gets a hash chained to the "
    "hash of the block before it; blocks no request uses wait in a free queue and are evicted least recently "
    "used first."
)

DOCUMENT = (
    "Paged attention stores the key-value cache of a language model in fixed-size blocks, much like an "
    "operating system stores memory in pages. Each request has a block table that maps its logical blocks to "
    "physical blocks in one shared pool. Because blocks are small and all the same size, memory is not "
    "wasted on padding, and many requests fit in the same GPU at once. Automatic prefix caching builds on "
    "this: when a block is full, the engine computes a hash of its tokens and of the hash of the block "
    "before it. A later request that begins with the same tokens finds those hashes in a table and reuses "
    "the blocks instead of recomputing them, which cuts the time to the first token."
)

DIVERGENCE_START = (
    "In a small town by the sea there was a bakery that opened every morning at six. The baker, an old man "
    "with flour on his sleeves, knew every customer by name and every order by heart. One winter morning "
)


@dataclass(frozen=True)
class Preset:
    """A small workload: prompts sent one after another, to show one kind of reuse."""

    title: str
    mode: str  # CHAT: system prompt + user messages; TEXT: raw prompts
    inputs: tuple[str, ...]  # user messages (CHAT) or whole prompts (TEXT), sent in order
    system: str = ""
    continue_chat: bool = False  # each turn re-sends the conversation so far
    note: str = ""


PRESETS: dict[str, Preset] = {
    "shared-system": Preset(
        "Shared system prompt", CHAT,
        ("What is a KV cache?", "Why are prompts split into blocks?", "What does the free queue do?"),
        system=TUTOR,
        note="Every question sits behind the same long system prompt: from the second request on, "
             "its full blocks are hits and only the question is computed.",
    ),
    "multi-turn": Preset(
        "Multi-turn chat", CHAT,
        ("Give me one sentence about caches.", "Now say it more simply."),
        system="You are a helpful assistant who answers briefly.", continue_chat=True,
        note="Turn 2 re-sends turn 1 and the model's answer: every full block of turn 1 is a hit, and so are "
             "blocks the answer filled (give it more max tokens to see more of them).",
    ),
    "document-qa": Preset(
        "Long document + questions", TEXT,
        tuple(f"Document:\n{DOCUMENT}\n\nQuestion: {q}\nAnswer:" for q in (
            "What does a block table map?", "Why is memory not wasted?", "What does a later request reuse?")),
        note="Raw text prompts: the document comes first, so each new question reuses its blocks.",
    ),
    "divergence": Preset(
        "Divergence in the middle", TEXT,
        (DIVERGENCE_START + "a cat walked in and asked for bread. The baker",
         DIVERGENCE_START + "the oven would not light and the baker"),
        note="The two prompts agree up to the middle. Blocks before the first different token hit; the "
             "block holding it and every block after it miss, because each hash includes its parent.",
    ),
}


def build_prompt(mode: str, text: str, system: str = "", history: Sequence[dict[str, str]] = ()) -> Prompt:
    """What ``engine.add_request`` takes: raw text, or chat messages (the engine applies the template).

    ``history`` is the conversation so far (user/assistant turns) when continuing a chat.
    """
    if mode == TEXT:
        return text
    messages = [{"role": "system", "content": system}] if system.strip() else []
    messages += list(history)
    if not text.strip():  # the engine names the problem; an empty chat turn is still an empty prompt
        return ""
    return messages + [{"role": "user", "content": text}]


@functools.lru_cache(maxsize=1 << 16)
def token_piece(tokenizer: Any, token_id: int) -> str:
    """How one token reads on a block: special tokens kept, newlines as ↵, a bare space as ␣.

    Kept per (tokenizer, token): the pictures of a long session decode the same tokens again and again.
    """
    hf = getattr(tokenizer, "hf_tokenizer", None)
    text = hf.decode([token_id], skip_special_tokens=False) if hf is not None else tokenizer.decode([token_id])
    text = text.replace("\n", "↵").strip()
    return text or "␣"


def request_block_ids(events: Sequence[Event], request_id: str) -> list[int]:
    """The physical blocks of a request's block table, in logical order, read from the event log.

    A finished request has freed its blocks, so the engine no longer knows them; the events do.
    After a preemption the table restarts, so the last table the request held wins.
    """
    current: list[int] = []
    last: list[int] = []
    for event in events:
        if getattr(event, "request_id", None) != request_id:
            continue
        if isinstance(event, (BlocksTouched, BlocksAllocated)):
            current.extend(event.block_ids)
        elif isinstance(event, BlocksFreed):
            last, current = current, []
    return current or last


@dataclass
class RequestView:
    """One request, ready to draw with :func:`viz.tokens.token_blocks_figure`."""

    request_id: str
    token_text: list[str]
    num_prompt_tokens: int
    block_size: int
    states: list[str]  # hit / computed / partial per block
    short_hashes: list[str | None]
    full_hashes: list[str | None]
    physical_ids: list[int | None]
    text: str
    finished: bool
    metrics: dict[str, float | int | None] = field(default_factory=dict)

    @property
    def num_hit_blocks(self) -> int:
        return self.states.count("hit")


def request_view(engine: LLMEngine, request_id: str) -> RequestView:
    """Prompt and output tokens as blocks: which were hits, their hashes, the blocks backing them."""
    request = engine.get_request(request_id)
    output = engine.output_of(request_id)
    block_size = engine.kv_cache_manager.block_size
    tokens = list(request.all_token_ids)
    n_blocks = -(-len(tokens) // block_size)
    cached = output.metrics.num_cached_tokens if output.metrics else output.num_cached_tokens
    hit_blocks = cached // block_size
    hashes = list(request.block_hashes)
    table = request_block_ids(engine.kv_cache_manager.events.events, request_id)
    states, shorts, fulls, physical = [], [], [], []
    for index in range(n_blocks):
        full = (index + 1) * block_size <= len(tokens)
        states.append("partial" if not full else "hit" if index < hit_blocks else "computed")
        block_hash = hashes[index] if full and index < len(hashes) else None
        shorts.append(short_hash(block_hash) if block_hash else None)
        fulls.append(block_hash.hex() if block_hash else None)
        physical.append(table[index] if index < len(table) else None)  # the last sampled token has no slot
    return RequestView(
        request_id=request_id,
        token_text=[token_piece(engine.tokenizer, t) for t in tokens],
        num_prompt_tokens=request.num_prompt_tokens,
        block_size=block_size,
        states=states,
        short_hashes=shorts,
        full_hashes=fulls,
        physical_ids=physical,
        text=output.text,
        finished=output.finished,
        metrics=output.metrics.as_dict() if output.metrics else {},
    )


def _ms(seconds: object) -> str:
    return f"{float(seconds) * 1000:.0f} ms" if isinstance(seconds, (int, float)) else "…"


def metrics_text(m: dict[str, float | int | None]) -> str:
    """Where one request's time went, in a line: queue, the engine's TTFT (from scheduling) with its
    prefill apart, decode speed, and the tokens the cache saved.

    TTFT counts from the moment the scheduler picks the request, not from the click on Send: the
    page redraws in between, and that time would hide what the cache saves. The wait before that
    (other requests ahead, or the shared model busy) is shown apart as the queue.
    """
    rate = m.get("tokens_per_s")
    decode = f" · decode {float(rate):.1f} tokens/s" if isinstance(rate, (int, float)) else ""
    return (f"queued {_ms(m.get('queue_s'))} · **TTFT {_ms(m.get('scheduled_ttft_s'))}** (scheduled → first token; "
            f"prefill forward pass {_ms(m.get('prefill_s'))}){decode} · prompt {m.get('prompt_tokens')} tokens · "
            f"**{m.get('cached_tokens')} cached** (saved) · **{m.get('computed_prefill_tokens')} computed** in prefill · "
            f"{m.get('output_tokens')} generated")
