"""The graph side of recording: runs and attempts, in one transaction per batch.

``write_attempts`` is the only way attempts reach the graph (a single
``record_attempt`` is a batch of one; ``sync`` and the benchmark's ingest use
bigger batches). Inside one write transaction it:

1. skips attempts whose Decision exists already (same content: idempotent; other
   content under the same id: ``RecordConflictError``);
2. locks the runs written to, then every ancestor of the parents the new
   decisions start from (property writes take Neo4j write locks, held to
   commit), so that concurrent writers to one lineage are serialised;
3. computes a, r, label and confidence in Python (``kope.memory.scoring``), the
   diff against the parent's kernel, and writes Decision, Outcome, Kernel with
   PRODUCED, IN_RUN, WROTE, FROM, NEXT and USED edges;
4. recomputes d(v) for the new decisions and all their ancestors from their
   children (after the locks, so every committed sibling is seen);
5. recomputes each run's totals and incumbent;
6. writes what people read (``kope.memory.present``): outcome-class, ``:Root``
   and ``:Backtrack`` labels, captions and datetimes of the new decisions and
   outcomes, and moves ``:Incumbent`` with the run's incumbent.

The driver retries the whole transaction on transient errors (deadlocks
between writers that lock overlapping lineages in different orders included);
every step is idempotent, so a retry is safe.

Concurrency that is safe: any number of processes recording attempts of
different runs, of the same task, into the same lineages (FROM edges across
runs), at the same time. Not supported: two processes writing the same run at
once (each run belongs to one loop), and ``prune`` concurrently with writers of
the same namespace.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.db.client import Tx
from kope.memory import present, scoring
from kope.memory.errors import InvalidRecordError, RecordConflictError, UnknownDecisionError, UnknownRunError
from kope.memory.ids import content_hash, kernel_id, uid
from kope.memory.shapes import CaseShape, ShapeSummary
from kope.memory.specs import Attempt, RunSpec

MAX_DIFF_CHARS = 12_000


@dataclass(frozen=True)
class RecordResult:
    """What happened to one attempt. ``in_graph`` False: it is only in the journal
    (``pending_reason`` says why); ``kope memory sync`` will write it."""

    decision_id: str
    in_graph: bool
    created: bool = False
    a: float | None = None
    r: float | None = None
    label: str | None = None
    d: float | None = None
    incumbent_id: str | None = None
    incumbent_changed: bool = False
    missing_evidence: tuple[str, ...] = ()
    pending_reason: str | None = None


@dataclass(frozen=True)
class RunResult:
    run_id: str
    in_graph: bool
    created: bool = False
    pending_reason: str | None = None


@dataclass
class _Prepared:
    attempt: Attempt
    uid: str
    a: float | None
    r: float
    label: str
    conf: float
    a_parent: float | None = None
    rows: dict[str, Any] = field(default_factory=dict)

    def facts(self) -> present.DecisionFacts:
        at = self.attempt
        return present.DecisionFacts(
            self.uid,
            at.outcome.task,
            at.step,
            at.title,
            at.outcome.status,
            self.a,
            self.r,
            at.parent_id is not None,
            self.a_parent,
            at.params.to_json(),
            tuple(_cases(at)),
        )


# -- runs ------------------------------------------------------------------------------------


def run_rows(ns: str, team: str, spec: RunSpec) -> dict[str, Any]:
    task, hw = spec.task, spec.hardware
    case_names = [c.get("name", str(i)) if isinstance(c, dict) else str(c) for i, c in enumerate(task.cases)]
    return {
        "operator": {
            "uid": uid(ns, task.operator),
            "ns": ns,
            "id": task.operator,
            "name": task.operator,
            "family": task.family,
            "level": task.level,
        },
        "hardware": {
            "uid": uid(ns, hw.id),
            "ns": ns,
            "id": hw.id,
            "hw_class": hw.class_,
            "vendor": hw.vendor,
            "arch": hw.arch,
            "cpu_model": hw.cpu_model,
            "cores": hw.cores,
            "isa": list(hw.isa),
            "caches_json": json.dumps(hw.caches, sort_keys=True),
            "gpu_json": json.dumps(dataclasses.asdict(hw.gpu)) if hw.gpu else None,
        },
        "task": {
            "uid": uid(ns, task.id),
            "ns": ns,
            "id": task.id,
            "operator": task.operator,
            "target": task.target,
            "family": task.family,
            "level": task.level,
            "case_names": case_names,
            "case_count": len(case_names),
            "case_shapes_json": json.dumps(task.shapes, sort_keys=True) if task.shapes else None,
        },
        "run": {
            "uid": uid(ns, spec.run_id),
            "ns": ns,
            "id": spec.run_id,
            "team": team,
            "task_id": task.id,
            "operator": task.operator,
            "family": task.family,
            "level": task.level,
            "target": task.target,
            "case_names": case_names,
            "hw_id": hw.id,
            "hw_class": hw.class_,
            "vendor": hw.vendor,
            "proposer": spec.proposer,
            "model": spec.model,
            "context_policy": spec.context_policy,
            "memory_enabled": spec.memory_enabled,
            "budgets_json": json.dumps(spec.budgets, sort_keys=True),
            "started_at": spec.started_at,
            "status": "running",
            "steps": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "spec_hash": content_hash(spec.content(), 32),
        },
    }


def _present_runs(tx: Tx, ns: str, specs: Sequence[RunSpec]) -> None:
    rows = [{"uid": uid(ns, s.run_id), "caption": present.run_caption(s.task.operator, s.started_at)} for s in specs]
    tx.run("memory/present/runs", rows=rows)


def write_runs(tx: Tx, ns: str, team: str, specs: Sequence[RunSpec]) -> list[RunResult]:
    wanted = {uid(ns, s.run_id): s for s in specs}
    existing = {row["uid"]: row["spec_hash"] for row in tx.run("memory/run/existing", uids=list(wanted))}
    results, rows = [], []
    for u, spec in wanted.items():
        if u in existing:
            if existing[u] != content_hash(spec.content(), 32):
                raise RecordConflictError(
                    f"run {spec.run_id} was started before with a different task, hardware or settings"
                )
            results.append(RunResult(spec.run_id, in_graph=True, created=False))
        else:
            rows.append(run_rows(ns, team, spec))
            results.append(RunResult(spec.run_id, in_graph=True, created=True))
    if rows:
        tx.run("memory/run/create", rows=rows)
        _present_runs(tx, ns, [s for s in specs if uid(ns, s.run_id) not in existing])
    return results


def finish_run_tx(tx: Tx, ns: str, run_id: str, status: str, ended_at: float) -> str | None:
    """End a run (status, end time); returns its family, whose insights the caller may distil."""
    rows = tx.run("memory/run/finish", uid=uid(ns, run_id), status=status, ended_at=ended_at)
    if not rows:
        raise UnknownRunError(f"run {run_id} is not in the graph (namespace {ns})")
    row = rows[0]
    caption = present.run_caption(row["operator"], row["started_at"])
    tx.run("memory/present/runs", rows=[{"uid": uid(ns, run_id), "caption": caption}])
    family: str | None = row["family"]
    return family


# -- attempts --------------------------------------------------------------------------------


def _topological(attempts: list[Attempt]) -> list[Attempt]:
    """Parents before children inside the batch (stable otherwise)."""
    by_id = {a.id: a for a in attempts}
    placed: set[str] = set()
    ordered: list[Attempt] = []
    for start in attempts:
        chain: list[Attempt] = []
        node: Attempt | None = start
        seen: set[str] = set()
        while node is not None and node.id not in placed:
            if node.id in seen:
                raise InvalidRecordError(f"attempts form a cycle through {node.id}")
            seen.add(node.id)
            chain.append(node)
            node = by_id.get(node.parent_id) if node.parent_id else None
        for item in reversed(chain):
            placed.add(item.id)
            ordered.append(item)
    return ordered


def _diff(parent_code: str | None, code: str | None) -> str | None:
    if parent_code is None or code is None:
        return None
    text = "".join(
        difflib.unified_diff(
            parent_code.splitlines(keepends=True),
            code.splitlines(keepends=True),
            "parent",
            "candidate",
            n=2,
        )
    )
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n... (diff truncated)\n"
    return text


def _check_against_run(attempt: Attempt, run: dict[str, Any]) -> None:
    o = attempt.outcome
    if o.task != run["operator"]:
        raise InvalidRecordError(
            f"attempt {attempt.id}: outcome is for task {o.task!r} but run {run['id']} optimises {run['operator']!r}"
        )
    if o.target != run["target"]:
        raise InvalidRecordError(
            f"attempt {attempt.id}: outcome target {o.target!r} differs from the run's target {run['target']!r}"
        )
    if o.hardware.id != run["hw_id"]:
        raise InvalidRecordError(
            f"attempt {attempt.id}: outcome hardware {o.hardware.id!r} differs from the run's hardware {run['hw_id']!r}"
        )
    if attempt.parent_id == attempt.id:
        raise InvalidRecordError(f"attempt {attempt.id} cannot start from itself")


def _compact(values: dict[str, Any]) -> dict[str, Any]:
    """Leave out null values: for a new node an absent key and a null are the same,
    and every value sent costs packing time in the driver."""
    return {k: v for k, v in values.items() if v is not None}


def _cases(at: Attempt) -> list[dict[str, Any]]:
    """Per-case results as stored in the Outcome's ``cases_json``."""
    return [
        {
            "name": c.name,
            "passed": c.passed,
            "speedup": c.speedup,
            "error": c.error,
            "ref_ms": c.ref_ms.median if c.ref_ms else None,
            "cand_ms": c.cand_ms.median if c.cand_ms else None,
            "shape": CaseShape.from_params(c.params).key,
            "tolerance": c.tolerance,
        }
        for c in at.outcome.cases
    ]


def _params_json(at: Attempt) -> str | None:
    params = at.params.to_json()
    return None if params is None else json.dumps(params, sort_keys=True, separators=(",", ":"))


def _rows(p: _Prepared, parent_code: str | None) -> dict[str, Any]:
    """One attempt as statement parameters (attempt/create fills in ns, uids, run facts)."""
    at, o = p.attempt, p.attempt.outcome
    code_hash = kernel_id(at.code) if at.code is not None else None
    shapes = [CaseShape.from_params(c.params) for c in o.cases]
    summary = ShapeSummary.of(shapes)
    template = at.params.extension.get("template")
    decision = _compact(
        {
            "id": at.id,
            "step": at.step,
            "title": at.title,
            "thought": at.thought,
            "layer": at.layer,
            "parent_id": at.parent_id,
            "code_hash": code_hash,
            "diff": _diff(parent_code, at.code),
            "attempt_hash": at.content_hash(),
            "status": o.status.value,
            "label": p.label,
            "a": p.a,
            "r": p.r,
            "d": scoring.downstream(p.r, []),
            "conf": p.conf,
            "error_kind": o.error_kind,
            "created_at": at.created_at,
            "prompt_tokens": at.prompt_tokens,
            "completion_tokens": at.completion_tokens,
            "params_json": _params_json(at),
            # derived, for retrieval: the kernel template the settings belong to, and the cases' shapes
            "template": template if isinstance(template, str) else None,
            "shape_sig": summary.signature if summary else None,
            "shape_class": summary.shape_class if summary else None,
        }
    )
    cases = _cases(at)
    outcome = _compact(
        {
            "cases_total": o.cases_total,
            "cases_passed": o.cases_passed,
            "speedup": o.speedup,  # measured (the usable one, a, is copied from the decision)
            "error_excerpt": o.error_excerpt,  # at most EXCERPT_LIMIT characters (validated)
            "compile_time_s": o.compile_time_s,
            "timings_valid": o.timings_valid,
            "threads": o.threads,
            "duration_s": o.duration_s,
            "cases_json": json.dumps(cases, separators=(",", ":")),
            "replayed": True if at.replayed else None,  # answered from a recorded space (absent: measured)
        }
    )
    kernel = None
    if at.code is not None and code_hash is not None:
        template = (at.params.to_json() or {}).get("template")
        kernel = _compact(
            {
                "source": at.code,
                "bytes": len(at.code.encode("utf-8")),
                "lines": at.code.count("\n") + 1,
                "template": template if isinstance(template, str) else None,
                "caption": present.kernel_caption(code_hash, template if isinstance(template, str) else None),
            }
        )
    return {"run_id": at.run_id, "decision": decision, "outcome": outcome, "kernel": kernel}


def _relink_next(tx: Tx, ns: str, run_ids: list[str]) -> None:
    add, stale = [], []
    for row in tx.run("memory/attempt/run_steps", ns=ns, run_ids=run_ids):
        steps = row["steps"]
        desired = {(a[0], b[0]) for a, b in zip(steps, steps[1:])}
        current = {(step[0], step[2]) for step in steps if step[2] is not None}
        add.extend(sorted(desired - current))
        stale.extend(sorted(current - desired))
    if stale:
        tx.run("memory/attempt/unlink_next", pairs=[list(p) for p in stale])
    if add:
        tx.run("memory/attempt/link_next", pairs=[list(p) for p in add])


def _refresh_runs(tx: Tx, ns: str, run_uids: list[str], made: list[_Prepared]) -> dict[str, tuple[Any, Any]]:
    """Each run's (previous, current) incumbent id after this write, its totals and incumbent updated: from the
    totals before and the new decisions (``attempt/advance_runs``), or from all its decisions
    (``attempt/refresh_runs``) for a run whose totals do not match its decisions and for runs that got none."""
    new: dict[str, list[str]] = {ru: [] for ru in run_uids}
    for p in made:
        new[uid(ns, p.attempt.run_id)].append(p.uid)
    rows = [{"uid": ru, "new": uids} for ru, uids in new.items() if uids]
    incumbents: dict[str, tuple[Any, Any]] = {}
    stale = [ru for ru, uids in new.items() if not uids]
    for row in tx.run("memory/attempt/advance_runs", rows=rows) if rows else []:
        if row["stale"]:
            stale.append(row["uid"])
        else:
            incumbents[row["uid"]] = (row["previous"], row["incumbent"])
    if stale:
        for row in tx.run("memory/attempt/refresh_runs", run_uids=sorted(stale)):
            incumbents[row["uid"]] = (row["previous"], row["incumbent"])
    return incumbents


def _link_next(tx: Tx, ns: str, runs: dict[str, Any], made: list[_Prepared]) -> None:
    """NEXT edges for the decisions this transaction created. A run that only grows at its end (every new step
    after the run's ``last_step``, the usual case) links its former last decision (``tails``, read by
    ``attempt/lock_runs``) to the first new one and the new ones in step order: nothing of the rest of the run is
    read. A run written out of order (sync, import, a step recorded late) is relinked in full (``_relink_next``)."""
    by_run: dict[str, list[_Prepared]] = {}
    for p in made:
        by_run.setdefault(p.attempt.run_id, []).append(p)
    pairs: list[list[str]] = []
    relink: list[str] = []
    for run_id, ps in by_run.items():
        ps.sort(key=lambda p: p.attempt.step)
        run = runs[uid(ns, run_id)]
        steps = [p.attempt.step for p in ps]
        last, tails = run["last_step"], run["tails"]
        grows = len(set(steps)) == len(steps) and (last is None or (steps[0] > last and len(tails) == 1))
        if not grows:
            relink.append(run_id)
            continue
        chain = tails[:1] + [p.uid for p in ps]
        pairs.extend([a, b] for a, b in zip(chain, chain[1:]))
    if pairs:
        tx.run("memory/attempt/link_next", pairs=pairs)
    if relink:
        _relink_next(tx, ns, sorted(relink))


def _link_used(tx: Tx, ns: str, new: list[_Prepared]) -> dict[str, list[str]]:
    """USED edges; returns decision uid -> evidence ids that are not in the graph."""
    wanted: dict[str, list[dict[str, Any]]] = {"decision": [], "insight": [], "knowledge": []}
    for p in new:
        by_kind: dict[str, list[list[Any]]] = {}
        for item in p.attempt.used:
            by_kind.setdefault(item.kind, []).append([item.id, item.tier, item.rank, item.tokens])
        for kind, items in by_kind.items():
            wanted[kind].append({"from": p.uid, "items": items})
    missing: dict[str, list[str]] = {}
    for kind, rows in wanted.items():
        if rows:
            for row in tx.run(f"memory/attempt/used_{kind}", ns=ns, rows=rows):
                missing.setdefault(row["from"], []).extend(f"{kind}:{item}" for item in row["missing"])
    return missing


def _relink(tx: Tx, ns: str, attempts: list[Attempt]) -> dict[str, list[str]]:
    """Relationships of decisions recorded before that the graph lacks, restored from their attempts (all
    idempotent: an edge that is there is left alone); returns decision uid -> evidence not in the graph."""
    rows = [{"uid": uid(ns, at.id), "run_id": at.run_id, "parent_id": at.parent_id} for at in attempts]
    tx.run("memory/attempt/relink", ns=ns, rows=rows)
    used = [
        {"from": uid(ns, at.id), "items": [[i.kind, i.id, i.tier, i.rank, i.tokens] for i in at.used]}
        for at in attempts
        if at.used
    ]
    missing: dict[str, list[str]] = {}
    for row in tx.run("memory/attempt/relink_used", ns=ns, rows=used) if used else []:
        missing.setdefault(row["from"], []).extend(row["missing"])
    _relink_next(tx, ns, sorted({at.run_id for at in attempts}))
    return missing


def recompute_scores(tx: Tx, affected: list[str]) -> dict[str, float]:
    """d(v) for ``affected`` (which must contain every ancestor of every node in it
    whose score changed) from their children; stores them and releases the locks."""
    if not affected:
        return {}
    nodes = tx.run("memory/attempt/children_scores", uids=affected)[0]["nodes"]
    info = {node: (r, children) for node, r, children in nodes}
    scores: dict[str, float] = {}

    def score(node: str) -> float:
        stack = [(node, False)]
        while stack:
            key, expanded = stack.pop()
            if key in scores:
                continue
            r, children = info[key]
            pending = [c for c, _d in children if c in info and c not in scores]
            if not expanded and pending:
                stack.append((key, True))
                stack.extend((c, False) for c in pending)
                continue
            values = [scores[c] if c in info else (d if d is not None else 0.0) for c, d in children]
            scores[key] = scoring.downstream(r, values)
        return scores[node]

    for node in info:
        score(node)
    tx.run("memory/attempt/set_scores", rows=[[k, v] for k, v in scores.items()])
    return scores


def write_attempts(tx: Tx, ns: str, attempts: Sequence[Attempt], *, relink: bool = False) -> list[RecordResult]:
    """Write a batch of attempts in this transaction; one result per distinct attempt, in input order.

    ``relink`` (journal sync): for attempts recorded before with the same content, restore the relationships
    the attempt says they have and the graph lacks (``_relink``); their results list the evidence that is
    still not in the graph."""
    by_uid: dict[str, Attempt] = {}
    for at in attempts:
        key = uid(ns, at.id)
        if key in by_uid and by_uid[key].content_hash() != at.content_hash():
            raise RecordConflictError(f"attempt {at.id} appears twice in one batch with different content")
        by_uid.setdefault(key, at)
    existing = {row["uid"]: row["attempt_hash"] for row in tx.run("memory/attempt/existing", uids=list(by_uid))}
    for key, stored in existing.items():
        if stored != by_uid[key].content_hash():
            raise RecordConflictError(
                f"attempt {by_uid[key].id} was recorded before with different content",
                hint="a run's step is recorded once; use a new step number for a new attempt",
            )
    new = [at for key, at in by_uid.items() if key not in existing]
    results = _write_new(tx, ns, new) if new else {}
    others = [key for key in by_uid if key not in results]
    missing = _relink(tx, ns, [by_uid[key] for key in others]) if relink and others else {}
    if others:  # recorded before (or concurrently by another writer): report what the graph holds
        for row in tx.run("memory/attempt/results", uids=others):
            results[row["uid"]] = RecordResult(
                decision_id=row["id"],
                in_graph=True,
                created=False,
                a=row["a"],
                r=row["r"],
                label=row["label"],
                d=row["d"],
                incumbent_id=row["incumbent_id"],
                missing_evidence=tuple(missing.get(row["uid"], ())),
            )
    return [results[key] for key in by_uid]


def _write_new(tx: Tx, ns: str, new: list[Attempt]) -> dict[str, RecordResult]:
    run_uids = sorted({uid(ns, at.run_id) for at in new})
    runs = {row["uid"]: row for row in tx.run("memory/attempt/lock_runs", ns=ns, run_uids=run_uids)}
    for ru in run_uids:
        if ru not in runs:
            raise UnknownRunError(
                f"run {ru.split('/', 1)[1]} is not in the graph (namespace {ns})",
                hint=(
                    "start the run first (ExperienceGraph.start_run), or "
                    f"`kope memory sync --namespace {ns}` if it is journaled"
                ),
            )
    new_ids = {at.id for at in new}
    external = sorted({uid(ns, at.parent_id) for at in new if at.parent_id and at.parent_id not in new_ids})
    parents = {row["uid"]: row for row in tx.run("memory/attempt/parents", parent_uids=external)} if external else {}
    for pu in external:
        if pu not in parents:
            raise UnknownDecisionError(f"parent decision {pu.split('/', 1)[1]} is not in the graph (namespace {ns})")

    prepared: dict[str, _Prepared] = {}
    rows = []
    for at in _topological(new):
        run = runs[uid(ns, at.run_id)]
        _check_against_run(at, run)
        correct = at.outcome.ok
        a = scoring.absolute_speedup(at.outcome)
        if at.parent_id is None:
            a_parent, parent_code = None, None
        elif at.parent_id in prepared:
            parent = prepared[at.parent_id]
            a_parent, parent_code = parent.a, parent.attempt.code
        else:
            row = parents[uid(ns, at.parent_id)]
            a_parent, parent_code = row["a"], row["source"]
        r = scoring.step_ratio(a, correct, a_parent, at.parent_id is not None)
        p = _Prepared(at, uid(ns, at.id), a, r, scoring.label_for(r, correct), scoring.confidence(at.outcome), a_parent)
        prepared[at.id] = p
        rows.append(_rows(p, parent_code))
    created = set(tx.run("memory/attempt/create", ns=ns, rows=rows, nonce=secrets.token_hex(8))[0]["created"])
    made = [p for p in prepared.values() if p.uid in created]
    _link_next(tx, ns, runs, made)
    missing = _link_used(tx, ns, made)
    incumbents = _refresh_runs(tx, ns, run_uids, made)
    tx.run("memory/present/incumbents", run_uids=run_uids)
    # The lineage last: the ancestors' locks (contended by every writer that extends the same lineage) are
    # taken here and held only for these statements and the commit, not for the whole transaction.
    chain = [row["uid"] for row in tx.run("memory/attempt/lock_chains", parent_uids=external)] if external else []
    links = [[p.uid, uid(ns, p.attempt.parent_id)] for p in made if p.attempt.parent_id]
    if links:
        tx.run("memory/attempt/link_from", links=links)
    if made:  # after the FROM edges: it mirrors them between the outcomes
        tx.run("memory/present/decisions", rows=[present.decision_row(p.facts()) for p in made])
    mine = {p.uid for p in prepared.values()}
    scores = recompute_scores(tx, list(mine) + [c for c in chain if c not in mine])
    results = {}
    for p in made:
        previous, current = incumbents[uid(ns, p.attempt.run_id)]
        results[p.uid] = RecordResult(
            decision_id=p.attempt.id,
            in_graph=True,
            created=True,
            a=p.a,
            r=p.r,
            label=p.label,
            d=scores[p.uid],
            incumbent_id=current,
            incumbent_changed=current == p.attempt.id and previous != p.attempt.id,
            missing_evidence=tuple(missing.get(p.uid, ())),
        )
    return results
