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
