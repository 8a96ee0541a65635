"""Expert kernel templates by target (see harness/suite/kernel_templates.py)."""
