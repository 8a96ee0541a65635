"""``kope optimize``: run the optimization loop on one task or a suite, with a live view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kope.agent import PROPOSERS
from kope.boundary import TARGETS
from kope.cli._common import State, err, evaluator_option, out, pass_state, print_json
from kope.context import POLICIES
from kope.errors import UsageError


def _fmt(value: Any, spec: str = ".2f", suffix: str = "") -> str:
    return f"{format(value, spec)}{suffix}" if isinstance(value, (int, float)) else "-"


class LiveView:
    """Step, status of the last attempt, best speedup so far and tokens, redrawn after each step."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Live | None = None
        self.rows: list[Any] = []
        self.header = ""

    def __enter__(self) -> LiveView:
        if self.enabled:
            self.live = Live(self._render(), console=err, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def _render(self) -> Group:
        table = Table(box=None, pad_edge=False)
        for name in ("step", "decision", "status", "speedup", "label", "best", "tokens", "s"):
            table.add_column(name, overflow="ellipsis", no_wrap=True, max_width=48 if name == "decision" else None)
        best, tokens = None, 0
        for r in self.rows:
            tokens += r.prompt_tokens + r.completion_tokens
            if r.status == "correct" and r.speedup and (best is None or r.speedup > best):
                best = r.speedup
            style = "green" if r.improved else ("red" if r.status != "correct" else "")
            table.add_row(
                str(r.step) + ("↩" if r.backtracked else ""),
                r.title,
                Text(r.status, style=style),
                _fmt(r.speedup, ".2f", "x"),
                r.label,
                _fmt(best, ".2f", "x"),
                str(tokens),
                f"{r.seconds:.0f}",
            )
        return Group(Text(self.header, style="bold"), table)

    def event(self, kind: str, data: Any) -> None:
        if kind == "run":
            self.rows = []
            resumed = f", resumed at step {data['resumed_at']}" if data.get("resumed_at") is not None else ""
            self.header = f"{data['operator']}: run {data['run_id']}{resumed}"
        elif kind == "step":
            self.rows.append(data)
        elif kind == "deployed" and self.live is None:
            err.print(f"timing the best kernel as deployed: {data['path']}")
        if self.live is not None:
            self.live.update(self._render())
        elif kind == "step":
            err.print(f"step {data.step}: {data.status} {_fmt(data.speedup, '.2f', 'x')} {data.title}")


def _summary_table(summaries: list[Any]) -> Table:
    table = Table(title="kope optimize", title_justify="left")
    # Short columns only, so the table stays readable in an 80-column terminal or a CI log; the run id,
    # stop reason and best kernel's path follow it one line per operator.
    # "best" is the harness's figure (forced settings, warm workers); "as deployed" is the same kernel's best.py
    # timed in plain processes under the user's own settings (what a user gets; kope.agent.loop._as_deployed).
    names = ("operator", "steps", "correct", "as deployed", "best", "best at step", "first correct", "status", "tokens")
    for name in names:
        table.add_column(name, no_wrap=True, overflow="ellipsis", max_width=28 if name == "operator" else None)
    for s in summaries:
        correct = [r for r in s.steps if r.status == "correct"]
        first = next((str(r.step) for r in s.steps if r.status == "correct"), "-")
        best_step = next((str(r.step) for r in s.steps if r.decision_id == s.best_id), "-")
        table.add_row(
            s.operator,
            str(len(s.steps)),
            str(len(correct)),
            _fmt(s.best_deployed_speedup, ".2f", "x"),
            _fmt(s.best_speedup, ".2f", "x"),
            best_step,
            first,
            s.status,
            f"{s.prompt_tokens + s.completion_tokens:,}",
        )
    return table


def memory_contribution(summary: Any) -> str:
    """One line: where the run got its best, and what memory gave its first step (evidence, prediction)."""
    best = next((r for r in summary.steps if r.decision_id == summary.best_id), None)
    where = f"best {_fmt(summary.best_speedup, '.2f', 'x')} at step {best.step}" if best else "no correct kernel"
    first = summary.steps[0] if summary.steps else None
    if first is None:
        return f"{summary.operator}: {where}"
    if not summary.memory:
        return f"{summary.operator}: {where}; memory off"
    model = first.model or {}
    parts = []
    if model.get("basis") == "model":
        parts.append(
            f"step {first.step} predicted {_fmt(model.get('predicted'), '.2f', 'x')} "
            f"(95% {_fmt(model.get('low'), '.2f', 'x')}-{_fmt(model.get('high'), '.2f', 'x')}) from "
            f"{model.get('memory_records', 0)} attempts in memory, measured {_fmt(first.speedup, '.2f', 'x')}"
        )
    elif model:
        parts.append(f"step {first.step}: no usable records in memory yet (initial design)")
    if first.cited:
        parts.append(f"cited {', '.join(first.cited)}")
    if first.used:
        parts.append(f"{first.used} evidence items in its context")
    return f"{summary.operator}: {where}; memory: " + ("; ".join(parts) if parts else "nothing relevant yet")


@click.command("optimize")
@click.argument("task", required=False)
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option(
    "--proposer",
    type=click.Choice(PROPOSERS),
    default=None,
    help="Default: llm when an LLM endpoint is configured, else offline.",
)
@click.option(
    "--steps",
    type=click.IntRange(1, 10_000),
    default=8,
    show_default=True,
    help="Steps per run (total, also when resuming).",
)
@click.option("--policy", type=click.Choice(POLICIES), default="active", show_default=True)
@click.option("--no-memory", is_flag=True, help="Do not retrieve experience (attempts are still recorded).")
@click.option("--team", default=None, help="Team recorded on the run (KOPE_TEAM).")
@click.option("--namespace", default=None, help="Memory namespace (KOPE_NAMESPACE).")
@click.option("--resume", "resume", default=None, metavar="RUN_ID", help="Continue this run from the graph.")
@click.option("--suite", type=click.Choice(["builtin"]), default=None, help="Run several built-in tasks in sequence.")
@click.option("--level", type=click.IntRange(1, 4), multiple=True, help="With --suite: only these levels.")
@click.option("--family", default=None, help="With --suite: only this family.")
@click.option("--limit", type=click.IntRange(1), default=None, help="With --suite: at most this many tasks.")
@click.option("--cases", default=None, help="Harness case selection (indices, ranges, names), e.g. 0,3-5.")
@click.option(
    "--patience", type=click.IntRange(1), default=3, show_default=True, help="Non-improving steps before backtracking."
)
@click.option("--token-budget", type=click.IntRange(1), default=None, help="Stop a run after this many tokens.")
@click.option("--time-budget", type=click.FloatRange(1), default=None, help="Stop a run after this many seconds.")
@click.option(
    "--target-speedup",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Stop once the best speedup reaches this.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("kope-out"),
    show_default=True,
    help="Where candidates, the best kernel and its outcome are written.",
)
@evaluator_option
@click.option("--json", "as_json", is_flag=True, help="Print the run summaries as JSON.")
@pass_state
def command(
    state: State,
    task: str | None,
    target: str,
    proposer: str | None,
    steps: int,
    policy: str,
    no_memory: bool,
    team: str | None,
    namespace: str | None,
    resume: str | None,
    suite: str | None,
    level: tuple[int, ...],
    family: str | None,
    limit: int | None,
    cases: str | None,
    patience: int,
    token_budget: int | None,
    time_budget: float | None,
    target_speedup: float | None,
    out_dir: Path,
    evaluator: str | None,
    as_json: bool,
) -> None:
    """Optimize TASK (a built-in operator or a task file), or a suite with --suite builtin."""
    from kope.agent.loop import LoopOptions
    from kope.agent.runner import make_proposer, optimize_tasks, suite_tasks

    if cases is not None and not cases.strip(" ,"):
        raise UsageError(
            "--cases is empty: it selects harness cases by index, range or name",
            hint="e.g. --cases 0,3-5 (leave it out for every case)",
        )
    state.override(**{"memory.team": team, "memory.namespace": namespace, "evaluator.backend": evaluator})
    config = state.config
    if resume and task is None and suite is None:
        from kope.memory import open_memory

        with open_memory(config, journal=False) as memory:
            task = memory.run(resume).operator
    if (task is None) == (suite is None):
        raise UsageError(
            "give either a TASK or --suite builtin",
            hint="e.g. `kope optimize softmax` or `kope optimize --suite builtin --level 1`",
        )
    if resume and suite:
        raise UsageError("--resume continues one run; it cannot be combined with --suite")
    if (level or family or limit) and not suite:
        raise UsageError("--level, --family and --limit select tasks of --suite")
    from kope.evaluators import make_evaluator

    chosen_evaluator = make_evaluator(config)
    chosen_evaluator.prestart(target)  # the first step's workers boot while the run starts up
    try:
        chosen = make_proposer(config, proposer)
        if chosen.name == "offline":
            err.print("[dim]proposer: offline (expert kernel templates explored step by step; no LLM)[/dim]")
        options = LoopOptions(
            target=target,
            steps=steps,
            policy=policy,
            memory=not no_memory,
            patience=patience,
            token_budget=token_budget,
            time_budget_s=time_budget,
            target_speedup=target_speedup,
            cases=cases,
            out_dir=out_dir,
        )
        if suite:
            tasks = suite_tasks(level, family, limit)
        else:
            assert task is not None  # checked above: exactly one of TASK and --suite
            tasks = [task]
        with LiveView(enabled=not as_json and err.is_terminal) as view:
            summaries = optimize_tasks(
                config, chosen, options, tasks, resume=resume, progress=view.event, evaluator=chosen_evaluator
            )
    finally:
        chosen_evaluator.close()
    if as_json:
        print_json([s.to_dict() for s in summaries])
    else:
        out.print(_summary_table(summaries))
        out.print(
            "as deployed: the best kernel's best.py timed against PyTorch in a plain process with your own thread "
            "and OpenMP settings; best: the harness's figure, under the settings it forces on its workers",
            soft_wrap=True,
            highlight=False,
        )
        for s in summaries:
            out.print(
                f"{s.operator}: {s.stop_reason}; run {s.run_id}; best kernel {s.best_path or '-'}",
                soft_wrap=True,
                highlight=False,
            )
            if s.best_path and s.deployed_error:
                out.print(f"  as deployed: {s.deployed_error}", soft_wrap=True, highlight=False, markup=False)
        out.print("What memory contributed:", highlight=False)
        for s in summaries:
            out.print("  " + memory_contribution(s), soft_wrap=True, highlight=False, markup=False)
        _memory_and_browser(config, summaries)
    _fail_if_nothing_attempted(summaries)


def _fail_if_nothing_attempted(summaries: list[Any]) -> None:
    """Exit 12 when not one attempt was made for any selected operator (a run that did nothing says so)."""
    from kope.errors import NothingAttemptedError

    if summaries and all(not s.steps and not s.resumed_at for s in summaries):  # resumed_at: attempts before
        reasons = "; ".join(f"{s.operator}: {s.stop_reason}" for s in summaries)
        raise NothingAttemptedError(
            f"no attempt was made for {'the operator' if len(summaries) == 1 else 'any of the operators'} ({reasons})"
        )


def _memory_and_browser(config: Any, summaries: list[Any]) -> None:
    from kope.hints import kope_command
    from kope.memory.browser import GUIDE_PATH, LINEAGE_PATH

    before, after = summaries[0].memory_before, summaries[-1].memory_after

    def describe(counts: dict[str, int]) -> str:
        return (
            f"{counts.get('Decision', 0)} decisions, {counts.get('Run', 0)} runs, {counts.get('Insight', 0)} insights, "
            f"{sum(v for k, v in counts.items() if k != 'relationships')} nodes, {counts.get('relationships', 0)} relationships"
        )

    namespace = summaries[0].namespace or config.memory.namespace
    out.print(f"memory (namespace {namespace}): before {describe(before)}")
    out.print(f"                          after  {describe(after)}")
    if config.memory.url:  # a client of a memory server: no Bolt, no Browser; the memory commands work
        import shlex

        out.print(f"The memory is on the server {config.memory.url}; inspect it with", highlight=False)
        scope = f"--namespace {shlex.quote(namespace)}"
        for s in summaries:
            out.print(f"  `kope memory show {shlex.quote(s.run_id)} {scope}`", soft_wrap=True, highlight=False)
            if s.best_id:
                out.print(f"  `kope memory lineage {shlex.quote(s.best_id)} {scope}`", soft_wrap=True, highlight=False)
        out.print(f"  `kope memory stats {scope}`", soft_wrap=True, highlight=False)
        return
    out.print(f"Inspect the lineages in Neo4j Browser: {config.browser_url}")
    if config.uses_local_server:
        out.print(
            f"  (connect to {config.neo4j_uri} as {config.neo4j.user}; the password is in {config.password_file})"
        )
    else:
        out.print(f"  (connect to {config.neo4j_uri} as {config.neo4j.user})")
    out.print(
        f"  run `{kope_command(config, 'browser', '--port', '7476')}`, then in Browser: "
        f":play http://127.0.0.1:7476{GUIDE_PATH}"
    )
    out.print(f"  the lineage page is then at http://127.0.0.1:7476{LINEAGE_PATH}")
    out.print(f"  or write it to a file: `{kope_command(config, 'memory', 'report', '-o', 'lineage.html')}`")
