"""KOPE's target side: load tasks and candidates, compile, check and time them.

This package never imports ``kope``; it is usable on its own.
"""

__version__ = "0.1.0"
