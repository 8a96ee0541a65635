"""The kernel-template loader: validation of template files and of settings."""

import pytest

from harness.suite import kernel_templates as kt

GOOD = """
FAMILY = "elementwise"
OPERATORS = ["relu"]
KNOBS = [{"name": "block", "values": [64, 256], "default": 256, "layer": "tiling", "doc": "elements per chunk"}]
def render(operator, settings):
    return f"# block={settings['block']}\\nclass ModelNew: pass\\n"
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "cpu").mkdir()
    monkeypatch.setattr(kt, "TEMPLATES_DIR", tmp_path)
    return tmp_path / "cpu"


def test_a_valid_template_renders_with_defaults_and_settings(folder):
    (folder / "rowwise.py").write_text(GOOD)
    template = kt.template_for("relu")
    assert template.name == "rowwise" and template.default_settings() == {"block": 256}
    assert "block=64" in template.render("relu", {"block": 64})
    assert kt.template_for("gelu") is None


@pytest.mark.parametrize(
    "settings, message",
    [({"block": 7}, "does not allow 7"), ({"tile": 64}, "has no knob 'tile'")],
)
def test_bad_settings_are_refused(folder, settings, message):
    (folder / "rowwise.py").write_text(GOOD)
    with pytest.raises(kt.TemplateError, match=message):
        kt.template_for("relu").render("relu", settings)


def test_unserved_operator_is_refused(folder):
    (folder / "rowwise.py").write_text(GOOD)
    with pytest.raises(kt.TemplateError, match="does not serve operator 'gelu'"):
        kt.list_templates()[0].render("gelu")


@pytest.mark.parametrize(
    "edit, message",
    [
        (('FAMILY = "elementwise"', 'FAMILY = "misc"'), "FAMILY must be one of"),
        (('"default": 256', '"default": 100'), "is not among its values"),
        (('"layer": "tiling"', '"layer": "magic"'), "layer 'magic'"),
        (("def render", "def rendr"), "render\\(operator, settings\\) is missing"),
        (('OPERATORS = ["relu"]', "OPERATORS = []"), "OPERATORS must be"),
    ],
)
def test_malformed_templates_name_the_file_and_problem(folder, edit, message):
    (folder / "bad.py").write_text(GOOD.replace(*edit))
    with pytest.raises(kt.TemplateError, match=message) as info:
        kt.list_templates()
    assert "bad.py" in str(info.value)


def test_two_templates_serving_one_operator_are_refused(folder):
    (folder / "a.py").write_text(GOOD)
    (folder / "b.py").write_text(GOOD)
    with pytest.raises(kt.TemplateError, match="served by two templates"):
        kt.list_templates()


MATH = """
FAMILY = "elementwise"
OPERATORS = ["relu", "gelu"]
KNOBS = [
    {"name": "block", "values": [64, 256], "default": 256, "layer": "tiling", "doc": "elements per chunk"},
    {"name": "math", "values": ["libm", "poly"], "default": "libm", "layer": "algorithm", "doc": "erf",
     "operators": OPERATORS_OF_MATH},
]
def render(operator, settings):
    return f"# {settings}\\nclass ModelNew: pass\\n"
"""


def test_a_knob_names_the_operators_it_matters_for_and_the_others_keep_its_default(folder):
    (folder / "act.py").write_text(MATH.replace("OPERATORS_OF_MATH", '["gelu"]'))
    template = kt.template_for("relu")
    assert [k.name for k in template.relevant_knobs("relu")] == ["block"]
    assert [k.name for k in template.relevant_knobs("gelu")] == ["block", "math"]
    assert template.pinned_settings("relu", {"math": "poly", "block": 64}) == {"block": 64, "math": "libm"}
    assert template.knob("math").to_dict()["operators"] == ["gelu"]


@pytest.mark.parametrize("operators", ['["silu"]', "[]", '"gelu"'])
def test_a_knob_that_names_operators_the_template_does_not_serve_is_refused(folder, operators):
    (folder / "act.py").write_text(MATH.replace("OPERATORS_OF_MATH", operators))
    with pytest.raises(kt.TemplateError, match="operators must be a non-empty list of operators the template serves"):
        kt.list_templates()


def test_the_shipped_templates_declare_which_operators_their_knobs_matter_for():
    cpu = {t.name: t for t in kt.list_templates("cpu")}
    assert [k.name for k in cpu["pointwise"].knobs if not k.matters_for("relu")] == ["math"]
    assert cpu["pointwise"].knob("math").matters_for("elu")
    assert not cpu["row_norm"].knob("variance").matters_for("rms_norm")
    assert {k.name for k in cpu["channel_norm"].knobs if not k.matters_for("batch_norm")} == {
        "variance",
        "accumulate",
        "lanes",
    }
