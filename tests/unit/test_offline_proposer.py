"""The offline proposer's decisions from memory, on real templates (no harness, no database)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from harness.suite.kernel_templates import template_for
from kope.agent.offline import OfflineProposer
from kope.agent.proposal import ParentState, ProposerExhausted


def hit(id, operator, template, settings, a, label="effective", status="correct", tier="hardware"):
    return NS(
        hit=NS(
            id=id,
            operator=operator,
            status=status,
            label=label,
            a=a,
            r=1.1,
            params={"template": template, "settings": settings},
        ),
        relevance=NS(hardware_tier=tier),
    )


def request(operator, lineages=(), parent=None, history=(), in_prompt=None):
    ids = [lin.hit.id for lin in lineages] if in_prompt is None else in_prompt
    return NS(
        task=NS(operator=operator),
        target="cpu",
        step=len(history),
        backtracked=False,
        parent=parent,
        history=list(history),
        retrieval=NS(lineages=list(lineages)) if lineages else None,
        context=NS(items=[NS(id=i, evidence_kind="decision") for i in ids]),
    )


def test_without_experience_the_first_step_is_the_templates_defaults():
    proposal = OfflineProposer().propose(request("rms_norm"))
    assert proposal.title == "baseline: template row_norm"
    assert proposal.params == {"template": "row_norm", "settings": template_for("rms_norm", "cpu").default_settings()}
    assert proposal.thought.startswith("[offline proposer]") and "ModelNew" in proposal.code


def test_the_first_step_starts_from_the_best_settings_recorded_for_the_same_template():
    row_norm = template_for("rms_norm", "cpu")
    tuned = {**row_norm.default_settings(), "lanes": 16, "accumulate": "float"}
    lineages = [
        hit("a:s3", "layer_norm", "row_norm", tuned, 1.4),
        hit("a:s1", "layer_norm", "row_norm", row_norm.default_settings(), 1.1),
    ]
    proposal = OfflineProposer().propose(request("rms_norm", lineages))
    assert proposal.title == "start from the best recorded settings (layer_norm)"
    assert proposal.params["settings"] == tuned and proposal.cited == ("a:s3",)


def test_settings_of_another_template_with_the_same_knob_names_are_not_copied():
    channel = template_for("instance_norm", "cpu")
    other = {**channel.default_settings(), "variance": "shifted", "lanes": 64}
    proposal = OfflineProposer().propose(
        request("rms_norm", [hit("b:s2", "instance_norm", "channel_norm", other, 2.9)])
    )
    assert proposal.title == "baseline: template row_norm"


def test_experience_that_is_not_in_the_prompt_is_not_used():
    row_norm = template_for("rms_norm", "cpu")
    tuned = {**row_norm.default_settings(), "lanes": 16}
    proposal = OfflineProposer().propose(
        request("rms_norm", [hit("a:s3", "layer_norm", "row_norm", tuned, 1.4)], in_prompt=[])
    )
    assert proposal.title == "baseline: template row_norm"


def test_a_later_step_changes_one_knob_of_its_parent_preferring_values_effective_elsewhere():
    row_norm = template_for("rms_norm", "cpu")
    base = row_norm.default_settings()
    parent = ParentState(
        id="r:s0", code=None, params={"template": "row_norm", "settings": base}, speedup=1.0, status="correct"
    )
    past = [NS(params={"template": "row_norm", "settings": base})]
    # instance_norm (another template) found lanes=64 effective: the knob value is preferred, not the whole settings
    lineages = [hit("b:s2", "instance_norm", "channel_norm", {"lanes": 64}, 2.9)]
    proposal = OfflineProposer().propose(request("rms_norm", lineages, parent=parent, history=past))
    assert proposal.params["change"] == {"knob": "lanes", "from": base["lanes"], "to": 64}
    changed = {k for k, v in proposal.params["settings"].items() if v != base[k]}
    assert changed == {"lanes"} and "b:s2" in proposal.cited


def test_a_block_of_several_kernels_is_served_by_the_composite_template():
    proposal = OfflineProposer().propose(request("tiny_cnn"))
    assert proposal.params == {"template": "pipeline", "settings": template_for("tiny_cnn", "cpu").default_settings()}
    assert proposal.structure["structure"].startswith("conv.conv2d -> channel_norm.batch_norm -> chain(relu)")


def test_a_task_whose_structure_no_template_computes_is_exhausted_with_the_reason(tmp_path):
    task = tmp_path / "sort_rows.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.sort(x, dim=1).values\n\n\ndef get_inputs():\n    return [torch.randn(4, 9)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    req = request("sort_rows")
    req.task.path = str(task)
    with pytest.raises(ProposerExhausted, match=r"no kernel template for 'sort_rows' on cpu: .*aten\.sort"):
        OfflineProposer().propose(req)
