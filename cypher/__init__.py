"""Cypher statements KOPE runs, one parameterised statement per .cypher file (see kope/db/catalog.py)."""
