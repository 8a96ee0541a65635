"""KOPE's target side: load tasks and candidates, compile, check and time them.

docs/harness.md, "Module notes".
"""

__version__ = "0.1.0"
