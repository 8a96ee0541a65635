"""Assemble a candidate file: docstring, imports, the C++ source, the kernel table and ModelNew."""

from __future__ import annotations

from harness.suite.cpp_kit.prelude import FLAGS


def settings_line(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def entry_macro(name: str, params: str, body: str) -> str:
    """An entry-point macro instantiated for float32, float64 and bfloat16.

    ``params`` uses ``PT`` for the pointer element type of the entry point
    (``uint16_t`` for bfloat16) and the body uses ``T`` (``bf16``) after casting
    with ``cptr<T>(x)`` (const pointers) or ``wptr<T>(x)`` (writable pointers).
    """
    lines = [f"#define ENTRY_{name.upper()}(SUFFIX, T, PT)", f'extern "C" void {name}_##SUFFIX({params}) {{']
    lines += ["    " + line for line in body.strip("\n").splitlines()]
    lines.append("}")
    macro = " \\\n".join(lines)
    return (
        f"{macro}\n"
        f"ENTRY_{name.upper()}(f32, float, float)\n"
        f"ENTRY_{name.upper()}(f64, double, double)\n"
        f"ENTRY_{name.upper()}(bf16, bf16, uint16_t)\n"
    )


CASTS = r"""
template <class T, class P> static inline const T* cptr(const P* p) { return reinterpret_cast<const T*>(p); }
template <class T, class P> static inline T* wptr(P* p) { return reinterpret_cast<T*>(p); }
"""


def kernel_table(name: str) -> str:
    return (
        f"_KERNELS = {{torch.float32: _lib.{name}_f32, torch.float64: _lib.{name}_f64, "
        f"torch.bfloat16: _lib.{name}_bf16}}\n"
    )


def module(doc: str, cpp: str, body: str, *, extra_imports: str = "", vector_width: int | None = None) -> str:
    """The candidate file text; ``vector_width`` adds ``-mprefer-vector-width`` on x86-64 CPUs."""
    flags = f"{FLAGS!r}"
    if vector_width is not None:
        extra_imports = "import platform\n" + extra_imports
        flags += f' + (["-mprefer-vector-width={vector_width}"] if platform.machine() in ("x86_64", "AMD64") else [])'
    imports = extra_imports + ("\n" if extra_imports else "")
    return (
        f'"""{doc.strip()}\n"""\n\n'
        f"{imports}import torch\nimport torch.nn as nn\n\nfrom harness.cpu import compile_cpp\n\n"
        f'_SOURCE = r"""{cpp}"""\n\n'
        f"_lib = compile_cpp(_SOURCE, flags={flags})\n"
        f"{body.strip()}\n"
    )
