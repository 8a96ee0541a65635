"""Output strides compared with the reference's; index outputs checked by the values they point at."""

import torch

from harness.compare import compare_layout, compare_outputs


def test_contiguous_output_for_a_contiguous_reference_passes():
    assert compare_layout((4, 8), [8, 1], [8, 1]).ok


def test_a_transposed_view_for_a_contiguous_reference_is_refused():
    verdict = compare_layout((4, 8), [1, 4], [8, 1])
    assert verdict.kind == "incorrect:stride" and "not contiguous" in verdict.message


def test_an_overlapping_expand_view_is_refused():
    verdict = compare_layout((4, 8), [0, 1], [8, 1])
    assert verdict.kind == "incorrect:stride" and "overlaps itself" in verdict.message


def test_a_contiguous_output_for_a_transposed_reference_passes():
    assert compare_layout((4, 8), [8, 1], [1, 4]).ok
    assert compare_layout((4, 8), [1, 4], [1, 4]).ok  # or the reference's own layout


def test_dimensions_of_size_one_do_not_matter():
    assert compare_layout((1, 8), [123, 1], [8, 1]).ok


def test_outputs_without_reported_strides_are_not_judged_by_layout():
    assert compare_layout((4, 8), None, [8, 1]).ok


def test_compare_outputs_applies_the_layout_check():
    x = torch.randn(4, 8)
    verdict = compare_outputs(x.clone(), x, cand_strides=[[1, 4]], ref_strides=[[8, 1]])
    assert verdict.kind == "incorrect:stride"


SPEC = [{"output": 0, "input": 0, "dim": 1, "keepdim": False}]


def ties() -> torch.Tensor:
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 2.0]])
    return x


def test_an_index_breaking_a_tie_another_way_passes():
    x = ties()
    ref, cand = torch.tensor([1, 0]), torch.tensor([2, 3])  # first max vs last max
    assert compare_outputs(cand, ref, inputs=[x], index_outputs=SPEC).ok
    assert not compare_outputs(cand, ref).ok  # compared exactly, it would be refused


def test_an_index_that_points_at_a_smaller_value_fails():
    verdict = compare_outputs(torch.tensor([3, 0]), torch.tensor([1, 0]), inputs=[ties()], index_outputs=SPEC)
    assert verdict.kind == "incorrect:index" and "point at input values" in verdict.message


def test_an_index_out_of_range_fails():
    verdict = compare_outputs(torch.tensor([4, 0]), torch.tensor([1, 0]), inputs=[ties()], index_outputs=SPEC)
    assert verdict.kind == "incorrect:index" and "outside 0..3" in verdict.message


def test_topk_style_indices_must_point_at_the_values_returned():
    x = torch.tensor([[5.0, 1.0, 4.0, 2.0]])
    spec = [{"output": 1, "input": 0, "dim": 1, "keepdim": True, "values": 0}]
    ref = (torch.tensor([[5.0, 4.0]]), torch.tensor([[0, 2]]))
    assert compare_outputs((ref[0].clone(), torch.tensor([[0, 2]])), ref, inputs=[x], index_outputs=spec).ok
    wrong = compare_outputs((ref[0].clone(), torch.tensor([[2, 0]])), ref, inputs=[x], index_outputs=spec)
    assert wrong.kind == "incorrect:index" and "differ from the values returned" in wrong.message


def test_the_index_dtype_and_shape_are_still_checked_first():
    verdict = compare_outputs(torch.tensor([1.0, 0.0]), torch.tensor([1, 0]), inputs=[ties()], index_outputs=SPEC)
    assert verdict.kind == "incorrect:dtype"
