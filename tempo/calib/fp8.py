"""fp8 layouts DeepGEMM's masked grouped GEMM expects (NOTES-sglang, "DeepGEMM"), in plain
torch so they run (and are tested) on CPU:

* activations: per-token 1x128 scales -- ``x [m, k]`` -> fp8 ``[m, k]`` and float32
  ``[m, ceil(k/128)]``, each 128-wide group of a row scaled by its own absmax / 448;
* weights: 128x128 block scales -- ``w [n, k]`` -> fp8 ``[n, k]`` and float32
  ``[ceil(n/128), ceil(k/128)]``.

448 is the largest finite value of float8_e4m3fn.  These mirror
``deep_gemm.utils.per_token_cast_to_fp8`` / ``per_block_cast_to_fp8`` (SM90 float32 scales;
SM100 wants UE8M0-packed scales, which DeepGEMM converts itself)."""
from __future__ import annotations

FP8_MAX = 448.0
BLOCK = 128


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def per_token_cast_to_fp8(x):
    """x [m, k] -> (fp8 [m, k], float32 scales [m, ceil(k/128)])."""
    import torch

    if x.dim() != 2:
        raise ValueError(f"x must be [m, k], got shape {tuple(x.shape)}")
    m, k = x.shape
    kp = _ceil(k, BLOCK) * BLOCK
    xp = torch.zeros((m, kp), dtype=torch.float32, device=x.device)
    xp[:, :k] = x.float()
    v = xp.view(m, kp // BLOCK, BLOCK)
    amax = v.abs().amax(dim=2).clamp(min=1e-4)
    scale = amax / FP8_MAX
    q = (v / scale[:, :, None]).to(torch.float8_e4m3fn).view(m, kp)[:, :k].contiguous()
    return q, scale


def per_block_cast_to_fp8(w):
    """w [n, k] -> (fp8 [n, k], float32 scales [ceil(n/128), ceil(k/128)])."""
    import torch

    if w.dim() != 2:
        raise ValueError(f"w must be [n, k], got shape {tuple(w.shape)}")
    n, k = w.shape
    np_, kp = _ceil(n, BLOCK) * BLOCK, _ceil(k, BLOCK) * BLOCK
    wp = torch.zeros((np_, kp), dtype=torch.float32, device=w.device)
    wp[:n, :k] = w.float()
    v = wp.view(np_ // BLOCK, BLOCK, kp // BLOCK, BLOCK)
    amax = v.abs().amax(dim=(1, 3)).clamp(min=1e-4)
    scale = amax / FP8_MAX
    q = (v / scale[:, None, :, None]).to(torch.float8_e4m3fn).view(np_, kp)[:n, :k].contiguous()
    return q, scale


def dequant_per_token(q, scale):
    """Inverse of :func:`per_token_cast_to_fp8` (float32)."""
    m, k = q.shape
    s = scale.repeat_interleave(BLOCK, dim=1)[:, :k]
    return q.float() * s


def dequant_per_block(q, scale):
    """Inverse of :func:`per_block_cast_to_fp8` (float32)."""
    n, k = q.shape
    s = scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    return q.float() * s


def grouped_masked_inputs(G: int, max_m: int, n_out: int, k: int, device="cpu", seed: int = 0):
    """Random inputs in the masked grouped layout: ``a = (fp8 [G, max_m, k], f32 [G, max_m,
    ceil(k/128)])`` and ``b = (fp8 [G, n_out, k], f32 [G, ceil(n_out/128), ceil(k/128)])``."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    aq, as_, bq, bs = [], [], [], []
    for _ in range(G):
        x = torch.randn(max_m, k, generator=g)
        w = torch.randn(n_out, k, generator=g) / k ** 0.5
        q, s = per_token_cast_to_fp8(x)
        aq.append(q)
        as_.append(s)
        q, s = per_block_cast_to_fp8(w)
        bq.append(q)
        bs.append(s)
    to = (lambda t: torch.stack(t).to(device))
    return (to(aq), to(as_)), (to(bq), to(bs))
