"""A packed, cache-blocked, register-blocked GEMM in C++ (the BLIS design), shared by the templates.

The knobs and their ``#define`` lines are here; the C++ itself is ``gemm.cpp`` beside this module (package
data). More on it: docs/templates.md, "Template notes", cpp_kit/gemm.
"""

from __future__ import annotations

from importlib.resources import files

SUMMARY = (
    "C = A @ B by a packed, cache-blocked GEMM with a register-blocked micro-kernel (the knobs are the\n"
    "#defines at the top of _SOURCE); shapes with one output row or column use matrix-vector kernels.\n"
    "bfloat16 is computed in float32 and rounded once, to nearest even."
)
TILES_DOC = (
    "cache blocking MCxKCxNC: rows of A per L2 block, depth of the K block, columns of B per "
    "packed block (rounded to the micro-kernel); 'auto' derives them from the measured L1/L2/L3 sizes"
)
MICRO_DOC = (
    "register blocking of the micro-kernel: MR rows x NV SIMD vectors of C held in registers; 'auto' sizes it "
    "to the ISA (14x2 AVX-512, 6x2 AVX2, 4x2 portable); 6x2 and 4x3 fit AVX2's 16 registers, 8x3 and 14x2 "
    "need AVX-512's 32"
)
MICRO_VALUES = ["auto", "4x1", "6x2", "4x3", "8x3", "14x2"]
TILES_VALUES = ["auto", "32x128x256", "96x256x1024", "192x384x3072"]
PARALLEL_DOC = (
    "OpenMP work split: 'm' = batch x row blocks (each thread sweeps all columns), 'mn' = batch x "
    "row blocks x column blocks, 'mnk' = like 'mn' and splits K across threads when there are "
    "fewer blocks than threads, 'grid' = each thread owns a balanced range of rows x columns and "
    "packs each block of B once for all its rows (no barriers)"
)
PARALLEL_CODES = {"m": 0, "mn": 1, "mnk": 2, "grid": 3}
# Cache sizes assumed when the machine does not report one (bytes).
FALLBACK_CACHES = {"l1d": 32 << 10, "l2": 512 << 10, "l3": 8 << 20}


def knob(name: str, isa_doc: str = "") -> dict:
    """The declaration of one of the GEMM knobs every GEMM-based template shares (micro_kernel, isa, tiles,
    parallel); ``isa_doc`` is the prelude's ISA_DOC (passed in: the prelude imports nothing from here).
    The defaults are the choices derived from the hardware (micro-kernel sized to the ISA, cache blocks from
    the measured caches, the widest instructions the CPU has) and the barrier-free 'grid' split (measured
    1.3-1.8x faster than 'm'/'mn' on square float32 matmuls on 2 cores: benchmarks/gemm_core.py)."""
    knobs = {
        "micro_kernel": {
            "name": "micro_kernel",
            "values": MICRO_VALUES,
            "default": "auto",
            "layer": "instruction",
            "doc": MICRO_DOC,
        },
        "isa": {
            "name": "isa",
            "values": ["omp_simd", "avx2", "avx512"],
            "default": "avx512",
            "layer": "vectorization",
            "doc": isa_doc,
        },
        "tiles": {
            "name": "tiles",
            "values": TILES_VALUES,
            "default": "auto",
            "layer": "tiling",
            "doc": TILES_DOC,
        },
        "parallel": {
            "name": "parallel",
            "values": ["grid", "m", "mn", "mnk"],
            "default": "grid",
            "layer": "parallelization",
            "doc": PARALLEL_DOC,
        },
    }
    return dict(knobs[name])


def cache_defines(caches: dict[str, int] | None = None) -> str:
    """``KOPE_L1D``/``KOPE_L2``/``KOPE_L3`` from ``caches`` (default: this machine's, ``harness.hardware``)."""
    if caches is None:
        from harness.hardware import cache_sizes

        caches = cache_sizes()
    sizes = {k: int(caches.get(k) or v) for k, v in FALLBACK_CACHES.items()}
    return "".join(f"#define KOPE_{k.upper()} {v}  // bytes, measured\n" for k, v in sizes.items())


def defines(micro_kernel: str, tiles: str, pack_a: bool, parallel: str, caches: dict[str, int] | None = None) -> str:
    """The ``#define`` lines for one knob setting (micro_kernel "6x2" or "auto", tiles "96x256x1024" or "auto")."""
    mr, nv = (0, 0) if micro_kernel == "auto" else (int(x) for x in micro_kernel.split("x"))
    if tiles == "auto":
        blocks = "#define KOPE_TILES_AUTO 1  // tiles=auto: MC, KC, NC from the cache sizes below\n"
        blocks += cache_defines(caches) + "#define KOPE_MC 0\n#define KOPE_KC 0\n#define KOPE_NC 0\n"
    else:
        mc, kc, nc = (int(x) for x in tiles.split("x"))
        blocks = f"#define KOPE_TILES_AUTO 0\n#define KOPE_MC {mc}  // tiles={tiles}\n#define KOPE_KC {kc}\n#define KOPE_NC {nc}\n"
    return (
        f"#define KOPE_MR {mr}  // micro_kernel={micro_kernel}\n#define KOPE_NV {nv}\n"
        + blocks
        + f"#define KOPE_PACK_A {int(bool(pack_a))}  // pack_a={pack_a}\n"
        f"#define KOPE_PARALLEL {PARALLEL_CODES[parallel]}  // parallel={parallel}\n"
    )


GEMM = "\n" + files("harness.suite.cpp_kit").joinpath("gemm.cpp").read_text(encoding="utf-8")
