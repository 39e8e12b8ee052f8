"""Every limit on input that turns into work, in one place.

PrefixLab runs on one classroom server: anything a student types, pastes or shares as a link
becomes simulator steps, hashes, figures or model tokens on that server. These numbers keep
each of those bounded, far above what any lesson or sensible experiment needs, so one link
can never take the server down. The messages that quote them are written for a student.
"""

from __future__ import annotations

import time

from engine.errors import PrefixLabError

# -- scenarios (editor, lab URL, lessons, `prefixlab replay`) --------------------------------------
MAX_SCENARIO_CHARS = 100_000  #: the whole text; the built-ins are under 2,000
MAX_SCENARIO_LINES = 2_000
MAX_NUM_BLOCKS = 4_096  #: ``blocks N`` (the lab draws every block: beyond this nothing is legible)
MAX_BLOCK_SIZE = 256
MAX_BATCHED_TOKENS = 65_536  #: ``max_num_batched_tokens``
MAX_NUM_SEQS = 1_024
MAX_REQUESTS = 500  #: ``request`` lines in one scenario
MAX_PROMPT_TOKENS = 8_192  #: tokens in one scenario prompt or scripted output
MAX_MAX_TOKENS = 8_192  #: ``max_tokens=`` of one scenario request
MAX_STEP_COUNT = 10_000  #: ``step N``; ``run`` stops after this many steps too
MAX_EVENTS = 200_000  #: cache events one run may log (each one is replayable in the lab)
PLAYER_MAX_FRAMES = 300  #: newest events of a Playground session the player gets (every state is sent: ~4 requests)
SCENARIO_TIME_BUDGET_S = 3.0  #: wall-clock seconds for one scenario run, checked inside its loops

# -- the hashing pages (Hash chain, Why did it miss?) ----------------------------------------------
MAX_PROBE_TOKENS = 2_048  #: tokens in one prompt there (2,048 words = 512 blocks of 4)
MAX_PROBE_CHARS = 50_000
MAX_EXTRA_KEY_CHARS = 1_000  #: a cache salt or LoRA name (hashed into every block)

# -- lessons -----------------------------------------------------------------------------------------
MAX_LESSON_BYTES = 200_000  #: one lesson file
MAX_LESSON_YAML_NODES = 5_000  #: nodes in one front matter (an alias bomb has billions)

# -- the real model (Playground, lessons' measurements) ---------------------------------------------
MAX_PROMPT_CHARS = 20_000  #: one Playground prompt or message (the model's context is 8,192 tokens)
MAX_GENERATE_TOKENS = 256  #: max_tokens of one Playground request
SESSION_BURST = 5  #: requests a session may start back to back ...
SESSION_REFILL_S = 3.0  #: ... then one more per this many seconds (a token bucket)
SHARED_KV_BUDGET_MIB = 1_024  #: KV memory for every Playground session together
KV_CHOICES_MIB = (8, 32, 128)  #: one session's pool, drawn from the shared budget
#: CPU cores a server leaves to its page scripts: its model worker's passes use the others (at least one).
#: On 2 cores, 30-session load test: later Playground requests' TTFT p95 0.35-0.50 s with one pass thread,
#: 0.34-0.93 s with two (whose partner thread waits for a core the pages hold).
PAGE_CORES = 1
#: The app server's youngest-generation GC threshold (ui.model.tune_page_server); Python's is 700.
SERVER_GC_THRESHOLD = 20_000
#: How often the app server's threads hand the GIL over (ui.model.tune_page_server); Python's is 5 ms.
SERVER_SWITCH_INTERVAL_S = 0.001

# -- URLs ---------------------------------------------------------------------------------------------
MAX_URL_SCENARIO_CHARS = 6_000  #: above this a shared scenario gets a short id instead of living in the URL
MAX_SHARED_SCENARIOS = 1_000  #: short ids kept per server (oldest forgotten first)


class LimitError(PrefixLabError, ValueError):
    """Input that would cost the server more than a classroom allows. The message says which limit."""


def check_size(what: str, size: int, limit: int, unit: str, hint: str = "") -> None:
    """Raise :class:`LimitError` when ``size`` is over ``limit``."""
    if size > limit:
        raise LimitError(f"{what} is {size:,} {unit}; the limit here is {limit:,}.{' ' + hint if hint else ''}")


class Deadline:
    """A wall-clock budget for one unit of work, checked from inside its loops."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise LimitError(f"{self.what} took longer than {self.seconds:g} s, the limit per run here; "
                             "make it smaller (fewer blocks, steps or requests).")


def parse_whole_number(text: object, lo: int, hi: int) -> int | None:
    """``text`` as a whole number in ``[lo, hi]``, or None: for URL values and lesson fields.

    Only ASCII digits count: ``str.isdigit`` accepts '²', which ``int`` then refuses, and ``int``
    itself accepts '٣', '1_0' and ' 7 ', none of which a shared link should carry.
    """
    if not isinstance(text, str) or not text or len(text) > 12 or not (text.isascii() and text.isdecimal()):
        return None
    value = int(text)
    return value if lo <= value <= hi else None
