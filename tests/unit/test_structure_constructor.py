"""Reusing the reference's constructor as ModelNew's (pure source transformation)."""

from __future__ import annotations

import pytest

from harness.structure.constructor import ConstructorError, reuse_constructor

KERNELBENCH = '''
import torch
import torch.nn as nn
import einops_is_not_needed_by_init as unused

SCALE = 2.0


def width(n):
    return 2 * n


class Frozen(nn.Module):
    """A helper with its own forward."""

    def __init__(self, c):
        super(Frozen, self).__init__()
        self.register_buffer("mean", torch.zeros(c))

    def forward(self, x):
        return torch.relu(x - self.mean)


class Model(nn.Module):
    def __init__(self, c):
        super(Model, self).__init__()
        self.fc = nn.Linear(c, width(c))
        self.norm = Frozen(width(c))
        self.scale = SCALE

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(2, 3)]


def get_init_inputs():
    return [3]
'''


def test_the_init_is_copied_with_super_called_plainly():
    ctor = reuse_constructor(KERNELBENCH)
    assert "super().__init__()" in ctor.init and "Model" not in ctor.init
    assert "self.fc = nn.Linear(c, width(c))" in ctor.init


def test_what_the_init_uses_comes_along_and_nothing_else():
    ctor = reuse_constructor(KERNELBENCH)
    helpers = "\n".join(ctor.helpers)
    assert "SCALE = 2.0" in helpers and "def width(n):" in helpers and "class Frozen(nn.Module):" in helpers
    assert ctor.imports == ("import torch", "import torch.nn as nn")  # the unused import stays behind


def test_helper_modules_keep_their_constructor_only():
    helper = next(h for h in reuse_constructor(KERNELBENCH).helpers if h.startswith("class Frozen"))
    assert "def __init__" in helper and "def forward" not in helper and "torch.relu" not in helper


def test_a_constructor_reading_a_name_the_cases_change_cannot_be_reused():
    with pytest.raises(ConstructorError, match="'SCALE', which CASES change"):
        reuse_constructor(KERNELBENCH, case_keys={"SCALE"})


def test_a_model_without_init_gives_none():
    source = "import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert reuse_constructor(source).init is None
