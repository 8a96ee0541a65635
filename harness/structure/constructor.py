"""The reference's constructor, reused as ``ModelNew.__init__``.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from harness.pyparse import parse as parse_source


class ConstructorError(Exception):
    """The reference's constructor cannot be reused (the message says why)."""


@dataclass(frozen=True)
class Constructor:
    imports: tuple[str, ...]  # import statements the copied code needs
    helpers: tuple[str, ...]  # module-level definitions it needs, in file order
    init: str | None  # the __init__ method source (4-space indented), or None when Model has none
    class_body: tuple[str, ...]  # class-level statements of Model other than methods


BUILTINS = set(dir(builtins))
SKIP = {"Model", "get_inputs", "get_init_inputs", "CASES", "apply_case"}


class _Names(ast.NodeVisitor):
    """Free names a piece of code reads (loads not bound inside it), and self.<method>() calls."""

    def __init__(self) -> None:
        self.loaded: set[str] = set()
        self.bound: set[str] = set()
        self.methods: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loaded.add(node.id)
        else:
            self.bound.add(node.id)

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            self.methods.add(f.attr)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.bound.add(node.name)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.bound.add(node.name)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.generic_visit(node)


def _free(node: ast.AST) -> tuple[set[str], set[str]]:
    v = _Names()
    v.visit(node)
    return v.loaded - v.bound - BUILTINS, v.methods


class _RenameModel(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and f.id == "super" and node.args:
            node.args = []  # super(Model, self) -> super()
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "Model":
            return ast.copy_location(ast.Name("ModelNew", node.ctx), node)
        return node


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node, padded=True)
    if text is None:
        raise ConstructorError("the task source cannot be segmented")
    return text


def _method_source(source: str, method: ast.FunctionDef) -> str:
    """A method, with Model renamed, as source indented by 4 spaces."""
    lines = source.splitlines()
    start = min([d.lineno for d in method.decorator_list] + [method.lineno]) - 1
    text = "\n".join(lines[start : method.end_lineno])
    tree = parse_source(_dedent(text))
    uses_model = any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree)) or any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" and n.args
        for n in ast.walk(tree)
    )
    if uses_model:
        text = ast.unparse(ast.fix_missing_locations(_RenameModel().visit(tree)))
    else:
        text = _dedent(text)
    return "".join(("    " + line if line.strip() else "") + "\n" for line in text.splitlines())


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _helper_class(source: str, node: ast.ClassDef) -> str:
    """A helper nn.Module class with only its constructor (and class-level constants)."""
    kept = [n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or n.name == "__init__"]
    kept = [n for n in kept if not (isinstance(n, ast.Expr) and isinstance(getattr(n, "value", None), ast.Constant))]
    bases = ", ".join(ast.unparse(b) for b in node.bases)
    head = f"class {node.name}({bases}):\n" if bases else f"class {node.name}:\n"
    doc = f'    """{node.name} from the task file, constructor only: its forward is replaced by the kernels."""\n'
    body = "".join(
        _method_source(source, n) if isinstance(n, ast.FunctionDef) else _indent(_segment(source, n)) for n in kept
    )
    return head + doc + (body or "    pass\n")


def _indent(text: str) -> str:
    return "".join(("    " + line if line.strip() else "") + "\n" for line in _dedent(text).splitlines())


def reuse_constructor(source: str, case_keys: frozenset[str] | set[str] = frozenset()) -> Constructor:
    """What ModelNew needs from the task file to construct itself like Model (see the module docstring)."""
    tree = parse_source(source)
    top: dict[str, ast.stmt] = {}
    imports: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imports[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            top[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    top[t.id] = node
    model = top.get("Model")
    if not isinstance(model, ast.ClassDef):
        raise ConstructorError("the task defines no class Model")
    methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    init = methods.get("__init__")
    class_body = [
        n
        for n in model.body
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not (isinstance(n, ast.Expr) and isinstance(getattr(n, "value", None), ast.Constant))
    ]
    wanted_methods: list[ast.FunctionDef] = []
    pending: list[ast.AST] = [*class_body]
    if init is not None:
        pending.append(init)
        wanted_methods.append(init)
    needed_top: dict[str, ast.AST] = {}
    needed_imports: dict[int, ast.AST] = {}
    seen: set[str] = set()
    while pending:
        item = pending.pop()
        names, called = _free(item)
        for method in sorted(called):
            if method in methods and method != "forward" and methods[method] not in wanted_methods:
                wanted_methods.append(methods[method])
                pending.append(methods[method])
        for name in sorted(names - seen):
            seen.add(name)
            if name in ("self", "Model", "ModelNew"):
                continue
            if name in case_keys:
                raise ConstructorError(
                    f"the constructor reads the module-level name {name!r}, which CASES change; pass it as a "
                    "constructor argument (get_init_inputs) instead"
                )
            if name in imports:
                needed_imports[id(imports[name])] = imports[name]
            elif name in top and name not in SKIP:
                definition = top[name]
                needed_top[name] = definition
                pending.append(definition)
            elif name in SKIP:
                raise ConstructorError(f"the constructor uses {name}, which a candidate may not")
            else:
                raise ConstructorError(f"the constructor reads {name!r}, which the task file does not define")
    helpers = []
    for node in tree.body:  # file order
        if node in needed_top.values():
            if isinstance(node, ast.ClassDef):
                helpers.append(_helper_class(source, node))
            else:
                helpers.append(_dedent(_segment(source, node)) + "\n")
    import_lines = tuple(dict.fromkeys(_dedent(_segment(source, n)) for n in tree.body if id(n) in needed_imports))
    init_text = "".join(_method_source(source, m) + "\n" for m in sorted(wanted_methods, key=lambda m: m.lineno))
    body = tuple(_indent(_segment(source, n)) for n in class_body)
    return Constructor(import_lines, tuple(helpers), init_text or None, body)
