"""The hash chain as HTML, checked on its markup: states, glyphs, outlines, steps, escaping."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from teaching.pages.prefix_probe import ProbeResult, RequestSpec, probe_prefix_cache
from viz.hash_chain import changed_blocks, hash_chain_css, hash_chain_html, lookup_text
from viz.theme import OUTLINES, STATE_GLYPHS

R1 = "system : you are a helpful tutor . user : my dog ate my homework , what should I do now ?"
R2 = R1.replace("my dog", "my cat")  # token 11, in block 2 (block size 4)


def probe(r2: RequestSpec | None = None, block_size: int = 4) -> ProbeResult:
    return probe_prefix_cache(RequestSpec(R1), r2 or RequestSpec(R2), block_size=block_size)


VOID = {"input", "br"}


class Tiles(HTMLParser):
    """Collects each tile's class list, data-state and text, and every other element's text by class."""

    def __init__(self) -> None:
        super().__init__()
        self.tiles: list[dict] = []
        self.by_class: dict[str, list[str]] = {}
        self._stack: list[tuple[str, dict | None, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag in VOID:
            return
        tile = None
        if "hc-tile" in (a.get("class") or "").split():
            tile = {"classes": a["class"].split(), "state": a.get("data-state"), "title": a.get("title"), "text": ""}
            self.tiles.append(tile)
        self._stack.append((a.get("class") or "", tile, []))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or not self._stack:
            return
        cls, _, parts = self._stack.pop()
        text = "".join(parts)
        for name in cls.split():
            self.by_class.setdefault(name, []).append(text)
        if self._stack:
            self._stack[-1][2].append(text)

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1][2].append(data)
            if any("hc-pending" in cls for cls, _, _ in self._stack):
                return  # the "not hashed yet" cover is not the tile's own text
            for _, tile, _ in self._stack:
                if tile is not None:
                    tile["text"] += data


def parse(result: ProbeResult) -> Tiles:
    parser = Tiles()
    parser.feed(hash_chain_html(result.cached.blocks, result.probe.blocks, none_hash=result.none_hash))
    return parser


def r2_tiles(p: Tiles) -> list[dict]:
    return [t for t in p.tiles if "r2" in t["classes"]]


def test_final_state_hits_misses_and_the_partial_tail_with_glyphs() -> None:
    p = parse(probe())
    assert [t["state"] for t in r2_tiles(p)] == ["hit"] * 2 + ["computed"] * 3 + ["partial"]
    html = hash_chain_html(probe().cached.blocks, probe().probe.blocks)
    glyphs = re.findall(r"class='hc-tile r2[^']*' data-state='(\w+)'.*?<span class='s'>(.)", html, re.S)
    assert all(glyph == STATE_GLYPHS[state] for state, glyph in glyphs) and len(glyphs) == 6  # glyph as well as colour
    assert p.by_class["hc-lookup"] == ["✓ hit: block #1", "✓ hit: block #2", "✗ miss", "✗ miss", "✗ miss", "never hashed"]
    assert "partial: never hashed" in r2_tiles(p)[5]["text"]
    assert {t["state"] for t in p.tiles if "r1" in t["classes"]} == {"cached_free", "partial"}


def test_every_hash_after_the_edit_has_the_differs_outline() -> None:
    result = probe()
    p = parse(result)
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == [2, 3, 4]
    assert ["differs" in t["classes"] for t in r2_tiles(p)] == [False, False, True, True, True, False]
    assert OUTLINES["differs"].css in hash_chain_css(5)  # one outline from the theme


def test_one_step_button_per_hashed_block_plus_the_start_and_play() -> None:
    result = probe()
    html = hash_chain_html(result.cached.blocks, result.probe.blocks, none_hash=result.none_hash)
    assert re.findall(r"id='hc-(s\d+|play)'", html) == ["play", "s0", "s1", "s2", "s3", "s4", "s5"]
    assert "id='hc-s5' aria-label='5 blocks of r2 hashed' checked" in html  # opens with every block hashed
    css = hash_chain_css(5)
    for k in range(6):
        assert f"#hc-s{k}:checked ~ .hc-body {{ --step: {k}; }}" in css
    assert "to { --step: 5; }" in css and "<" not in css.removeprefix("<style>").removesuffix("</style>")
    # r2's full blocks carry their ordinal (what --step is compared with); the partial tail does not
    assert re.findall(r"--j:(\d+)'", html).count("3") == 3  # block 2's label, tile and lookup


def test_formulas_one_per_step_with_short_hashes() -> None:
    result = probe()
    p = parse(result)
    formulas = p.by_class["hc-f"]
    assert len(formulas) == 6
    assert "NONE_HASH = #" + result.none_hash.hex()[:8] in formulas[0]
    parent = result.probe.blocks[1].block_hash.hex()[:8]
    assert formulas[3].startswith(f"block 2 = H( parent #{parent}")
    assert formulas[3].endswith(f"#{result.probe.blocks[2].block_hash.hex()[:8]} → ✗ miss")


def test_short_hash_in_the_tile_full_hash_on_hover() -> None:
    result = probe()
    tile = r2_tiles(parse(result))[2]
    block = result.probe.blocks[2]
    assert f"#{block.block_hash.hex()[:8]}" in tile["text"] and block.block_hash.hex() not in tile["text"]
    assert block.block_hash.hex() in tile["title"] and block.parent_hash.hex() in tile["title"]


def test_salt_is_an_extra_key_of_block_zero_only_but_changes_every_hash() -> None:
    result = probe(RequestSpec(R1, cache_salt="s1"))
    texts = [t["text"] for t in r2_tiles(parse(result))]
    assert "salt s1" in texts[0] and not any("salt" in t for t in texts[1:])
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == [0, 1, 2, 3, 4]
    assert lookup_text(result.probe.blocks[0]) == "✗ miss"


def test_lora_is_an_extra_key_of_every_block() -> None:
    texts = [t["text"] for t in r2_tiles(parse(probe(RequestSpec(R1, lora_name="sql"))))]
    assert all("lora sql" in t for t in texts[:5])
    assert "lora" not in texts[5]  # the partial tail is never hashed


def test_user_text_is_escaped() -> None:
    evil = "<img src=x onerror=alert(1)> & <b>bold</b> 'q'"
    result = probe_prefix_cache(RequestSpec(evil), RequestSpec(evil, lora_name="<i>x</i>"), block_size=2)
    html = hash_chain_html(result.cached.blocks, result.probe.blocks, none_hash=result.none_hash)
    assert "<img" not in html and "<i>x" not in html and "<b>bold" not in html
    assert "&lt;img" in html and "lora &lt;i&gt;x&lt;/i&gt;" in html
    assert "title='" in html and "'q'" not in html  # a quote cannot end an attribute


@pytest.mark.parametrize("block_size", [1, 3, 8, 30])
def test_any_block_size_draws(block_size: int) -> None:
    result = probe(block_size=block_size)
    p = parse(result)
    assert len(r2_tiles(p)) == len(result.probe.blocks)
    assert len(p.by_class["hc-f"]) == len(result.probe.full_blocks) + 1


def test_identical_prompt_last_block_is_left_out_by_the_last_token_rule() -> None:
    prompt = "a b c d e f g h"
    result = probe_prefix_cache(RequestSpec(prompt), RequestSpec(prompt), block_size=4)
    assert parse(result).by_class["hc-lookup"] == ["✓ hit: block #1", "in table: last-token rule"]
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == []
