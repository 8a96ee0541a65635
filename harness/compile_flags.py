"""The compiler flags a candidate may pass: an allow-list, checked by the parent before anything is compiled.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from harness.errors import CompileError

ESCAPE_CHECK = "compiler_escape"

# -f flags (without "-f"/"-fno-") that only change how code is optimised
F_FLAGS = frozenset(
    {
        "openmp",
        "openmp-simd",
        "unroll-loops",
        "unroll-all-loops",
        "peel-loops",
        "fast-math",
        "math-errno",
        "trapping-math",
        "finite-math-only",
        "signed-zeros",
        "associative-math",
        "reciprocal-math",
        "rounding-math",
        "signaling-nans",
        "cx-limited-range",
        "tree-vectorize",
        "tree-loop-vectorize",
        "tree-slp-vectorize",
        "strict-aliasing",
        "omit-frame-pointer",
        "inline-functions",
        "inline-small-functions",
        "prefetch-loop-arrays",
        "ipa-pta",
        "loop-interchange",
        "loop-unroll-and-jam",
        "aggressive-loop-optimizations",
        "semantic-interposition",
        "exceptions",
        "rtti",
        "pic",
        "PIC",
        "plt",
        "stack-protector",
        "builtin",
        "gcse",
        "split-loops",
        "unswitch-loops",
        "version-loops-for-strides",
        "sched-pressure",
        "schedule-insns",
        "schedule-insns2",
        "align-loops",
        "align-functions",
        "diagnostics-color",
    }
)
_F_VALUED = re.compile(
    r"-f(vect-cost-model|simd-cost-model)=(unlimited|dynamic|cheap|very-cheap)$"
    r"|-ffp-contract=(fast|on|off)$"
    r"|-fexcess-precision=(fast|standard|16)$"
    r"|-fvisibility=(hidden|default|protected|internal)$"
    r"|-fmax-errors=\d{1,4}$"
    r"|-falign-(loops|functions)=\d{1,3}$"
    r"|-fopenmp-version=\d{2}$"
    r"|-f(constexpr-loop-limit|constexpr-ops-limit|constexpr-depth|template-depth)=\d{1,20}$"
)
_ISA = re.compile(
    r"-m(no-)?("
    r"avx|avx2|avx512[a-z0-9]*|avxvnni[a-z0-9]*|avxifma|fma|fma4|f16c|sse|sse2|sse3|ssse3|sse4|sse4\.1|sse4\.2|sse4a"
    r"|bmi|bmi2|popcnt|lzcnt|aes|pclmul|vaes|vpclmulqdq|gfni|sha|movbe|adx|xsave|xsaveopt|amx-[a-z0-9]+"
    r"|prefer-avx128|vzeroupper|fp16|neon|sve|sve2|outline-atomics"
    r")$"
    r"|-mprefer-vector-width=(128|256|512|none)$"
    r"|-m(arch|tune|cpu)=[A-Za-z0-9][A-Za-z0-9._+-]{0,40}$"
)
_CXX_ALLOWED = re.compile(
    r"-O[0-3sgz]?$|-Ofast$"
    r"|-D[A-Za-z_][A-Za-z0-9_]*(=[^\s\x00]{0,200})?$|-U[A-Za-z_][A-Za-z0-9_]*$"
    r"|-std=(c|gnu)\+\+(11|14|17|20|23|1z|2a|2b)$"
    r"|-W(no-)?[a-z][a-z0-9+-]*(=[a-z0-9-]+)?$|-w$|-pedantic$|-pedantic-errors$|-Werror$"
    r"|-g[0-3]?$|-pthread$|-pipe$"
)
_LD_ALLOWED = re.compile(r"-fopenmp$|-pthread$|-l(gomp|m|pthread)$|-O[0-3]?$")
_NVCC_ALLOWED = re.compile(
    r"-O[0-3]$|-{1,2}use_fast_math$|-lineinfo$|--expt-relaxed-constexpr$|--expt-extended-lambda$"
    r"|-arch=(sm|compute)_\d{2,3}[a-z]?$|--gpu-architecture=(sm|compute)_\d{2,3}[a-z]?$"
    r"|-gencode=arch=compute_\d{2,3}[a-z]?,code=(sm|compute)_\d{2,3}[a-z]?$"
    r"|-maxrregcount=\d{1,3}$|--extra-device-vectorization$|-Xptxas=-(v|O[0-3])$|--ptxas-options=-(v|O[0-3])$"
    r"|-D[A-Za-z_][A-Za-z0-9_]*(=[^\s\x00]{0,200})?$|-U[A-Za-z_][A-Za-z0-9_]*$|-std=c\+\+(14|17|20)$"
)
# a program or a file of the candidate's choosing: never honest
_ESCAPE = re.compile(
    r"@|-wrapper$|-B|--?specs|-fplugin|-fuse-ld|-W[lap],|-X(linker|assembler|preprocessor|compiler)$"
    r"|--?sysroot|-isysroot|-include|-imacros|-iprefix|-iwithprefix|-imultilib|-no-integrated-cpp"
    r"|-ccbin$|--compiler-bindir|--linker-options|--compiler-options|-Xarchive"
)


def _problem(flag: object, allowed: re.Pattern[str], where: str) -> tuple[str, bool] | None:
    """(message, is an escape attempt) for a flag that is not allowed, else None."""
    if not isinstance(flag, str):
        return f"{where}: a flag must be a string, got {type(flag).__name__}", False
    if _ESCAPE.match(flag):
        return (
            f"{where}: the compiler flag {flag!r} is refused: it makes the compiler run or read a program or file of "
            "the candidate's choosing (an escape attempt)",
            True,
        )
    if not flag or any(c.isspace() or not c.isprintable() for c in flag):
        return f"{where}: the compiler flag {flag!r} is refused: one flag per list element, no spaces", False
    if allowed.match(flag):
        return None
    if allowed is _CXX_ALLOWED or allowed is _LD_ALLOWED:
        if allowed is _CXX_ALLOWED and (_ISA.match(flag) or _F_VALUED.match(flag)):
            return None
        name = flag[5:] if flag.startswith("-fno-") else flag[2:] if flag.startswith("-f") else None
        if name in F_FLAGS and (allowed is _CXX_ALLOWED or name == "openmp"):
            return None
    return f"{where}: the compiler flag {flag!r} is not on the harness's allow-list (see harness.compile_flags)", False


def check(flags: Iterable[object], where: str = "compile_cpp flags", kind: str = "cxx") -> None:
    """Raise ``CompileError`` naming the first flag not allowed (``cheat`` set for an escape attempt)."""
    allowed = {"cxx": _CXX_ALLOWED, "ld": _LD_ALLOWED, "nvcc": _NVCC_ALLOWED}[kind]
    for flag in flags:
        problem = _problem(flag, allowed, where)
        if problem is not None:
            message, escape = problem
            raise CompileError(message, cheat=ESCAPE_CHECK if escape else None)


# load_inline / load keyword arguments: which may be given, and how their values are checked
_SPEC_FLAGS = {"extra_cflags": "cxx", "extra_ldflags": "ld", "extra_cuda_cflags": "nvcc"}
_SPEC_PLAIN = {
    "name",
    "cpp_sources",
    "cuda_sources",
    "sources",
    "functions",
    "with_cuda",
    "is_python_module",
    "is_standalone",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "use_pch",
    "extra_include_paths",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,100}$")


def check_extension_spec(kind: str, spec: dict[str, object]) -> None:
    """Raise ``CompileError`` for a ``load_inline``/``load`` call the harness will not build."""
    for key, value in spec.items():
        if key in _SPEC_FLAGS:
            if value is None:
                continue
            if not isinstance(value, list):
                raise CompileError(f"torch.utils.cpp_extension.{kind}: {key} must be a list of strings")
            check(value, f"torch.utils.cpp_extension.{kind} {key}", _SPEC_FLAGS[key])
        elif key not in _SPEC_PLAIN:
            raise CompileError(f"torch.utils.cpp_extension.{kind}: the argument {key}= is not allowed here")
    if not isinstance(spec.get("name"), str) or not _NAME.match(str(spec.get("name"))):
        raise CompileError(f"torch.utils.cpp_extension.{kind}: name must be an identifier, got {spec.get('name')!r}")
    if spec.get("extra_include_paths"):
        raise CompileError(
            f"torch.utils.cpp_extension.{kind}: extra_include_paths is refused (as -I is): put the code in the source"
        )
