"""The app's few CSS rules: the lab's title row, the lessons' text, projector mode (one stylesheet for every
page), the toolbar. The player's own look is ``ui/lab_player/player.css`` plus :func:`viz.theme.player_css`."""

from __future__ import annotations

from viz.theme import STATE_COLORS

LAB_CSS = """<style>
[data-testid=stMainBlockContainer] { padding-top: 3.2rem; }
.lab-title { font-size: 1.45rem; font-weight: 700; line-height: 1.2; }
</style>"""

#: The Lessons page: its scenario script and the log of what a line did.
LESSONS_CSS = f"""<style>
[data-testid=stMainBlockContainer]{{padding:2.2rem 1.5rem 2rem 1.5rem;max-width:1400px}}
.lesson-log{{border-left:5px solid {STATE_COLORS["computed"]};background:#f5f7fa;padding:8px 12px;border-radius:4px;
  overflow-wrap:anywhere}}
.lesson-log-head{{font-size:.9rem;color:#455a64;margin-bottom:2px}}.lesson-log ul{{margin:0;padding-left:1.1rem}}
.lesson-tag{{background:#263238;color:white;border-radius:3px;padding:0 5px;font-size:.75rem;margin-right:5px}}
.lesson-script{{font-family:monospace;font-size:.9rem;background:#f5f7fa;border-radius:4px;padding:6px 0;
  white-space:pre-wrap;overflow-wrap:anywhere;margin-bottom:8px}}
.lesson-script div{{padding:0 10px}}.lesson-script .now{{background:#fff3c4;font-weight:700}}
.lesson-script .next{{background:#e3f2fd}}.lesson-script .n{{color:#90a4ae;display:inline-block;width:2.2em}}
</style>"""

#: Projector mode, every page (ui.projector puts it in the page): no sidebar or header, tight margins,
#: and no text under 16 px. The size rule raises whatever is smaller (captions, widget labels, code,
#: the HTML pictures' hashes) to 16 px and leaves larger text (headings) as it is; icons keep their
#: size, and Plotly's SVG is resized in Python (ui.projector.plotly_chart) so its layout follows.
#: Style-only elements and the fixed Projector switch take no room (no gap above the first line).
PROJECTOR_CSS = """<style>
[data-testid=stSidebar], [data-testid=stSidebarCollapsedControl], [data-testid=stExpandSidebarButton],
header[data-testid=stHeader] { display: none !important; }
[data-testid=stMainBlockContainer] { padding: 0.4rem 0.8rem 0.6rem 0.8rem !important; max-width: 100% !important; }
[data-testid=stMain] { margin-left: 0 !important; }
[data-testid=stVerticalBlock] { gap: 0.45rem; }
[data-testid=stMain] *:not(h1, h2, h3, h4, h5, h6, h1 *, h2 *, h3 *, h4 *, h5 *, h6 *, svg, svg *,
  [data-testid=stIconMaterial], .lab-title) { font-size: max(16px, 1em) !important; }
[data-testid=stMain] h1 { font-size: 1.9rem; padding: 0.3rem 0 0.2rem; }
[data-testid=stMain] h2 { font-size: 1.55rem; padding: 0.3rem 0 0.2rem; }
[data-testid=stMain] h3 { font-size: 1.3rem; padding: 0.2rem 0 0.1rem; }
[data-testid=stMain] pre, [data-testid=stMain] pre code { white-space: pre-wrap !important; overflow-wrap: anywhere; }
.st-key-projector_switch { top: 0.25rem; right: 0.6rem; }
[data-testid=stVerticalBlock] > :has(> .st-key-projector_switch) { display: contents; }
[data-testid=stElementContainer]:has(> [data-testid=stMarkdown] [data-testid=stMarkdownContainer] > style:only-child),
[data-testid=stElementContainer]:has(> [data-testid=stHtml] > style:only-child) { display: none; }
.lab-title { font-size: 1.0rem; white-space: nowrap; }
.pl-table table { border-collapse: collapse; width: 100%; }
.pl-table th, .pl-table td { text-align: left; padding: 3px 6px; border-bottom: 1px solid #cfd8dc; vertical-align: top;
  overflow-wrap: anywhere; }
.pl-table th { background: #eceff1; }
</style>"""

#: Every page: no "Deploy" button in Streamlit's toolbar (the app is not a Streamlit Cloud draft), and
#: button / toggle labels wrap onto a second line instead of being cut to "F…" in narrow columns.
APP_CSS = """<style>
[data-testid=stAppDeployButton], [data-testid=stDeployButton] { display: none !important; }
.stMarkdownEllipsis, .stMarkdownEllipsis p { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; overflow-wrap: normal !important; word-break: normal !important; }
button .stMarkdownEllipsis p { line-height: 1.15; }
.st-key-projector_switch { position: fixed; top: 0.7rem; right: 3.4rem; z-index: 1000001; width: auto !important;
  background: white; border-radius: 6px; padding: 0 6px; }
</style>"""
