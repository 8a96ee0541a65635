"""C++ building blocks shared by the compute templates (``harness/suite/templates/cpu``).

The matmul, convolution, fused and block templates render candidates whose
C++ source is assembled from these pieces, each a plain string of C++ with its
knobs as preprocessor constants at the top of the rendered file:

* ``prelude``: element types (float, double, bfloat16 stored as ``uint16_t``),
  conversions with round-to-nearest-even, vectorisable exp/erf/tanh/sigmoid, and
  ``Vec<T>``, a thin wrapper over AVX2 or AVX-512 intrinsics chosen by the
  ``isa`` knob (with a clean fallback to ``#pragma omp simd`` code when the CPU
  lacks the instructions);
* ``gemm``: a packed, cache-blocked, register-blocked GEMM with pluggable
  operand loaders (strided matrices, implicit im2col, concatenations,
  normalised rows) and row epilogues, plus matrix-vector paths.

Nothing here imports torch; the pieces are strings.
"""
