"""``kope context``: print the prompt that would be sent, with its token breakdown per tier."""

from __future__ import annotations

import click
from rich.table import Table

from kope.boundary import TARGETS, hardware_for, load_task_view
from kope.cli._common import State, out, pass_state, print_json
from kope.context import POLICIES


@click.command("context")
@click.argument("task")
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default="active",
    show_default=True,
    help="active: hot+warm+cold from the graph; passive: the full history; none: hot only.",
)
@click.option(
    "--budget",
    type=click.IntRange(0),
    default=None,
    help="Token budget B_k for the prompt (default: W - S - G - R from the configuration).",
)
@click.option(
    "--run", "run_id", default=None, help="Build the prompt for the next step of this run (incumbent, feedback)."
)
@click.option("--no-memory", is_flag=True, help="Do not read the Experience Graph (hot and knowledge only).")
@click.option("-k", "k", type=click.IntRange(1, 50), default=8, show_default=True, help="Lineages to retrieve.")
@click.option("--json", "as_json", is_flag=True, help="Print the assembled context as JSON.")
@click.option("--quiet", is_flag=True, help="Only the token table, not the prompt.")
@pass_state
def command(
    state: State,
    task: str,
    target: str,
    policy: str,
    budget: int | None,
    run_id: str | None,
    no_memory: bool,
    k: int,
    as_json: bool,
    quiet: bool,
) -> None:
    """Show the prompt KOPE would send for TASK (a built-in operator or a task file)."""
    from kope.context.budget import Budget
    from kope.context.state import build_context
    from kope.errors import UsageError
    from kope.memory import Memory, open_memory

    config = state.config
    view, _ = load_task_view(task)  # a file without FAMILY gets its traced structure's family
    plan = Budget.from_settings(config.context)
    if budget is not None:
        plan = plan.with_total(budget)
    if run_id and no_memory:
        raise UsageError("--run reads the run from the Experience Graph; it cannot be combined with --no-memory")
    graph: Memory | None = None if no_memory else open_memory(config, journal=False)
    try:
        context, retrieval = build_context(
            view,
            target=target,
            hardware=hardware_for(target),
            budget=plan,
            policy=policy,
            graph=graph,
            run_id=run_id,
            model=config.llm.model,
            encoding_fallback=config.context.encoding_fallback,
            k=k,
        )
    finally:
        if graph is not None:
            graph.close()
    if as_json:
        print_json(context.to_dict())
        return
    if not quiet:
        out.print("[bold]── system ──[/bold]")
        out.print(context.system_text, markup=False, highlight=False)
        out.print("[bold]── human ──[/bold]")
        out.print(context.human_text, markup=False, highlight=False)
    b = context.budget
    table = Table(
        title=f"context for {view.operator} ({policy}); B_k = {b.total} = W {b.window} - S {b.system} - "
        f"G {b.generation} - R {b.recency}",
        title_justify="left",
    )
    for name in ("tier", "tokens", "cap", "items"):
        table.add_column(name)
    caps = {
        "hot": "required",
        "warm": str(b.warm_cap) if policy == "active" else "-",
        "cold": str(b.cold_cap) if policy == "active" else "-",
    }
    for tier in ("hot", "warm", "cold"):
        ids = [i.id + (" (compact)" if i.compact else "") for i in context.items if i.tier == tier]
        table.add_row(tier, str(context.tokens.get(tier, 0)), caps[tier], ", ".join(ids) or "-")
    table.add_row("prompt", str(context.tokens["prompt"]), str(b.total), f"+ system {context.tokens['system']}")
    out.print(table)
    out.print(f"tokens counted with {context.encoding}")
    for note in context.notes:
        out.print(f"note: {note}")
    if context.dropped:
        out.print(
            f"left out: {len(context.dropped)} items ("
            + "; ".join(f"{i}: {why}" for i, why in context.dropped[:5])
            + (" ..." if len(context.dropped) > 5 else "")
            + ")"
        )
    if retrieval is not None:
        out.print(
            f"retrieval: {len(retrieval.lineages)} lineages, {len(retrieval.rules)} rules in {retrieval.elapsed_ms:.1f} ms"
        )
