"""Static anti-cheat checks on a candidate's source, before anything runs.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.pyparse import parse as parse_source

FORBIDDEN_MODULES = {
    "subprocess": "starts processes",
    "multiprocessing": "starts processes",
    "threading": "starts threads",
    "_thread": "starts threads",
    "concurrent": "starts threads or processes",
    "asyncio": "runs work outside forward",
    "socket": "opens network connections",
    "ssl": "opens network connections",
    "http": "uses the network",
    "urllib": "uses the network",
    "requests": "uses the network",
    "httpx": "uses the network",
    "ftplib": "uses the network",
    "smtplib": "uses the network",
    "ctypes": "pokes raw memory (use harness.cpu.compile_cpp)",
    "cffi": "pokes raw memory",
    "gc": "reaches objects it was not given",
    "inspect": "inspects the harness's frames",
    "importlib": "import machinery",
    "builtins": "rebinds builtins",
    "pickle": "deserialises arbitrary objects",
    "marshal": "loads code objects",
    "shelve": "reads files",
    "signal": "changes signal handling",
    "resource": "changes resource limits",
    "pty": "starts processes",
    "mmap": "maps files",
    "shutil": "touches files",
    "tempfile": "touches files",
    "pathlib": "touches files",
    "io": "touches files",
    "glob": "lists files",
    "sysconfig": "inspects the environment",
}
FORBIDDEN_TORCH = (
    "torch._C",
    "torch._dynamo",
    "torch._inductor",
    "torch.library",
    "torch.overrides",
    "torch._ops",
    "torch._prims",
    "torch._refs",
    "torch._decomp",
    "torch.fx",
    "torch.utils._python_dispatch",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.compile",
    "torch.jit",
    "torch.export",
    "torch.testing",
)
THREAD_SETTERS = ("torch.set_num_threads", "torch.set_num_interop_threads")
# torch callables that allocate, view, copy or describe: allowed anywhere.
ALLOWED_TORCH = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "tensor",
    "as_tensor",
    "as_strided",
    "from_numpy",
    "frombuffer",
    "arange",
    "Size",
    "device",
    "dtype",
    "no_grad",
    "inference_mode",
    "enable_grad",
    "is_tensor",
    "is_floating_point",
    "numel",
    "get_default_dtype",
    "promote_types",
    "result_type",
    "can_cast",
    "finfo",
    "iinfo",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "hstack",
    "vstack",
    "chunk",
    "split",
    "narrow",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "t",
    "broadcast_shapes",
    "get_num_threads",
    "manual_seed",
    "is_grad_enabled",
    "set_grad_enabled",
    "Generator",
    "Tensor",
    "Stream",
    "Event",
}
ALLOWED_TORCH_PREFIXES = (
    "torch.cuda.",
    "torch.utils.cpp_extension.",
    "torch.nn.Parameter",
    "torch.nn.Module",
    "torch.nn.ModuleList",
    "torch.nn.ModuleDict",
    "torch.nn.ParameterList",
    "torch.nn.init.",
    "torch.backends.",
    "torch.version",
    "torch.types",
)
FORBIDDEN_CALLS = {
    "open": "reads or writes files",
    "exec": "runs dynamic code",
    "eval": "runs dynamic code",
    "compile": "compiles dynamic code",
    "__import__": "import machinery",
    "globals": "reaches module state",
    "vars": "reaches module state",
    "breakpoint": "debugger",
    "input": "reads stdin",
}
FORBIDDEN_ATTRS = {
    "os.system": "starts processes",
    "os.popen": "starts processes",
    "os.fork": "starts processes",
    "os.forkpty": "starts processes",
    "os.posix_spawn": "starts processes",
    "os.posix_spawnp": "starts processes",
    "os.kill": "signals processes",
    "os.killpg": "signals processes",
    "os.write": "writes to file descriptors",
    "os.read": "reads file descriptors",
    "os.open": "opens files",
    "os.fdopen": "opens files",
    "os.dup": "file descriptors",
    "os.dup2": "file descriptors",
    "os.pipe": "file descriptors",
    "os.remove": "deletes files",
    "os.unlink": "deletes files",
    "os.listdir": "lists files",
    "os.scandir": "lists files",
    "os.walk": "lists files",
    "os.chdir": "changes directory",
    "os.setsid": "escapes the process group",
    "os.nice": "changes priority",
    "os.sched_setaffinity": "changes CPU affinity",
    "sys.modules": "reaches other modules",
    "sys._getframe": "inspects the harness's frames",
    "sys.settrace": "traces the harness",
    "sys.setprofile": "profiles the harness",
    "sys.addaudithook": "changes audit hooks",
    "sys.setrecursionlimit": "changes limits",
    "sys.setswitchinterval": "changes scheduling",
}
_SPAWN_PREFIXES = ("os.exec", "os.spawn")

_CPP_FORBIDDEN = [
    (re.compile(r"\b(fopen|freopen|open|openat|creat)\s*\("), "opens files"),
    (re.compile(r"\b(i|o)?fstream\b"), "opens files"),
    (
        re.compile(r"\b(popen|system|fork|vfork|execl|execlp|execle|execv|execvp|execve|posix_spawn|clone)\s*\("),
        "starts processes",
    ),
    (re.compile(r"\b(socket|connect|bind|getaddrinfo)\s*\("), "uses the network"),
    (re.compile(r"\bstd::(thread|jthread|async)\b|\bpthread_create\b"), "starts background threads (use OpenMP)"),
    (re.compile(r"\b(dlopen|dlsym|mmap|mprotect|syscall|ptrace)\s*\("), "low-level system calls"),
    (re.compile(r"#\s*include\s*[<\"](/|\.\.)"), "includes a file by absolute or parent path"),
]
_CPP_THREADS = re.compile(r"\bomp_set_num_threads\s*\(|\bnum_threads\s*\(|\bomp_set_dynamic\s*\(")
_ATEN_COMPUTE = (
    "matmul|mm|bmm|addmm|addmv|mv|baddbmm|linear|einsum|tensordot|softmax|log_softmax|_softmax|relu|relu_|gelu|"
    "silu|sigmoid|tanh|exp|log|sqrt|rsqrt|pow|sum|mean|var|std|norm|amax|amin|max|min|argmax|argmin|prod|"
    "cumsum|layer_norm|native_layer_norm|batch_norm|group_norm|instance_norm|rms_norm|conv1d|conv2d|conv3d|"
    "convolution|_convolution|conv_transpose1d|conv_transpose2d|conv_transpose3d|max_pool2d|avg_pool2d|"
    "adaptive_avg_pool2d|dropout|add|sub|mul|div|clamp|where|abs|neg|maximum|minimum|dot|outer|scaled_dot_product_attention"
)
_CPP_ATEN = re.compile(r"\b(?:torch|at)::(?:nn::functional::)?(" + _ATEN_COMPUTE + r")\s*\(")
_CPP_METHOD = re.compile(r"\.(" + _ATEN_COMPUTE + r")\s*\(")
_CPP_HINT = re.compile(r"#\s*include|extern\s+\"C\"|__global__|\btorch::|\bat::|#pragma")


@dataclass(frozen=True)
class Finding:
    check: str  # reference_call | monkey_patch | thread_count | forbidden_api
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


# Checks about what runs in forward: not held against code ModelNew never executes.
EXECUTION_CHECKS = frozenset({"reference_call", "thread_count"})


def check_source(source: str, filename: str = "<candidate>") -> list[Finding]:
    """All findings for a candidate file (raises SyntaxError if it is not Python). The findings depend on the text
    alone, so the last few texts' are remembered (a candidate assembled from a structure match is checked when it
    is assembled and again when it is evaluated)."""
    try:
        return list(_findings(source))
    except SyntaxError as exc:
        exc.filename = filename
        raise


@functools.lru_cache(maxsize=8)
def _findings(source: str) -> tuple[Finding, ...]:
    tree = parse_source(source)
    inert = unreachable_nodes(tree)
    visitor = _Visitor(inert)
    visitor.visit(tree)
    findings = visitor.findings
    inert_lines = [(n.lineno, n.end_lineno or n.lineno) for n in inert]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CPP_HINT.search(node.value):
            cpp = check_cpp(node.value, first_line=node.lineno)
            if any(lo <= node.lineno <= hi for lo, hi in inert_lines):
                cpp = [f for f in cpp if f.check not in EXECUTION_CHECKS]
            findings += cpp
    return tuple(sorted(set(findings), key=lambda f: (f.line, f.check, f.message)))


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (never true when the harness imports the candidate)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (
        len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def unreachable_nodes(tree: ast.Module) -> list[ast.stmt]:
    """Module-level statements ModelNew can never execute: defs nothing reachable names, ``__main__`` blocks.

    Roots are the ``ModelNew`` class and every other module-level statement (they run at import);
    a module-level def becomes reachable when a reachable node loads its name. Without a
    ``ModelNew`` class everything counts as reachable."""
    defs: dict[str, list[ast.stmt]] = {}
    roots: list[ast.stmt] = []
    inert: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(node.name, []).append(node)
            if node.name == "ModelNew":
                roots.append(node)
        elif _is_main_guard(node):
            inert.append(node)
        else:
            roots.append(node)
    if "ModelNew" not in defs:
        return []
    reached: set[int] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        if id(node) in reached:
            continue
        reached.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                todo.extend(d for d in defs.get(sub.id, ()) if id(d) not in reached)
    inert += [d for group in defs.values() for d in group if id(d) not in reached]
    return inert


def check_cpp(code: str, first_line: int = 1) -> list[Finding]:
    """Findings in embedded C/C++/CUDA source (comments ignored)."""
    from harness._cdecl import strip_comments

    text = strip_comments(code)
    findings: list[Finding] = []
    torch_source = bool(re.search(r"torch/extension\.h|ATen|\btorch::|\bat::", text))
    # A pattern (none is anchored) that matches no line does not match the whole text either: only the ones
    # that match the text are tried line by line (a rendered kernel has thousands of lines and usually none).
    forbidden = [(pattern, why) for pattern, why in _CPP_FORBIDDEN if pattern.search(text)]
    threads = _CPP_THREADS.search(text) is not None
    aten = torch_source and (_CPP_ATEN.search(text) or _CPP_METHOD.search(text)) is not None
    if not (forbidden or threads or aten):
        return findings
    for lineno, line in enumerate(text.splitlines()):
        where = first_line + lineno
        for pattern, why in forbidden:
            m = pattern.search(line)
            if m:
                findings.append(Finding("forbidden_api", where, f"C++ source uses {m.group(0).strip()!r}: {why}"))
        m = _CPP_THREADS.search(line) if threads else None
        if m:
            findings.append(
                Finding(
                    "thread_count",
                    where,
                    f"C++ source sets the thread count ({m.group(0).strip()}); the harness fixes it (OMP_NUM_THREADS)",
                )
            )
        if aten:
            m = _CPP_ATEN.search(line) or _CPP_METHOD.search(line)
            if m:
                findings.append(
                    Finding(
                        "reference_call",
                        where,
                        f"C++ source calls the ATen compute op {m.group(0).rstrip('( ')!r}: "
                        "the kernel must compute the result itself",
                    )
                )
    return findings


class _Visitor(ast.NodeVisitor):
    def __init__(self, inert: Sequence[ast.stmt] = ()) -> None:
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.functions: list[str] = []
        self.inert_nodes = {id(n) for n in inert}
        self.inert = 0  # > 0 while visiting code ModelNew never executes

    def add(self, check: str, node: ast.AST, message: str) -> None:
        if self.inert and check in EXECUTION_CHECKS:
            return
        self.findings.append(Finding(check, getattr(node, "lineno", 0), message))

    def visit(self, node: ast.AST) -> None:
        if id(node) not in self.inert_nodes:
            super().visit(node)
            return
        self.inert += 1
        try:
            super().visit(node)
        finally:
            self.inert -= 1

    # -- imports -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("forbidden_api", node, "relative import: a candidate is a single file")
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._check_module(full if module in ("torch", "torch.nn", "harness", "os", "sys") else module, node)
            self.aliases[alias.asname or alias.name] = full

    def _check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root in FORBIDDEN_MODULES:
            self.add("forbidden_api", node, f"imports {name}, which {FORBIDDEN_MODULES[root]}")
        elif root == "harness" and name not in (
            "harness",
            "harness.cpu",
            "harness.errors",
            "harness.cpu.compile_cpp",
            "harness.cpu.threads",
            "harness.errors.CompileError",
        ):
            self.add("forbidden_api", node, f"imports {name}: candidates may use harness.cpu only")
        elif name.startswith(FORBIDDEN_TORCH):
            self.add("forbidden_api", node, f"imports {name}: torch internals are off limits")
        elif name.startswith(("os.exec", "os.spawn")) or name in FORBIDDEN_ATTRS:
            self.add("forbidden_api", node, f"imports {name}, which {FORBIDDEN_ATTRS.get(name, 'starts processes')}")

    # -- scopes ------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.functions.append("<lambda>")
        self.generic_visit(node)
        self.functions.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if self.resolve(base) in ("torch.Tensor", "torch.nn.Parameter"):
                self.add(
                    "forbidden_api",
                    node,
                    f"class {node.name} subclasses {self.resolve(base)}: tensor subclasses are off limits",
                )
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
                self.add("forbidden_api", item, f"defines {item.name}: overriding torch dispatch is off limits")
        self.generic_visit(node)

    @property
    def in_compute(self) -> bool:
        return bool(self.functions) and self.functions[-1] != "__init__"

    # -- names and calls ---------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
        ):
            base, attr = self.resolve(node.args[0]), node.args[1]
            if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                return f"{base}.{attr.value}"
        return None

    def visit_Name(self, node: ast.Name) -> None:
        if (
            isinstance(node.ctx, ast.Load)
            and node.id in ("Model", "get_inputs", "get_init_inputs")
            and node.id not in self.aliases
        ):
            self.add("reference_call", node, f"uses the task's {node.id}: the candidate must not call the reference")
        if node.id in ("__builtins__",):
            self.add("forbidden_api", node, "reaches __builtins__")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self.resolve(node)
        if path:
            if path.startswith(FORBIDDEN_TORCH):
                self.add("forbidden_api", node, f"uses {path}: torch internals are off limits")
            elif path in FORBIDDEN_ATTRS or path.startswith(_SPAWN_PREFIXES):
                self.add("forbidden_api", node, f"uses {path}, which {FORBIDDEN_ATTRS.get(path, 'starts processes')}")
            elif path.startswith("harness.") and not path.startswith(("harness.cpu", "harness.errors")):
                self.add("forbidden_api", node, f"uses {path}: candidates may use harness.cpu only")
        if node.attr in (
            "__dict__",
            "__globals__",
            "__code__",
            "__closure__",
            "__subclasses__",
            "__builtins__",
            "f_back",
            "f_globals",
            "f_locals",
            "gi_frame",
            "tb_frame",
        ):
            self.add("forbidden_api", node, f"reaches {node.attr}: introspection is off limits")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.in_compute:
            self.add("reference_call", node, "uses the @ operator (torch matmul) instead of a kernel")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            if func.id in FORBIDDEN_CALLS:
                self.add("forbidden_api", node, f"calls {func.id}(), which {FORBIDDEN_CALLS[func.id]}")
            if (
                func.id in ("setattr", "delattr")
                and node.args
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
            ):
                self.add("monkey_patch", node, f"calls {func.id}() on {ast.unparse(node.args[0])}")
        path = self.resolve(func)
        if path:
            self._check_call_path(path, node)
        self.generic_visit(node)

    def _check_call_path(self, path: str, node: ast.Call) -> None:
        if path in THREAD_SETTERS:
            self.add("thread_count", node, f"calls {path}: the harness fixes the thread count")
            return
        if not path.startswith("torch.") or path.startswith(FORBIDDEN_TORCH):
            return
        if path.startswith("torch.ops."):
            self.add("reference_call", node, f"calls {path}: the kernel must compute the result itself")
            return
        if not self.in_compute:
            return
        name = path.removeprefix("torch.")
        if name in ALLOWED_TORCH or path.startswith(ALLOWED_TORCH_PREFIXES):
            return
        if (
            path.startswith("torch.nn.")
            and not path.startswith("torch.nn.functional.")
            and path.split(".")[2][:1].isupper()
        ):
            return  # constructing a module; using it in forward is caught at run time
        self.add(
            "reference_call",
            node,
            f"calls {path} in {self.functions[-1]}(): torch compute ops are not allowed outside "
            "__init__ (allocation, views and copies are)",
        )

    # -- monkey-patching ---------------------------------------------------------------------
    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t)
            return
        if isinstance(target, ast.Subscript):
            path = self.resolve(target.value)
            if path == "os.environ":
                key = ast.unparse(target.slice)
                if "THREAD" in key.upper():
                    self.add("thread_count", target, f"sets os.environ[{key}]: the harness fixes the thread count")
            return
        if isinstance(target, ast.Attribute):
            base = target.value
            if isinstance(base, ast.Name) and base.id == "self":
                return
            path = self.resolve(base)
            if path and path.split(".")[0] in self._module_roots():
                self.add(
                    "monkey_patch", target, f"assigns {ast.unparse(target)}: patching modules or classes is off limits"
                )

    def _module_roots(self) -> set[str]:
        roots = {v.split(".")[0] for v in self.aliases.values()}
        return roots | {"torch", "time", "os", "sys", "math", "harness", "numpy", "triton"}

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)
