"""C++ building blocks shared by the compute templates (``harness/suite/templates/cpu``).

Each piece is a plain string of C++ with its knobs as preprocessor constants at the top of the rendered file
(``prelude``: element types, vectorisable math and ``Vec<T>``; ``gemm``: the packed GEMM with its loaders and
epilogues, its C++ read from ``gemm.cpp``; ``conv``, ``attention``, ``blocks``): docs/templates.md, "What the
offline proposer explores" and "The CPU GEMM core". Nothing here imports torch; the pieces are strings.
"""
