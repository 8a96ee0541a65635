"""The harness core is laid out in one-way layers: a module imports only modules of its own layer or below.

Every import counts, the ones inside functions too (a function-level import that runs back up the
layers is still a circle, only a hidden one). The layers are drawn in docs/architecture.md; a new
module of harness/ (or of harness/targets/ and harness/serve/) is placed in one here.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Bottom up. A module may import its own layer and the layers below it, never one above.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "leaves",
        [
            "harness",
            "harness._cdecl",
            "harness.budget",
            "harness.compile_flags",
            "harness.device_lock",
            "harness.device_traffic",
            "harness.dispatch_allowance",
            "harness.errors",
            "harness.guards",
            "harness.ipc",
            "harness.jsonfile",
            "harness.native_probe",
            "harness.op_watch",
            "harness.pyparse",
            "harness.sandbox",
            "harness.serve",
            "harness.serve.quarantine",
            "harness.settings",
            "harness.vocabulary",
            "harness.worker_common",
            "harness.worker_limits",
        ],
    ),
    ("process helpers and records", ["harness.commands", "harness.index_check", "harness.record"]),
    (
        "task files, hardware, comparison",
        [
            "harness.compare",
            "harness.hardware",
            "harness.isolated",
            "harness.reference_cache",
            "harness.remote_memory",
            "harness.serve.probe",
            "harness.static_check",
            "harness.task",
        ],
    ),
    ("the C++ compiler, the timed loop's worker side", ["harness.cpu", "harness.worker_timed"]),
    (
        "seccomp, clocks, extensions, isolated task loading",
        [
            "harness.fast_compare",
            "harness.seccomp",
            "harness.targets.torch_ext",
            "harness.task_loader",
            "harness.timing",
        ],
    ),
    ("target base, compile service", ["harness.compile_service", "harness.targets.base"]),
    (
        "targets, roofline",
        [
            "harness.roofline",
            "harness.targets",
            "harness.targets.cpu",
            "harness.targets.cuda",
            "harness.targets.triton",
        ],
    ),
    ("worker roles", ["harness.worker_candidate", "harness.worker_reference"]),
    ("the worker process", ["harness.worker"]),
    ("one worker process", ["harness.worker_process", "harness.zygote", "harness.zygote_client"]),
    ("worker pools", ["harness.worker_pool"]),
    ("one case's timing loop", ["harness.case_timer", "harness.precise_reference"]),
    ("evaluation", ["harness.eval_setup", "harness.evaluate", "harness.task_check"]),
    ("as deployed", ["harness.deployed"]),
    ("remote evaluation", ["harness.remote", "harness.serve.devices", "harness.serve.executor"]),
    ("entry points", ["harness.__main__", "harness.cli", "harness.serve.app", "harness.serve.cli"]),
]
LAYER_OF = {module: k for k, (_, modules) in enumerate(LAYERS) for module in modules}
# The one circle left: the template library and the structure matcher know each other.
KNOWN_CIRCLES = [{"harness.structure.codegen", "harness.structure.match", "harness.suite.kernel_templates"}]
DATA = ("harness/suite/tasks/", "harness/suite/candidates/", "harness/suite/templates/")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((REPO / "harness").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(DATA):
            continue
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, int]]:
    """(imported harness module, line) for every import in ``module``, at any depth."""
    found = []
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("harness"):
            targets = [_resolve(f"{node.module}.{a.name}") or _resolve(node.module or "") for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [_resolve(a.name) for a in node.names if a.name.startswith("harness")]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t is not None and t != module]
    return found


def test_every_core_module_of_the_harness_has_a_layer():
    core = [m for m in MODULES if m.count(".") <= 1 or m.startswith(("harness.targets.", "harness.serve."))]
    core = [m for m in core if not m.startswith(("harness.structure", "harness.suite"))]
    assert sorted(m for m in core if m not in LAYER_OF) == []
    assert sorted(m for m in LAYER_OF if m not in MODULES) == []  # no stale names


def test_no_harness_module_imports_one_above_it():
    upward = [
        f"{MODULES[m].relative_to(REPO)}:{line} imports {target} "
        f"({LAYERS[LAYER_OF[target]][0]!r} is above {LAYERS[LAYER_OF[m]][0]!r})"
        for m in LAYER_OF
        for target, line in _imports(m)
        if target in LAYER_OF and LAYER_OF[target] > LAYER_OF[m]
    ]
    assert upward == []


def test_the_harness_has_no_import_circle_but_the_known_one():
    graph = {m: {t for t, _ in _imports(m)} for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    assert [sorted(c) for c in circles if c not in KNOWN_CIRCLES] == []
