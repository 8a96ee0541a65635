"""Data shipped with KOPE: the repository's top-level ``cypher/`` and ``docker/``
folders, mapped here at install time (see setup.py)."""
