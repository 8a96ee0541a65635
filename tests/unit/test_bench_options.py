"""A bench's options: validated in kope.bench (not in the CLI), and a resumed bench keeps its stored plan."""

from pathlib import Path

import pytest

from kope.bench.options import BenchRequest, fresh_options, resume_options
from kope.bench.store import BenchStore, write_json
from kope.errors import UsageError


def stored_bench(tmp_path: Path, **request) -> BenchRequest:
    out = tmp_path / "bench"
    options = fresh_options(BenchRequest(out=out, configs="active,no-memory", steps=3, **request), model=None)
    write_json(BenchStore(out).plan_file, {"options": options.to_dict()})
    return BenchRequest(out=out)


def test_a_fresh_bench_is_named_after_its_folder_and_runs_configurations_in_order(tmp_path):
    options = fresh_options(BenchRequest(out=tmp_path / "my bench!", configs="no-memory,active"), model="m")
    assert options.name == "my-bench" and options.configs == ("active", "no-memory") and options.model is None


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (BenchRequest(suite="/does/not/exist"), "suite folder not found"),
        (BenchRequest(import_memory=("/no/such.jsonl",)), "--import-memory file not found"),
        (BenchRequest(configs="active", baseline="none"), "--baseline 'none' is not one of the configurations"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(request_, message):
    with pytest.raises(UsageError, match=message):
        fresh_options(request_, model=None)


def test_resuming_keeps_the_stored_options_and_takes_new_workers_and_baseline(tmp_path):
    request = stored_bench(tmp_path)
    again = BenchRequest(out=request.out, workers=3, baseline="active", steps=99)
    options = resume_options(again, given={"workers", "baseline"}, model=None)
    assert (options.steps, options.workers, options.baseline) == (3, 3, "active")


def test_resuming_with_other_options_names_each_difference(tmp_path):
    request = stored_bench(tmp_path)
    again = BenchRequest(out=request.out, steps=5, configs="active")
    with pytest.raises(UsageError, match="started with other options") as info:
        resume_options(again, given={"steps", "configs"}, model=None)
    assert "steps: started with 3, given 5" in info.value.message and "configs:" in info.value.message


def test_there_is_nothing_to_resume_in_an_empty_folder(tmp_path):
    with pytest.raises(UsageError, match="no bench to resume"):
        resume_options(BenchRequest(out=tmp_path), given=set(), model=None)
