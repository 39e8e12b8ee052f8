"""Built-in scenarios: small, hand-checked traces that each show one behaviour of the cache.

Each is plain scenario text (see ``docs/scenarios.md``), so a teacher can copy one into the
editor and change it. The first comment line is the title, the following ones the summary.
"""

from __future__ import annotations

import functools

from teaching.scenarios.scenario import Scenario, parse_scenario

DESIGN_DOC_EXAMPLE = """\
# Two free-queue rules, one trace: vLLM's own worked example
# Two requests share the prefix A..J. After both finish, r2 comes back for A..L plus 17 new
# tokens. Compare the free queue under vllm and classic: vllm reuses hashless blocks first,
# so block 4 (A..P) survives; classic evicts it.
blocks 11
block_size 4
request r0: A B C D E F G H I J K L M N O | output=P Q R
step      # r0 prefills A..O into blocks 1-4 (A-D, A-H, A-L cached) and decodes P
step      # r0 computes P: block 4 is full, so A-P is cached; it decodes Q
request r1: A B C D E F G H I J k l m n | output=o p
step      # r0 computes Q in new block 5 and finishes; r1 hits 1, 2 and gets 6, 7
step      # r1 decodes p and finishes
request r2: A B C D E F G H I J K L a b c d e f g h i j q r s t u v w | output=x
run       # r2 hits 1, 2, 3 and needs 5 new blocks
"""

SHARED_SYSTEM_PROMPT = """\
# Shared system prompt
# Four chats start with the same 9-token system prompt. The first computes it; every later
# request hits its two full blocks (8 tokens; the ninth shares a block with the question),
# and the ref counts show how many requests share them.
blocks 17
block_size 4
request u1: You are a kind tutor . Be brief . What is a cache ? | output=a fast store
step
request u2: You are a kind tutor . Be brief . Explain hashing please | output=it maps keys
request u3: You are a kind tutor . Be brief . Why use blocks ? | output=fixed size pages
step
request u4: You are a kind tutor . Be brief . What is LRU eviction ? | output=least recently used
run
"""

DIVERGENCE = """\
# Divergence in the middle
# Two prompts agree on their first 8 tokens and differ at the 9th. Only the blocks
# before the first difference can hit: the block that holds the difference gets a new
# hash, and because hashes are chained, so does every block after it, even where the
# tokens agree again.
blocks 13
block_size 4
request a: the cat sat on the mat and then it slept all day long | output=zzz
run
request b: the cat sat on the mat and then a dog slept all day long | output=woof
run
"""

EVICTION_PRESSURE = """\
# A small pool: which cached document survives?
# Eight usable blocks and three documents of two blocks each that take turns. Watch the free
# queue: freed blocks join the tail, new allocations pop the head, and a cached block is
# evicted only when it reaches the head. doc1 comes back after doc2 and doc3: is it still
# there?
blocks 9
block_size 4
request q1: doc1 w1 w2 w3 w4 w5 w6 w7 ask one | output=x
run
request q2: doc2 v1 v2 v3 v4 v5 v6 v7 ask two | output=y
run
request q3: doc3 u1 u2 u3 u4 u5 u6 u7 ask three | output=z
run
request q4: doc1 w1 w2 w3 w4 w5 w6 w7 ask again | output=x
run
request q5: doc4 s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 s12 s13 s14 s15 | output=k
run
request q6: doc2 v1 v2 v3 v4 v5 v6 v7 ask two more | output=y
run
"""

PREEMPTION = """\
# Preemption
# Two requests decode long answers in a pool that cannot hold both. When the first needs a
# new block and none is free, the scheduler preempts the last running request: its blocks
# are freed tail first (so they stay cached), and it waits at the front of the queue. When
# it comes back it re-hits whatever of its blocks survived.
blocks 7
block_size 4
request r0: one two three four five six seven eight | output=a b c d e f g h
request r1: uno dos tres cuatro cinco seis siete ocho | output=i j k l m n o p
run
"""

#: key -> scenario text, in the order the lab lists them.
#: A hybrid model's scenario (lesson 12's): a window releases blocks, they are evicted first, and a
#: repeat of the prompt gets nothing from the cache. Not in the lab's list: the lab plays every
#: scenario under both free rules, and vLLM 0.23's rules have no sliding-window groups here.
HYBRID_SLIDING_WINDOW = """\
# A sliding window releases blocks, and the hit needs them
# One sliding-window layer (8 tokens) and one full-attention layer: two KV cache groups.
blocks 24
block_size 4
layers sliding:8,full
request r1: S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 S11 S12 S13 S14 S15 S16 | output=o1 o2 o3 o4 o5 o6 o7 o8 o9 o10 o11 o12
step 8
request other: Q1 Q2 Q3 Q4 Q5 Q6 Q7 Q8 Q9 Q10 Q11 Q12 Q13 Q14 Q15 Q16 Q17 Q18 Q19 Q20 | output=w x y z
step 2    # other takes the blocks r1's window released; r1 is still decoding
run
request r2: S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 S11 S12 S13 S14 S15 S16 again | output=done
run
"""

BUILTIN_SCENARIOS: dict[str, str] = {
    "eviction-pressure": EVICTION_PRESSURE,  # first: it evicts under the default rule, so every lab control has work
    "design-doc": DESIGN_DOC_EXAMPLE,
    "shared-system-prompt": SHARED_SYSTEM_PROMPT,
    "divergence": DIVERGENCE,
    "preemption": PREEMPTION,
}
#: The scenario the lab opens on.
DEFAULT_SCENARIO = "eviction-pressure"


def builtin_scenario(key: str) -> Scenario:
    """Parse one built-in scenario by key (``KeyError`` lists the keys)."""
    if key not in BUILTIN_SCENARIOS:
        raise KeyError(f"No built-in scenario {key!r}; choose one of {list(BUILTIN_SCENARIOS)}.")
    return parse_scenario(BUILTIN_SCENARIOS[key])


@functools.cache
def builtin_titles() -> dict[str, str]:
    """key -> title, for a select box; parsed once (the lab's every run asks). Do not change the dict."""
    return {key: parse_scenario(text).title for key, text in BUILTIN_SCENARIOS.items()}
