"""The compiler-flag allow-list (issue 33, item 1): what an honest kernel needs passes, everything else is refused
with the flag named, and flags that run or load a program of the candidate's choosing are escape attempts."""

from __future__ import annotations

import pytest

from harness import compile_flags
from harness.errors import CompileError

HONEST = [
    "-O0",
    "-O2",
    "-O3",
    "-Ofast",
    "-march=native",
    "-mtune=native",
    "-mtune=znver3",
    "-mavx2",
    "-mfma",
    "-mavx512f",
    "-mno-avx512f",
    "-mprefer-vector-width=512",
    "-fopenmp",
    "-funroll-loops",
    "-ffast-math",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fvect-cost-model=unlimited",
    "-ffp-contract=fast",
    "-DBLOCK=64",
    "-DUSE_AVX",
    "-UNDEBUG",
    "-std=c++17",
    "-std=c++20",
    "-Wall",
    "-Wno-unused-variable",
    "-Werror=return-type",
    "-w",
    "-g",
    "-pthread",
]
ESCAPES = [
    "-wrapper",
    "-B/tmp/evil",
    "-B",
    "-specs=/tmp/evil.specs",
    "--specs=/tmp/evil.specs",
    "-fplugin=/tmp/evil.so",
    "-fplugin-arg-evil-x=1",
    "@/tmp/flags.txt",
    "-fuse-ld=/tmp/ld",
    "-Wl,--wrap=malloc",
    "-Wa,-o,/tmp/x",
    "-Wp,-imacros,/etc/passwd",
    "-Xlinker",
    "-Xassembler",
    "--sysroot=/tmp",
    "-include",
    "-imacros",
    "-no-integrated-cpp",
]
REFUSED = [
    "-I/tmp",
    "-I",
    "-o",
    "/tmp/out.so",
    "-x",
    "-lfoo",
    "-L/tmp",
    "-c",
    "-E",
    "-save-temps",
    "-fdump-tree-all",
    "-isystem",
    "-DX\nY",
    "-O3 -mavx2",
    "--param",
    "-fdiagnostics-plain-output",
]


@pytest.mark.parametrize("flag", HONEST)
def test_flags_an_honest_kernel_uses_pass(flag):
    compile_flags.check([flag])


@pytest.mark.parametrize("flag", ESCAPES)
def test_flags_that_run_or_load_a_program_are_escape_attempts(flag):
    with pytest.raises(CompileError) as exc:
        compile_flags.check(["-O3", flag])
    assert exc.value.cheat == "compiler_escape"
    assert repr(flag) in str(exc.value)


@pytest.mark.parametrize("flag", REFUSED)
def test_every_other_flag_is_a_compile_error_naming_it(flag):
    with pytest.raises(CompileError) as exc:
        compile_flags.check([flag])
    assert exc.value.cheat is None
    assert repr(flag) in str(exc.value)


def test_link_flags_allow_openmp_and_system_libraries_only():
    compile_flags.check(["-fopenmp", "-lgomp", "-lm", "-pthread"], kind="ld")
    for flag in ("-lcrypto", "-L/tmp", "-ffast-math", "-shared"):
        with pytest.raises(CompileError, match="allow-list"):
            compile_flags.check([flag], kind="ld")
    with pytest.raises(CompileError) as exc:
        compile_flags.check(["-Wl,-rpath,/tmp"], kind="ld")
    assert exc.value.cheat == "compiler_escape"


def test_nvcc_flags_refuse_a_host_compiler_of_the_candidates_choosing():
    compile_flags.check(["-O3", "--use_fast_math", "-arch=sm_90", "--expt-relaxed-constexpr"], kind="nvcc")
    for flag in ("-ccbin", "-Xcompiler", "--compiler-bindir=/tmp"):
        with pytest.raises(CompileError) as exc:
            compile_flags.check([flag], kind="nvcc")
        assert exc.value.cheat == "compiler_escape"


def test_a_load_inline_call_is_checked_argument_by_argument():
    ok = {
        "name": "relu_ext",
        "cpp_sources": ["..."],
        "functions": ["relu"],
        "extra_cflags": ["-O3", "-fopenmp"],
        "extra_ldflags": ["-lgomp"],
        "verbose": None,
    }
    ok.pop("verbose")
    compile_flags.check_extension_spec("load_inline", ok)
    with pytest.raises(CompileError) as exc:
        compile_flags.check_extension_spec("load_inline", {**ok, "extra_cflags": ["-fplugin=/tmp/p.so"]})
    assert exc.value.cheat == "compiler_escape"
    with pytest.raises(CompileError, match="extra_include_paths"):
        compile_flags.check_extension_spec("load_inline", {**ok, "extra_include_paths": ["/tmp"]})
    with pytest.raises(CompileError, match="name must be an identifier"):
        compile_flags.check_extension_spec("load_inline", {**ok, "name": "../../escape"})
    with pytest.raises(CompileError, match="build_directory"):
        compile_flags.check_extension_spec("load_inline", {**ok, "build_directory": "/tmp"})
    with pytest.raises(CompileError, match="must be a list"):
        compile_flags.check_extension_spec("load_inline", {**ok, "extra_cflags": "-O3"})
