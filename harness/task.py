"""Task files: KernelBench-compatible problems, plus KOPE's optional metadata and CASES.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import TaskFormatError, TaskNotFoundError
from harness.pyparse import parse as parse_source
from harness.vocabulary import FAMILIES

METADATA = ("OPERATOR", "FAMILY", "LEVEL", "DESCRIPTION", "DTYPE", "CASES", "HELDOUT_CASES", "INDEX_OUTPUTS")
CASE_LISTS = ("CASES", "HELDOUT_CASES")
CASE_SETS = ("visible", "heldout", "all")
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "half",
    "float",
    "double",
    "long",
    "int",
    "short",
)
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
_counter = itertools.count()


@dataclass(frozen=True)
class Case:
    index: int
    name: str
    params: dict[str, Any]  # every key of the case dict except ``name``
    heldout: bool = False  # from HELDOUT_CASES: only the final evaluation runs it

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.params}


@dataclass
class TaskInfo:
    """What a task is: metadata, path and cases (the implicit ``default`` case when the file has no CASES)."""

    operator: str
    family: str
    level: int | None
    description: str
    path: Path
    dtype: str | None = None
    cases: list[Case] = field(default_factory=list)  # the visible cases
    heldout_cases: list[Case] = field(default_factory=list, repr=False)
    index_outputs: list[dict[str, Any]] = field(default_factory=list)  # INDEX_OUTPUTS (harness.index_check)

    @property
    def all_cases(self) -> list[Case]:
        return [*self.cases, *self.heldout_cases]

    def case(self, index: int) -> Case:
        """The case with this index, visible or held-out."""
        return self.all_cases[index]

    def to_dict(self) -> dict[str, Any]:
        """What a person or a proposer may see: the visible cases, and only the number of held-out ones."""
        return {
            "operator": self.operator,
            "family": self.family,
            "level": self.level,
            "description": self.description,
            "path": str(self.path),
            "dtype": self.dtype,
            "cases": [c.as_dict() for c in self.cases],
            "heldout_cases": len(self.heldout_cases),
        }


@dataclass
class Task(TaskInfo):
    """A loaded, validated task. ``cases`` is always set (the implicit ``default`` case if the file has none)."""

    has_apply_case: bool = False
    source: str = field(default="", repr=False)

    def module_for_case(self, case: Case) -> ModuleType:
        """A fresh copy of the task module with ``case`` applied."""
        module = _exec_module(self.path)
        apply_case(module, case)
        return module


def default_operator(path: Path) -> str:
    name = re.sub(r"[^a-z0-9]+", "_", path.stem.lower()).strip("_")
    return name or "task"


def level_from_path(path: Path) -> int | None:
    for part in reversed(path.resolve().parts[:-1]):
        match = re.fullmatch(r"level[_-]?(\d)", part.lower())
        if match and 1 <= int(match.group(1)) <= 4:
            return int(match.group(1))
    return None


def resolve_task_path(path: str | Path) -> Path:
    """The task file's absolute path; ``TaskNotFoundError`` / ``TaskFormatError`` saying what is wrong with it."""
    p = Path(path)
    if not p.is_file():
        what = "is a folder, not a file" if p.is_dir() else "does not exist"
        raise TaskNotFoundError(f"task file not found: {p} {what}")
    if p.suffix != ".py":
        ends = f"ends in {p.suffix!r}" if p.suffix else "has no suffix"
        raise TaskFormatError(f"{p}: a task is a Python file (.py); this file name {ends}")
    return p.resolve()


def _parse(path: Path) -> tuple[str, ast.Module]:
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFormatError(f"{path}: cannot read the task file: {exc}") from None
    try:
        tree = parse_source(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskFormatError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    return source, tree


Assignment = ast.Assign | ast.AnnAssign  # a top-level `NAME = value` (annotated or not)


def _top_level_assignments(tree: ast.Module) -> dict[str, Assignment]:
    found: dict[str, Assignment] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = node
    return found


def _top_level_defs(tree: ast.Module) -> set[str]:
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    return names | set(_top_level_assignments(tree))


def _imported_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def read_task_literals(path: str | Path) -> TaskInfo | None:
    """Metadata and cases from the file's literals, without executing it; ``None`` when a metadata value is
    not a literal (then the file must be imported: ``harness.task_loader.read_task_info`` does it in a worker)."""
    p = resolve_task_path(path)
    _source, tree = _parse(p)
    assigned = _top_level_assignments(tree)
    values: dict[str, Any] = {}
    for name in METADATA:
        if name in assigned:
            try:
                values[name] = ast.literal_eval(assigned[name].value or "")
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    defined = _top_level_defs(tree) | _imported_names(tree)
    problems = _check_metadata(
        values, assigned, has_apply_case="apply_case" in defined, module_globals=dict.fromkeys(defined)
    )
    missing = [n for n in REQUIRED if n not in defined]
    problems = [f"no `{n}` defined at module level (required by the KernelBench format)" for n in missing] + problems
    _raise_if(p, problems)
    return _info_from_values(p, values)


def load_task(path: str | Path) -> Task:
    """Execute the task file once, in this process, and validate it; precise ``TaskFormatError`` otherwise.

    Only for processes that must run the task's code anyway (the workers); everywhere else use
    ``harness.task_loader.load_task_isolated`` (a worker process under a timeout)."""
    p = resolve_task_path(path)
    source, tree = _parse(p)
    module = _exec_module(p)
    assigned = _top_level_assignments(tree)
    problems = _check_required(module)
    values = {name: getattr(module, name) for name in METADATA if hasattr(module, name)}
    has_hook = hasattr(module, "apply_case")
    if has_hook and not callable(module.apply_case):
        problems.append("`apply_case` must be a function apply_case(case: dict) -> None")
    problems += _check_metadata(values, assigned, has_apply_case=has_hook, module_globals=vars(module))
    _raise_if(p, problems)
    info = _info_from_values(p, values)
    return Task(
        operator=info.operator,
        family=info.family,
        level=info.level,
        description=info.description,
        path=p,
        dtype=info.dtype,
        cases=info.cases,
        heldout_cases=info.heldout_cases,
        index_outputs=info.index_outputs,
        has_apply_case=has_hook,
        source=source,
    )


def apply_case(module: ModuleType, case: Case) -> None:
    hook = getattr(module, "apply_case", None)
    if callable(hook):
        hook(case.as_dict())
        return
    for key, value in case.params.items():
        setattr(module, key, value)


def _exec_module(path: Path) -> ModuleType:
    name = f"_kope_task_{default_operator(path)}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskFormatError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the task's own code failed at import: say where
        sys.modules.pop(name, None)
        line = _failing_line(exc, path)
        where = f"{path}:{line}" if line else str(path)
        raise TaskFormatError(f"{where}: importing the task raised {type(exc).__name__}: {exc}") from None
    return module


def _failing_line(exc: BaseException, path: Path) -> int | None:
    tb, line = exc.__traceback__, None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _check_required(module: ModuleType) -> list[str]:
    problems = []
    model = getattr(module, "Model", None)
    if model is None:
        problems.append(
            "no `Model` defined at module level (required by the KernelBench format: class Model(nn.Module))"
        )
    else:
        import torch

        if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
            problems.append(f"`Model` must be a class deriving from torch.nn.Module, found {type(model).__name__}")
    for name in ("get_inputs", "get_init_inputs"):
        value = getattr(module, name, None)
        if value is None:
            problems.append(f"no `{name}()` defined at module level (required by the KernelBench format)")
        elif not callable(value):
            problems.append(f"`{name}` must be a function returning a list, found {type(value).__name__}")
    return problems


def _line(assigned: dict[str, Assignment], name: str) -> str:
    node = assigned.get(name)
    return f" (line {node.lineno})" if node is not None else ""


def _check_metadata(
    values: dict[str, Any],
    assigned: dict[str, Assignment],
    *,
    has_apply_case: bool,
    module_globals: dict[str, Any] | None,
) -> list[str]:
    problems: list[str] = []
    if "OPERATOR" in values:
        op = values["OPERATOR"]
        if not isinstance(op, str) or not _SNAKE.match(op):
            problems.append(
                f"OPERATOR{_line(assigned, 'OPERATOR')} must be a snake_case string like 'layer_norm', found {op!r}"
            )
    if "FAMILY" in values and values["FAMILY"] not in FAMILIES:
        problems.append(
            f"FAMILY{_line(assigned, 'FAMILY')} must be one of {', '.join(FAMILIES)}; found {values['FAMILY']!r}"
        )
    if "LEVEL" in values:
        level = values["LEVEL"]
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 4:
            problems.append(f"LEVEL{_line(assigned, 'LEVEL')} must be an integer from 1 to 4, found {level!r}")
    if "DESCRIPTION" in values and not isinstance(values["DESCRIPTION"], str):
        problems.append(f"DESCRIPTION{_line(assigned, 'DESCRIPTION')} must be a string")
    if "DTYPE" in values and values["DTYPE"] not in DTYPES:
        problems.append(
            f"DTYPE{_line(assigned, 'DTYPE')} must name a torch dtype ({', '.join(DTYPES[:6])}, ...), found {values['DTYPE']!r}"
        )
    if "INDEX_OUTPUTS" in values:
        from harness.index_check import problems as index_problems

        problems += index_problems(values["INDEX_OUTPUTS"], module_globals, _line(assigned, "INDEX_OUTPUTS"))
    seen: set[str] = set()
    for list_name in CASE_LISTS:
        if list_name in values:
            problems += _check_cases(values[list_name], assigned, has_apply_case, module_globals, list_name, seen)
    return problems


def _case_line(assigned: dict[str, Assignment], index: int, list_name: str = "CASES") -> str:
    node = assigned.get(list_name)
    value = getattr(node, "value", None)
    if isinstance(value, (ast.List, ast.Tuple)) and index < len(value.elts):
        return f" (line {value.elts[index].lineno})"
    return ""


def _check_cases(
    cases: Any,
    assigned: dict[str, Assignment],
    has_apply_case: bool,
    module_globals: dict[str, Any] | None,
    list_name: str = "CASES",
    seen: set[str] | None = None,
) -> list[str]:
    """Problems of one case list; ``seen`` collects names across CASES and HELDOUT_CASES (unique over both)."""
    where = _line(assigned, list_name)
    if not isinstance(cases, (list, tuple)) or not cases:
        return [f"{list_name}{where} must be a non-empty list of dicts, found {type(cases).__name__}"]
    problems: list[str] = []
    seen = set() if seen is None else seen
    for i, case in enumerate(cases):
        at = f"{list_name}[{i}]{_case_line(assigned, i, list_name)}"
        if not isinstance(case, dict):
            problems.append(f"{at} must be a dict, found {type(case).__name__}")
            continue
        name = case.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{at} needs a non-empty string 'name'")
        elif name in seen:
            also = " (names are unique over CASES and HELDOUT_CASES)" if list_name != "CASES" else ""
            problems.append(f"{at} repeats the case name {name!r}{also}")
        else:
            seen.add(name)
        try:
            json.dumps(case, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"{at} holds a value that is not JSON-serialisable: {exc}")
        for key, value in case.items():
            if key == "name":
                continue
            if not isinstance(key, str) or not key.isidentifier():
                problems.append(f"{at} key {key!r} is not a valid Python name")
                continue
            if key == "DTYPE" and value not in DTYPES:
                problems.append(f"{at} sets DTYPE to {value!r}, which is not a torch dtype name")
            if not has_apply_case and module_globals is not None and key not in module_globals:
                close = difflib.get_close_matches(key, [k for k in module_globals if not k.startswith("__")], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(
                    f"{at} sets {key!r}, which is not a module-level name of the task{hint}; "
                    "define it at module level or add an apply_case(case) hook"
                )
    return problems


def _raise_if(path: Path, problems: list[str]) -> None:
    if problems:
        body = "\n".join(f"  - {p}" for p in problems)
        raise TaskFormatError(f"invalid task file {path}:\n{body}")


def _info_from_values(path: Path, values: dict[str, Any]) -> TaskInfo:
    cases = [Case(0, "default", {})]
    if "CASES" in values:
        cases = [Case(i, c["name"], {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(values["CASES"])]
    heldout = [
        Case(len(cases) + i, c["name"], {k: v for k, v in c.items() if k != "name"}, heldout=True)
        for i, c in enumerate(values.get("HELDOUT_CASES") or [])
    ]
    return TaskInfo(
        operator=values.get("OPERATOR") or default_operator(path),
        family=values.get("FAMILY", "unknown"),
        level=values["LEVEL"] if "LEVEL" in values else level_from_path(path),
        description=values.get("DESCRIPTION", ""),
        path=path,
        dtype=values.get("DTYPE"),
        cases=cases,
        heldout_cases=heldout,
        index_outputs=[dict(spec) for spec in values.get("INDEX_OUTPUTS") or []],
    )


def visible_source(source: str) -> str:
    """The task source without its ``HELDOUT_CASES`` assignment: what a prompt or a listing may show."""
    try:
        tree = parse_source(source)
    except SyntaxError:
        return source
    lines = source.splitlines(keepends=True)
    for node in reversed(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "HELDOUT_CASES" for t in targets) and node.end_lineno:
            del lines[node.lineno - 1 : node.end_lineno]
    return "".join(lines)


def select_cases(task: TaskInfo, spec: str | list[int | str] | tuple | None, case_set: str = "visible") -> list[Case]:
    """Cases by index, index range (``2-5``) or name; ``None`` selects all of ``case_set``. Order follows the task.

    ``case_set`` is the pool: ``visible`` (the default: what proposers see), ``heldout`` or ``all``."""
    from harness.errors import OptionsError

    if case_set not in CASE_SETS:
        raise OptionsError(f"case set must be one of {', '.join(CASE_SETS)}, got {case_set!r}")
    pool = {"visible": task.cases, "heldout": task.heldout_cases, "all": task.all_cases}[case_set]
    if spec is None or spec == "" or spec == []:
        return list(pool)
    items: list[int | str] = []
    for part in spec.split(",") if isinstance(spec, str) else spec:
        if isinstance(part, int):
            items.append(part)
            continue
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            items.append(int(part))
        elif re.fullmatch(r"\d+-\d+", part):
            lo, hi = map(int, part.split("-"))
            known = [c.index for c in pool]
            if lo > hi or not known or lo < min(known) or hi > max(known):  # refused before it is expanded
                span = f"{known[0]}-{known[-1]}" if known else "none"
                raise OptionsError(f"case range {part} is out of range: task {task.operator} has cases {span}")
            items.extend(range(lo, hi + 1))
        elif part:
            items.append(part)
    by_name = {c.name: c for c in pool}
    by_index = {c.index: c for c in pool}
    chosen: dict[int, Case] = {}
    for item in items:
        if isinstance(item, int):
            if item not in by_index:
                span = f"{pool[0].index}-{pool[-1].index}" if pool else "none"
                raise OptionsError(f"case index {item} is out of range: task {task.operator} has cases {span}")
            chosen[item] = by_index[item]
        elif item in by_name:
            chosen[by_name[item].index] = by_name[item]
        else:
            close = difflib.get_close_matches(item, list(by_name), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; cases are {', '.join(by_name)}"
            raise OptionsError(f"task {task.operator} has no case {item!r}{hint}")
    return [chosen[i] for i in sorted(chosen)]
