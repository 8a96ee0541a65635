"""Running a bench: prepare the namespaces, run every pending pair, keep results.json current.

A fresh bench wipes its configurations' namespaces (graph and journal), imports
``--import-memory`` files into each, and writes ``plan.json``. A resumed bench
(``--resume``) reads the plan back and runs only the pairs without a result
file: finished pairs are skipped, a started one continues its run (see
``pair``). After every finished pair ``results.json`` is rewritten, so an
interrupted bench leaves a readable partial result.

``--workers N`` runs up to N pairs at once, each in its own process
(``python -m kope.bench.worker``) writing its own run into the shared Neo4j,
which the memory supports (concurrent writers of different runs, even into
the same lineages). The next pair started is the first pending one, in bench
order, of a configuration with nothing running; only when every
configuration with work left is busy does a second operator of one
configuration start. So with N no larger than the number of configurations,
each configuration's operators still run one after another, as in a
sequential bench, until the last configurations are left; beyond that,
operators of one configuration overlap and cannot see each other's
experience in the order a sequential run would (each pair records the
operators it overlapped with). Timings of parallel pairs share the CPU cores.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kope.bench.metrics import bench_metrics
from kope.bench.pair import PairSpec, run_pair
from kope.bench.plan import CONFIGURATIONS, BenchOptions, Pair, Plan, TaskEntry, default_baseline
from kope.bench.repeats import for_repeat, memory_key, repeat_summary
from kope.bench.store import RESULTS_SCHEMA, BenchStore, read_json, write_json
from kope.config import KopeConfig
from kope.errors import KopeError, UsageError
from kope.hints import kope_command
from kope.memory import Memory, open_memory

if TYPE_CHECKING:
    from kope.evaluators import Evaluator

Progress = Callable[[str, Any], None]


class BenchInterrupted(KopeError):
    """Ctrl-C (or SIGTERM) stopped the bench; it can be resumed."""

    exit_code = 130


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def resume_hint(out: Path, config: KopeConfig) -> str:
    """The bench's namespaces are in its plan (under ``out``); the server is named like every hint's."""
    return f"continue it with `{kope_command(config, 'bench', '--resume', '--out', str(out), scoped=False)}`"


@dataclass
class BenchRunner:
    plan: Plan
    config: KopeConfig
    command: str
    progress: Progress
    _evaluator: Evaluator | None = None

    @property
    def store(self) -> BenchStore:
        return BenchStore(self.plan.options.out)

    @property
    def evaluator(self) -> Evaluator:
        """This process's evaluator (``plan.options.evaluator``): the hardware, and the pairs it runs itself."""
        if self._evaluator is None:
            from kope.evaluators import make_evaluator

            self._evaluator = make_evaluator(self.config, self.plan.options.evaluator)
        return self._evaluator

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None

    # -- preparing -----------------------------------------------------------------------------------
    def start_fresh(self) -> None:
        opts = self.plan.options
        store = self.store
        store.wipe()
        imports = []
        memory_start = {}
        for repeat in self.plan.repeats:
            for config in opts.configs:
                namespace = self.plan.namespace(config, repeat)
                wiped = self._wipe_namespace(namespace)
                self.progress("info", f"namespace {namespace}: wiped ({wiped} nodes)")
                imported = self._import(namespace)
                imports.extend(imported)
                memory_start[memory_key(config, repeat)] = self._memory_size(namespace)
        write_json(
            store.plan_file,
            {
                "schema": RESULTS_SCHEMA,
                "command": self.command,
                "options": opts.to_dict(),
                "created_at": _now(),
                "hardware": self.evaluator.hardware(opts.target).to_dict(),
                "operators": [t.to_dict() for t in self.plan.tasks],
                "optima": self._optima(),
                "imports": imports,
                "memory_start": memory_start,
            },
        )

    def _optima(self) -> dict[str, float]:
        """Each operator's best recorded speedup when the evaluator knows it (a replay evaluator's spaces)."""
        known = getattr(self.evaluator, "optimum", None)
        if known is None:
            return {}
        out = {}
        for task in self.plan.tasks:
            try:
                value = known(task.operator, self.plan.options.target)
            except UsageError:
                continue
            if value is not None:
                out[task.operator] = value
        return out

    def _graph(self, namespace: str, journal: bool = False) -> Memory:
        return open_memory(self.config, namespace=namespace, journal=journal)

    def _wipe_namespace(self, namespace: str) -> int:
        with self._graph(namespace) as graph:
            # the schema first, here, once: pair processes that create it while others write can deadlock
            graph.init_schema()
            report = graph.prune(everything=True)
        shutil.rmtree(Path(self.config.data_dir) / "memory" / namespace, ignore_errors=True)  # its journal
        return report.deleted_nodes

    def _import(self, namespace: str) -> list[dict[str, Any]]:
        done = []
        for item in self.plan.options.imports:
            path = Path(item["file"])
            # journaled: the runs that grow from the seeded memory rebuild from the journal too
            with self._graph(namespace, journal=True) as graph, open(path, encoding="utf-8") as handle:
                report = graph.import_from(handle, source=str(path))
            self.progress(
                "info",
                f"namespace {namespace}: imported {path} ({report.node_total} nodes, "
                f"{report.relationship_total} relationships)",
            )
            done.append(
                {
                    "namespace": namespace,
                    "file": str(path),
                    "sha256": item["sha256"],
                    "nodes": report.node_total,
                    "relationships": report.relationship_total,
                }
            )
        return done

    def _memory_size(self, namespace: str) -> dict[str, int]:
        from kope.bench.pair import memory_size

        with self._graph(namespace) as graph:
            return memory_size(graph)

    def note_resume(self) -> None:
        """Record this invocation in plan.json (results.json lists every resume with its command).
        The evaluator may change on resume, the hardware it evaluates on may not."""
        plan = self.store.read_plan()
        opts = self.plan.options
        now = self.evaluator.hardware(opts.target)
        if now.id != plan["hardware"]["id"]:
            raise UsageError(
                f"--resume: the bench ran on {plan['hardware']['class']} [{plan['hardware']['id']}], but the evaluator "
                f"{opts.evaluator} evaluates on {now.class_} [{now.id}]",
                hint="resume with an evaluator on the same hardware (--evaluator), or start a new bench",
            )
        plan.setdefault("resumes", []).append(
            {"command": self.command, "at": _now(), "workers": opts.workers, "evaluator": opts.evaluator}
        )
        write_json(self.store.plan_file, plan)

    # -- running -------------------------------------------------------------------------------------
    def pending(self) -> list[Pair]:
        return [p for p in self.plan.pairs() if self.store.finished(*p.key) is None]

    def spec(self, pair: Pair) -> PairSpec:
        opts = self.plan.options
        conf = CONFIGURATIONS[pair.config]
        task: TaskEntry = self.plan.task(pair.operator)
        return PairSpec(
            config=pair.config,
            operator=pair.operator,
            index=pair.index,
            task_path=task.path,
            cases=opts.cases,
            namespace=self.plan.namespace(pair.config, pair.repeat),
            policy=conf.policy,
            memory=conf.memory,
            target=opts.target,
            proposer=opts.proposer,
            steps=opts.steps,
            runs_dir=str(self.store.runs_dir(pair.config, pair.repeat)),
            resume_run_id=self.store.started_run(*pair.key),
            repeat=pair.repeat,
            seed=pair.seed,
            final=opts.final_settings(),
            evaluator=opts.evaluator,
        )

    def _record_broken(self, pending: list[Pair]) -> list[Pair]:
        """Pairs of tasks that did not load are recorded as errors with the loader's message; the rest run."""
        runnable = []
        for pair in pending:
            task = self.plan.task(pair.operator)
            if task.error is None:
                runnable.append(pair)
                continue
            now = time.time()
            self._finish_pair(
                {
                    "config": pair.config,
                    "operator": pair.operator,
                    "index": pair.index,
                    "namespace": self.plan.namespace(pair.config),
                    "run_id": None,
                    "status": "error",
                    "stop_reason": f"the task file does not load: {task.error}",
                    "error": task.error,
                    "resumed_from": None,
                    "resumed_at": None,
                    "started_at": now,
                    "ended_at": now,
                    "seconds": 0.0,
                    "attempts": [],
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                },
                [],
            )
        return runnable

    def _trace_all(self, pending: list[Pair]) -> None:
        """The offline proposer matches every task by its traced structure: trace them in one worker process
        up front (cached; a task that fails here is reported by its own pair)."""
        from kope.boundary import TaskError, trace_tasks

        paths: list[str | Path] = sorted({self.plan.task(p.operator).path for p in pending})
        if self.plan.options.proposer == "offline" and paths:
            try:
                traced = trace_tasks(paths)
            except TaskError as exc:
                self.progress("info", f"tracing the tasks up front failed ({exc.message}); each pair traces its own")
                return
            if traced:
                self.progress("info", f"traced {traced} task(s) for the offline proposer's structure match")

    def run(self) -> dict[str, Any]:
        pending = self._record_broken(self.pending())
        self._trace_all(pending)
        total = len(self.plan.pairs())
        self.progress("plan", {"total": total, "pending": len(pending), "workers": self.plan.options.workers})
        try:
            if self.plan.options.workers == 1:
                self._sequential(pending)
            else:
                self._parallel(pending)
        except KeyboardInterrupt:
            self.write_results()
            raise BenchInterrupted(
                f"bench interrupted: {self._done()} of {total} pairs finished",
                hint=resume_hint(self.plan.options.out, self.config),
            ) from None
        except KopeError as exc:
            self.write_results()
            # the loop's own hint names `kope optimize --resume`; a bench resumes as a whole
            own = (exc.hint or "").partition("the run is kept:")[0].strip("; ")
            exc.hint = "; ".join(filter(None, [own, resume_hint(self.plan.options.out, self.config)]))
            raise
        return self.write_results()

    def _done(self) -> int:
        return sum(1 for p in self.plan.pairs() if self.store.finished(*p.key) is not None)

    def _finish_pair(self, result: dict[str, Any], overlapped: list[str]) -> None:
        result["overlapped_with"] = overlapped
        self.store.save_pair(result)
        self.write_results()
        self.progress("pair-done", result)

    def _sequential(self, pending: list[Pair]) -> None:
        for pair in pending:
            spec = self.spec(pair)
            self.progress("pair-start", {"pair": pair, "resume": spec.resume_run_id})
            result = run_pair(
                spec,
                self.config,
                on_started=functools.partial(self.store.mark_started, pair.config, pair.operator, repeat=pair.repeat),
                progress=self.progress,
                evaluator=self.evaluator,
            )
            self._finish_pair(result, [])

    def _parallel(self, pending: list[Pair]) -> None:
        store = self.store
        workers = self.plan.options.workers
        queue = list(pending)
        running: dict[subprocess.Popen[bytes], tuple[Pair, list[str], IO[str]]] = {}
        failure: dict[str, Any] | None = None
        try:
            while queue or running:
                while queue and len(running) < workers and failure is None:
                    # a configuration's namespace (one per repeat) is busy while one of its pairs runs
                    busy = {(p.config, p.repeat) for p, _, _ in running.values()}
                    pair = next((p for p in queue if (p.config, p.repeat) not in busy), queue[0])
                    queue.remove(pair)
                    overlapped = [
                        p.operator for p, _, _ in running.values() if (p.config, p.repeat) == (pair.config, pair.repeat)
                    ]
                    proc, log = self._spawn(pair)
                    running[proc] = (pair, overlapped, log)
                    self.progress(
                        "pair-start",
                        {
                            "pair": pair,
                            "resume": self.spec(pair).resume_run_id,
                            "log": str(store.log_file(*pair.key)),
                        },
                    )
                if failure is not None and not running:
                    break
                time.sleep(0.5)
                for proc in [p for p in running if p.poll() is not None]:
                    pair, overlapped, log = running.pop(proc)
                    log.close()
                    result = store.finished(*pair.key) if proc.returncode == 0 else None
                    if result is not None:
                        result["overlapped_with"] = overlapped
                        store.save_pair(result)
                        self.write_results()
                        self.progress("pair-done", result)
                        continue
                    error_file = store.work_file(pair.config, pair.operator, "error", pair.repeat)
                    error = (
                        read_json(error_file, "worker error")
                        if error_file.is_file()
                        else {
                            "message": f"worker for {pair.config}/{pair.operator} exited with status {proc.returncode}; "
                            f"see {store.log_file(*pair.key)}",
                            "hint": None,
                            "exit_code": 1,
                        }
                    )
                    failure = failure or {**error, "pair": f"{pair.config}/{pair.operator}"}
        except KeyboardInterrupt:
            self._stop(running)
            raise
        if failure is not None:
            if failure.get("exit_code") == 130:
                raise KeyboardInterrupt
            error = KopeError(f"{failure['pair']}: {failure['message']}", hint=failure.get("hint"))
            error.exit_code = int(failure.get("exit_code") or 1)
            raise error

    def _spawn(self, pair: Pair) -> tuple[subprocess.Popen[bytes], IO[str]]:
        store = self.store
        spec_file = store.work_file(pair.config, pair.operator, "spec", pair.repeat)
        write_json(spec_file, {**self.spec(pair).to_dict(), "bench_dir": str(store.root)})
        log_path = store.log_file(*pair.key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "a", encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")])
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "kope.bench.worker", str(spec_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        return proc, log

    @staticmethod
    def _stop(running: dict[subprocess.Popen[bytes], tuple[Pair, list[str], IO[str]]]) -> None:
        for proc in running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        for proc, (_, _, log) in running.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()

    # -- results -------------------------------------------------------------------------------------
    def write_results(self) -> dict[str, Any]:
        data = assemble(self.store, self.plan)
        write_json(self.store.results_file, data)
        return data


def assemble(store: BenchStore, plan: Plan) -> dict[str, Any]:
    """results.json: the plan, every finished pair in bench order, and the metrics computed from them."""
    stored = store.read_plan()
    opts = plan.options
    pairs = [r for r in (store.finished(*p.key) for p in plan.pairs()) if r is not None]
    total = len(plan.pairs())
    baseline = opts.baseline or default_baseline(opts.configs)
    data = {
        "schema": RESULTS_SCHEMA,
        "command": stored["command"],
        "resumes": stored.get("resumes", []),
        "options": stored["options"],
        "created_at": stored["created_at"],
        "updated_at": _now(),
        "complete": len(pairs) == total,
        "pairs_total": total,
        "hardware": stored["hardware"],
        "baseline": baseline,
        "configurations": [
            {
                "name": c.name,
                "policy": c.policy,
                "memory": c.memory,
                "description": c.description,
                "namespace": plan.namespace(c.name),
                "namespaces": [plan.namespace(c.name, r) for r in plan.repeats],
            }
            for c in plan.configurations
        ],
        "operators": stored["operators"],
        "optima": stored.get("optima") or {},
        "imports": stored["imports"],
        "memory_start": stored["memory_start"],
        "pairs": pairs,
    }
    data["repeats"] = opts.repeats
    first = for_repeat(data, 1)
    data["metrics"] = {c: m.to_dict() for c, m in bench_metrics(first, baseline).items()}
    if opts.repeats > 1:
        data["repeat_summary"] = repeat_summary(data, baseline)
    return data


def plan_from_store(store: BenchStore, options: BenchOptions) -> Plan:
    """The plan of an existing bench (its stored operator list), with this invocation's workers/baseline."""
    stored = store.read_plan()
    tasks = [
        TaskEntry(t["operator"], t["family"], t["level"], t["path"], tuple(t["cases"]), t.get("error"))
        for t in stored["operators"]
    ]
    return Plan(options, tasks)


def stored_options(store: BenchStore) -> BenchOptions:
    return BenchOptions.from_dict(store.read_plan()["options"])
