"""``python -m prefixlab ARGS`` runs the ``prefixlab`` command."""

import sys

from prefixlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
