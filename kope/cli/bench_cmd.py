"""``kope bench``: run a suite under the paper's configurations; ``kope bench report|compare|relabel-hardware``."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from kope.agent import PROPOSERS
from kope.bench.plan import CONFIG_ORDER
from kope.boundary import TARGETS
from kope.cli._common import KopeGroup, State, err, evaluator_option, out, pass_state, print_json
from kope.errors import UsageError

if TYPE_CHECKING:
    from kope.bench.options import BenchRequest

DEFAULT_CONFIGS = ",".join(CONFIG_ORDER)


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _fmt(value: Any, spec: str = ".2f", suffix: str = "") -> str:
    return f"{format(value, spec)}{suffix}" if isinstance(value, (int, float)) else "-"


class Printer:
    """Progress lines on stderr: one per pair, one per step."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def __call__(self, kind: str, data: Any) -> None:
        if kind == "info":
            err.print(f"[dim]› {data}[/dim]")
        elif kind == "plan":
            self.total = data["total"]
            self.done = data["total"] - data["pending"]
            err.print(
                f"[dim]› {data['total']} pairs (configuration × operator), {data['pending']} to run, "
                f"{data['workers']} worker(s)[/dim]"
            )
        elif kind == "pair-start":
            pair = data["pair"]
            resume = f", continuing run {data['resume']}" if data.get("resume") else ""
            log = f" (log: {data['log']})" if data.get("log") else ""
            repeat = f" · repeat {pair.repeat}" if pair.repeat > 1 else ""
            err.print(
                f"[bold][{pair.index + 1}/{self.total}] {pair.config} · {pair.operator}{repeat}[/bold]{resume}{log}"
            )
        elif kind == "step":
            err.print(f"    step {data.step}: {data.status} {_fmt(data.speedup, '.2f', 'x')} {data.title}")
        elif kind == "final-start":
            err.print("    [dim]final evaluation of the best kernel (visible + held-out cases, fresh workers)[/dim]")
        elif kind == "pair-done":
            self.done += 1
            attempts = data.get("attempts") or []
            best = max((a["cases_passed"] for a in attempts), default=0)
            err.print(
                f"    [dim]{data['config']} · {data['operator']}: {len(attempts)} attempt(s), best "
                f"{best}/{attempts[0]['cases_total'] if attempts else '-'} cases, {data['status']} "
                f"({self.done}/{self.total} pairs done)[/dim]"
            )
            final = data.get("final")
            if final:
                visible, held = final["visible"], final["heldout"]
                err.print(
                    f"    [dim]final evaluation: visible {visible['passed']}/{visible['cases']}, held-out "
                    f"{held['passed']}/{held['cases']}, speedup {_fmt(visible['geomean_speedup'], '.2f', 'x')}"
                    f"{' (wrong on held-out cases)' if final.get('overfit') else ''}[/dim]"
                )


@click.group("bench", cls=KopeGroup, invoke_without_command=True)
@click.option(
    "--suite", default="builtin", show_default=True, help="`builtin` or a folder of KernelBench-format task files."
)
@click.option("--levels", default=None, help="Levels to run, e.g. 1,2 or 1-3 (default: all).")
@click.option("--family", default=None, help="Only operators of this family (or families: a,b,c).")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many operators (in suite order).")
@click.option("--cases", default=None, help="Case selection for every operator (indices, ranges, names), e.g. 0-2.")
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option("--proposer", type=click.Choice(PROPOSERS), default="offline", show_default=True)
@click.option("--steps", type=click.IntRange(1, 10_000), default=8, show_default=True, help="Steps per run.")
@click.option("--configs", default=DEFAULT_CONFIGS, show_default=True, help="Configurations to compare.")
@click.option(
    "--repeats",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Independent repeats of the whole bench (fresh namespaces, proposer seed k-1); metrics get 95% intervals.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Pairs run at once, each in its own process (see docs/bench.md: the trade-off).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("kope-bench"),
    show_default=True,
    help="Output folder: results.json, summary.md, plots/, the runs.",
)
@click.option(
    "--name", default=None, help="Bench name: namespaces are bench-<name>-<config> (default: the --out folder's name)."
)
@click.option(
    "--import-memory",
    "import_memory",
    multiple=True,
    metavar="FILE",
    help="Import this exported memory (`kope memory export`) into every configuration first (repeatable).",
)
@click.option(
    "--baseline",
    default=None,
    help="Configuration the paired speedup is measured against (default: no-memory, else none, else the last).",
)
@click.option(
    "--no-final",
    "no_final",
    is_flag=True,
    help="Report in-loop numbers: skip the final evaluation of each pair's best kernel on visible + held-out cases.",
)
@click.option(
    "--final-seeds",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="Correctness trials per case in the final evaluation.",
)
@click.option(
    "--final-rep-ms",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Measured time per implementation and case in the final evaluation (default: evaluator.final_rep_ms, 300).",
)
@evaluator_option
@click.option("--resume", is_flag=True, help="Continue the bench in --out (finished pairs are skipped).")
@click.option(
    "--fresh", is_flag=True, help="Start over even if --out holds a bench (its files and namespaces are wiped)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON instead of the table.")
@click.pass_context
def command(
    ctx: click.Context,
    suite: str,
    levels: str | None,
    family: str | None,
    limit: int | None,
    cases: str | None,
    target: str,
    proposer: str,
    steps: int,
    configs: str,
    repeats: int,
    workers: int,
    out: Path,
    name: str | None,
    import_memory: tuple[str, ...],
    baseline: str | None,
    no_final: bool,
    final_seeds: int,
    final_rep_ms: float | None,
    evaluator: str | None,
    resume: bool,
    fresh: bool,
    as_json: bool,
) -> None:
    """Run every operator of a suite under each configuration and report the paper's metrics.

    Subcommands: `kope bench report DIR` (regenerate summary.md and plots from results.json),
    `kope bench compare DIR...` (benches side by side, e.g. a memory-transfer comparison),
    `kope bench relabel-hardware` (simulate another machine's memory on one machine)."""
    given = [p.name for p in ctx.command.params if p.name is not None and _given(ctx, p.name)]
    if ctx.invoked_subcommand is not None:
        if given:
            raise UsageError(
                f"`kope bench {ctx.invoked_subcommand}` takes its own options; "
                f"remove {', '.join('--' + g.replace('_', '-') for g in given)}"
            )
        return
    from kope.bench.options import BenchRequest

    state = ctx.ensure_object(State)
    request = BenchRequest(
        suite=suite,
        levels=levels,
        family=family,
        limit=limit,
        cases=cases,
        target=target,
        proposer=proposer,
        steps=steps,
        configs=configs,
        workers=workers,
        out=out,
        name=name,
        import_memory=import_memory,
        baseline=baseline,
        no_final=no_final,
        final_seeds=final_seeds,
        final_rep_ms=state.config.evaluator.final_rep_ms if final_rep_ms is None else final_rep_ms,
        final_min_reps=state.config.evaluator.min_reps,
        repeats=repeats,
        evaluator=evaluator or state.config.evaluator.backend,
    )
    _run(state, request, set(given), resume=resume, fresh=fresh, as_json=as_json)


def _run(state: State, request: BenchRequest, given: set[str], *, resume: bool, fresh: bool, as_json: bool) -> None:
    from kope.agent.runner import make_proposer
    from kope.bench.options import fresh_options, resume_options
    from kope.bench.plan import build_plan, is_replay
    from kope.bench.report import with_metrics, write_report
    from kope.bench.runner import BenchRunner, plan_from_store
    from kope.bench.store import BenchStore

    if resume and fresh:
        raise UsageError("--resume continues a bench and --fresh starts over: choose one")
    store = BenchStore(request.out)
    model = state.config.llm.model
    if resume:
        options = resume_options(request, given, model)
        plan = plan_from_store(store, options)
    else:
        options = fresh_options(request, model)
        if store.exists() and not fresh:
            raise UsageError(
                f"{request.out} already holds a bench",
                hint="continue it with --resume, start over with --fresh, or choose another --out",
            )
        plan = build_plan(options, note=lambda line: err.print(line, style="dim", markup=False))
        if is_replay(options.evaluator) and not request.no_final:
            err.print("[dim]› replay: no final evaluation (held-out cases are not recorded)[/dim]")
    make_proposer(state.config, options.proposer)  # fails now, not mid-bench, when an LLM is not configured
    if options.proposer == "offline":
        err.print("[dim]proposer: offline (expert kernel templates explored step by step; no LLM)[/dim]")
    command_line = "kope " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "kope bench"
    runner = BenchRunner(plan, state.config, command_line, Printer())
    try:
        if resume:
            runner.note_resume()
        else:
            runner.start_fresh()
        data = runner.run()
    finally:
        runner.close()
    paths = write_report(options.out, data)
    data = with_metrics(data)
    if as_json:
        print_json({"results": str(store.results_file), "baseline": data["baseline"], "metrics": data["metrics"]})
    else:
        _print_tables(data)
        out.print(f"results: {store.results_file}", markup=False)
        for path in paths:
            out.print(f"report: {path}", markup=False)
    _fail_if_nothing_attempted(data)


def _fail_if_nothing_attempted(data: dict[str, Any]) -> None:
    """Exit 12 when no pair of the bench made a single attempt (the results are written all the same)."""
    from kope.errors import NothingAttemptedError

    pairs = data.get("pairs") or []
    if pairs and not any(p.get("attempts") for p in pairs):
        errors = sorted({p.get("stop_reason") or p.get("error") or p.get("status") or "?" for p in pairs})
        raise NothingAttemptedError(
            f"no attempt was made for any of the {len({p['operator'] for p in pairs})} operators "
            f"({'; '.join(errors[:3])}{'; ...' if len(errors) > 3 else ''})",
            hint="see the stop reasons in results.json",
        )


def _print_tables(data: dict[str, Any]) -> None:
    """The summary table; with repeats, first the means with their intervals, overall and per family."""
    from kope.bench.report import family_table, repeats_table, summary_table

    if data.get("repeat_summary"):
        out.print(repeats_table(data), markup=False)
        out.print("", markup=False)
        out.print(family_table(data), markup=False)
        out.print("\nrepeat 1:", markup=False)
    out.print(summary_table(data), markup=False)


@command.command("report")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--baseline", default=None, help="Pair against this configuration instead of the bench's baseline.")
def report(folder: Path, baseline: str | None) -> None:
    """Regenerate summary.md and plots/ of a bench FOLDER from its results.json alone."""
    from kope.bench.report import with_metrics, write_report
    from kope.bench.store import load_results

    data = load_results(folder)
    paths = write_report(folder, data, baseline)
    _print_tables(with_metrics(data, baseline))
    for path in paths:
        out.print(f"report: {path}", markup=False)


@command.command("compare")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--label", "labels", multiple=True, help="A name per folder (default: the bench names), in order.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the table (Markdown) to this file.",
)
def compare(folders: tuple[Path, ...], labels: tuple[str, ...], output: Path | None) -> None:
    """Put benches side by side; paired speedups against the first FOLDER (e.g. the cold start)."""
    from kope.bench.store import load_results
    from kope.bench.transfer import compare_table

    if labels and len(labels) != len(folders):
        raise UsageError(f"give one --label per folder ({len(folders)}), or none")
    benches = [load_results(f) for f in folders]
    table = compare_table(benches, list(labels) or None)
    out.print(table, markup=False)
    if output is not None:
        output.write_text(table + "\n", encoding="utf-8")


@command.command("relabel-hardware")
@click.argument("source", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--hw-class",
    "hw_class",
    default="simulated-other",
    show_default=True,
    help="Hardware class the experience will claim (e.g. aarch64-neon).",
)
@click.option("--vendor", default="unknown", show_default=True)
@pass_state
def relabel_hardware(state: State, source: Path, target: Path, hw_class: str, vendor: str) -> None:
    """Rewrite an exported memory SOURCE as if it came from other hardware (simulating transfer on one machine)."""
    from kope.bench.transfer import relabel_export

    report = relabel_export(source, target, hw_class=hw_class, vendor=vendor)
    out.print(
        f"{target}: {report['hardware']} hardware node(s) relabelled to class {hw_class!r}, vendor {vendor!r}; "
        f"{report['nodes']} node(s) rewritten",
        markup=False,
    )


@command.command("record-space")
@click.option("--suite", default="builtin", show_default=True, help="The suite to record (only `builtin` for now).")
@click.option("--family", default=None, help="Record the operators of this family.")
@click.option("--operators", default=None, help="Only these operators (comma-separated), e.g. relu,elu.")
@click.option("--cases", default=None, help="Case selection every setting is evaluated on, e.g. 0 (default: all).")
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder of the space files (one <operator>.<template>.space.json per operator).",
)
@click.option(
    "--max-settings",
    type=click.IntRange(1, 100_000),
    default=24,
    show_default=True,
    help="The full grid when it is this small; else the defaults, every single-knob change and a seeded sample up "
    "to this many.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random sample.")
@click.option(
    "--budget-ms",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Measured time per implementation and case (default: evaluator.rep_ms).",
)
@click.option("--resume", is_flag=True, help="Continue a recording in --out (recorded settings are skipped).")
@click.option(
    "--transfer-from",
    "transfer_from",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="A folder of recorded spaces: each operator's design also gets the 2 fastest settings of every other "
    "operator of its template recorded there (so a replay can propose what another operator found best).",
)
@click.option(
    "--confirm",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Measure each space's fastest setting this many more times and keep the median; again while another, "
    "unconfirmed setting is then the fastest (0: the optimum may be one lucky measurement).",
)
@pass_state
def record_space(
    state: State,
    suite: str,
    family: str | None,
    operators: str | None,
    cases: str | None,
    target: str,
    out_dir: Path,
    max_settings: int,
    seed: int,
    budget_ms: float | None,
    resume: bool,
    transfer_from: Path | None,
    confirm: int,
) -> None:
    """Measure a bounded set of kernel-template settings per operator once, for `--evaluator replay:DIR`.

    Each setting is compiled, checked and timed by the real harness on this machine; every space file
    is rewritten after each setting, so an interrupted recording continues with --resume."""
    from kope.bench.record_space import RecordRequest, record_spaces, summarize

    if suite != "builtin":
        raise UsageError(f"--suite {suite!r}: record-space records the built-in suite only (--suite builtin)")
    names = tuple(o.strip() for o in (operators or "").split(",") if o.strip())
    if not family and not names:
        raise UsageError("say what to record: --family F and/or --operators a,b")
    ev = state.config.evaluator
    request = RecordRequest(
        out=out_dir,
        family=family,
        operators=names,
        cases=cases,
        target=target,
        max_settings=max_settings,
        seed=seed,
        warmup_ms=ev.warmup_ms,
        rep_ms=ev.rep_ms if budget_ms is None else budget_ms,
        min_reps=ev.min_reps,
        resume=resume,
        transfer_from=transfer_from,
        confirm=confirm,
    )
    began = time.monotonic()
    paths = record_spaces(
        request,
        note=lambda line: err.print(f"› {line}", style="dim", markup=False),
        progress=lambda line: err.print(line, markup=False),
    )
    for line in summarize(paths):
        out.print(line, markup=False)
    out.print(f"recorded in {time.monotonic() - began:.0f} s", markup=False)
