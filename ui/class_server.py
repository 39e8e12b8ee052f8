"""The Playground's "send to the class server" mode: the prompt goes to a shared server instead.

The teacher runs one server (``prefixlab serve`` or vLLM); every student's prompt then meets the
others' in one prefix cache, and the Live page shows it. Logic lives in :mod:`teaching.live.client`.
"""

from __future__ import annotations

import streamlit as st

from teaching.live.client import ClassServerError, RequestResult, send_prompt
from teaching.pages.playground import build_prompt
from teaching.pages.playground_session import PlaygroundSession
from ui.class_config import class_server_started, class_server_url

DEFAULT_URL = "http://127.0.0.1:8000"
SHOWN_RESULTS = 5


def result_line(result: RequestResult) -> str:
    ttft = "…" if result.ttft_s is None else f"{result.ttft_s * 1000:.0f} ms"
    return (f"**TTFT {ttft}** · prompt {result.prompt_tokens} tokens · **{result.cached_tokens or 0} cached** "
            f"(served by the class server's prefix cache) · {result.completion_tokens} generated")


def class_server_panel(pg: PlaygroundSession) -> bool:
    """Draw the mode's switch; when on, its own Send and the answers kept in ``pg``. True when the mode is on."""
    s = st.session_state
    s.setdefault("pg_class_on", class_server_started())  # on by default under `prefixlab class`
    on = st.toggle("Send to the class server", key="pg_class_on",
                   help="Send this prompt to a shared server (the teacher's) instead of your own engine: "
                        "everyone's prompts meet in one prefix cache.")
    if not on:
        return False
    url = st.text_input("Class server URL", class_server_url(DEFAULT_URL), key="pg_class_url")
    if st.button("Send to the class server", type="primary", key="pg_class_send", icon=":material/cloud_upload:"):
        text = pg.current_text  # the boxes' widgets copied their values into pg before the script ran
        prompt = build_prompt(pg.mode, text, pg.system)
        try:
            with st.spinner("Waiting for the class server…"):
                result = send_prompt(url, prompt, max_tokens=int(pg.max_tokens),
                                     temperature=float(pg.temperature))
        except ClassServerError as exc:
            st.error(str(exc))
        else:
            pg.class_results.insert(0, (text, result))
    for text, result in pg.class_results[:SHOWN_RESULTS]:
        with st.container(border=True):
            st.markdown(result_line(result))
            st.markdown(f"**You:** {text[-300:]}")
            st.markdown(f"**{result.model}:** {result.text or '(no text)'}")
    if not pg.class_results:
        st.info("Nothing sent yet. The answer, TTFT and the tokens the shared cache saved appear here; "
                "the Live page shows the server's cache.")
    return True
