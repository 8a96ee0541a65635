"""The optimization loop: retrieve -> assemble -> propose -> evaluate -> record, step by step.

Each step starts from the incumbent (the best correct kernel so far; before
there is one, from the latest attempt, to repair it). After ``patience``
steps without improvement the loop backtracks to the most promising earlier
state by downstream score d(v): the next decision's FROM points at that state
(an alternative branch) while NEXT keeps time order. The run stops on the step
budget, the token budget, the wall-clock budget, a target speedup, or when the
proposer has nothing left to try. Everything a step needs is read back from
the graph, once per step, into a typed ``StepState`` (``Memory.step_state``)
that the step's context assembly and proposer share, so a run resumes from the
graph alone (``resume=RUN_ID``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kope.agent.proposal import (
    Proposal,
    ProposalRequest,
    Proposer,
    ProposerExhausted,
    UsesTuningRecords,
)
from kope.boundary import (
    CaseSelection,
    Hardware,
    Outcome,
    TaskView,
    eval_options,
    evaluate_code,
    excerpt,
    measure_deployed,
    selected_cases,
    timing_budget,
)
from kope.config import KopeConfig
from kope.context.assemble import AssembledContext
from kope.context.budget import Budget
from kope.context.knowledge import load_knowledge
from kope.context.state import build_context
from kope.errors import KopeError, UsageError
from kope.evaluators import Evaluator, LocalEvaluator, RecordedSpace
from kope.hints import kope_command
from kope.memory import Attempt, DecisionParams, DeployedFigures, Memory, RunSpec, TaskSpec, UsedItem
from kope.memory.records import DecisionRecord
from kope.memory.shapes import case_shape
from kope.memory.state import AttemptState, RunState, StepState
from kope.memory.tuning import TuningData


@dataclass
class LoopOptions:
    target: str = "cpu"
    steps: int = 8  # total steps of the run (a resumed run continues to this count)
    policy: str = "active"
    memory: bool = True  # retrieve experience (attempts are recorded either way)
    patience: int = 3  # non-improving steps before backtracking
    token_budget: int | None = None
    time_budget_s: float | None = None
    target_speedup: float | None = None
    cases: CaseSelection = None  # harness case selection; None = all
    k: int = 8
    out_dir: Path = Path("kope-out")
    # the caller evaluates more after the run (the bench's final evaluation): the last step still has a warm
    # worker booted for what follows; otherwise none is booted for nothing (harness EvalOptions.refill_pool)
    evaluations_after: bool = False
    # the run's best kernel is timed again as deployed (kope.boundary.measure_deployed): best.py imported in plain
    # processes under the user's own settings; RunSummary.best_deployed_speedup. Local evaluators only.
    deployed: bool = True


@dataclass
class StepReport:
    step: int
    decision_id: str
    parent_id: str | None
    title: str
    layer: str
    status: str
    error_kind: str | None
    speedup: float | None
    label: str | None  # None: the attempt is only in the journal so far (in_graph false)
    r: float | None
    incumbent_id: str | None
    improved: bool
    backtracked: bool
    prompt_tokens: int
    completion_tokens: int
    context_tokens: int
    used: int
    seconds: float
    in_graph: bool
    cited: list[str] = field(default_factory=list)  # evidence ids the proposer said it used
    model: dict[str, Any] | None = None  # a learning proposer's prediction for this step (params["tuner"])


@dataclass
class RunSummary:
    run_id: str
    operator: str
    family: str
    target: str
    proposer: str
    policy: str
    memory: bool
    status: str  # finished | target_reached | token_budget | time_budget | exhausted
    stop_reason: str
    steps: list[StepReport] = field(default_factory=list)
    best_id: str | None = None
    best_speedup: float | None = None
    best_path: str | None = None
    # the best kernel as deployed (best.py in a plain PyTorch process, the user's settings), and why it is missing
    best_deployed_speedup: float | None = None
    deployed_error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_tokens: int = 0
    memory_before: dict[str, int] = field(default_factory=dict)
    memory_after: dict[str, int] = field(default_factory=dict)
    resumed_at: int | None = None
    namespace: str = ""  # the memory's namespace (through a server: the one the server resolved)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[str, Any], None]


def _quiet(_event: str, _data: Any) -> None:
    pass


class Optimizer:
    """Runs one task with one proposer against one Experience Graph."""

    def __init__(
        self,
        config: KopeConfig,
        memory: Memory,
        proposer: Proposer,
        options: LoopOptions,
        progress: Progress = _quiet,
        evaluator: Evaluator | None = None,
    ) -> None:
        self.config = config
        self.evaluator: Evaluator = evaluator or LocalEvaluator()  # where candidates are evaluated (kope.evaluators)
        self.memory = memory
        self.proposer = proposer
        self.options = options
        self.progress = progress
        self.budget = Budget.from_settings(config.context)
        ev = config.evaluator  # each step's timing budget (the evaluator settings; harness defaults otherwise)
        self.timing = timing_budget(warmup_ms=ev.warmup_ms, rep_ms=ev.rep_ms, min_reps=ev.min_reps)
        self.allowed: Mapping[str, frozenset[str]] | None = None  # a replay's recorded settings (run sets it)
        self._outcomes: dict[str, Outcome] = {}  # this process's evaluated outcomes by decision id (as deployed)

    # -- run setup -----------------------------------------------------------------------------
    def _start(self, task: TaskView, hardware: Hardware, resume: str | None) -> tuple[str, int | None]:
        if resume:
            run = self.memory.run(resume)  # raises a clear error for an unknown run
            if run.operator != task.operator or run.target != self.options.target:
                raise UsageError(
                    f"run {resume} is for {run.operator} on {run.target}, not {task.operator} on {self.options.target}"
                )
            return resume, self.memory.run_state(resume).next_step
        spec = RunSpec(
            task=TaskSpec(
                operator=task.operator,
                target=self.options.target,
                family=task.family,
                level=task.level,
                cases=tuple(str(c.get("name")) for c in task.cases),
                shapes={str(c.get("name")): case_shape(c).key for c in task.cases},
            ),
            hardware=hardware,
            proposer=self.proposer.name,
            model=self.proposer.model,
            context_policy=self.options.policy,
            memory_enabled=self.options.memory,
            budgets={
                "steps": self.options.steps,
                "tokens": self.options.token_budget,
                "seconds": self.options.time_budget_s,
                "window": self.budget.window,
                "B_k": self.budget.total,
            },
        )
        result = self.memory.start_run(spec)
        if not result.in_graph:
            raise KopeError(
                f"could not start the run in the Experience Graph: {result.pending_reason}",
                hint=(
                    f"start Neo4j (`{kope_command(self.config, 'db', 'start', scoped=False)}`); the run was "
                    f"journaled and `{kope_command(self.config, 'memory', 'sync', namespace=self.memory.namespace)}` "
                    "replays it"
                ),
            )
        return result.run_id, None

    def _parent(self, state: RunState, stale: int) -> tuple[DecisionRecord | None, bool]:
        """The state this step starts from, and whether it is a backtrack."""
        incumbent = state.incumbent
        if incumbent is not None and stale >= self.options.patience:
            candidate = state.best_by_downstream(exclude=[incumbent.id])
            if candidate is not None:
                return candidate, True
        if incumbent is not None:
            return incumbent, False
        return state.last, False

    @staticmethod
    def _stale_steps(state: RunState) -> int:
        """Steps since the incumbent last changed (or since the last backtrack)."""
        count = 0
        for d in reversed(state.decisions):
            if (state.incumbent is not None and d.id == state.incumbent.id) or d.params.backtracked:
                break
            count += 1
        return count

    # -- the loop --------------------------------------------------------------------------------
    def run(self, task: TaskView, task_path: Path, *, resume: str | None = None) -> RunSummary:
        opts = self.options
        hardware = self.evaluator.hardware(opts.target)  # the run is filed under the hardware that evaluates it
        # a replay answers only recorded settings: the proposer is told which exist (refused here when none do)
        self.allowed = (
            self.evaluator.space(task_path, opts.target, opts.cases)
            if isinstance(self.evaluator, RecordedSpace)
            else None
        )
        memory_before = self._memory_counts()
        run_id, resumed_at = self._start(task, hardware, resume)
        self.memory.upsert_knowledge(load_knowledge())
        summary = RunSummary(
            run_id,
            task.operator,
            task.family,
            opts.target,
            self.proposer.name,
            opts.policy,
            opts.memory,
            "finished",
            "step budget reached",
            memory_before=memory_before,
            resumed_at=resumed_at,
            namespace=self.memory.namespace,
        )
        run_dir = opts.out_dir / task.operator / run_id
        began = time.monotonic()
        self.progress("run", {"run_id": run_id, "operator": task.operator, "resumed_at": resumed_at})
        try:
            self._steps(task, task_path, run_id, hardware, summary, run_dir, began)
        except (KopeError, KeyboardInterrupt) as exc:
            # an outage or Ctrl-C is not an attempt: end the run as interrupted (resumable) and re-raise
            try:
                self.memory.finish_run(run_id, "interrupted", distill=False)
            except KopeError:
                pass
            self.progress("interrupted", {"run_id": run_id, "error": str(exc)})
            if isinstance(exc, KopeError):
                resume = kope_command(self.config, "optimize", "--resume", run_id, namespace=self.memory.namespace)
                resume_hint = f"the run is kept: continue it with `{resume}`"
                exc.hint = f"{exc.hint}; {resume_hint}" if exc.hint else resume_hint
            raise
        return self._finish(run_id, summary, run_dir, task_path)

    def _steps(
        self,
        task: TaskView,
        task_path: Path,
        run_id: str,
        hardware: Hardware,
        summary: RunSummary,
        run_dir: Path,
        began: float,
    ) -> None:
        opts = self.options
        cases = selected_cases(task, opts.cases)
        while True:
            state = self.memory.step_state(run_id, history_code=opts.policy == "passive")
            step = state.next_step
            summary.prompt_tokens = state.run.prompt_tokens
            summary.completion_tokens = state.run.completion_tokens
            stop = self._should_stop(step, summary, state, began)
            if stop:
                summary.status, summary.stop_reason = stop
                break
            stale = self._stale_steps(state)
            parent_record, backtracked = self._parent(state, stale)
            parent = state.attempt(parent_record.id) if parent_record is not None else None
            start: AttemptState | None = None  # shown as the incumbent when the step does not start from it
            if parent_record is not None and (
                backtracked or (state.incumbent is None and parent_record.status == "correct")
            ):
                start = parent
            started = time.monotonic()
            context, retrieval = build_context(
                task,
                target=opts.target,
                hardware=hardware,
                budget=self.budget,
                policy=opts.policy,
                graph=self.memory,
                state=state,
                start=start,
                model=self.config.llm.model,
                encoding_fallback=self.config.context.encoding_fallback,
                k=opts.k,
                step=step,
                use_memory=opts.memory,
                cases=cases,
                text_search=self.proposer.name == "llm",
            )
            request = ProposalRequest(
                task,
                opts.target,
                step,
                hardware,
                context,
                retrieval,
                parent,
                state.history,
                backtracked,
                cases=cases,
                tuning=self._tuning(task, cases, hardware, run_id),
                allowed=self.allowed,
            )
            try:
                proposal = self.proposer.propose(request)
            except ProposerExhausted as exc:
                summary.status, summary.stop_reason = "exhausted", str(exc)
                break
            report = self._evaluate_and_record(
                task, task_path, run_id, step, parent, proposal, context, hardware, run_dir, backtracked, started
            )
            summary.steps.append(report)
            self.progress("step", report)

    def _tuning(
        self, task: TaskView, cases: Sequence[Mapping[str, Any]], hardware: Hardware, run_id: str
    ) -> TuningData | None:
        """The tuning records a learning proposer asks for (memory off: this run's own only)."""
        if not isinstance(self.proposer, UsesTuningRecords):
            return None
        query = self.proposer.tuning_query(task, self.options.target, cases, hardware, run_id, self.options.memory)
        return self.memory.tuning_records(query) if query is not None else None

    def _finish(self, run_id: str, summary: RunSummary, run_dir: Path, task_path: Path) -> RunSummary:
        graph_status = {
            "token_budget": "budget_exhausted",
            "time_budget": "budget_exhausted",
            "exhausted": "finished",
        }.get(summary.status, summary.status)
        end = self.memory.finish_run(run_id, graph_status)
        final = self.memory.run_state(run_id)
        summary.prompt_tokens = final.run.prompt_tokens
        summary.completion_tokens = final.run.completion_tokens
        summary.context_tokens = sum(s.context_tokens for s in summary.steps)
        if final.incumbent is not None:
            summary.best_id = final.incumbent.id
            summary.best_speedup = final.incumbent.a
            summary.best_path = str(self._write_best(run_dir, final.incumbent.id))
            deployed = self._as_deployed(task_path, Path(summary.best_path), final.incumbent.id)
            if deployed is not None:
                summary.best_deployed_speedup, summary.deployed_error = (
                    deployed.deployed_speedup,
                    deployed.deployed_error,
                )
                stored = self._record_deployed(run_id, final.incumbent.id, deployed)
                if stored is not None:
                    summary.stop_reason += f" (as-deployed figure not in the memory: {stored})"
            else:
                summary.deployed_error = self._not_deployed_reason()
            self._write_best_outcome(run_dir, final.incumbent.id, deployed)
        summary.memory_after = self._memory_counts()
        if end is None:
            summary.stop_reason += " (run end journaled: Neo4j unreachable)"
        (run_dir).mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2, default=str), encoding="utf-8")
        self.progress("done", summary)
        return summary

    def _should_stop(self, step: int, summary: RunSummary, state: StepState, began: float) -> tuple[str, str] | None:
        opts = self.options
        best = state.incumbent.a if state.incumbent is not None else None
        if opts.target_speedup is not None and best is not None and best >= opts.target_speedup:
            return "target_reached", f"speedup {best:.2f}x reached the target {opts.target_speedup:.2f}x"
        if step >= opts.steps:
            return "finished", f"step budget reached ({opts.steps} steps)"
        used = summary.prompt_tokens + summary.completion_tokens
        if opts.token_budget is not None and used >= opts.token_budget:
            return "token_budget", f"token budget used ({used} >= {opts.token_budget})"
        if opts.time_budget_s is not None and time.monotonic() - began >= opts.time_budget_s:
            return "time_budget", f"wall-clock budget used ({opts.time_budget_s:.0f} s)"
        return None

    def _evaluate_and_record(
        self,
        task: TaskView,
        task_path: Path,
        run_id: str,
        step: int,
        parent: AttemptState | None,
        proposal: Proposal,
        context: AssembledContext,
        hardware: Hardware,
        run_dir: Path,
        backtracked: bool,
        started: float,
    ) -> StepReport:
        opts = self.options
        outcome: Outcome
        replayed = False
        if proposal.code is None:
            problem = proposal.format_problem
            assert problem is not None  # a proposal without code says why
            outcome = Outcome.format_error(
                problem.error_kind,
                problem.message,
                task=task.operator,
                family=task.family,
                level=task.level,
                target=opts.target,
                hardware=hardware,
                cases=task.case_params(),
            )
        elif isinstance(self.evaluator, RecordedSpace):
            outcome = self._answer_from_space(
                task_path, proposal, proposal.code, run_dir / "candidates" / f"step-{step:03d}.py"
            )
            replayed = True
        else:
            outcome = evaluate_code(
                task_path,
                proposal.code,
                run_dir / "candidates" / f"step-{step:03d}.py",
                target=opts.target,
                cases=opts.cases,
                evaluator=self.evaluator,
                budget=self.timing,
                last=step + 1 >= opts.steps and not opts.evaluations_after,  # steps count from 0
            )
        used = tuple(
            UsedItem(kind=i.evidence_kind, id=i.id, tier=i.tier, rank=i.rank, tokens=i.tokens)
            for i in context.evidence()
        )
        extension = dict(proposal.params or {})
        if proposal.structure:  # the offline proposer's structure match, kept with its template choice
            extension["structure"] = dict(proposal.structure)
        params = DecisionParams(backtracked=backtracked, cited=tuple(proposal.cited), extension=extension)
        context_tokens = context.tokens["prompt"] + context.tokens["system"]
        attempt = Attempt(
            run_id=run_id,
            step=step,
            title=proposal.title,
            layer=proposal.layer,
            thought=proposal.thought,
            parent_id=parent.id if parent else None,
            code=proposal.code,
            outcome=outcome,
            used=used,
            # the offline proposer sends its context nowhere: record what an LLM would have been sent
            prompt_tokens=proposal.prompt_tokens if self.proposer.name == "llm" else context_tokens,
            completion_tokens=proposal.completion_tokens,
            params=params,
            replayed=replayed,
        )
        result = self.memory.record_attempt(attempt)
        if not replayed:
            self._outcomes[result.decision_id] = outcome
        return StepReport(
            step=step,
            decision_id=result.decision_id,
            parent_id=attempt.parent_id,
            title=proposal.title,
            layer=proposal.layer,
            status=outcome.status.value,
            error_kind=outcome.error_kind,
            speedup=outcome.speedup,
            label=result.label,
            r=result.r,
            incumbent_id=result.incumbent_id,
            improved=bool(result.incumbent_changed),
            backtracked=backtracked,
            prompt_tokens=attempt.prompt_tokens or 0,
            completion_tokens=proposal.completion_tokens,
            context_tokens=context_tokens,
            used=len(used),
            seconds=time.monotonic() - started,
            in_graph=result.in_graph,
            cited=list(proposal.cited),
            model=dict(tuner) if isinstance(tuner := extension.get("tuner"), Mapping) else None,
        )

    def _answer_from_space(self, task_path: Path, proposal: Proposal, code: str, path: Path) -> Outcome:
        """The recorded outcome of the proposal's template setting (``ReplayMiss`` when it is not recorded)."""
        assert isinstance(self.evaluator, RecordedSpace)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
        params = proposal.params or {}
        template, settings = params.get("template"), params.get("settings")
        return self.evaluator.evaluate_setting(
            task_path,
            path,
            target=self.options.target,
            cases=self.options.cases,
            template=template if isinstance(template, str) else None,
            settings=settings if isinstance(settings, Mapping) else None,
        )

    def _write_best(self, run_dir: Path, decision_id: str) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "best.py"
        path.write_text(self.memory.kernel_source(decision_id) or "", encoding="utf-8")
        return path

    def _not_deployed_reason(self) -> str | None:
        if not self.options.deployed:
            return "not measured: switched off"
        if not isinstance(self.evaluator, LocalEvaluator):
            where = getattr(self.evaluator, "spec", "another evaluator")
            return f"not measured: the run's evaluations ran on {where}, not on this machine"
        return "not measured: the best kernel was evaluated by an earlier process (a resumed run)"

    def _as_deployed(self, task_path: Path, best: Path, decision_id: str) -> Outcome | None:
        """The best kernel's outcome with its as-deployed figures (``best.py`` timed in plain processes under the
        user's settings against the reference, on the cases the loop timed); None where it cannot be measured
        here: switched off, a remote or recorded evaluator, or an incumbent from an earlier process."""
        outcome = self._outcomes.get(decision_id)
        if not self.options.deployed or not isinstance(self.evaluator, LocalEvaluator) or outcome is None:
            return None
        self.progress("deployed", {"decision_id": decision_id, "path": str(best)})
        options = eval_options(target=self.options.target, cases=self.options.cases, budget=self.timing, last=True)
        return measure_deployed(task_path, best, outcome, options)

    def _record_deployed(self, run_id: str, decision_id: str, deployed: Outcome) -> str | None:
        """The as-deployed figures onto the best decision's Outcome in the graph (journal first, like every
        write; ``kope.memory.deployed``): what a team reading the lineage sees beside the harness's figure.
        Returns why it is not there (None: written; journaled only while the store is down)."""
        figures = DeployedFigures(
            run_id=run_id,
            decision_id=decision_id,
            speedup=deployed.deployed_speedup,
            error=excerpt(deployed.deployed_error),
            cases={c.name: c.deployed_speedup for c in deployed.cases},
        )
        try:
            if not self.memory.record_deployed(figures):
                return "journaled; `kope memory sync` writes it once the memory answers"
        except KopeError as exc:  # e.g. a memory server older than the measurement: the run's work stands
            return exc.message
        return None

    def _write_best_outcome(self, run_dir: Path, decision_id: str, deployed: Outcome | None) -> None:
        record = self.memory.outcome(decision_id)
        data: dict[str, Any] = {
            "decision_id": decision_id,
            **{k: v for k, v in record.to_dict().items() if k != "cases_json"},
            "cases": [case.to_json() for case in record.cases],
        }
        if deployed is not None:  # the harness's figure (speedup) and the as-deployed one, case by case
            data["deployed_speedup"] = deployed.deployed_speedup
            data["deployed_error"] = deployed.deployed_error
            data["deployed_cases"] = {c.name: c.deployed_speedup for c in deployed.cases}
        (run_dir / "best_outcome.json").write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")

    def _memory_counts(self) -> dict[str, int]:
        stats = self.memory.stats()
        counts = {label: n for label, n in stats.nodes.items() if n}
        counts["relationships"] = sum(stats.relationships.values())
        return counts
