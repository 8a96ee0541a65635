"""Recorded search spaces and the replay evaluator, on the committed spaces (tests/fixtures/spaces).

The spaces were recorded once with the real harness (`kope bench record-space`); nothing here
compiles or times a kernel: a replay answers from the record, or refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kope.bench.record_space import design
from kope.boundary import builtin_task_path, eval_options, render_for_task, task_structure, template_for
from kope.config import load_config
from kope.evaluators import RecordedSpace, make_evaluator
from kope.evaluators.replay import ReplayEvaluator, ReplayMiss
from kope.evaluators.space import SPACE_SCHEMA, SpaceFile, SpaceFileError, read_spaces, settings_key
from kope.evaluators.spec import parse_evaluator
from kope.memory import Attempt, synthetic

SPACES = Path(__file__).resolve().parents[1] / "fixtures" / "spaces"


def replay() -> ReplayEvaluator:
    evaluator = make_evaluator(load_config(), f"replay:{SPACES}")
    assert isinstance(evaluator, ReplayEvaluator) and isinstance(evaluator, RecordedSpace)
    return evaluator


def test_the_committed_spaces_are_small_versioned_files_of_one_machine():
    files = read_spaces(SPACES)
    assert len(files) >= 2
    assert len({f.hardware.id for f in files}) == 1
    for f in files:
        assert f.path is not None and f.path.stat().st_size < 64_000
        assert json.loads(f.path.read_text())["schema"] == SPACE_SCHEMA
        assert f.harness["cases"] and f.design["kind"] in ("grid", "one-knob+sample")
        assert len(f.settings) == f.design["planned"]
        assert f.optimum() is not None


def test_a_recorded_setting_is_answered_with_the_recorded_outcome(tmp_path):
    evaluator = replay()
    space = read_spaces(SPACES)[0]
    entry = space.settings[-1]
    candidate = tmp_path / "c.py"
    candidate.write_text("anything: looked up by setting, then checked against the recorded kernel")
    task = builtin_task_path(space.operator)
    assert task is not None
    with pytest.raises(ReplayMiss, match="not the one recorded"):
        evaluator.evaluate_setting(
            task, candidate, target="cpu", cases="0", template=space.template, settings=entry["settings"]
        )
    match = task_structure(task, space.operator, "cpu")
    code = render_for_task(template_for(space.served_as), match, entry["settings"])  # type: ignore[arg-type]
    candidate.write_text(code)
    answered = evaluator.evaluate_setting(
        task, candidate, target="cpu", cases="0", template=space.template, settings=entry["settings"]
    )
    assert answered.to_dict() == space.outcome(entry).to_dict()
    assert answered.to_dict()["cases"] == [
        {**c, "params": c["params"]} for c in entry["outcome"]["cases"]
    ]  # per-case times as the harness returned them
    options = eval_options(target="cpu", cases="0")
    assert evaluator.evaluate(task, candidate, options).to_dict() == answered.to_dict()  # by kernel text
    assert evaluator.hardware("cpu").id == space.hardware.id
    allowed = evaluator.space(task, "cpu", "0")
    assert allowed == {space.template: frozenset(settings_key(e["settings"]) for e in space.settings)}


def test_a_setting_outside_the_space_is_refused_with_one_clear_error(tmp_path):
    evaluator = replay()
    space = read_spaces(SPACES)[0]
    template = template_for(space.served_as)
    assert template is not None
    grid = [s for s in design(template, space.served_as, 10_000, 0)[1]]
    outside = next(s for s in grid if space.entry(s) is None)
    candidate = tmp_path / "c.py"
    candidate.write_text("class ModelNew: pass\n")
    task = builtin_task_path(space.operator)
    assert task is not None
    with pytest.raises(ReplayMiss, match="outside the recorded space") as caught:
        evaluator.evaluate_setting(task, candidate, target="cpu", cases="0", template=space.template, settings=outside)
    assert "\n" not in caught.value.message
    with pytest.raises(ReplayMiss, match="not a kernel of the recorded space"):
        evaluator.evaluate_setting(task, candidate, target="cpu", cases="0", template=None, settings=None)
    sigmoid = builtin_task_path("sigmoid")
    assert sigmoid is not None
    with pytest.raises(ReplayMiss, match="no recorded space for sigmoid"):
        evaluator.space(sigmoid, "cpu", "0")
    with pytest.raises(ReplayMiss, match=r"the run evaluates cases .* recorded 1024x7168"):
        evaluator.space(task, "cpu", "1")
    with pytest.raises(ReplayMiss, match="no space recorded for the cuda target"):
        evaluator.hardware("cuda")


def test_a_folder_without_spaces_or_with_a_broken_file_is_one_error(tmp_path):
    with pytest.raises(SpaceFileError, match="no such folder"):
        ReplayEvaluator(parse_evaluator(f"replay:{tmp_path / 'nowhere'}"))
    with pytest.raises(SpaceFileError, match="holds no recorded spaces"):
        ReplayEvaluator(parse_evaluator(f"replay:{tmp_path}"))
    (tmp_path / "x.pointwise.space.json").write_text('{"schema": "kope.space/1", "operator": "x"}')
    with pytest.raises(SpaceFileError, match="not a valid kope.space/1 file"):
        ReplayEvaluator(parse_evaluator(f"replay:{tmp_path}"))


def test_a_space_file_round_trips_and_rebuilds_each_outcome(tmp_path):
    space = read_spaces(SPACES)[0]
    copy = tmp_path / "copy.space.json"
    space.write(copy)
    again = SpaceFile.read(copy)
    assert again.to_dict() == space.to_dict()
    for entry in again.settings:
        outcome = again.outcome(entry)
        assert outcome.task == space.operator and outcome.hardware.id == space.hardware.id
        assert outcome.status.value == entry["outcome"]["status"] and outcome.speedup == entry["outcome"]["speedup"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_design_is_the_grid_when_small_else_defaults_single_knob_changes_and_a_seeded_sample():
    template = template_for("relu")
    assert template is not None
    kind, grid = design(template, "relu", 10_000, 0)
    relevant = template.relevant_knobs("relu")
    size = 1
    for knob in relevant:
        size *= len(knob.values)
    assert kind == "grid" and len(grid) == size
    kind, chosen = design(template, "relu", 12, 0)
    singles = sum(len(k.values) - 1 for k in relevant)
    assert kind == "one-knob+sample" and len(chosen) == max(12, 1 + singles)
    assert chosen[0] == template.default_settings()
    assert len({settings_key(s) for s in chosen}) == len(chosen)
    assert design(template, "relu", 12, 0) == (kind, chosen)
    assert design(template, "relu", 12, 1)[1][: 1 + singles] == chosen[: 1 + singles]


def test_the_transfer_design_adds_the_best_settings_of_the_templates_other_operators_as_this_one_reads_them():
    """Issue 34, fourteenth round: `--transfer-from` adds each other operator's TRANSFER_TOP fastest settings of the
    same template (pinned: this operator's irrelevant knobs at their defaults) after the base design, once each;
    spaces of other templates and the operator's own space add nothing."""
    from kope.agent.tuner import Tuner
    from kope.bench.record_space import TRANSFER_TOP
    from kope.evaluators.space import read_spaces

    spaces = read_spaces(Path(__file__).resolve().parents[2] / "benchmarks" / "spaces-r2")
    template = template_for("matvec")
    assert template is not None
    tuner_space = Tuner(template).space
    kind, base = design(template, "matvec", 48, 0)
    tkind, chosen = design(template, "matvec", 48, 0, spaces)
    assert tkind == f"{kind}+transfer" and chosen[: len(base)] == base
    keys = [settings_key(s) for s in chosen]
    assert len(set(keys)) == len(keys)
    others = [s for s in spaces if s.template == template.name and s.served_as != "matvec"]
    assert len(others) >= 4
    for other in others:
        ranked = sorted(
            (e for e in other.settings if e["outcome"]["status"] == "correct" and e["outcome"].get("speedup")),
            key=lambda e: -e["outcome"]["speedup"],
        )
        for entry in ranked[:TRANSFER_TOP]:
            assert settings_key(tuner_space.pin("matvec", entry["settings"])) in keys, (other.operator, entry)
    added = len(chosen) - len(base)
    assert added > 0
    own_and_foreign = [s for s in spaces if s.template != template.name or s.served_as == "matvec"]
    assert design(template, "matvec", 48, 0, own_and_foreign) == (kind, base)


def test_a_measured_attempt_keeps_its_content_hash_a_replayed_one_says_so():
    live = synthetic.attempt("run-1", 0, "relu", created_at=1.0)
    assert "replayed" not in live.to_json()
    replayed = Attempt.parse({**live.to_json(), "replayed": True})
    assert replayed.replayed and replayed.to_json()["replayed"] is True
    assert replayed.content_hash() != live.content_hash()
    assert Attempt.parse(live.to_json()).content_hash() == live.content_hash()


def _disturbed_copy(tmp_path: Path) -> tuple[SpaceFile, Path, dict, dict]:
    """A committed space with one setting's reference (and so its speedup) made 7x off, as a disturbed
    measurement of 5 Dec recorded hardswish's `unroll=2, store=streaming` (6.44x, the others 0.90-1.11x)."""
    space = read_spaces(SPACES)[0]
    path = tmp_path / space.path.name  # type: ignore[union-attr]
    space.write(path)
    space = SpaceFile.read(path)
    for i, other in enumerate(space.settings):  # quiet: references within 5 % (the fixtures' vary more)
        for k, case in enumerate(other["outcome"]["cases"]):
            case["ref_ms"]["median"] = (2.0 + k) * (1 + 0.01 * (i % 5))
    entry = space.settings[-1]
    honest = json.loads(json.dumps(entry["outcome"]))
    for case in entry["outcome"]["cases"]:
        case["ref_ms"]["median"] *= 7
    entry["outcome"]["speedup"] *= 7
    return space, path, entry, honest


def test_a_setting_whose_reference_time_is_off_the_spaces_median_is_measured_again(tmp_path):
    from types import SimpleNamespace

    from kope.bench.record_space import REF_DRIFT, _remeasure_disturbed, reference_drift

    space, path, entry, honest = _disturbed_copy(tmp_path)
    drift = reference_drift(space)
    assert drift[-1] > 6 and max(drift[:-1]) <= REF_DRIFT  # the reference is the recording's control
    item = SimpleNamespace(task=SimpleNamespace(operator=space.operator), template=template_for(space.served_as))
    measured, lines = [], []

    def measure(_item, settings):
        measured.append(settings)
        return "k", space.outcome({"outcome": honest})

    _remeasure_disturbed(item, space, path, measure, lines.append)  # type: ignore[arg-type]
    assert measured == [entry["settings"]]  # only the disturbed setting, once: its new reference fits
    again = SpaceFile.read(path).settings[-1]
    assert again["outcome"]["speedup"] == honest["speedup"]
    assert again["remeasured"] == [
        {"speedup": pytest.approx(honest["speedup"] * 7), "ref_drift": pytest.approx(7, rel=0.2)}
    ]
    assert len(lines) == 1 and "off the median" in lines[0]


def test_a_setting_still_disturbed_when_measured_again_keeps_its_nearest_measurement(tmp_path):
    from types import SimpleNamespace

    from kope.bench.record_space import REMEASURE, _remeasure_disturbed

    space, path, entry, honest = _disturbed_copy(tmp_path)
    worse = json.loads(json.dumps(entry["outcome"]))
    for case in worse["cases"]:
        case["ref_ms"]["median"] *= 2
    item = SimpleNamespace(task=SimpleNamespace(operator=space.operator), template=template_for(space.served_as))
    calls = []

    def measure(_item, settings):
        calls.append(settings)
        return "k", space.outcome({"outcome": worse})

    _remeasure_disturbed(item, space, path, measure, lambda _line: None)  # type: ignore[arg-type]
    kept = SpaceFile.read(path).settings[-1]
    assert len(calls) == REMEASURE  # bounded
    assert kept["outcome"]["speedup"] == entry["outcome"]["speedup"]  # nearer the median than 14x off
    assert len(kept["remeasured"]) == REMEASURE


def test_a_space_recorded_on_a_machine_with_other_caches_is_replayed_here_and_a_changed_template_still_refused(
    tmp_path,
):
    """gemm's `tiles=auto` writes the machine's cache sizes into the kernel, so the kernel the proposer renders here
    differs from the one recorded on another machine (spaces-r2: an AMD EPYC; replayed on an Intel Xeon every
    matmul and convolution proposal was refused as 'the template changed'). The replay renders the setting with the
    recorded caches too: equal there, it is the recorded kernel. A kernel that is neither is still refused."""
    from harness.hardware import cache_sizes, caches_as
    from kope.memory.ids import kernel_id

    source = Path(__file__).resolve().parents[2] / "benchmarks" / "spaces-r2" / "matmul.gemm.space.json"
    data = json.loads(source.read_text())
    elsewhere = {"l1d": 32768 * 3, "l1i": 32768, "l2": 1024 * 1024 * 3, "l3": 1024 * 1024 * 7}
    assert elsewhere != cache_sizes()
    data["hardware"]["caches"] = elsewhere
    task = builtin_task_path("matmul")
    assert task is not None
    match = task_structure(task, "matmul", "cpu")
    template = template_for(data["served_as"])
    assert template is not None
    auto = [e for e in data["settings"] if e["settings"].get("tiles") == "auto"]
    assert auto
    with caches_as(elsewhere):
        for e in data["settings"]:
            e["kernel"] = kernel_id(render_for_task(template, match, e["settings"]))
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / source.name).write_text(json.dumps(data))
    evaluator = make_evaluator(load_config(), f"replay:{tmp_path / 'spaces'}")
    candidate = tmp_path / "c.py"
    candidate.write_text(render_for_task(template, match, auto[0]["settings"]))  # this machine's rendering
    assert kernel_id(candidate.read_text()) != auto[0]["kernel"]
    answered = evaluator.evaluate_setting(
        task, candidate, target="cpu", cases="0", template="gemm", settings=auto[0]["settings"]
    )
    assert answered.speedup == auto[0]["outcome"]["speedup"]
    with caches_as({**elsewhere, "l2": 1024 * 1024 * 5}):  # a third machine's kernel: neither
        candidate.write_text(render_for_task(template, match, auto[0]["settings"]))
    with pytest.raises(ReplayMiss, match="not the one recorded"):
        evaluator.evaluate_setting(
            task, candidate, target="cpu", cases="0", template="gemm", settings=auto[0]["settings"]
        )
    data["settings"][data["settings"].index(auto[0])]["kernel"] = "0" * 64  # the template edited since the recording
    (tmp_path / "spaces" / source.name).write_text(json.dumps(data))
    candidate.write_text(render_for_task(template, match, auto[0]["settings"]))
    with pytest.raises(ReplayMiss, match="not the one recorded"):
        make_evaluator(load_config(), f"replay:{tmp_path / 'spaces'}").evaluate_setting(
            task, candidate, target="cpu", cases="0", template="gemm", settings=auto[0]["settings"]
        )


def _space_with_speedups(tmp_path: Path, speedups: list[float]) -> tuple[SpaceFile, Path]:
    """A committed space copied to ``tmp_path`` with its first settings' speedups set to ``speedups`` (the rest
    far below them)."""
    space = read_spaces(SPACES)[0]
    path = tmp_path / space.path.name  # type: ignore[union-attr]
    assert len(space.settings) > len(speedups)
    for i, entry in enumerate(space.settings):
        entry["outcome"]["status"] = "correct"
        entry["outcome"]["speedup"] = speedups[i] if i < len(speedups) else 0.1
    space.write(path)
    return SpaceFile.read(path), path


def _measuring(space: SpaceFile, answers: dict[str, list[float]]):
    """A stand-in for the harness: each setting's next speedup from ``answers`` (by the setting's key)."""
    calls: list[str] = []

    def measure(_item, settings):
        key = settings_key(settings)
        calls.append(key)
        stored = json.loads(json.dumps(space.entry(settings)["outcome"]))  # type: ignore[index]
        stored["speedup"] = answers[key].pop(0)
        return "k", space.outcome({"outcome": stored})

    return measure, calls


def _item(space: SpaceFile):
    from types import SimpleNamespace

    return SimpleNamespace(task=SimpleNamespace(operator=space.operator), template=template_for(space.served_as))


def test_a_lucky_optimum_is_measured_again_and_keeps_its_median(tmp_path):
    from kope.bench.record_space import _confirm_optimum

    space, path = _space_with_speedups(tmp_path, [1.0, 1.1, 2.0])
    lucky = settings_key(space.settings[2]["settings"])
    measure, calls = _measuring(space, {lucky: [1.05, 1.2]})
    lines: list[str] = []
    _confirm_optimum(_item(space), space, path, measure, lines.append, 2)  # type: ignore[arg-type]
    assert calls == [lucky, lucky]  # then the fastest (1.2x) is confirmed: done
    again = SpaceFile.read(path)
    entry = again.settings[2]
    assert entry["outcome"]["speedup"] == 1.2 and entry["confirmed"] == 3
    assert sorted(r["speedup"] for r in entry["remeasured"]) == [1.05, 2.0]
    assert all(r["confirm"] for r in entry["remeasured"])
    assert again.optimum() == 1.2
    assert len(lines) == 1 and "measured 3 times, 2.00x, 1.05x, 1.20x; kept the median 1.20x" in lines[0]


def test_when_the_confirmed_optimum_falls_the_next_fastest_is_confirmed_too(tmp_path):
    from kope.bench.record_space import _confirm_optimum

    space, path = _space_with_speedups(tmp_path, [1.0, 1.1, 2.0])
    lucky, second = (settings_key(space.settings[i]["settings"]) for i in (2, 1))
    measure, calls = _measuring(space, {lucky: [0.9, 0.95], second: [1.15, 1.0]})
    _confirm_optimum(_item(space), space, path, measure, lambda _line: None, 2)  # type: ignore[arg-type]
    assert calls == [lucky, lucky, second, second]
    again = SpaceFile.read(path)
    assert again.settings[2]["outcome"]["speedup"] == 0.95 and again.settings[1]["outcome"]["speedup"] == 1.1
    assert again.optimum() == 1.1 and "confirmed" in again.ranked()[0]
    assert "confirmed" not in again.settings[0]


def test_a_failed_measurement_counts_zero_and_an_even_count_keeps_the_lower_median(tmp_path):
    space, _ = _space_with_speedups(tmp_path, [1.0, 1.1, 2.0])
    entry = space.settings[2]
    failed = json.loads(json.dumps(entry["outcome"]))
    failed.update(status="incorrect", speedup=None)
    kept = space.confirmed(entry, [space.outcome({"outcome": failed})])
    assert kept["status"] == "incorrect" and entry["confirmed"] == 2
    assert entry["remeasured"] == [{"speedup": 2.0, "confirm": True}]
    assert space.optimum() == 1.1


def test_confirmation_is_bounded_and_off_with_zero(tmp_path):
    from kope.bench.record_space import CONFIRM_MAX, _confirm_optimum

    falling = [3.0 - 0.1 * i for i in range(CONFIRM_MAX + 2)]
    space, path = _space_with_speedups(tmp_path, falling)
    answers = {settings_key(e["settings"]): [0.5, 0.5] for e in space.settings}
    measure, calls = _measuring(space, answers)
    _confirm_optimum(_item(space), space, path, measure, lambda _line: None, 0)  # type: ignore[arg-type]
    assert calls == []
    lines: list[str] = []
    _confirm_optimum(_item(space), space, path, measure, lines.append, 2)  # type: ignore[arg-type]
    assert len(calls) == 2 * CONFIRM_MAX  # each confirmed one fell below the next: the limit stops it
    again = SpaceFile.read(path)
    assert sum(1 for e in again.settings if "confirmed" in e) == CONFIRM_MAX
    assert "the limit" in lines[-1] and "stays measured once" in lines[-1]


def test_the_clis_record_space_defaults_are_the_recorders():
    """The CLI imports the recorder only when the command runs, so its option defaults are written out; they must be
    the recorder's own."""
    from kope.bench.record_space import CONFIRM, DEFAULT_MAX_SETTINGS
    from kope.cli.bench_cmd import command

    record = command.commands["record-space"]  # type: ignore[attr-defined]
    defaults = {p.name: p.default for p in record.params}
    assert defaults["max_settings"] == DEFAULT_MAX_SETTINGS
    assert defaults["confirm"] == CONFIRM
