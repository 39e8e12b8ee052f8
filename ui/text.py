"""User and model text inside Streamlit's Markdown: shown as typed, never as markup.

``st.markdown`` turns ``![x](http://...)`` into an image every viewer's browser fetches,
``[x](...)`` and bare ``https://...`` into links, ``:red[...]`` and ``$...$`` into styling. A
prompt, a model's answer or a scenario comment is text, so every character that can start
markup becomes a numeric character reference (Markdown shows the character and parses nothing),
and so do the ``:`` of ``scheme://`` and the ``.`` of ``www.``, which would make bare links.
Ordinary punctuation (``, . : ' "``) stays as it is, so messages read the same in tests.
(No Streamlit import: the pages call it, the tests call it directly.)
"""

from __future__ import annotations

import re

_MARKUP = "\\`*_[]<>!$~|#&@"  # [ ] stop links and images, @ e-mail autolinks
_REFERENCES = {ord(c): f"&#{ord(c)};" for c in _MARKUP}
_BARE_LINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<=www)(\.)")


def _inert_line(line: str) -> str:
    line = line.translate(_REFERENCES)
    return _BARE_LINK.sub(lambda m: f"&#{ord(m.group(0))};", line)


def plain_md(text: str) -> str:
    """``text`` for ``st.markdown`` (also inside HTML with ``unsafe_allow_html``): literal, inert.

    Line breaks are kept as Markdown hard breaks, so a multi-line prompt keeps its lines.
    """
    return "  \n".join(_inert_line(line) for line in text.split("\n"))
