"""The fused dispatch-and-count kernel (paper Section 4.4): torch reference implementation.

For every routed (token, slot) pair with logical expert ``e = topk_ids[t, k]`` and uniform
``u[t*K + k]``, pick a replica column of ``e`` by inverse-CDF sampling of the row
``prob[e]`` -- renormalised at use; a row with no positive mass on a real replica falls back
to uniform over the replicas that hold the expert -- write its physical id and increment
``counts[e]``.  Rows at or beyond ``num_token_non_padded`` (CUDA-graph padding) are neither
routed by the table nor counted: their degenerate routing would otherwise fabricate a
phantom hot expert (Section 5.9).  They get the expert's first replica, a valid physical id
any downstream kernel can index.  Negative logical ids (already-masked slots) stay -1.
Padding that is not a suffix -- the DP-gathered MoE input under attention DP with
``--moe-a2a-backend none``, one padded slot per DP rank -- is given as a per-row mask
``row_valid`` (see :class:`tempo.serving.runtime.DpPadding`); a row is real when it is below
``num_token_non_padded`` and its ``row_valid`` entry is true.

The Triton kernel in :mod:`.triton_kernels` implements the same contract on GPU; this one runs
anywhere torch does and is the oracle the tests compare it against.
"""
from __future__ import annotations

# Weyl increments in 32-bit fixed point (all odd): the golden ratio (pair index), the plastic
# number (layer), sqrt(2) - 1 (forward step), sqrt(3) - 1 (rank, hashed draws only)
_A = 2654435769
_B = 3242174889
_C = 1779033703
_D = 3144134277
_TWO32 = 4294967296


def pair_uniforms(n: int, layer: int, step, rank: int = 0, hashed: bool = False, device="cpu"):
    """The kernel's uniforms in torch (the same integer arithmetic, bit for bit): float32
    ``[n]`` in ``[0, 1)`` on multiples of 2^-24.

    Without ``hashed`` (rank-invariant dispatch): a Weyl sequence in the pair index, shifted by
    the layer and the forward ``step``, so every rank draws the same values, a batch's values
    are evenly spread, and one pair's value over the steps is evenly spread too (a one-token
    batch realises the table).  With ``hashed`` (ranks route their own tokens): the same sum
    with the ``rank`` mixed in, through an integer hash.  ``step``: int or one-element tensor."""
    import torch

    M = _TWO32
    s = int(step.reshape(-1)[0]) if torch.is_tensor(step) else int(step)
    i = torch.arange(int(n), dtype=torch.int64, device=device)
    h = (i % M) * _A % M + (int(layer) % M) * _B % M + (s % M) * _C % M
    if hashed:
        h = h + (int(rank) % M) * _D % M
        h = h % M
        h = h ^ (h >> 16)
        h = h * 2146121005 % M
        h = h ^ (h >> 15)
        h = h * 1540483477 % M
        h = h ^ (h >> 16)
    h = h % M
    return (h >> 8).to(torch.float32) * 2.0 ** -24


def dispatch_and_count_reference(topk_ids, prob, phys_map, counts, u, num_token_non_padded=None, row_valid=None,
                                 invalid=None):
    """Route logical expert ids to physical replicas by the table and count them.

    Parameters
    ----------
    topk_ids : int[T, K] torch tensor, logical ids (negative: masked slot).
    prob : float[E, R], one layer's replica weights (need not be normalised).
    phys_map : int[E, R], physical id of each replica column, -1 padding.
    counts : int64[E] (or int32[E]), cumulative counter, updated in place for non-padding rows.
    u : float[T*K], one uniform in [0, 1) per routed pair (1.0 takes the last positive column).
    num_token_non_padded : int or 0-d tensor, optional; rows ``t >=`` it are padding.
    row_valid : bool[T] torch tensor, optional; rows with a false entry are padding.
    invalid : int[1] torch tensor, optional, as the Triton kernel's: with it a bad pair does not
        raise but is counted (an id ``>= E`` is routed to ``-1``; a uniform is clamped, NaN as 1).

    Returns int[T, K] physical ids, the dtype of ``topk_ids``.  Raises ValueError, without
    ``invalid``, for an id ``>= E`` or a uniform below 0, above 1 or NaN.
    """
    import torch

    for name, x in (("topk_ids", topk_ids), ("prob", prob), ("phys_map", phys_map), ("counts", counts), ("u", u)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(x).__name__}")
    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids must be [T, K], got shape {tuple(topk_ids.shape)}")
    if topk_ids.is_floating_point() or topk_ids.is_complex() or topk_ids.dtype == torch.bool:
        raise TypeError(f"topk_ids must be an integer tensor, got {topk_ids.dtype}")
    if phys_map.dim() != 2:
        raise ValueError(f"phys_map must be [E, R], got shape {tuple(phys_map.shape)}")
    T, K = topk_ids.shape
    E, R = phys_map.shape
    if E == 0 or R == 0:
        raise ValueError(f"the table is empty: phys_map has shape (E, R) = {(E, R)}; E and R must be >= 1")
    if prob.shape != phys_map.shape:
        raise ValueError(f"prob {tuple(prob.shape)} and phys_map {tuple(phys_map.shape)} differ in shape")
    if counts.shape != (E,):
        raise ValueError(f"counts must be [E] = [{E}], got {tuple(counts.shape)}")
    if u.numel() != T * K:
        raise ValueError(f"u must hold T*K = {T * K} uniforms, got {u.numel()}")
    if invalid is not None and (not isinstance(invalid, torch.Tensor) or invalid.numel() != 1
                                or invalid.is_floating_point()):
        raise ValueError("invalid must be a one-element integer counter tensor")
    bad_u = ~((u >= 0) & (u <= 1))  # NaN fails both comparisons
    if invalid is None:
        if u.numel() and bool(bad_u.any()):
            raise ValueError("u must hold uniforms in [0, 1]; got values outside it or NaN")
        if topk_ids.numel() and int(topk_ids.max()) >= E:
            raise ValueError(f"topk_ids has logical ids >= E = {E} (largest {int(topk_ids.max())}); "
                             f"only negative ids mark masked slots")
    if row_valid is not None and (not isinstance(row_valid, torch.Tensor) or tuple(row_valid.shape) != (T,)):
        raise ValueError(f"row_valid must be a [T] = [{T}] tensor, got "
                         f"{tuple(row_valid.shape) if isinstance(row_valid, torch.Tensor) else type(row_valid).__name__}")
    ids = topk_ids.reshape(-1).long()
    n_valid = T if num_token_non_padded is None else int(num_token_non_padded)
    real = (torch.arange(T * K, device=ids.device) // K) < n_valid
    if row_valid is not None:
        real = real & row_valid.to(torch.bool).reshape(T, 1).expand(T, K).reshape(-1)
    routed = (ids >= 0) & (ids < E)
    if invalid is not None:
        bad = real & ((ids >= E) | bad_u.reshape(-1))
        invalid += bad.sum().to(invalid.dtype)
        u = torch.nan_to_num(u.reshape(-1).clamp(0, 1), nan=1.0)
    e = ids.clamp(0, E - 1)
    ph = phys_map[e].long()                                # [T*K, R]
    valid = ph >= 0
    p = prob[e].to(torch.float32)
    p = torch.where(valid & torch.isfinite(p) & (p > 0), p, torch.zeros_like(p))
    s = p.sum(-1, keepdim=True)
    p = torch.where(s > 0, p, valid.to(p.dtype))            # torn / idle row -> uniform over holders
    cdf = torch.cumsum(p, -1)
    x = u.reshape(-1, 1).to(cdf.dtype) * cdf[:, -1:]
    col = (cdf <= x).sum(-1)                                # first column whose cdf exceeds u * total
    last_pos = (R - 1) - torch.argmax(torch.flip((p > 0).to(torch.int8), [-1]), -1)
    col = torch.minimum(col, last_pos)                      # guards u * total rounding onto the total
    chosen = torch.gather(ph, 1, col[:, None])[:, 0]
    first = ph[:, 0]
    out = torch.where(real, chosen, first)
    out = torch.where(routed, out, torch.full_like(out, -1))
    hit = real & routed
    counts.index_add_(0, e[hit], torch.ones(int(hit.sum()), dtype=counts.dtype, device=counts.device))
    return out.reshape(T, K).to(topk_ids.dtype)
