"""KV events of a real engine (the simulator back end: real scheduler, cache and hashes, no model).

A class's worth of chat-like prompts: a few system prompts, many students under each, each
student's conversation growing turn by turn, so the cache is a tree that branches at every
system prompt and student and runs unbranched along each conversation. Run through
:class:`engine.llm_engine.LLMEngine`, each step's events become one vLLM ``KVEventBatch`` frame,
exactly as ``prefixlab serve`` publishes them. Generated when needed, never stored in the repo.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from engine.config import EngineConfig
from engine.kv_events import encode_batch
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from teaching.live.frames import Frame

WORDS = ("cache block prefix token request replica router student teacher bread bakery rye flour oven "
         "morning question answer memory hash chain branch tree leaf root page table batch step model "
         "attention layer query key value window sliding system prompt lesson example kitchen recipe").split()
TOPICS = ["You are the class tutor for caching.", "You are a baker who explains recipes step by step.",
          "You are a travel guide for small towns.", "You answer questions about gardening.",
          "You are a chess coach for beginners.", "You explain physics with kitchen examples."]

Encode = Callable[[str], Sequence[int]]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def class_prompts(encode: Encode, *, students: int, turns: int, seed: int, system_words: int = 420,
                  turn_words: int = 180) -> list[list[int]]:
    """Prompts in arrival order: every student's turn t after every student's turn t-1."""
    rng = random.Random(seed)
    systems = [list(encode(topic + " " + " ".join(_sentence(rng, 12) for _ in range(system_words // 12))))
               for topic in TOPICS]
    conversations = [list(systems[index % len(systems)]) for index in range(students)]
    prompts: list[list[int]] = []
    for _ in range(turns):
        for student, conversation in enumerate(conversations):
            conversation.extend(encode(f" Student {student} asks: " + " ".join(
                _sentence(rng, 12) for _ in range(turn_words // 12))))
            prompts.append(list(conversation))
    return prompts


def engine_frames(prompts: list[list[int]], server: str, *, block_size: int = 16, num_blocks: int = 16_384,
                  topic: str = "kv") -> list[Frame]:
    """Every KV-event batch the engine publishes while answering ``prompts`` (one token each)."""
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=block_size, num_blocks=num_blocks,
                                    max_num_batched_tokens=8192, max_num_seqs=64))
    manager = engine.kv_cache_manager
    frames: list[Frame] = []
    params = SamplingParams(max_tokens=1, temperature=0.0)
    for start in range(0, len(prompts), 32):
        for ids in prompts[start:start + 32]:
            engine.add_request(ids, params)
        while engine.has_unfinished_requests():
            engine.step()
            events = manager.take_events()
            manager.events.drop_taken()
            payload = encode_batch(events, ts=time.time())
            if payload is not None:
                frames.append(Frame(topic, len(frames), payload, server))
    return frames
