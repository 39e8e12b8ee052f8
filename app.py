"""PrefixLab: the app's entry point. Navigation over the pages and the shared sidebar.

Run: ``python -m streamlit run app.py --server.fileWatcherType none --server.headless true``.
Pages are registered only when their file exists, so each page can land on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import streamlit as st

from ui.model import lower_page_priority, tune_page_server
from ui.projector import apply_projector
from ui.settings import render_sidebar
from ui.state import restore_from_url
from ui.style import APP_CSS

ROOT = Path(__file__).parent
#: Pages that play scenarios or prompts with the sidebar's engine settings. The others (lessons,
#: hash chain, why did it miss?) use their own settings, so the sidebar would offer knobs that do nothing.
SETTINGS_PAGES = ("app_pages/lab.py", "app_pages/scenario_editor.py", "app_pages/compare.py", "app_pages/playground.py")


settings_titles: set[str] = set()  # titles of the pages in SETTINGS_PAGES, as navigation reports them


def page(path: str, title: str, icon: str, default: bool = False) -> st.Page:
    if path in SETTINGS_PAGES:
        settings_titles.add(title)
    return st.Page(path, title=title, icon=icon, default=default)


def optional_page(path: str, title: str, icon: str, default: bool = False) -> list[st.Page]:
    """A page if its file exists (other pages are built separately), else nothing."""
    return [page(path, title, icon, default)] if (ROOT / path).exists() else []


def pages() -> tuple[dict[str, list[st.Page]], frozenset[str]]:
    """The navigation's pages and the titles of those with sidebar settings, built once per session:
    a ``st.Page`` resolves its file on the disk, about 80 system calls a run, and under a room's load
    each one waits for the GIL again."""
    if "_pages" not in st.session_state:
        st.session_state["_pages"] = (build_pages(), frozenset(settings_titles))
    return cast(tuple[dict[str, list[st.Page]], frozenset[str]], st.session_state["_pages"])


def build_pages() -> dict[str, list[st.Page]]:
    sections = {
        # Lessons page (app_pages/lessons.py): guided lessons from lessons/. A first visit lands on lesson 1.
        "Learn": optional_page("app_pages/lessons.py", "Lessons", ":material/school:", default=True),
        "Explore": [
            # Playground page (app_pages/playground.py): real model, prompts as blocks.
            *optional_page("app_pages/playground.py", "Playground", ":material/chat:"),
            # Hash chain and "Why did it miss?" pages (app_pages/hash_chain.py, app_pages/why_miss.py).
            *optional_page("app_pages/hash_chain.py", "Hash chain", ":material/link:"),
            *optional_page("app_pages/why_miss.py", "Why did it miss?", ":material/search:"),
            *optional_page("app_pages/live.py", "Live", ":material/sensors:"),
        ],
        "Lab": [
            page("app_pages/lab.py", "Block pool & eviction lab", ":material/grid_view:",
                 default=not (ROOT / "app_pages/lessons.py").exists()),
            page("app_pages/scenario_editor.py", "Scenario editor", ":material/edit_note:"),
            # KV cache groups page (app_pages/groups.py): a hybrid model's block tables per group.
            page("app_pages/groups.py", "KV cache groups", ":material/view_column:"),
            *optional_page("app_pages/second_tier.py", "A second tier", ":material/layers:"),
        ],
        # Compare page (app_pages/compare.py): cache off / vLLM / classic on one trace.
        "Measure": optional_page("app_pages/compare.py", "Compare", ":material/bar_chart:"),
        "At scale": optional_page("app_pages/traces.py", "Production traces", ":material/timeline:"),
    }
    return {name: items for name, items in sections.items() if items}


tune_page_server()  # a room's server: the GIL's switch interval, the garbage collector (once)
lower_page_priority()  # each run is a thread of its own: below the model's forward passes
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
