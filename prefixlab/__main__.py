"""``python -m prefixlab ARGS`` runs the ``prefixlab`` command."""

from prefixlab.cli import main

if __name__ == "__main__":
    main()
