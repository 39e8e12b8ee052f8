"""Turn a :class:`~teaching.pages.prefix_probe.ProbeResult` into plain English: why did r2 miss?

The verdict (how many blocks hit, where the lookup stopped and why) is the engine's own
``CacheLookup`` event; this module only *names* the cause a student should look at: a
differing token, a differing cache salt or LoRA adapter, a partial block, or the rule that
the last token is always recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

from teaching.pages.prefix_probe import ProbeResult, RequestSpec
from teaching.scenarios.describe import describe_extra_keys


@dataclass(frozen=True)
class MissExplanation:
    headline: str  # one sentence: the verdict and its main cause
    reasons: tuple[str, ...]  # the rules that apply, one sentence each


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _span(first: int, last: int) -> str:
    return f"token {first}" if first == last else f"tokens {first}-{last}"


def _token(result: ProbeResult, which: str, position: int) -> str:
    trace = result.cached if which == "r1" else result.probe
    return repr(trace.tokens_text[position]) if position < trace.num_tokens else "(end of prompt)"


def _q(value: str | None) -> str:
    return repr(value) if value else "none"


def extra_key_differences(r1: RequestSpec, r2: RequestSpec) -> list[str]:
    """Cache keys besides tokens that differ, each with the blocks it affects."""
    diffs = []
    if (r1.cache_salt or None) != (r2.cache_salt or None):
        diffs.append(
            f"The cache salt differs ({_q(r1.cache_salt)} vs {_q(r2.cache_salt)}): it is in "
            "block 0's extra keys only, but every later hash chains on block 0, so no block can match."
        )
    if (r1.lora_name or None) != (r2.lora_name or None):
        diffs.append(
            f"The LoRA adapter differs ({_q(r1.lora_name)} vs {_q(r2.lora_name)}): it is in "
            "every block's extra keys, because the same tokens give different K/V under another adapter."
        )
    return diffs


def _miss_cause(result: ProbeResult, block: int) -> str:
    """Why block ``block`` of r2 was not in the hash table."""
    bs = result.block_size
    diff = result.first_diff_token
    r1_full = len(result.cached.full_blocks)
    if diff is not None and diff < result.cached.num_tokens and diff // bs == block:
        return f"block {block} differs at token {diff} ({_token(result, 'r1', diff)} vs {_token(result, 'r2', diff)})"
    if block >= r1_full:
        if block < len(result.cached.blocks):
            return (
                f"block {block} was partial in r1 ({_plural(len(result.cached.blocks[block].token_ids), 'token')} "
                f"of {bs}), and a partial block is never cached"
            )
        return f"r1 has only {_plural(r1_full, 'full block')}, so there is no block {block} to hit"
    r1, r2 = result.cached.spec, result.probe.spec
    if block == 0 and r1.cache_salt != r2.cache_salt:
        return (
            f"the cache salt differs ({_q(r1.cache_salt)} vs {_q(r2.cache_salt)}), so block 0's hash differs, "
            "and every later hash with it"
        )
    if r1.lora_name != r2.lora_name:
        return f"the LoRA adapter differs ({_q(r1.lora_name)} vs {_q(r2.lora_name)}), and it is in every block's hash"
    r1_keys = result.cached.blocks[block].extra_keys
    r2_keys = result.probe.blocks[block].extra_keys
    if r1_keys != r2_keys:
        return f"block {block} has different extra keys ({describe_extra_keys(r1_keys)} vs {describe_extra_keys(r2_keys)})"
    return f"block {block}'s hash is not in the hash table"


def _last_token_cause(result: ProbeResult, cap: int, n: int) -> str:
    """The lookup stopped before block ``cap`` because it holds r2's last token.

    When that block also differs from r1, say so: calling it a match would contradict the
    table of differences shown under the verdict.
    """
    last = f"block {cap} holds r2's last token (token {n - 1}), which is always recomputed to get the next token's logits"
    diff = result.first_diff_token
    bs = result.block_size
    if diff is not None and diff < result.cached.num_tokens and diff // bs == cap:
        before = "block 0 matches" if cap == 1 else f"blocks 0-{cap - 1} match"
        return (f"{before}; the lookup stops there because {last}. "
                f"Block {cap} also differs at token {diff} ({_token(result, 'r1', diff)} vs "
                f"{_token(result, 'r2', diff)}), so it could not have hit anyway")
    return f"every full block matches, but {last}"


def _same_tokens(result: ProbeResult) -> str:
    """Equal token ids: say whose tokenizer made them equal when the typed texts differ.

    The word tokenizer drops spaces, so "a b " and "a b" give the same ids here; SmolLM2's
    tokenizer (what vLLM would use) makes a trailing space a token of its own.
    """
    p1, p2 = result.prompt_texts or (result.cached.spec.prompt, result.probe.spec.prompt)
    if result.tokenizer != "words":
        same = "send the same text" if p1 == p2 else "differ only in ways SmolLM2's tokenizer does not see"
        return f"r1 and r2 {same}: SmolLM2's tokenizer gives them the same token ids, as vLLM would."
    if isinstance(p1, str) and isinstance(p2, str) and p1 != p2:
        return ("The prompts differ only in spacing, and this page's word tokenizer drops spaces, so r1 and r2 "
                "get the same tokens here. A real tokenizer keeps them: SmolLM2's turns a trailing space into "
                "a token of its own, so vLLM would see different prompts (switch to SmolLM2's tokenizer to see it).")
    return "r1 and r2 send the same prompt, so they have the same token ids."


def explain(result: ProbeResult) -> MissExplanation:
    """The headline verdict plus every rule that shaped it."""
    lookup, bs = result.lookup, result.block_size
    n = result.probe.num_tokens
    hits = result.num_hit_blocks
    verdict = f"r2 would hit {_plural(hits, 'block')} ({hits * bs} of its {_plural(n, 'token')})"
    cap = lookup.max_hit_blocks
    if lookup.stop_reason == "miss" and lookup.first_miss_block_index is not None:
        cause = _miss_cause(result, lookup.first_miss_block_index)
    elif lookup.stop_reason == "the last token is always recomputed":
        cause = _last_token_cause(result, cap, n)
    elif lookup.stop_reason == "the partial tail block is never cached":
        sits = "the last token sits" if n % bs == 1 else f"the last {n % bs} tokens sit"
        cause = f"every full block hit; {sits} in a partial block, which is never cached"
    elif lookup.stop_reason == "no full block to look up":
        cause = f"r2 has only {_plural(n, 'token')}, so no block can hit ((num_tokens - 1) // block_size = 0)"
    else:
        cause = lookup.stop_reason
    headline = f"{verdict}: {cause}."

    reasons: list[str] = []
    diff = result.first_diff_token
    if diff is None:
        reasons.append(_same_tokens(result))
    elif diff >= result.cached.num_tokens:
        reasons.append(f"r1 ends at token {diff}; r2 goes on ({_token(result, 'r2', diff)} next), so everything "
                       f"from token {diff} is new to the cache.")
    elif diff >= n:
        reasons.append(f"r2 is a prefix of r1: it ends at token {diff}.")
    else:
        reasons.append(
            f"First differing token: token {diff} in block {diff // bs} "
            f"({_token(result, 'r1', diff)} in r1 vs {_token(result, 'r2', diff)} in r2)."
        )
    reasons.extend(extra_key_differences(result.cached.spec, result.probe.spec))
    reasons.append(
        f"Last-token rule: at most (num_tokens - 1) // block_size = ({n} - 1) // {bs} = "
        f"{_plural(cap, 'block')} of r2 can hit."
    )
    if n % bs:
        tail = n // bs
        reasons.append(
            f"Block {tail} ({_span(tail * bs, n - 1)}) is partial: it is never hashed, so it is never cached."
        )
    reasons.append(f"r2 computes {_plural(n - hits * bs, 'token')} and reuses {hits * bs} from the cache.")
    return MissExplanation(headline, tuple(reasons))
