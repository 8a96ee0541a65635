"""Where an evaluation's time goes: each phase of ``harness.evaluate`` measured on its own.

Not a test. Prints, for one task and one candidate (default: the suite's relu on all 9 cases):

1. worker start-up: a fresh interpreter importing torch, and a harness worker
   answering its first ``load`` (interpreter + torch + harness + task);
2. per case, in this process: building the case module and the model, generating
   one seed's inputs, the reference forward, the candidate forward, the comparison,
   one output through a pipe (encode, write, read, decode); the timed phase
   itself is in the phase trace of 4;
3. compiling the candidate with an empty cache;
4. one full ``evaluate()`` with its phase trace.

    PYTHONPATH=. python benchmarks/profile_harness.py [--task relu] [--candidate PATH] [--cases 0-8]
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def clock() -> float:
    return time.perf_counter()


def startup() -> None:
    started = clock()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    print(f"  python -c 'import torch'                    {clock() - started:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="relu")
    parser.add_argument("--candidate", default=None)
    parser.add_argument("--cases", default=None)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()

    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print("\n== 1. worker start-up")
    startup()
    from harness.suite import find_candidate, find_task

    task_path = find_task(args.task).path
    candidate = Path(args.candidate) if args.candidate else find_candidate(args.task)

    import torch

    from harness.compare import compare_outputs
    from harness.ipc import Load, MessageReader, write_message
    from harness.targets import get_target
    from harness.task import load_task, select_cases
    from harness.worker_common import build, build_reference, decode, encode, init_inputs, make_inputs
    from harness.worker_limits import Limits
    from harness.worker_process import Worker

    target = get_target("cpu")
    env = dict(os.environ)
    env.update(target.worker_env(os.cpu_count() or 1))
    started = clock()
    worker = Worker("reference", env, Limits(), True)
    worker.request(
        Load(task=str(task_path), target="cpu", target_options={}, threads=os.cpu_count() or 1),
        120,
        "load",
    )
    print(f"  harness reference worker: start + load task  {clock() - started:6.2f} s")
    worker.close()

    print("\n== 3. compile (empty cache)")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KOPE_HARNESS_CACHE"] = cache
        from harness.targets.base import import_file

        started = clock()
        module = import_file(candidate, "kope_profile_candidate")
        print(f"  import + compile {candidate.name:28} {clock() - started:6.2f} s")
        os.environ.pop("KOPE_HARNESS_CACHE")
    torch.set_num_threads(os.cpu_count() or 1)
    task = load_task(task_path)
    cases = select_cases(task, args.cases)
    print(f"\n== 2. per case (ms; inputs/forward/compare per seed; x{args.seeds} seeds x 2 workers today)")
    print(f"  {'case':22} {'module':>7} {'inputs':>7} {'ref fwd':>8} {'cand fwd':>8} {'compare':>8} {'ipc':>7}")
    totals: dict[str, float] = {}
    for case in cases:
        row = {}
        t0 = clock()
        mod = task.module_for_case(case)
        init = init_inputs(mod, 1, case.name)
        ref = build_reference(mod, init, 1, "cpu", case.name)
        cand = build(module.ModelNew, init, 1, "cpu")
        row["module"] = clock() - t0
        t0 = clock()
        inputs = make_inputs(mod, 7, "cpu", case.name)
        row["inputs"] = clock() - t0
        with torch.no_grad():
            t0 = clock()
            out_ref = ref(*inputs)
            row["ref fwd"] = clock() - t0
            t0 = clock()
            out_cand = cand(*inputs)
            row["cand fwd"] = clock() - t0
        t0 = clock()
        verdict = compare_outputs(out_cand, out_ref, device="cpu")
        row["compare"] = clock() - t0
        assert verdict.ok, verdict.message
        r, w = os.pipe()
        got = {}
        reader = threading.Thread(target=lambda g=got, fd=r: g.update(msg=MessageReader(fd, 1 << 40).read(60)))
        t0 = clock()
        reader.start()
        tensors: list = []
        write_message(w, {"output": encode(out_cand, tensors)}, tensors)
        reader.join()
        decode(got["msg"][0]["output"], got["msg"][1])
        row["ipc"] = clock() - t0
        os.close(r)
        os.close(w)
        for k, v in row.items():
            totals[k] = totals.get(k, 0.0) + v
        print(f"  {case.name:22} " + " ".join(f"{row[k] * 1e3:{w}.0f}" for k, w in zip(row, (7, 7, 8, 8, 8, 7))))
    print(f"  {'total':22} " + " ".join(f"{totals[k] * 1e3:{w}.0f}" for k, w in zip(totals, (7, 7, 8, 8, 8, 7))))

    print("\n== 4. one evaluate() with its phase trace (parent side)")
    from harness.evaluate import EvalOptions, evaluate
    from harness.worker_pool import REFERENCE_POOL

    logging.basicConfig(level=logging.DEBUG, format="  %(message)s")
    logging.getLogger("harness").setLevel(logging.DEBUG)
    started = clock()
    outcome = evaluate(task_path, candidate, EvalOptions(cases=args.cases, seeds=args.seeds))
    print(f"  evaluate(): {clock() - started:.2f} s, {outcome.status.value}, speedup {outcome.speedup}")
    REFERENCE_POOL.close_all()


if __name__ == "__main__":
    main()
