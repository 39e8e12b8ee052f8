"""The app's few CSS rules: the lab's title row, projector mode, and the app-wide toolbar."""

from __future__ import annotations

LAB_CSS = """<style>
[data-testid=stMainBlockContainer] { padding-top: 3.2rem; }
.lab-title { font-size: 1.45rem; font-weight: 700; line-height: 1.2; }
</style>"""

#: Projector mode: no sidebar or header, tight margins, so the lab fits one 1024x768 screen.
PROJECTOR_CSS = """<style>
[data-testid=stSidebar], [data-testid=stSidebarCollapsedControl], [data-testid=stExpandSidebarButton],
header[data-testid=stHeader] { display: none !important; }
[data-testid=stMainBlockContainer] { padding: 0.4rem 0.8rem 0 0.8rem !important; max-width: 100% !important; }
[data-testid=stMain] { margin-left: 0 !important; }
.lab-title { font-size: 1.0rem; white-space: nowrap; }
[data-testid=stVerticalBlock] { gap: 0.35rem; }
</style>"""

#: Every page: no "Deploy" button in Streamlit's toolbar (the app is not a Streamlit Cloud draft), and
#: button / toggle labels wrap onto a second line instead of being cut to "F…" in narrow columns.
APP_CSS = """<style>
[data-testid=stAppDeployButton], [data-testid=stDeployButton] { display: none !important; }
.stMarkdownEllipsis, .stMarkdownEllipsis p { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; overflow-wrap: normal !important; word-break: normal !important; }
button .stMarkdownEllipsis p { line-height: 1.15; }
</style>"""
