"""PrefixLab's teaching layer: what the pages compute, without widgets, grouped by concept.

* ``scenarios/``  the plain-text scenario format, the built-in library, events in words, share links
* ``lessons/``    lesson files, questions answered by the engine, the guided flow, real-model timing
* ``pages/``      each page's logic (lab, playground, compare, hash probe, why-miss, TTFT)
* ``live/``       watching real servers through their KV events and metrics
* ``traces/``     production request traces replayed through the real cache manager
* ``limits``      every limit on input that turns into work, in one place

It imports :mod:`engine` and never the reverse; figures (:mod:`viz`), the Streamlit glue (:mod:`ui`),
the pages (``app_pages``) and the command line (:mod:`prefixlab`) sit on top of it.
"""
