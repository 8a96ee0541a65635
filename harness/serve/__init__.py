"""``python -m harness serve``: the evaluation service that runs on a target host (``kope worker`` wraps it).

docs/harness.md, "Module notes".
"""
