"""Scenarios: a plain-text script of requests and steps that a teacher writes without Python.

A scenario is a list of lines. Settings (``blocks``, ``block_size``, ...) come first, then
actions that are played in order on a simulator engine::

    # vLLM design-doc example
    blocks 11
    block_size 4
    request r0: A B C D E F G H I J K L M N O   | max_tokens=3 output=P Q R
    step 2
    run

:func:`parse_scenario` turns the text into a :class:`Scenario` (or raises a
:class:`ScenarioError` naming the line), and :func:`run_scenario` plays it and records,
for every action, which slice of the event log it produced, so a UI can say "after line 5".
The full format is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.events import Event
from engine.kv_cache.kv_cache_spec import parse_layer_pattern
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from engine.timeline import Timeline
from engine.vllm_versions import DEFAULT_VLLM_VERSION
from teaching import limits

#: Safety net for ``run``: a scenario that needs more steps than this is surely a mistake.
MAX_RUN_STEPS = limits.MAX_STEP_COUNT
DEFAULT_NUM_BLOCKS = 11
DEFAULT_BLOCK_SIZE = 4
#: The most layers a scenario's ``layers`` pattern may name (one period of the pattern is enough).
MAX_PATTERN_LAYERS = 16


class ScenarioError(PrefixLabError, ValueError):
    """A scenario line that cannot be parsed or played. The message starts with ``Line N:``."""

    def __init__(self, line_no: int | None, message: str) -> None:
        self.line_no = line_no
        self.detail = message
        super().__init__(f"Line {line_no}: {message}" if line_no is not None else message)


# -- the parsed form -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Action:
    """One line that does something when played. ``line_no`` is 1-based, ``source`` the line itself."""

    line_no: int
    source: str


@dataclass(frozen=True)
class AddRequest(Action):
    """``request ID: prompt | options``. ``prompt`` is words (str) or token ids (list)."""

    request_id: str
    prompt: str | list[int]
    max_tokens: int
    output: str | list[int] | None = None  # scripted output: words or ids
    cache_salt: str | None = None
    lora_name: str | None = None


@dataclass(frozen=True)
class Step(Action):
    """``step`` / ``step N``: run N engine steps."""

    count: int = 1


@dataclass(frozen=True)
class RunAll(Action):
    """``run``: step until every request has finished."""


@dataclass(frozen=True)
class Finish(Action):
    """``finish ID``: abort a request now (its blocks are freed, tail first)."""

    request_id: str


@dataclass(frozen=True)
class Reset(Action):
    """``reset``: ``reset_prefix_cache`` (refused while any block is in use)."""


@dataclass
class Scenario:
    """A parsed scenario: settings plus the actions in order.

    ``num_blocks`` / ``block_size`` are ``None`` when the text does not set them, so a
    caller (the lab's sidebar) can supply its own; :meth:`resolved` fills the defaults.
    """

    title: str = "Untitled scenario"
    description: str = ""
    num_blocks: int | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    layer_pattern: str | None = None  # "layers sliding:8*5,full": a hybrid model's KV cache groups
    kv_offloading_num_blocks: int | None = None  # a second tier in host memory (vLLM's KV offloading)
    actions: list[Action] = field(default_factory=list)
    text: str = ""

    @property
    def request_ids(self) -> list[str]:
        return [a.request_id for a in self.actions if isinstance(a, AddRequest)]


# -- parsing ---------------------------------------------------------------------------------------
_SETTINGS = {
    "blocks": "num_blocks",
    "num_blocks": "num_blocks",
    "block_size": "block_size",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "offload_blocks": "kv_offloading_num_blocks",
}
_SETTING_MINIMUM = {"num_blocks": 2, "block_size": 1, "max_num_batched_tokens": 1, "max_num_seqs": 1,
                    "kv_offloading_num_blocks": 1}
_SETTING_MAXIMUM = {
    "num_blocks": limits.MAX_NUM_BLOCKS, "block_size": limits.MAX_BLOCK_SIZE,
    "kv_offloading_num_blocks": limits.MAX_NUM_BLOCKS,
    "max_num_batched_tokens": limits.MAX_BATCHED_TOKENS, "max_num_seqs": limits.MAX_NUM_SEQS,
}
_REQUEST_OPTIONS = ("max_tokens", "output", "salt", "lora")
_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_IDS_RE = re.compile(r"^\[\s*([0-9]+\s*(,\s*[0-9]+\s*)*)?,?\s*\]$")


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


def _parse_int(word: str, what: str, line_no: int, minimum: int, maximum: int) -> int:
    # ASCII digits only: ``\d`` and ``str.isdigit`` also accept '²' or Arabic digits.
    if not re.fullmatch(r"[+]?[0-9]+", word, flags=re.ASCII):
        raise ScenarioError(line_no, f"{what} must be a whole number, got {word!r}.")
    if len(word) > 12:  # int() of a huge string is itself work; anything this long is over every limit
        raise ScenarioError(line_no, f"{what} must be at most {maximum:,}, got a {len(word)}-digit number.")
    value = int(word)
    if value < minimum:
        raise ScenarioError(line_no, f"{what} must be at least {minimum}, got {value}.")
    if value > maximum:
        raise ScenarioError(line_no, f"{what} must be at most {maximum:,} on this server, got {value:,}.")
    return value


def _parse_tokens(text: str, what: str, line_no: int) -> str | list[int]:
    """Words stay a string (the engine's tokenizer encodes them); ``[1, 2]`` becomes ids."""
    text = text.strip()
    if not text:
        raise ScenarioError(line_no, f"the {what} is empty.")
    count = len(text.split(",") if text.startswith("[") else text.split())
    if count > limits.MAX_PROMPT_TOKENS:
        raise ScenarioError(line_no, f"the {what} has {count:,} tokens; the limit is {limits.MAX_PROMPT_TOKENS:,}.")
    if text.startswith("["):
        if not _IDS_RE.match(text):
            raise ScenarioError(line_no, f"the {what} {text!r} is not a list of token ids like [1, 2, 3].")
        ids = [int(x) for x in re.findall(r"[0-9]+", text)]
        if any(len(x) > 9 for x in re.findall(r"[0-9]+", text)):
            raise ScenarioError(line_no, f"the {what} has a token id over 999,999,999.")
        if not ids:
            raise ScenarioError(line_no, f"the {what} is an empty list of token ids.")
        return ids
    return text


def _split_options(text: str, line_no: int) -> dict[str, str]:
    """``max_tokens=3 output=P Q R salt=x`` -> dict; words after ``output=`` belong to it."""
    options: dict[str, str] = {}
    key: str | None = None
    for word in text.split():
        if "=" in word:
            key, _, value = word.partition("=")
            key = key.strip().lower()
            if key not in _REQUEST_OPTIONS:
                raise ScenarioError(
                    line_no, f"unknown request option {key!r}; use {', '.join(o + '=' for o in _REQUEST_OPTIONS)}."
                )
            if key in options:
                raise ScenarioError(line_no, f"option {key}= is given twice.")
            options[key] = value
        elif key == "output":
            options[key] = f"{options[key]} {word}".strip()
        else:
            raise ScenarioError(line_no, f"{word!r} after '|' is not an option; write options as key=value.")
    return options


def _parse_request(rest: str, line_no: int, source: str, seen: set[str]) -> AddRequest:
    head, bar, option_text = rest.partition("|")
    if ":" not in head:
        raise ScenarioError(line_no, "a request needs an id and a colon, like 'request r0: A B C D'.")
    request_id, _, prompt_text = head.partition(":")
    request_id = request_id.strip()
    if not request_id:
        raise ScenarioError(line_no, "the request has no id before the colon.")
    if not _ID_RE.match(request_id):
        raise ScenarioError(line_no, f"request id {request_id!r} may only use letters, digits, '_', '-' and '.'.")
    if request_id in seen:
        raise ScenarioError(line_no, f"request id {request_id!r} is used twice.")
    prompt = _parse_tokens(prompt_text, "prompt", line_no)
    options = _split_options(option_text, line_no) if bar else {}
    output = _parse_tokens(options["output"], "output", line_no) if "output" in options else None
    output_len = None if output is None else (len(output) if isinstance(output, list) else len(output.split()))
    if "max_tokens" in options:
        max_tokens = _parse_int(options["max_tokens"], "max_tokens", line_no, 1, limits.MAX_MAX_TOKENS)
        if output_len is not None and output_len > max_tokens:
            raise ScenarioError(line_no, f"output has {output_len} tokens but max_tokens={max_tokens}.")
    else:
        max_tokens = output_len or 1
    for key in ("salt", "lora"):
        if key in options and not options[key]:
            raise ScenarioError(line_no, f"{key}= needs a value.")
    return AddRequest(
        line_no, source, request_id, prompt, max_tokens, output,
        cache_salt=options.get("salt"), lora_name=options.get("lora"),
    )


def parse_scenario(text: str) -> Scenario:
    """Parse scenario text. Raises :class:`ScenarioError` ("Line N: ...") on the first bad line."""
    if len(text) > limits.MAX_SCENARIO_CHARS:
        raise ScenarioError(None, f"The scenario is {len(text):,} characters long; the limit is "
                                  f"{limits.MAX_SCENARIO_CHARS:,}.")
    if text.count("\n") >= limits.MAX_SCENARIO_LINES:
        raise ScenarioError(None, f"The scenario has {text.count(chr(10)) + 1:,} lines; the limit is "
                                  f"{limits.MAX_SCENARIO_LINES:,}.")
    scenario = Scenario(text=text)
    comments: list[str] = []  # the comment lines before the first setting or action
    in_header = True
    seen: set[str] = set()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        source = raw.strip()
        line = _strip_comment(raw)
        if not line:
            if in_header and source.startswith("#"):
                comments.append(source.lstrip("#").strip())
            continue
        in_header = False
        keyword, _, rest = line.partition(" ")
        keyword = keyword.lower()
        if keyword.endswith(":") and keyword[:-1] == "request":  # "request: A B" (no id)
            raise ScenarioError(line_no, "a request needs an id, like 'request r0: A B C D'.")
        rest = rest.strip()
        if keyword in _SETTINGS:
            name = _SETTINGS[keyword]
            if scenario.actions:
                raise ScenarioError(line_no, f"'{keyword}' is a setting: put it before the first request or step.")
            if not rest or " " in rest:
                raise ScenarioError(line_no, f"'{keyword}' needs one number, like '{keyword} 8'.")
            setattr(scenario, name, _parse_int(rest, keyword, line_no, _SETTING_MINIMUM[name], _SETTING_MAXIMUM[name]))
        elif keyword == "layers":
            if scenario.actions:
                raise ScenarioError(line_no, "'layers' is a setting: put it before the first request or step.")
            try:
                windows = parse_layer_pattern(rest)
            except PrefixLabError as exc:
                raise ScenarioError(line_no, f"'layers {rest}': {exc}") from None
            if len(windows) > MAX_PATTERN_LAYERS:
                raise ScenarioError(line_no, f"'layers' names {len(windows)} layers; at most {MAX_PATTERN_LAYERS} here.")
            scenario.layer_pattern = rest
        elif keyword == "request":
            if len(seen) >= limits.MAX_REQUESTS:
                raise ScenarioError(line_no, f"a scenario may add at most {limits.MAX_REQUESTS} requests.")
            action = _parse_request(rest, line_no, source, seen)
            seen.add(action.request_id)
            scenario.actions.append(action)
        elif keyword == "step":
            count = _parse_int(rest, "the step count", line_no, 1, limits.MAX_STEP_COUNT) if rest else 1
            scenario.actions.append(Step(line_no, source, count))
        elif keyword == "run":
            if rest:
                raise ScenarioError(line_no, "'run' takes nothing after it (it steps until every request finishes).")
            scenario.actions.append(RunAll(line_no, source))
        elif keyword == "finish":
            if not rest or " " in rest:
                raise ScenarioError(line_no, "'finish' needs one request id, like 'finish r0'.")
            if rest not in seen:
                raise ScenarioError(line_no, f"'finish {rest}': no request {rest!r} was added before this line.")
            scenario.actions.append(Finish(line_no, source, rest))
        elif keyword == "reset":
            if rest:
                raise ScenarioError(line_no, "'reset' takes nothing after it.")
            scenario.actions.append(Reset(line_no, source))
        else:
            raise ScenarioError(
                line_no,
                f"unknown command {keyword!r}. Lines start with one of: blocks, block_size, layers, "
                "max_num_batched_tokens, max_num_seqs, offload_blocks, request, step, run, finish, reset "
                "(or # for a comment).",
            )
    if comments:
        scenario.title = comments[0]
        scenario.description = "\n".join(comments[1:]).strip()
    return scenario


# -- playing -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActionSpan:
    """The events one action produced: ``events[start:end]``, plus a note when it did nothing."""

    action: Action
    start: int
    end: int
    note: str = ""


class EngineLog:
    """What any played engine's log offers to the pages and the player, read off ``self.engine``."""

    engine: LLMEngine

    @property
    def free_policy(self) -> str:
        """The free rule of its version ("vllm" or "classic"): a fact of the version, not a setting."""
        return self.engine.kv_cache_manager.version.free_policy

    @property
    def events(self) -> list[Event]:
        return self.engine.kv_cache_manager.events.events

    @property
    def num_blocks(self) -> int:
        return self.engine.kv_cache_manager.num_blocks

    @property
    def block_size(self) -> int:
        return self.engine.kv_cache_manager.block_size

    def timeline(self) -> Timeline:
        return self.engine.timeline()


@dataclass
class ScenarioRun(EngineLog):
    """A scenario played on one engine: the engine, its event log, and per-action event ranges."""

    scenario: Scenario
    engine: LLMEngine
    vllm_version: str  # the release whose rules it played ("0.33", "0.25", "0.23")
    spans: list[ActionSpan]

    def span_at(self, index: int) -> ActionSpan | None:
        """The action whose events include the state after ``index`` events (None before any)."""
        for span in self.spans:
            if span.start < index <= span.end:
                return span
        return None

    def token_text(self, token_id: int) -> str:
        """How the engine's word tokenizer writes a token (``t1234`` for unscripted outputs)."""
        return self.engine.tokenizer.token_text(token_id)


def _encode(engine: LLMEngine, tokens: str | list[int]) -> list[int]:
    return list(tokens) if isinstance(tokens, list) else engine.tokenize(tokens)


def _check_budget(engine: LLMEngine, deadline: limits.Deadline) -> None:
    """Called inside every loop of a run: stop a run that is too big, with a clear error."""
    deadline.check()
    num_events = len(engine.kv_cache_manager.events.events)
    if num_events > limits.MAX_EVENTS:
        raise limits.LimitError(f"the run logged over {limits.MAX_EVENTS:,} cache events, the limit here; "
                                "make it smaller (fewer steps or requests).")


def _play(engine: LLMEngine, action: Action, deadline: limits.Deadline) -> str:
    """Apply one action to the engine; returns a note for the UI (empty when nothing to say)."""
    if isinstance(action, AddRequest):
        prompt = _encode(engine, action.prompt)
        output = None if action.output is None else _encode(engine, action.output)
        engine.add_request(
            prompt, SamplingParams(max_tokens=action.max_tokens), request_id=action.request_id,
            cache_salt=action.cache_salt, lora_name=action.lora_name, scripted_output=output,
        )
        return ""
    if isinstance(action, Step):
        idle = 0
        for _ in range(action.count):
            if not engine.has_unfinished_requests():
                idle += 1
                continue
            _check_budget(engine, deadline)
            engine.step()
        return f"{idle} of {action.count} steps had nothing to run" if idle else ""
    if isinstance(action, RunAll):
        steps = 0
        while engine.has_unfinished_requests():
            if steps >= MAX_RUN_STEPS:
                raise ScenarioError(action.line_no, f"'run' did not finish within {MAX_RUN_STEPS} steps.")
            _check_budget(engine, deadline)
            engine.step()
            steps += 1
        return "" if steps else "nothing left to run"
    if isinstance(action, Finish):
        if engine.get_request(action.request_id).is_finished:
            return f"{action.request_id} had already finished"
        engine.abort_request(action.request_id)
        return ""
    if isinstance(action, Reset):
        ok = engine.reset_prefix_cache()
        return "" if ok else "reset refused: some blocks are still in use by requests"
    raise TypeError(f"unknown action {action!r}")


def run_scenario(
    scenario: Scenario | str,
    vllm_version: str = DEFAULT_VLLM_VERSION,
    *,
    enable_prefix_caching: bool = True,
    num_blocks: int | None = None,
    block_size: int | None = None,
    hash_algo: str = "sha256",
    hash_seed: str | None = None,
    seed: int = 0,
    time_budget_s: float = limits.SCENARIO_TIME_BUDGET_S,
) -> ScenarioRun:
    """Play ``scenario`` on a fresh simulator engine that follows ``vllm_version``'s rules.

    ``num_blocks`` / ``block_size`` override the scenario's own settings (the lab's
    sidebar); when both are ``None`` the scenario's values apply, then the defaults
    (11 blocks of 4 tokens, the design doc's pool). Errors become :class:`ScenarioError`
    naming the line that caused them; a run past ``time_budget_s`` or
    :data:`~teaching.limits.MAX_EVENTS` stops itself with one.
    """
    if isinstance(scenario, str):
        scenario = parse_scenario(scenario)
    config_kwargs: dict[str, object] = {}
    if scenario.max_num_batched_tokens is not None:
        config_kwargs["max_num_batched_tokens"] = scenario.max_num_batched_tokens
    if scenario.max_num_seqs is not None:
        config_kwargs["max_num_seqs"] = scenario.max_num_seqs
    if scenario.layer_pattern is not None:
        config_kwargs["layer_pattern"] = scenario.layer_pattern
    if scenario.kv_offloading_num_blocks is not None:
        config_kwargs["kv_offloading_num_blocks"] = scenario.kv_offloading_num_blocks
    for name, value, maximum in (("blocks", num_blocks, limits.MAX_NUM_BLOCKS), ("block_size", block_size, limits.MAX_BLOCK_SIZE)):
        if value is not None and value > maximum:
            raise ScenarioError(None, f"{name} must be at most {maximum:,} on this server, got {value:,}.")
    try:
        config = EngineConfig(
            backend="simulator",
            num_blocks=num_blocks or scenario.num_blocks or DEFAULT_NUM_BLOCKS,
            block_size=block_size or scenario.block_size or DEFAULT_BLOCK_SIZE,
            vllm_version=vllm_version,
            enable_prefix_caching=enable_prefix_caching,
            hash_algo=hash_algo,
            hash_seed=hash_seed,
            seed=seed,
            **config_kwargs,  # type: ignore[arg-type]
        )
    except PrefixLabError as exc:
        raise ScenarioError(None, f"Bad engine settings: {exc}") from exc
    engine = LLMEngine(config)
    events = engine.kv_cache_manager.events.events
    spans: list[ActionSpan] = []
    deadline = limits.Deadline(time_budget_s, "Playing this scenario")
    for action in scenario.actions:
        start = len(events)
        try:
            _check_budget(engine, deadline)
            note = _play(engine, action, deadline)
        except ScenarioError:
            raise
        except (PrefixLabError, ValueError, RuntimeError) as exc:
            raise ScenarioError(action.line_no, f"{action.source!r} failed: {exc}") from exc
        spans.append(ActionSpan(action, start, len(events), note))
    return ScenarioRun(scenario, engine, engine.kv_cache_manager.version.name, spans)
