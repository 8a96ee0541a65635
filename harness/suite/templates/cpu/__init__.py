"""Kernel templates for the cpu target: C++ with OpenMP and SIMD (see harness/suite/kernel_templates.py)."""
