"""``kope memory``: the Experience Graph (schema, journal sync, sharing, inspection, upkeep)."""

from __future__ import annotations

import functools
import io
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.tree import Tree

from kope.cli._common import KopeGroup, State, err, out, pass_state, print_json, progress
from kope.errors import KopeError, UsageError

if TYPE_CHECKING:
    from kope.memory import Memory
    from kope.memory.graph import ExperienceGraph
    from kope.memory.inspect import TreeNode


def namespace_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--namespace``: which memory to work on (KOPE_NAMESPACE, config memory.namespace)."""

    @click.option("--namespace", "-n", "namespace", help="Memory namespace (KOPE_NAMESPACE; default: default).")
    @functools.wraps(func)
    def wrapper(*args: Any, namespace: str | None, **kwargs: Any) -> Any:
        click.get_current_context().ensure_object(State).override(**{"memory.namespace": namespace})
        return func(*args, **kwargs)

    return wrapper


def _graph(state: State) -> Memory:
    from kope.memory import open_memory

    return open_memory(state.config)


def _direct_graph(state: State, what: str) -> ExperienceGraph:
    """The memory as Neo4j itself, for what reads the graph's presentation (not served by ``kope serve``)."""
    from kope.memory.graph import ExperienceGraph

    graph = _graph(state)
    if not isinstance(graph, ExperienceGraph):
        graph.close()
        raise UsageError(f"{what} reads Neo4j directly, not the memory server: unset KOPE_MEMORY_URL")
    return graph


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@click.group("memory", cls=KopeGroup)
def command() -> None:
    """The Experience Graph: init, sync the journal, export/import, stats, show runs and lineages, prune, distill."""


@command.command("init")
@namespace_option
@pass_state
def init(state: State) -> None:
    """Create the graph's constraints and indexes, and label and caption every attempt for people (idempotent)."""
    from kope.memory.graph import ExperienceGraph

    with _graph(state) as graph:
        report = graph.init_schema()
        migrated = graph.migrate() if isinstance(graph, ExperienceGraph) else None
        shown = graph.refresh_presentation() if isinstance(graph, ExperienceGraph) else None
    what = "created" if report.created else "already present"
    out.print(f"schema {what}: {len(report.constraints)} uniqueness constraints, {len(report.indexes)} indexes")
    if migrated is not None:
        _print_migrated(graph.namespace, migrated)
    if shown is not None:  # through the memory server, the server keeps its graph's presentation
        out.print(
            f"namespace {graph.namespace}: outcome classes, captions and datetimes of {shown['Decision']} decisions, "
            f"{shown['Run']} runs and {shown['Kernel']} kernels derived from their facts"
        )


def _print_migrated(namespace: str, migrated: dict[str, int]) -> None:
    for name, changed in migrated.items():
        done = f"{changed} nodes rewritten" if changed else "already current"
        out.print(f"namespace {namespace}: migration {name}: {done}")


@command.command("migrate")
@namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print how many nodes each migration changed as JSON.")
@pass_state
def migrate(state: State, as_json: bool) -> None:
    """Rewrite a graph written by an older KOPE to the current property names (idempotent; init runs it too)."""
    with _direct_graph(state, "kope memory migrate") as graph:
        migrated = graph.migrate()
    if as_json:
        print_json({"namespace": graph.namespace, "changed": migrated})
    else:
        _print_migrated(graph.namespace, migrated)


@command.command("sync")
@namespace_option
@click.option("--operator", help="Only this operator's journal.")
@click.option("--dry-run", is_flag=True, help="Only count what the graph lacks.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def sync(state: State, operator: str | None, dry_run: bool, as_json: bool) -> None:
    """Replay journaled attempts the graph lacks (after Neo4j was unreachable or a process died)."""
    with _graph(state) as graph:
        report = graph.sync(operator=operator, dry_run=dry_run)
        where = graph.journal_dir()
    if as_json:
        print_json(report.to_dict())
    else:
        verb = "would replay" if dry_run else "replayed"
        done = report.replayed
        out.print(
            f"journal {where}: {report.scanned} entries, {report.present} already in the graph, "
            f"{report.pending} missing; {verb} "
            + (
                f"{report.pending}"
                if dry_run
                else f"{done['run']} runs, {done['attempt']} attempts, {done['run_end']} run ends"
                + (f", {done['knowledge']} knowledge documents" if done.get("knowledge") else "")
                + (f", {done['distill']} distillations" if done.get("distill") else "")
            )
        )
        lost = report.relationships
        if lost:
            by_type = ", ".join(f"{kind} {n}" for kind, n in sorted(lost.items()))
            out.print(
                f"{sum(lost.values())} relationships missing ({by_type}) on attempts the graph holds; "
                + ("sync restores them" if dry_run else f"restored the relationships of {report.relinked} attempts")
            )
        for problem in report.problems:
            err.print(f"skipped {problem}")
        for failure in report.failed:
            err.print(f"[red]failed[/red] {failure}")
        for edge in report.unlinked:
            err.print(f"[yellow]not restored[/yellow] {edge}")
    if report.failed:
        raise KopeError(f"{len(report.failed)} journal entries could not be written to the graph (see above)")
    if report.unlinked:
        raise KopeError(
            f"{len(report.unlinked)} USED edges could not be restored: the evidence they point at is in neither "
            "the graph nor the journal (see above)",
            hint="the attempts themselves are restored; evidence outside this namespace's journal (or a journal "
            "written before KOPE journaled knowledge documents) cannot be linked",
        )


@command.command("export")
@namespace_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="File to write (default: stdout).")
@pass_state
def export(state: State, output: str | None) -> None:
    """Write the namespace as JSON Lines (format kope.memory v1) for another team or machine."""
    with _graph(state) as graph:
        if output is None:
            report = graph.export_to(sys.stdout)
        else:
            target = Path(output)
            fd, tmp = tempfile.mkstemp(prefix=".kope-export-", dir=target.parent if str(target.parent) else ".")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    report = graph.export_to(handle)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    progress(
        f"exported namespace {report.namespace}: {report.node_total} nodes, {report.relationship_total} relationships"
        + (f" to {output}" if output else "")
    )


@command.command("import")
@namespace_option
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--no-distill", is_flag=True, help="Do not recompute the insights from the merged evidence.")
@pass_state
def import_(state: State, file: str, no_distill: bool) -> None:
    """Merge a memory export into the namespace (idempotent; '-' reads stdin)."""
    if file == "-":
        # strict UTF-8 whatever the locale (a C locale's stdin escapes bad bytes): compressed input is one error line
        stream, source = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"), "<stdin>"
    else:
        from kope.memory.transfer import binary_kind

        path = Path(file)
        if not path.is_file():
            raise UsageError(f"no such file: {file}")
        with path.open("rb") as head:
            found = binary_kind(head.read(4096))
        if found is not None:
            what, how = found
            raise UsageError(
                f"{file} is {what}, not a memory export (the JSON Lines file `kope memory export` writes)",
                hint=how.replace("FILE", file),
            )
        stream, source = path.open(encoding="utf-8"), str(path)
    try:
        with _graph(state) as graph:
            report = graph.import_from(stream, source, distill=not no_distill)
    finally:
        if file == "-":
            stream.detach()  # stdin itself stays open
        else:
            stream.close()
    out.print(
        f"imported into namespace {report.namespace}: {report.node_total} nodes, "
        f"{report.relationship_total} relationships (merged; existing ones unchanged)"
    )


@command.command("stats")
@namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_state
def stats(state: State, as_json: bool) -> None:
    """What the namespace holds: nodes, relationships, outcomes, operators, teams, journal."""
    with _graph(state) as graph:
        s = graph.stats()
    if as_json:
        print_json(s.to_dict())
        return
    table = Table(title=f"memory namespace {s.namespace}", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("nodes", ", ".join(f"{k} {v}" for k, v in s.nodes.items()))
    table.add_row("relationships", ", ".join(f"{k} {v}" for k, v in s.relationships.items()) or "-")
    table.add_row("outcomes", ", ".join(f"{r['status']}/{r['label']} {r['n']}" for r in s.decisions) or "-")
    table.add_row("teams", ", ".join(f"{r['team']} ({r['runs']} runs)" for r in s.teams) or "-")
    table.add_row("journal", "no journal" if s.journal_entries is None else f"{s.journal_entries} entries")
    out.print(table)
    if s.operators:
        ops = Table(title="operators", title_justify="left")
        for col in ("operator", "family", "runs", "attempts", "correct", "best speedup"):
            ops.add_column(col)
        for r in s.operators:
            ops.add_row(
                r["operator"],
                r["family"],
                str(r["runs"]),
                str(r["attempts"]),
                str(r["correct"]),
                _fmt(r["best_speedup"]) + ("x" if r["best_speedup"] else ""),
            )
        out.print(ops)


@command.command("show")
@namespace_option
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_state
def show(state: State, run_id: str, as_json: bool) -> None:
    """One run: its attempts in step order, lineage parents, outcomes, scores, incumbent."""
    with _graph(state) as graph:
        run_state = graph.run_state(run_id)
        evidence = graph.run_evidence(run_id)
        best = graph.outcome(run_state.run.incumbent_id) if run_state.run.incumbent_id else None
    run = run_state.run
    # the incumbent's kernel timed as deployed after the run (kope.memory.deployed); None: not measured so
    deployed = (
        {"speedup": best.deployed_speedup, "error": best.deployed_error, "measured_at": best.deployed_at}
        if best is not None and best.deployed_at is not None
        else None
    )
    if as_json:
        print_json(
            {
                "run": run.to_dict(),
                "decisions": [d.to_dict() for d in run_state.decisions],
                "evidence": evidence,
                "deployed": deployed,
            }
        )
        return
    out.print(f"[bold]run {run.id}[/bold]  task {run.task_id}  on {run.hw_id} ({run.hw_class})  team {run.team}")
    out.print(
        f"proposer {run.proposer}{' / ' + run.model if run.model else ''}, context {run.context_policy}, "
        f"memory {'on' if run.memory_enabled else 'off'}, status {run.status}; {run.steps} attempts, "
        f"tokens {run.prompt_tokens} in / {run.completion_tokens} out; best {_fmt(run.best_speedup)}x "
        f"(incumbent {run.incumbent_id or '-'})"
    )
    if deployed is not None:  # what a user of best.py gets, beside the harness's figure
        why = f" ({deployed['error']})" if deployed["error"] else ""
        out.print(
            f"as deployed: {_fmt(deployed['speedup'])}x (best.py in a plain process, your settings){why}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    table = Table()
    for col in ("step", "decision", "from", "layer", "title", "status", "a", "r", "label", "d", "evidence"):
        table.add_column(col)
    for d in run_state.decisions:
        mark = " *" if d.id == run.incumbent_id else ""
        ev = evidence.get(d.id, {"used": 0, "used_tokens": 0})
        table.add_row(
            str(d.step),
            d.id + mark,
            d.parent_id or "-",
            d.layer,
            d.title[:48],
            d.error_kind or d.status,
            _fmt(d.a),
            _fmt(d.r),
            d.label,
            _fmt(d.d),
            f"{ev['used']} ({ev['used_tokens']} tok)",
        )
    out.print(table)
    out.print("* incumbent")


def _tree_label(data: dict[str, Any], focus: str, on_path: bool) -> str:
    speed = f"{data['a']:.2f}x" if data["a"] else "-"
    text = (
        f"{data['id']} · {data['layer']} · {data['title'][:50]} · {data['error_kind'] or data['status']} "
        f"{speed} r={data['r']:.2f} {data['label']} d={data['d']:.2f}"
    )
    if data["id"] == focus:
        return f"[bold reverse]{text}[/bold reverse]"
    return f"[bold]{text}[/bold]" if on_path else text


@command.command("lineage")
@namespace_option
@click.argument("decision_id")
@click.option(
    "--limit", default=200, show_default=True, type=click.IntRange(1, 100_000), help="Most tree members to show."
)
@pass_state
def lineage(state: State, decision_id: str, limit: int) -> None:
    """The lineage tree a decision belongs to, from its root, with every branch (the decision highlighted)."""
    with _graph(state) as graph:
        tree_data = graph.lineage(decision_id, limit)

    def add(branch: Tree, node: TreeNode) -> None:
        for child in node.children:
            add(branch.add(_tree_label(child.data, tree_data.focus, child.on_path)), child)

    root = tree_data.root
    tree = Tree(_tree_label(root.data, tree_data.focus, root.on_path))
    add(tree, root)
    out.print(tree)
    if tree_data.shown < tree_data.total:
        out.print(f"({tree_data.total - tree_data.shown} more members not shown; raise --limit)")


@command.command("report")
@namespace_option
@click.option(
    "-o",
    "--output",
    default="lineage.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="HTML file to write.",
)
@click.option("--operator", help="Only this operator's lineages.")
@pass_state
def report(state: State, output: str, operator: str | None) -> None:
    """Write the lineage page (decision trees, per-run speedups, details on click) as one offline HTML file."""
    import time

    from kope.memory.lineage_page import render_page

    with _direct_graph(state, "kope memory report") as graph:
        groups = graph.lineages(operator)
        namespace = graph.namespace
    if operator and not groups:
        raise UsageError(f"no decisions of operator {operator!r} in namespace {namespace!r}")
    path = Path(output)
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {path.parent} does not exist")
    page = render_page(namespace, groups, generated_at=time.time())
    fd, tmp = tempfile.mkstemp(prefix=".kope-report-", suffix=".html", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(tmp, path)
    decisions = sum(len(g.nodes) for g in groups)
    out.print(f"wrote {path}: {decisions} decisions of {len(groups)} operators (namespace {namespace})")


@command.command("prune")
@namespace_option
@click.option("--run", "run_ids", multiple=True, help="A run to remove (repeatable).")
@click.option("--older-than", type=float, help="Remove runs started more than this many days ago.")
@click.option("--all", "everything", is_flag=True, help="Remove everything in the namespace (needs --yes).")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.option("--yes", is_flag=True, help="Confirm --all.")
@pass_state
def prune(
    state: State, run_ids: tuple[str, ...], older_than: float | None, everything: bool, dry_run: bool, yes: bool
) -> None:
    """Remove runs (by id or age) with their attempts, never leaving dangling edges or cut lineages."""
    if everything and not (yes or dry_run):
        raise UsageError("--all deletes the whole namespace: add --yes to confirm (or --dry-run)")
    with _graph(state) as graph:
        report = graph.prune(list(run_ids), older_than_days=older_than, everything=everything, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    if everything:
        out.print(f"{verb} {report.deleted_nodes} nodes (namespace {state.config.memory.namespace})")
        return
    out.print(
        f"{verb} {len(report.runs)} runs, {report.decisions} attempts"
        + (
            f"; {report.foreign_used_edges} USED edges from other runs went with them"
            if report.foreign_used_edges
            else ""
        )
    )
    if not dry_run and report.orphans:
        out.print("orphans removed: " + ", ".join(f"{k} {v}" for k, v in report.orphans.items()))


@command.command("distill")
@namespace_option
@click.option("--family", help="Only this family (default: the whole namespace).")
@click.option("--json", "as_json", is_flag=True, help="Print the insights as JSON.")
@pass_state
def distill(state: State, family: str | None, as_json: bool) -> None:
    """Recompute validity rules (repeated failures) and patterns (repeated effective decisions)."""
    with _graph(state) as graph:
        report = graph.distill(family)
    if as_json:
        print_json(report.__dict__)
        return
    out.print(
        f"{report.rules} validity rules, {report.patterns} patterns, {report.effects} effect estimates; "
        f"{report.retired} stale insights deleted"
    )
