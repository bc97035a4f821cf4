"""The activation between the two grouped GEMMs of a DeepGEMM expert region, over real rows only.

SGLang 0.5.23's masked DeepGEMM runner (``layers/moe/moe_runner/deep_gemm.py``,
``_run_masked_gemm``) runs, per decode step and rank: the gate/up fp8 masked grouped GEMM into
``[G, cap, 2f]`` bf16; a masked SiLU-and-mul fused with the per-token 1x128 fp8 quantisation of
its output (``_varlen_deep_gemm_silu_mul_quant(gateup_output, masked_m, group_size=128)``),
which touches only the first ``masked_m[g]`` rows of each group; the down fp8 masked grouped
GEMM.  On SM90 the activation scales then go to DeepGEMM's MN-major TMA-aligned layout
(``get_mn_major_tma_aligned_tensor``).  :func:`silu_mul_quant` is that step in one Triton
kernel that writes the scales straight into the MN-major layout the down GEMM reads (so the
transpose is not a separate kernel here); the grid covers the whole capacity, as in SGLang, and
programs past a group's ``masked_m`` return at once, so the work is proportional to the real
rows and the launch is safe inside a captured CUDA graph (``masked_m`` is read on the device).

:func:`silu_mul_quant_reference` is the same contract in torch, the oracle of the tests (and
the path of a DeepGEMM stand-in on CPU).  The fp8 rounding is the hardware's on a GPU; the
Triton CPU interpreter's fp8 conversion is not exact (values just below a power of two can
round down a whole binade), so the CPU tests check the kernel's scales and its pre-rounding
values through a float32 output, and the fp8 path on a GPU is checked by gpu-check's numerics.
"""
from __future__ import annotations

FP8_MAX = 448.0
GROUP = 128


def _check(h, q, s, masked_m):
    if h.dim() != 3 or h.shape[-1] % (2 * GROUP):
        raise ValueError(f"h must be [G, cap, 2f] with f a multiple of {GROUP}, got shape {tuple(h.shape)}")
    G, cap, f2 = h.shape
    f = f2 // 2
    if tuple(q.shape) != (G, cap, f):
        raise ValueError(f"q must be [G, cap, f] = {(G, cap, f)}, got {tuple(q.shape)}")
    if tuple(s.shape) != (G, cap, f // GROUP):
        raise ValueError(f"s must be [G, cap, f/128] = {(G, cap, f // GROUP)}, got {tuple(s.shape)}")
    if tuple(masked_m.shape) != (G,):
        raise ValueError(f"masked_m must be [G] = [{G}], got {tuple(masked_m.shape)}")
    return G, cap, f


def silu_mul_quant_reference(h, q, s, masked_m) -> None:
    """For each group ``g`` and real row ``m < masked_m[g]``: ``a = silu(h[g, m, :f]) * h[g, m, f:]``
    in float32, scale ``s[g, m, j] = max(|a| over the j-th 128 columns, 1e-4) / 448``, ``q[g, m] =
    a / s`` cast to ``q``'s dtype.  Rows past ``masked_m[g]`` are left untouched.  (torch, any
    device; reads ``masked_m`` on the host.)"""
    import torch

    G, cap, f = _check(h, q, s, masked_m)
    for g, m in enumerate(masked_m.tolist()):
        m = min(int(m), cap)
        if m <= 0:
            continue
        x = h[g, :m].float()
        a = torch.nn.functional.silu(x[:, :f]) * x[:, f:]
        v = a.view(m, f // GROUP, GROUP)
        sc = v.abs().amax(-1).clamp(min=1e-4) / FP8_MAX
        q[g, :m] = (v / sc[..., None]).view(m, f).to(q.dtype)
        s[g, :m] = sc


_KERNEL = None


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def _silu_mul_quant_kernel(h_ptr, q_ptr, s_ptr, mm_ptr, cap, f,
                                   sh_g, sh_m, sq_g, sq_m, ss_g, ss_m, ss_k,
                                   BLOCK_M: tl.constexpr, GROUP_K: tl.constexpr):
            g = tl.program_id(0)
            mb = tl.program_id(1)
            kb = tl.program_id(2)
            m_real = tl.load(mm_ptr + g).to(tl.int32)
            row0 = mb * BLOCK_M
            if row0 < m_real:
                rows = row0 + tl.arange(0, BLOCK_M)
                cols = kb * GROUP_K + tl.arange(0, GROUP_K)
                live = (rows < m_real) & (rows < cap)
                base = h_ptr + g.to(tl.int64) * sh_g + rows[:, None].to(tl.int64) * sh_m
                gate = tl.load(base + cols[None, :], mask=live[:, None], other=0.0).to(tl.float32)
                up = tl.load(base + f + cols[None, :], mask=live[:, None], other=0.0).to(tl.float32)
                a = gate / (1.0 + tl.exp(-gate)) * up
                amax = tl.maximum(tl.max(tl.abs(a), axis=1), 1e-4)
                scale = amax / 448.0
                val = a / scale[:, None]
                qp = q_ptr + g.to(tl.int64) * sq_g + rows[:, None].to(tl.int64) * sq_m + cols[None, :]
                tl.store(qp, val.to(q_ptr.dtype.element_ty), mask=live[:, None])
                sp = s_ptr + g.to(tl.int64) * ss_g + rows.to(tl.int64) * ss_m + kb * ss_k
                tl.store(sp, scale, mask=live)

        _KERNEL = _silu_mul_quant_kernel
    return _KERNEL


def silu_mul_quant(h, q, s, masked_m, block_m: int = 64) -> None:
    """:func:`silu_mul_quant_reference` as one Triton launch (see the module docstring): ``h``
    ``[G, cap, 2f]`` (bf16 or float32, last dimension contiguous), ``q`` ``[G, cap, f]`` (fp8, or
    float32 to read the values before rounding), ``s`` ``[G, cap, f/128]`` float32 in any strided
    layout (DeepGEMM's MN-major TMA-aligned one included), ``masked_m`` int32 ``[G]`` on the device.
    No host synchronisation: safe to capture in a CUDA graph."""
    G, cap, f = _check(h, q, s, masked_m)
    if h.stride(-1) != 1 or q.stride(-1) != 1:
        raise ValueError("h and q need a contiguous last dimension")
    grid = (G, -(-cap // block_m), f // GROUP)
    _kernel()[grid](h, q, s, masked_m, cap, f, h.stride(0), h.stride(1), q.stride(0), q.stride(1),
                    s.stride(0), s.stride(1), s.stride(2), BLOCK_M=block_m, GROUP_K=GROUP)
