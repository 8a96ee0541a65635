"""Binding a matched op's scalars to where the task keeps them (no tracing: hand-made traced cases)."""

from __future__ import annotations

from harness.structure.bind import attribute_expr, bind_scalar, input_names
from harness.structure.graph import case_graph


def case(attrs=None, inputs=((4, 8),), scalar_inputs=None, forward_args=("x",)):
    values = {
        f"in{i}": {"kind": "input", "shape": list(shape), "dtype": "float32", "stride": None, "index": i}
        for i, shape in enumerate(inputs)
    }
    return case_graph(
        {
            "case": "c",
            "values": values,
            "ops": [],
            "outputs": [],
            "attrs": attrs or {},
            "forward_args": list(forward_args),
            "scalar_inputs": scalar_inputs or {},
        }
    )


def test_a_value_that_follows_an_attribute_from_case_to_case_binds_to_it():
    cases = [case({"dim": 0, "other": 5}), case({"dim": 2, "other": 5})]
    binding = bind_scalar("dim", [0, 2], cases, ["x"], module="")
    assert (binding.source, binding.expr) == ("attr", "self.dim")


def test_a_constant_binds_to_the_only_equal_attribute_of_the_module_that_computed_it():
    binding = bind_scalar("scalar", [2.0], [case({"multiplier": 2.0, "gemm.in_features": 2})], ["x"], module="")
    assert binding.expr == "self.multiplier"


def test_a_constant_equal_to_another_modules_attribute_stays_a_literal():
    binding = bind_scalar("stride", [(2, 2)], [case({"conv.stride": (2, 2)})], ["x"], module="")
    assert (binding.source, binding.expr) == ("literal", "(2, 2)")


def test_an_attribute_of_the_dispatching_submodule_binds_by_its_name():
    cases = [case({"leaky_relu.negative_slope": 0.1, "leaky_relu.inplace": False})]
    binding = bind_scalar("negative_slope", [0.1], cases, ["x"], module="leaky_relu")
    assert binding.expr == "self.leaky_relu.negative_slope"


def test_an_int_attribute_binds_to_a_square_kernel_size():
    cases = [case({"kernel_size": 3}), case({"kernel_size": 5})]
    binding = bind_scalar("kernel", [(3, 3), (5, 5)], cases, ["x"], module="")
    assert binding.expr == "(self.kernel_size,) * 2"


def test_a_value_that_follows_an_input_size_binds_to_that_size():
    cases = [case(inputs=((8, 64),)), case(inputs=((8, 256),))]
    binding = bind_scalar("denom", [8.0, 16.0], cases, ["q"], module="")
    assert (binding.source, binding.expr) == ("shape", "math.sqrt(q.shape[-1])")


def test_a_python_number_passed_to_forward_binds_to_that_input():
    cases = [case(scalar_inputs={1: 3.5}, forward_args=("A", "s"))]
    assert bind_scalar("scalar", [3.5], cases, ["A", "s"]).expr == "s"


def test_a_value_that_changes_and_follows_nothing_cannot_be_bound():
    assert bind_scalar("scale", [0.5, 0.7], [case(), case()], ["x"], module="") is None


def test_float32_rounding_of_a_traced_epsilon_still_matches_its_attribute():
    binding = bind_scalar("eps", [9.999999974752427e-07], [case({"eps": 1e-6})], ["x"], module="")
    assert binding.expr == "self.eps"


def test_attribute_paths_become_python_expressions():
    assert attribute_expr("norms.0.weight") == "self.norms[0].weight"
    assert attribute_expr("a.b") == "self.a.b"


def test_inputs_are_named_after_the_forward_signature():
    assert input_names(case(inputs=((2,), (3,)), forward_args=("a", "b"))) == ["a", "b"]
    assert input_names(case(inputs=((2,), (3,)), forward_args=())) == ["x0", "x1"]
