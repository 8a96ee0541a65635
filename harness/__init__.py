"""KOPE's target side: load tasks and candidates, compile, check and time them.

This package never imports ``kope``; it is usable on its own::

    python -m harness eval softmax my_candidate.py [--target cpu|triton|cuda] [--json]
    python -m harness tasks list|show|check

or from Python::

    from harness.evaluate import EvalOptions, evaluate
    outcome = evaluate("softmax", "my_candidate.py", EvalOptions(cases="0,2"))
    print(outcome.status, outcome.speedup, outcome.to_json())

The modules, layer by layer: docs/architecture.md, "The harness's own layers".

A candidate defines ``class ModelNew(torch.nn.Module)`` with ``Model``'s constructor
arguments; for the ``cpu`` target it builds its kernels with ``harness.cpu.compile_cpp``
(or ``torch.utils.cpp_extension.load_inline``). Importing ``harness`` (or ``harness.cpu``)
does not import torch.
"""

__version__ = "0.1.0"
