"""Kernel templates for the triton target: Triton kernels with block-size, warp and stage knobs (see harness/suite/kernel_templates.py)."""
