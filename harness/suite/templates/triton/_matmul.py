"""The Triton matmul kernel the matmul and gemm_epilogue templates render: C[b] = epilogue(A[b] @ B[b]).

More on it: docs/templates.md, "Template notes", templates/triton/_matmul.
"""

from __future__ import annotations

TILES = {
    "name": "tiles",
    "values": ["64x64x32", "128x128x32", "128x64x64", "32x32x32"],
    "default": "64x64x32",
    "layer": "tiling",
    "doc": "BLOCK_MxBLOCK_NxBLOCK_K: the C tile a program computes and the K step",
}
GROUP_M = {
    "name": "GROUP_M",
    "values": [8, 1],
    "default": 8,
    "layer": "scheduling",
    "doc": "tile rows per group of consecutive programs (1: row-major order; 8: programs share B in L2)",
}

KERNEL = '''
@triton.jit
def _matmul(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn, scale,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
            EPILOGUE: tl.constexpr, ACC: tl.constexpr, WIDEN: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % rows
    pid_n = (pid % (GROUP_M * tiles_n)) // rows
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + batch * s_ab + rm.to(tl.int64)[:, None] * s_am + rk[None, :] * s_ak
    b = b_ptr + batch * s_bb + rk[:, None] * s_bk + rn.to(tl.int64)[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), ACC)
    for k0 in range(0, K, BLOCK_K):
        ka = tl.load(a, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        kb = tl.load(b, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        if WIDEN:
            ka = ka.to(ACC)
            kb = kb.to(ACC)
        acc += tl.dot(ka, kb, input_precision="ieee", out_dtype=ACC)
        a += BLOCK_K * s_ak
        b += BLOCK_K * s_bk
    if EPILOGUE >= 1:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(ACC)[None, :]
    if EPILOGUE == 2:
        acc = tl.maximum(acc, 0.0)
    if EPILOGUE == 3:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476)) * scale
    c = c_ptr + batch * s_cb + rm.to(tl.int64)[:, None] * s_cm + rn.to(tl.int64)[None, :] * s_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _launch(a, b, bias, c, batch, M, N, K, sa, sb, sc, epilogue, scale=1.0):
    """sa, sb, sc: (batch, row, column) strides of A (M x K), B (K x N) and C (M x N), in elements."""
    bm, bn, bk = _TILES
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), batch)
    _matmul[grid](
        a, b, bias if bias is not None else c, c, M, N, K, *sa, *sb, *sc, float(scale),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=_GROUP_M, EPILOGUE=epilogue,
        ACC=_compute_dtype(a.dtype), WIDEN=a.dtype == torch.bfloat16 and a.device.type != "cuda",
        num_warps=_NUM_WARPS, num_stages=_NUM_STAGES,
    )
'''


def settings_code(settings: dict) -> str:
    bm, bn, bk = (int(x) for x in settings["tiles"].split("x"))
    return (
        f"_TILES = ({bm}, {bn}, {bk})  # tiles={settings['tiles']}\n_GROUP_M = {settings['GROUP_M']}\n"
        f"_NUM_WARPS = {settings['num_warps']}\n_NUM_STAGES = {settings['num_stages']}\n"
    )
