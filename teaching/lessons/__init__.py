"""Lessons: Markdown files loaded (``loader``), questions answered by the engine (``answers``),
the guided flow a page shows (``flow``), and the real-model timing a lesson may ask for (``measure``)."""
