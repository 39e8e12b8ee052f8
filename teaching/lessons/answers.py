"""The question vocabulary of lessons: small expressions answered by running the engine.

A lesson never writes down an answer. It writes an *expression* such as
``hit_blocks r1`` or ``free_queue``, and a scenario line; :func:`engine_state_after`
plays the scenario up to that line on a fresh simulator engine and :func:`evaluate`
reads the answer off the engine (its live objects and its event log). If the engine
changes, the lessons' answers change with it, and never silently disagree.

Every expression has a *kind* that says how to print it, how to compare a student's
choice with it, and how to invent wrong-but-plausible options:

========== ======================================= =====================
kind       example value                           printed as
========== ======================================= =====================
``block``  ``7`` or ``None``                       ``7`` / ``none``
``blocks`` ``[7, 5, 8]`` (order matters)           ``7, 5, 8`` / ``none``
``set``    ``[1, 2, 3]`` (order does not matter)   ``1, 2, 3`` / ``none``
``number`` ``3`` (a count)                         ``3``
``tokens`` ``8`` (a token count)                   ``8``
``percent````0.5``                                 ``50%``
``status`` ``"finished"``                          ``finished``
========== ======================================= =====================
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from engine.errors import PrefixLabError
from engine.events import BlockRemoved, BlocksTouched, Event, RequestPreempted
from engine.timeline import CacheSnapshot
from teaching.scenarios.scenario import ActionSpan, Scenario, ScenarioRun, run_scenario

KINDS = ("block", "blocks", "set", "number", "tokens", "percent", "status")
STATUSES = ("waiting", "running", "preempted", "finished")


class AnswerError(PrefixLabError, ValueError):
    """An answer expression that cannot be evaluated (unknown word, unknown request, ...)."""


# -- the engine state after one scenario line -------------------------------------------------------
@dataclass
class EngineState:
    """The engine stopped right after one scenario line: what every question reads from.

    ``line_events`` are the events that line produced (for "what did this step evict?");
    ``snapshot`` is the whole cache rebuilt from the event log at that point.
    """

    run: ScenarioRun
    span: ActionSpan | None  # the line's events; None for "before the first action"
    snapshot: CacheSnapshot

    @property
    def events(self) -> list[Event]:
        return self.run.events

    @property
    def line_events(self) -> list[Event]:
        return [] if self.span is None else self.events[self.span.start : self.span.end]

    @property
    def block_size(self) -> int:
        return self.run.block_size


def truncate(scenario: Scenario, line_no: int) -> Scenario:
    """The scenario with only its actions up to and including ``line_no``."""
    return replace(scenario, actions=[a for a in scenario.actions if a.line_no <= line_no])


def engine_state_after(scenario: Scenario, line_no: int, policy: str = "vllm") -> EngineState:
    """Play ``scenario`` up to ``line_no`` (0 = before any action) on a fresh engine.

    Stopping the engine at the line, rather than replaying a snapshot, keeps live values
    (a request's ``num_cached_tokens``, the hit rate) exactly as the engine holds them.
    """
    run = run_scenario(truncate(scenario, line_no), policy)
    span = run.spans[-1] if run.spans and line_no > 0 else None
    snapshot = run.timeline().state_at(len(run.events)).copy()
    return EngineState(run, span, snapshot)


# -- the vocabulary ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Word:
    """One answer word: what argument it takes, the kind of its value, and what it means."""

    name: str
    arg: str | None  # "request", "block" or None
    kind: str
    meaning: str
    fn: Callable[[EngineState, Any], object]  # the argument's type follows ``arg``


def _request(state: EngineState, request_id: str):
    try:
        return state.run.engine.get_request(request_id)
    except KeyError:
        known = ", ".join(state.run.scenario.request_ids) or "none"
        raise AnswerError(
            f"no request {request_id!r} exists by this line (requests in the scenario: {known})."
        ) from None


def _next_evicted(state: EngineState, _: object) -> int | None:
    return next((b for b in state.snapshot.free_queue if state.snapshot.block_hash[b] is not None), None)


def _evicted_blocks(state: EngineState, _: object) -> list[int]:
    return [b for e in state.line_events if isinstance(e, BlockRemoved) for b in e.block_ids]


def _hit_blocks(state: EngineState, request_id: str) -> list[int]:
    """Blocks the request took from the cache at its latest admission (preemption drops them)."""
    _request(state, request_id)
    hits: list[int] = []
    for event in state.events:
        if isinstance(event, BlocksTouched) and event.request_id == request_id:
            hits = list(event.block_ids)
        elif isinstance(event, RequestPreempted) and event.request_id == request_id:
            hits = []
    return hits


def _block_table(state: EngineState, request_id: str) -> list[int]:
    _request(state, request_id)
    return list(state.snapshot.block_tables.get(request_id, []))


def _num_full_blocks(state: EngineState, request_id: str) -> int:
    return sum(1 for b in _block_table(state, request_id) if state.snapshot.block_hash[b] is not None)


def _num_cached_tokens(state: EngineState, request_id: str) -> int:
    return max(0, _request(state, request_id).num_cached_tokens)


def _status(state: EngineState, request_id: str) -> str:
    status = _request(state, request_id).status
    return "finished" if status.is_finished else status.value


def _ref_cnt(state: EngineState, block_id: int) -> int:
    if not 0 <= block_id < state.snapshot.num_blocks:
        raise AnswerError(f"block {block_id} does not exist; this pool has blocks 0..{state.snapshot.num_blocks - 1}.")
    return state.snapshot.ref_cnt[block_id]


def _hit_rate(state: EngineState, _: object) -> float:
    return state.run.engine.kv_cache_manager.prefix_cache_stats.hit_rate


def _unchained_hits(state: EngineState, request_id: str) -> int:
    """How many leading blocks a cache keyed on *block tokens alone* would claim to hold.

    Uses the engine's own :class:`~engine.hashing.BlockHasher` with no parent for every
    block: the hash then depends only on the block's own tokens, so two blocks with the
    same tokens after *different* prefixes collide. Compared against every block any
    earlier request filled; capped like the real lookup (the last token is recomputed).
    """
    request = _request(state, request_id)
    hasher = state.run.engine.kv_cache_manager.hasher
    bs = state.block_size
    seen: set[bytes] = set()
    for other_id in state.run.scenario.request_ids:
        if other_id == request_id:
            break
        other = _request(state, other_id).all_token_ids
        seen.update(hasher.hash_block(None, other[i : i + bs]) for i in range(0, len(other) - bs + 1, bs))
    tokens = request.prompt_token_ids
    count = 0
    for index in range((len(tokens) - 1) // bs):
        if hasher.hash_block(None, tokens[index * bs : (index + 1) * bs]) not in seen:
            break
        count += 1
    return count


VOCABULARY: dict[str, Word] = {
    w.name: w
    for w in [
        Word("free_queue", None, "blocks", "the free queue, head (reused next) to tail", lambda s, _: list(s.snapshot.free_queue)),
        Word("next_reused", None, "block", "the block at the head of the free queue: the next one handed out", lambda s, _: s.snapshot.next_victim),
        Word("next_evicted", None, "block", "the first block from the head that still has a hash: the next cached prefix lost", _next_evicted),
        Word("evicted_blocks", None, "blocks", "blocks evicted by this line, in order", _evicted_blocks),
        Word("cached_blocks", None, "set", "every block that carries a hash (in use or free)", lambda s, _: [b for b, h in enumerate(s.snapshot.block_hash) if h is not None]),
        Word("num_free_blocks", None, "number", "how many blocks are in the free queue", lambda s, _: len(s.snapshot.free_queue)),
        Word("hit_rate", None, "percent", "token hit rate of the prefix cache so far (vLLM's counting)", _hit_rate),
        Word("hit_blocks", "request", "blocks", "blocks the request took from the cache at its latest admission", _hit_blocks),
        Word("num_cached_tokens", "request", "tokens", "prompt tokens served from the cache on first admission", _num_cached_tokens),
        Word("block_table", "request", "blocks", "the request's physical blocks in logical order (none once it has finished)", _block_table),
        Word("num_blocks", "request", "number", "how many blocks the request holds now", lambda s, r: len(_block_table(s, r))),
        Word("num_full_blocks", "request", "number", "how many of the request's blocks are full and hashed", _num_full_blocks),
        Word("status", "request", "status", "waiting, running, preempted or finished", _status),
        Word("num_preemptions", "request", "number", "how many times the request was preempted", lambda s, r: _request(s, r).num_preemptions),
        Word("unchained_hits", "request", "number", "leading blocks a token-only (parentless) hash would wrongly claim as cached", _unchained_hits),
        Word("ref_cnt", "block", "number", "the block's reference count", _ref_cnt),
    ]
}


@dataclass(frozen=True)
class Expression:
    """A parsed answer expression: a vocabulary word and its argument, if any."""

    word: Word
    arg: str | int | None

    @property
    def kind(self) -> str:
        return self.word.kind

    def __str__(self) -> str:
        return self.word.name if self.arg is None else f"{self.word.name} {self.arg}"


def parse_expression(text: str) -> Expression:
    """``"hit_blocks r1"`` -> Expression. Raises :class:`AnswerError` with the vocabulary on a typo."""
    parts = str(text).split()
    if not parts:
        raise AnswerError("the answer is empty; write one of: " + ", ".join(VOCABULARY) + ".")
    name, args = parts[0], parts[1:]
    word = VOCABULARY.get(name)
    if word is None:
        raise AnswerError(f"unknown answer {name!r}; use one of: " + ", ".join(VOCABULARY) + ".")
    if word.arg is None:
        if args:
            raise AnswerError(f"'{name}' takes nothing after it.")
        return Expression(word, None)
    if len(args) != 1:
        raise AnswerError(f"'{name}' needs one {word.arg}, like '{name} {'r1' if word.arg == 'request' else '3'}'.")
    if word.arg == "block":
        if not (args[0].isascii() and args[0].isdecimal() and len(args[0]) <= 9):  # isdigit() takes '²'
            raise AnswerError(f"'{name}' needs a block number, got {args[0]!r}.")
        return Expression(word, int(args[0]))
    return Expression(word, args[0])


def evaluate(expression: Expression, state: EngineState) -> object:
    """Read the answer off the engine."""
    return expression.word.fn(state, expression.arg)


# -- printing, matching, options --------------------------------------------------------------------
def format_value(value: Any, kind: str) -> str:
    """The canonical text of a value: what the page shows and what options are compared by."""
    if kind in ("blocks", "set"):
        items = list(value)
        return ", ".join(str(b) for b in items) if items else "none"
    if kind == "block":
        return "none" if value is None else str(value)
    if kind == "percent":
        pct = round(float(value) * 100, 1)
        return f"{pct:g}%"
    return str(value)


def _ints(text: str) -> list[int] | None:
    """Block ids written as ``7, 5, 8`` / ``[7, 5]`` / ``none``; None when it is not such a list."""
    cleaned = text.strip().strip("[]").strip()
    if cleaned.lower() in ("", "none", "-", "—", "empty"):
        return []
    if not re.fullmatch(r"\d+(\s*[,\s]\s*\d+)*", cleaned):
        return None
    return [int(x) for x in re.findall(r"\d+", cleaned)]


def option_matches(option: object, value: Any, kind: str) -> bool:
    """Does a teacher's option (text, number or YAML list) say the same as the engine's value?"""
    if isinstance(option, list):
        option = ", ".join(str(x) for x in option)
    text = str(option).strip()
    if kind in ("blocks", "set", "block"):
        ids = _ints(text)
        if ids is None:
            return False
        if kind == "block":
            return ids == ([] if value is None else [value])
        return ids == list(value) if kind == "blocks" else sorted(ids) == sorted(value)
    if kind == "percent":
        try:
            return abs(float(text.rstrip("%").strip()) - float(value) * 100) < 0.05
        except ValueError:
            return False
    if kind in ("number", "tokens"):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return text.lower() == str(value).lower()


def _distractors(value: Any, kind: str, state: EngineState, rng: random.Random) -> list[object]:
    """Wrong values a student could plausibly believe, most instructive first."""
    n = state.snapshot.num_blocks
    if kind == "block":
        pool = list(state.snapshot.free_queue) + list(range(1, n))
        return [b for b in dict.fromkeys(pool) if b != value] + ([None] if value is not None else [])
    if kind in ("blocks", "set"):
        items = list(value)
        extra = next((b for b in range(1, n) if b not in items), None)
        cands: list[object] = []
        if len(items) > 1 and kind == "blocks":
            cands += [items[::-1], sorted(items), items[1:] + items[:1]]
        if items:
            cands += [items[:-1], items[1:]]
        if extra is not None:
            cands += [items + [extra], [extra] + items[:-1]]
        cands += [[], list(range(1, min(n, 4)))]
        rng.shuffle(cands[len(cands) // 2 :])
        return cands
    if kind in ("number", "tokens"):
        v = int(value)
        step = state.block_size if kind == "tokens" else 1  # token counts move a block at a time
        numbers = [v + step, v - step, 0, v + 2 * step, 2 * v, v + 3 * step]
        return [c for c in numbers if c >= 0]
    if kind == "percent":
        return _percent_distractors(float(value), state)
    if value == "preempted":
        # A preempted request sits in the waiting queue, so "waiting" is half right: never offer it as wrong.
        return [s for s in STATUSES if s not in (value, "waiting")]
    return [s for s in STATUSES if s != value]


def _percent_distractors(value: float, state: EngineState) -> list[object]:
    """Hit rates a student gets by miscounting one or two blocks, so the right answer is not the odd one out.

    Round numbers (0%, 50%, 100%) give the answer away when the real rate is 45.3%; rates off
    by a block of hit tokens look just as plausible as the right one.
    """
    stats = state.run.engine.kv_cache_manager.prefix_cache_stats
    queries, hits, bs = stats.queries, stats.hits, state.block_size
    if not queries:
        return [0.25, 0.5, 1.0]
    cands = [(hits + d * bs) / queries for d in (1, -1, 2, -2, 3)]
    near: list[object] = [c for c in cands if 0.0 <= c <= 1.0 and abs(c - value) > 0.0005]
    return near + [value / 2, 0.25, 0.5, 1.0]


def generate_options(value: object, kind: str, state: EngineState, seed: str, count: int = 4) -> list[str]:
    """The engine's answer plus ``count - 1`` distinct distractors, in a stable shuffled order."""
    rng = random.Random(seed)
    right = format_value(value, kind)
    texts = [right]
    for cand in _distractors(value, kind, state, rng):
        text = format_value(cand, kind)
        if text not in texts and not option_matches(text, value, kind):
            texts.append(text)
        if len(texts) == count:
            break
    if kind in ("number", "tokens", "percent", "block"):
        return sorted(texts, key=lambda t: (t == "none", float(t.rstrip("%")) if t != "none" else 0.0))
    rng.shuffle(texts)
    return texts


# -- what a student needs to hear: the order an answer is read in, and the rule behind it ----------
#: For answers that are block lists in a meaningful order: which order.
ORDER_HINTS: dict[str, str] = {
    "free_queue": "head first (the block reused next), tail last",
    "evicted_blocks": "in the order they were evicted",
    "hit_blocks": "in the request's logical order (its first block first)",
    "block_table": "in the request's logical order (its first block first)",
}

#: The rule each answer word follows, named when a student's choice is wrong.
RULES: dict[str, str] = {
    "free_queue": ("a finishing request frees its blocks last block first; under vLLM 0.33 a block without a hash "
                   "goes to the head of the free queue and a hashed one to the tail (vLLM 0.23 (classic): every block to the tail); "
                   "a hit takes a block out of the queue"),
    "next_reused": "an allocation always pops the head of the free queue",
    "next_evicted": ("eviction is lazy: a cached block keeps its hash in the free queue and loses it only when it "
                     "reaches the head and is popped for reuse"),
    "evicted_blocks": ("eviction is lazy: only blocks popped from the head of the free queue lose their hash, and only "
                       "if they still had one"),
    "cached_blocks": "only full blocks get a hash, and a freed block keeps it until it is popped for reuse",
    "num_free_blocks": "a block is in the free queue exactly when its ref count is 0; a hit on a free block takes it out",
    "hit_rate": "hit rate = prompt tokens served from the cache ÷ prompt tokens looked up, over every request so far",
    "hit_blocks": ("the lookup walks the chained hashes from block 0 and stops at the first miss, and never takes the "
                   "block that holds the prompt's last token (it is recomputed for the logits)"),
    "num_cached_tokens": ("cached tokens = hit blocks × block size: the lookup stops at the first miss and never covers "
                          "the prompt's last token"),
    "block_table": "a request's table lists its hit blocks first, then new blocks popped from the head of the free queue",
    "num_blocks": "a request holds one block per block_size tokens it has in the cache (prompt plus generated), rounded up",
    "num_full_blocks": "only a block holding block_size tokens is full and hashed; the last, partial block is not",
    "status": ("a request is 'waiting' until it is first scheduled, 'running' while it computes, 'preempted' once it "
               "gave its blocks back and waits at the front of the waiting queue, and 'finished' when it is done"),
    "num_preemptions": ("when a running request needs a block and none is free, the scheduler preempts the last "
                        "running request"),
    "unchained_hits": ("a hash of a block's tokens alone ignores everything before it; vLLM chains each hash on its "
                       "parent's, so equal tokens after a different prefix never match"),
    "ref_cnt": "a block's ref count is the number of requests whose block tables hold it right now",
}


def order_hint(expression: Expression) -> str:
    """One line telling the student whether the order of the blocks matters, and which order."""
    if expression.kind == "blocks":
        return "Order matters: list the blocks " + ORDER_HINTS.get(expression.word.name, "in the order the engine has them") + "."
    if expression.kind == "set":
        return "Order does not matter."
    return ""


def diagnose(choice: str, value: Any, kind: str) -> str:
    """What is wrong with a student's choice, compared with the engine's value (one short phrase)."""
    if kind in ("blocks", "set"):
        picked, right = _ints(choice), list(value)
        if picked is None:
            return ""
        if kind == "blocks" and sorted(picked) == sorted(right):
            return "the right blocks, but in the wrong order"
        missing = [b for b in right if b not in picked]
        extra = [b for b in picked if b not in right]
        parts = []
        if missing:
            parts.append(f"it leaves out {', '.join(map(str, missing))}")
        if extra:
            parts.append(f"{', '.join(map(str, extra))} {'does' if len(extra) == 1 else 'do'} not belong")
        return " and ".join(parts)
    if kind in ("number", "tokens", "percent"):
        try:
            picked_num = float(choice.rstrip("%"))
        except ValueError:
            return ""
        right_num = float(value) * (100 if kind == "percent" else 1)
        return "too high" if picked_num > right_num else "too low"
    return ""


def wrong_answer_feedback(expression: Expression, choice: str, value: object, rule: str = "") -> str:
    """Feedback for a wrong choice that names the rule the student missed.

    ``rule`` is the question's own rule when the lesson gives one: ``hit_blocks`` in a LoRA
    question is about the adapter in the hash, not about the last token.
    """
    what = diagnose(choice, value, expression.kind)
    rule = rule or RULES.get(expression.word.name, expression.word.meaning)
    head = f"Not quite: **{choice}**: {what}." if what else f"Not quite: the engine does not say **{choice}**."
    return f"{head} The rule: {rule}."
