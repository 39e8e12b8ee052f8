"""PrefixLab: the app's entry point. Navigation over the pages and the shared sidebar.

Run: ``python -m streamlit run app.py --server.fileWatcherType none --server.headless true``.
Pages are registered only when their file exists, so each page can land on its own.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.settings import render_sidebar
from ui.state import restore_from_url
from ui.style import APP_CSS

ROOT = Path(__file__).parent


def optional_page(path: str, title: str, icon: str) -> list[st.Page]:
    """A page if its file exists (other pages are built separately), else nothing."""
    return [st.Page(path, title=title, icon=icon)] if (ROOT / path).exists() else []


def pages() -> dict[str, list[st.Page]]:
    sections = {
        # Lessons page (app_pages/lessons.py): guided lessons from lessons/.
        "Learn": optional_page("app_pages/lessons.py", "Lessons", ":material/school:"),
        "Explore": [
            # Playground page (app_pages/playground.py): real model, prompts as blocks.
            *optional_page("app_pages/playground.py", "Playground", ":material/chat:"),
            # Hash chain and "Why did it miss?" pages (app_pages/hash_chain.py, app_pages/why_miss.py).
            *optional_page("app_pages/hash_chain.py", "Hash chain", ":material/link:"),
            *optional_page("app_pages/why_miss.py", "Why did it miss?", ":material/search:"),
        ],
        "Lab": [
            st.Page("app_pages/lab.py", title="Block pool & eviction lab", icon=":material/grid_view:", default=True),
            st.Page("app_pages/scenario_editor.py", title="Scenario editor", icon=":material/edit_note:"),
        ],
        # Compare page (app_pages/compare.py): cache off / vLLM / classic on one trace.
        "Measure": optional_page("app_pages/compare.py", "Compare", ":material/bar_chart:"),
    }
    return {name: items for name, items in sections.items() if items}


st.set_page_config(page_title="PrefixLab", page_icon="🧱", layout="wide")
restore_from_url()
navigation = st.navigation(pages())
st.markdown(APP_CSS, unsafe_allow_html=True)
render_sidebar()
navigation.run()
