"""What goes over the wire to a remote evaluation: sources, the task's hash, options; never a path or a secret."""

import json

import pytest

from harness.errors import OptionsError, TaskNotFoundError
from harness.evaluate import EvalOptions
from harness.remote import EvalRequest, WireOptions, error_from_payload, materialize_task, request_for, scrub_secrets
from harness.suite import find_candidate, find_task
from harness.timing import Budget
from harness.worker_pool import Limits

RELU = find_task("relu").path
CANDIDATE = find_candidate("relu")


def test_a_request_carries_the_sources_the_task_hash_and_the_options_and_nothing_of_this_machine(monkeypatch):
    monkeypatch.setenv("KOPE_NEO4J_PASSWORD", "graph-secret-value")
    options = EvalOptions(cases="0-1", seeds=2, budget=Budget(warmup_ms=5, rep_ms=20))
    payload = request_for(RELU, CANDIDATE, options).to_payload()
    assert set(payload) == {"schema", "task", "candidate", "options"}
    assert payload["schema"] == "kope.eval-request/1"
    assert payload["task"]["source"] == RELU.read_text() and payload["task"]["name"] == "relu.py"
    assert payload["candidate"]["source"] == CANDIDATE.read_text()
    assert payload["options"]["cases"] == "0-1" and payload["options"]["seeds"] == 2
    assert payload["options"]["budget"]["rep_ms"] == 20
    text = json.dumps(payload)
    assert str(RELU.parent) not in text and "graph-secret-value" not in text


def test_a_request_round_trips_to_the_same_evaluation_options():
    options = EvalOptions(cases=[0, "2"], seeds=1, timing=False, seed=7, compile_timeout_s=30)
    wire = EvalRequest.from_payload(json.loads(json.dumps(request_for(RELU, CANDIDATE, options).to_payload())))
    again = wire.options.to_eval_options()
    assert (again.cases, again.seeds, again.timing, again.seed, again.compile_timeout_s) == ([0, "2"], 1, False, 7, 30)
    assert again.budget == options.budget


@pytest.mark.parametrize(
    "override",
    [{"static_checks": False}, {"lazy_check": False}, {"limits": Limits(memory_bytes=1 << 40)}, {"sandbox": False}],
)
def test_the_anti_cheat_switches_and_limits_cannot_be_sent(override):
    with pytest.raises(OptionsError, match="cannot be sent"):
        request_for(RELU, CANDIDATE, EvalOptions(**override))


def test_a_request_cannot_switch_a_check_off_by_adding_a_field():
    payload = request_for(RELU, CANDIDATE, EvalOptions()).to_payload()
    payload["options"]["static_checks"] = False
    with pytest.raises(OptionsError, match="options.static_checks"):
        EvalRequest.from_payload(payload)


def test_a_task_whose_source_does_not_match_its_hash_is_refused():
    payload = request_for(RELU, CANDIDATE, EvalOptions()).to_payload()
    payload["task"]["source"] += "\n# altered\n"
    with pytest.raises(OptionsError, match="sha256"):
        EvalRequest.from_payload(payload)


@pytest.mark.parametrize("name", ["../evil.py", "/etc/passwd.py", "a/b.py", "x.sh", ""])
def test_file_names_are_plain_python_file_names(name):
    payload = request_for(RELU, CANDIDATE, EvalOptions()).to_payload()
    payload["candidate"]["name"] = name
    with pytest.raises(OptionsError, match="candidate.name"):
        EvalRequest.from_payload(payload)


def test_an_unknown_timing_budget_field_is_an_options_error():
    wire = WireOptions(budget={"rep_ms": 10, "bogus": 1})
    with pytest.raises(OptionsError, match="bogus"):
        wire.to_eval_options()


def test_the_level_folder_travels_so_the_task_keeps_its_level(tmp_path):
    folder = tmp_path / "KernelBench" / "level2"
    folder.mkdir(parents=True)
    task = folder / "7_Relu.py"
    task.write_text(RELU.read_text().replace('OPERATOR = "relu"', "").replace("LEVEL = 1", ""))
    request = request_for(task, CANDIDATE, EvalOptions())
    assert request.task.level_folder == "level2"
    written = materialize_task(request.task, tmp_path / "worker")
    assert written.parent.name == "level2" and written.read_text() == task.read_text()
    assert materialize_task(request.task, tmp_path / "worker").stat().st_mtime_ns == written.stat().st_mtime_ns


def test_a_missing_task_file_is_a_task_error(tmp_path):
    with pytest.raises(TaskNotFoundError):
        request_for(tmp_path / "nope.py", CANDIDATE, EvalOptions())


def test_a_remote_error_comes_back_as_its_own_type():
    error = error_from_payload(
        {"type": "TaskFormatError", "message": "FAMILY (line 6) must be one of ...", "hint": None}
    )
    assert type(error).__name__ == "TaskFormatError" and "FAMILY" in str(error)
    assert type(error_from_payload({"type": "os.system", "message": "x"})).__name__ == "HarnessError"


def test_credential_like_variables_are_scrubbed_from_an_evaluation_environment():
    env = {
        "KOPE_WORKER_KEY": "k",
        "OPENAI_API_KEY": "k",
        "KOPE_NEO4J_PASSWORD": "p",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "s",
        "PATH": "/usr/bin",
        "OMP_NUM_THREADS": "2",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    assert scrub_secrets(env) == {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "0"}
