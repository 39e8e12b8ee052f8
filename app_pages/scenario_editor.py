"""Scenario editor: write a scenario as plain text, check it, run it in the lab.

Bad text shows an error naming the line; the text stays in the box, nothing is lost.
"""

from __future__ import annotations

import streamlit as st

from teaching.scenarios.library import BUILTIN_SCENARIOS, DESIGN_DOC_EXAMPLE, builtin_titles
from teaching.scenarios.scenario import Scenario, ScenarioError, parse_scenario
from ui.persist import copy_back, mirror
from ui.settings import current_settings
from ui.state import CUSTOM, get_runs, init_lab_state
from ui.style import LAB_CSS
from ui.text import plain_md

CHEATSHEET = """\
| line | meaning |
|---|---|
| `# text` | comment; the first comment lines are the title and summary |
| `blocks 11` | pool size, block 0 included (it is the null block) |
| `block_size 4` | tokens per block |
| `max_num_batched_tokens 8` / `max_num_seqs 2` | scheduler budget per step (optional) |
| `request r0: A B C D \\| max_tokens=3 output=P Q R` | a request: words are tokens; options after `\\|` |
| `request r2: [1, 2, 3]` | a prompt given as token ids |
| options | `max_tokens=N`, `output=words` or `output=[ids]`, `salt=NAME`, `lora=NAME` |
| `step` / `step 3` | run one / three engine steps |
| `run` | step until every request has finished |
| `finish r0` | abort a request now (its blocks are freed) |
| `reset` | reset the prefix cache (refused while blocks are in use) |
"""


def load_builtin() -> None:
    st.session_state["editor_text"] = BUILTIN_SCENARIOS[st.session_state["editor_template"]]
    st.session_state.pop("editor_error", None)


def summary(scenario: Scenario) -> str:
    requests = len(scenario.request_ids)
    return (f"**{plain_md(scenario.title)}** — {requests} request{'s' if requests != 1 else ''}, "
            f"{len(scenario.actions)} action{'s' if len(scenario.actions) != 1 else ''}.")


def current_text() -> str:
    """The text box's value (a button click can arrive before the box's own on_change)."""
    text = st.session_state.get("_w_editor_text", st.session_state["editor_text"])
    st.session_state["editor_text"] = text
    return text


def run_in_lab() -> None:
    """Play the text; on success it becomes the lab's scenario, at event 0, and the lab opens."""
    text = current_text()
    try:
        get_runs(text, current_settings())
    except ScenarioError as exc:
        st.session_state["editor_error"] = exc
        st.session_state["editor_ok"] = None
        return
    st.session_state.update(custom_text=text, lab_source=CUSTOM, lab_pos=0, lab_block=None, lab_hash=None,
                            lab_predict=False, editor_error=None,
                            editor_ok="Loaded into the lab.", editor_go=True)


def check() -> None:
    """Parse *and play* the text, as the lab will: a pool too small for a request fails here, not later."""
    text = current_text()
    try:
        scenario = parse_scenario(text)
        get_runs(text, current_settings())
    except ScenarioError as exc:
        st.session_state.update(editor_error=exc, editor_ok=None)
        return
    st.session_state.update(editor_error=None, editor_ok="Looks good, it plays to the end: " + summary(scenario))


def main() -> None:
    init_lab_state()
    if st.session_state.pop("editor_go", False):
        st.switch_page("app_pages/lab.py")
    st.session_state.setdefault("editor_text", st.session_state["custom_text"] or DESIGN_DOC_EXAMPLE)
    st.markdown(LAB_CSS, unsafe_allow_html=True)
    st.markdown("<div class='lab-title'>Scenario editor</div>", unsafe_allow_html=True)
    st.markdown("Write requests and steps as plain text, then **Run in the lab** to step through them. "
                "The format is described below and in `docs/scenarios.md`.")
    titles = builtin_titles()
    st.session_state.setdefault("editor_template", "design-doc")  # the picker names the text the box starts with
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    c1.selectbox("Start from a built-in scenario", list(titles), key=mirror("editor_template"),
                 on_change=copy_back("editor_template"), format_func=titles.__getitem__)
    c2.button("Load it", key="editor_load", on_click=load_builtin, width="stretch",
              help="Replaces the text below with the built-in scenario.")
    b1, b2, msg = st.columns([1.35, 1, 2.9], vertical_alignment="center")
    b1.button("Run in the lab", key="editor_run", type="primary", on_click=run_in_lab, width="stretch")
    b2.button("Check", key="editor_check", on_click=check, width="stretch")
    error = st.session_state.get("editor_error")
    with msg:
        if error is not None:
            st.error(plain_md(str(error)), icon=":material/error:")
        elif st.session_state.get("editor_ok"):
            st.success(st.session_state["editor_ok"], icon=":material/check_circle:")
    if error is not None and error.line_no is not None:
        lines = st.session_state["editor_text"].splitlines()
        if 1 <= error.line_no <= len(lines):
            st.code(f"{error.line_no:>3} | {lines[error.line_no - 1]}", language=None)
    st.text_area("Scenario", key=mirror("editor_text"), on_change=copy_back("editor_text"), height=340,
                 label_visibility="collapsed")
    if st.session_state.get("lab_source") == CUSTOM and st.session_state.get("editor_ok"):
        st.page_link("app_pages/lab.py", label="Open the lab", icon=":material/grid_view:")
    with st.expander("Scenario format", expanded=error is not None):
        st.markdown(CHEATSHEET)


main()
