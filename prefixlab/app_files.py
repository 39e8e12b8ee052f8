"""Where the Streamlit app's files are: beside the packages in a checkout, or where a wheel put them.

The app is a folder of scripts (``app.py``, ``app_pages/``) with the lessons, its ``.streamlit``
settings and the sample trace, not a package. A checkout (or ``pip install -e .``) runs it from the
repository; ``pip install .`` installs the same folder under ``<prefix>/share/prefixlab/`` (the
``data-files`` of pyproject.toml).
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

#: The folder's name under the install scheme's data path.
SHARE = Path("share") / "prefixlab"


def candidates() -> list[Path]:
    """Folders that may hold ``app.py``, in the order they are tried."""
    found = [Path(__file__).resolve().parents[1]]  # a checkout: the repository root
    schemes = [sysconfig.get_default_scheme(), f"{os.name}_user"]
    for scheme in schemes:
        try:
            found.append(Path(sysconfig.get_path("data", scheme)) / SHARE)
        except KeyError:  # a scheme this platform does not have
            continue
    return found


def app_root() -> Path | None:
    """The first folder that holds ``app.py``, or None when PrefixLab's app is not installed."""
    return next((folder for folder in candidates() if (folder / "app.py").is_file()), None)
