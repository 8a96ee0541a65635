"""KOPE's target side: load tasks and candidates, compile, check and time them.

This package never imports ``kope``; it is usable on its own::

    python -m harness eval softmax my_candidate.py [--target cpu|triton|cuda] [--json]
    python -m harness tasks list|show|check

or from Python::

    from harness.evaluate import EvalOptions, evaluate
    outcome = evaluate("softmax", "my_candidate.py", EvalOptions(cases="0,2"))
    print(outcome.status, outcome.speedup, outcome.to_json())

Modules, by role:

* ``task`` - task files (KernelBench format + OPERATOR/FAMILY/LEVEL/CASES), validation;
  ``suite`` - the built-in tasks and example candidates (discovery API);
* ``cpu`` - the fast compile path candidates use (``compile_cpp``; see its docstring);
* ``targets`` - cpu / triton / cuda plug-ins (compile, run, time, describe hardware);
* ``evaluate`` - the orchestration; ``sandbox`` + ``worker*`` - isolated worker processes;
  ``ipc`` - their pickle-free messages;
* ``compare`` - correctness and tolerances; ``static_check`` + ``guards`` - anti-cheat;
  ``timing`` - interleaved, cache-flushed measurement;
* ``record`` - the ``kope.outcome/1`` record; ``hardware`` - the fingerprint.

A candidate defines ``class ModelNew(torch.nn.Module)`` with ``Model``'s constructor
arguments; for the ``cpu`` target it builds its kernels with ``harness.cpu.compile_cpp``
(or ``torch.utils.cpp_extension.load_inline``). Importing ``harness`` (or ``harness.cpu``)
does not import torch.
"""

__version__ = "0.1.0"
