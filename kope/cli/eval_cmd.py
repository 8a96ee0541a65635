"""``kope eval``: compile, check and time one candidate against one task (a thin layer over ``harness``)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from kope.boundary import TARGETS, Outcome, TimingStats, evaluate_candidate, prestart_workers
from kope.cli._common import out, print_json

STATUS_STYLE = {
    "correct": "green",
    "incorrect": "red",
    "cheat_detected": "bold red",
    "compile_error": "yellow",
    "runtime_error": "red",
    "timeout": "yellow",
    "format_error": "yellow",
}


@click.command("eval")
@click.argument("task")
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default="cpu",
    show_default=True,
    help="Where the kernel runs.",
)
@click.option(
    "--cases",
    default=None,
    help="Case indices, ranges or names, comma-separated (e.g. 0,2-4,odd-7x1023). Default: all.",
)
@click.option(
    "--held-out",
    "held_out",
    is_flag=True,
    help="Also run the task's held-out cases (a final evaluation: never show its result to a proposer).",
)
@click.option(
    "--seeds",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="Correctness trials per case, each on fresh inputs.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 4096),
    default=None,
    help="Fixed thread count (default and cap: the CPUs this process may use but one).",
)
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option(
    "--rep-ms",
    type=click.FloatRange(min=0.1),
    default=100.0,
    show_default=True,
    help="Measured time per implementation and case.",
)
@click.option(
    "--warmup-ms",
    type=click.FloatRange(min=0.0),
    default=25.0,
    show_default=True,
    help="Warm-up time per implementation and case.",
)
@click.option("--seed", type=int, default=None, help="Fix every seed (reproducible inputs and parameters).")
@click.option("--json", "as_json", is_flag=True, help="Print the kope.outcome/1 JSON record.")
def command(
    task: str,
    candidate: str,
    target: str,
    cases: str | None,
    held_out: bool,
    seeds: int,
    threads: int | None,
    no_timing: bool,
    rep_ms: float,
    warmup_ms: float,
    seed: int | None,
    as_json: bool,
) -> None:
    """Evaluate CANDIDATE (a file defining ModelNew) against TASK (a built-in operator name or a task file).

    Exit status: 0 when the candidate is correct on every case, 1 when the outcome is anything else
    (incorrect, compile_error, runtime_error, timeout, cheat_detected, format_error), 2 or 3 when the
    task, candidate, options or target are unusable.
    """
    if Path(candidate).is_file():  # the reference and candidate workers boot while the task loads
        prestart_workers(target, threads)
    outcome = evaluate_candidate(
        task,
        candidate,
        target=target,
        cases=cases,
        case_set="all" if held_out else "visible",
        seeds=seeds,
        threads=threads,
        timing=not no_timing,
        warmup_ms=warmup_ms,
        rep_ms=rep_ms,
        seed=seed,
        one_shot=True,  # one evaluation, then the process exits: no warm worker booted for a next one
    )
    if as_json:
        print_json(outcome.to_dict())
    else:
        render(outcome)
    if not outcome.ok:
        raise SystemExit(1)


def _ms(stats: TimingStats | None) -> str:
    return "-" if stats is None else f"{stats.median:.3f} ± {stats.iqr:.3f}"


def render(outcome: Outcome) -> None:
    o, hw = outcome, outcome.hardware
    device = hw.gpu.name if hw.gpu else hw.cpu_model
    out.print(
        f"[bold]{o.task}[/bold] ({o.family}, level {o.level}) · target [bold]{o.target}[/bold] · {hw.class_} {device} "
        f"[dim]({hw.id})[/dim] · {o.threads} threads"
    )
    table = Table(title_justify="left", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("case")
    table.add_column("result")
    table.add_column("ref ms (median ± IQR)", justify="right")
    table.add_column("cand ms (median ± IQR)", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("roofline", justify="right")  # bound / measured: 1.0 = at the machine's measured peak
    table.add_column("error", overflow="fold", max_width=70)
    for c in o.cases:
        result = "[green]pass[/green]" if c.passed else "[red]FAIL[/red]"
        if c.heldout:
            result += " [dim](held-out)[/dim]"
        speed = "-" if c.speedup is None else f"{c.speedup:.2f}x"
        roof = "-" if c.roofline_fraction is None else f"{c.roofline_fraction:.2f}"
        table.add_row(str(c.index), c.name, result, _ms(c.ref_ms), _ms(c.cand_ms), speed, roof, (c.error or "")[:300])
    out.print(table)
    style = STATUS_STYLE.get(o.status.value, "")
    kind = f" ({o.error_kind})" if o.error_kind and o.error_kind != o.status.value else ""
    speed = "n/a" if o.speedup is None else f"{o.speedup:.3f}x"
    compile_s = "-" if o.compile_time_s is None else f"{o.compile_time_s:.2f} s"
    out.print(
        f"[{style}]{o.status.value}[/{style}]{kind} · {o.cases_passed}/{o.cases_total} cases · speedup (geomean) {speed} · "
        f"compile {compile_s} · {o.duration_s:.1f} s"
    )
    if not o.timings_valid:
        out.print(
            "[yellow]timings are not valid on this machine for this target (Triton interpreter): correctness only[/yellow]"
        )
    if o.error_excerpt and not o.ok:
        out.print(o.error_excerpt, markup=False, highlight=False)
