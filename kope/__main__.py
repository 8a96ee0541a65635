"""``python -m kope`` runs the CLI (same as the ``kope`` console script)."""

from kope.cli import main

main()
