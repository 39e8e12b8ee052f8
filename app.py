"""PrefixLab: the app's entry point. Navigation over the pages and the shared sidebar.

Run: ``python -m streamlit run app.py --server.fileWatcherType none --server.headless true``.
Pages are registered only when their file exists, so each page can land on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import streamlit as st

from ui.model import tune_page_server
from ui.projector import apply_projector
from ui.settings import render_sidebar
from ui.state import restore_from_url
from ui.style import APP_CSS

ROOT = Path(__file__).parent
#: Pages that play scenarios or prompts with the sidebar's engine settings. The others (lessons,
#: hash chain, why did it miss?) use their own settings, so the sidebar would offer knobs that do nothing.
SETTINGS_PAGES = ("app_pages/lab.py", "app_pages/scenario_editor.py", "app_pages/compare.py", "app_pages/playground.py")


def pages() -> tuple[dict[str, list[st.Page]], frozenset[str]]:
    """The navigation's pages and the titles of those with sidebar settings, built once per session:
    a ``st.Page`` resolves its file on the disk, about 80 system calls a run, and under a room's load
    each one waits for the GIL again."""
    if "_pages" not in st.session_state:
        st.session_state["_pages"] = build_pages()
    return cast(tuple[dict[str, list[st.Page]], frozenset[str]], st.session_state["_pages"])


#: The navigation: section -> (page file, title, icon). A page is registered only when its file exists.
SECTIONS: dict[str, list[tuple[str, str, str]]] = {
    "Learn": [("app_pages/lessons.py", "Lessons", ":material/school:")],  # guided lessons from lessons/
    "Explore": [
        ("app_pages/playground.py", "Playground", ":material/chat:"),  # the real model, prompts as blocks
        ("app_pages/hash_chain.py", "Hash chain", ":material/link:"),
        ("app_pages/why_miss.py", "Why did it miss?", ":material/search:"),
        ("app_pages/live.py", "Live", ":material/sensors:"),  # a real server's cache from its KV events
    ],
    "Lab": [
        ("app_pages/lab.py", "Block pool & eviction lab", ":material/grid_view:"),
        ("app_pages/scenario_editor.py", "Scenario editor", ":material/edit_note:"),
        ("app_pages/groups.py", "KV cache groups", ":material/view_column:"),  # a hybrid model's block tables per group
        ("app_pages/second_tier.py", "A second tier", ":material/layers:"),
    ],
    "Measure": [("app_pages/compare.py", "Compare", ":material/bar_chart:")],  # cache off / vLLM / classic on one trace
    "At scale": [("app_pages/traces.py", "Production traces", ":material/timeline:")],
}


def build_pages() -> tuple[dict[str, list[st.Page]], frozenset[str]]:
    """The pages whose files exist, by section (a first visit lands on the lessons, else the lab), and
    the titles of the pages in SETTINGS_PAGES."""
    default = "app_pages/lessons.py" if (ROOT / "app_pages/lessons.py").exists() else "app_pages/lab.py"
    sections = {name: [st.Page(path, title=title, icon=icon, default=path == default)
                       for path, title, icon in items if (ROOT / path).exists()]
                for name, items in SECTIONS.items()}
    with_settings = frozenset(title for items in SECTIONS.values() for path, title, _ in items if path in SETTINGS_PAGES)
    return {name: items for name, items in sections.items() if items}, with_settings


tune_page_server()  # a room's server: the GIL's switch interval, the garbage collector (once)
st.set_page_config(page_title="PrefixLab", page_icon="🧱", layout="wide")
restore_from_url()
sections, with_settings = pages()
navigation = st.navigation(sections)
st.markdown(APP_CSS, unsafe_allow_html=True)
apply_projector()  # ?projector=1 or the toggle: every page, one stylesheet (ui/projector.py)
if navigation.title == "Lessons" and "lesson" not in st.query_params and "scenario" in st.query_params:
    st.switch_page("app_pages/lab.py")  # a lab link shared when the lab was the first page
if navigation.title in with_settings:
    render_sidebar()
navigation.run()
