"""A character whose UTF-8 bytes span several tokens is held back until its last byte arrives, also
when the output ends there (as vLLM's incremental detokenizer does): no U+FFFD in the text."""

from __future__ import annotations

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model.tokenizer import TextTokenizer
from engine.simulator import SimulatorBackend


def byte_level_tokenizer() -> TextTokenizer:
    """A real byte-level BPE with no merges: one token per byte (as SmolLM2's for rare characters)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return TextTokenizer(PreTrainedTokenizerFast(tokenizer_object=tokenizer))


def run(output_ids: list[int], tokenizer: TextTokenizer) -> list[str]:
    backend = SimulatorBackend()
    backend.tokenizer = tokenizer  # type: ignore[assignment]
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=16, block_size=4), backend=backend)
    request_id = engine.add_request([1, 2, 3], SamplingParams(max_tokens=len(output_ids), ignore_eos=True))
    backend.set_script(request_id, output_ids)
    texts = []
    while engine.has_unfinished_requests():
        texts += [out.text for out in engine.step() if out.request_id == request_id]
    return texts


def test_a_character_split_across_tokens_is_held_back_until_complete():
    tokenizer = byte_level_tokenizer()
    ids = tokenizer.encode("a€")  # "a", then the euro sign's three bytes
    assert len(ids) == 4 and "\ufffd" in tokenizer.decode(ids[:3])
    assert run(ids, tokenizer) == ["a", "a", "a", "a€"]


def test_an_output_that_ends_inside_a_character_ends_before_it():
    tokenizer = byte_level_tokenizer()
    ids = tokenizer.encode("a€")[:3]
    assert run(ids, tokenizer)[-1] == "a"
