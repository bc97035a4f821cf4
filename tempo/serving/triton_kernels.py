"""The fused dispatch-and-count kernel in Triton (paper Section 4.4): same contract as
:func:`tempo.serving.kernels.dispatch_and_count_reference`, one launch, no host sync, safe
inside a captured CUDA graph (``num_token_non_padded`` may be a device tensor, ``row_valid``
is one).

Each program handles ``BLOCK`` routed pairs.  It loads each pair's probability row and replica
row once, as one ``[BLOCK, RP]`` tile (``RP``: ``R`` rounded up to a power of two), so a table
published while the kernel runs cannot hand the two passes different rows (review N8); a first
pass over the ``R`` columns of the tile sums the row's valid mass (and counts the holders, for
the uniform fallback), a second pass walks the cumulative mass to the first column exceeding
``u * total``, in the same column order and float32 arithmetic as the torch reference; the
physical id is stored and the logical expert's cumulative counter is incremented atomically.

Inputs the torch reference rejects with an error (a logical id ``>= E``, a uniform outside
``[0, 1]`` or NaN) cannot raise inside a kernel that runs in a captured graph with no host
synchronisation.  Here such a pair is routed as the reference routes a masked slot (``-1``, not
counted) when its id is out of range, and every such pair of a real (non-padding) row is
counted in the optional ``invalid`` counter, which the host reads when it already synchronises
(the refresher's snapshot) and reports.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _dispatch_count_kernel(ids_ptr, prob_ptr, phys_ptr, counts_ptr, u_ptr, out_ptr, nvalid_ptr, invalid_ptr,
                           rowmask_ptr, n_pairs, K, E, n_valid_scalar,
                           NVALID_FROM_PTR: tl.constexpr, COUNT_INVALID: tl.constexpr, ROW_MASK: tl.constexpr,
                           R: tl.constexpr, RP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    inb = offs < n_pairs
    e = tl.load(ids_ptr + offs, mask=inb, other=-1).to(tl.int64)
    routed = inb & (e >= 0) & (e < E)
    ec = tl.where(routed, e, 0)
    if NVALID_FROM_PTR:
        nv = tl.load(nvalid_ptr).to(tl.int64)
    else:
        nv = n_valid_scalar
    real = inb & ((offs // K) < nv)
    if ROW_MASK:
        real = real & (tl.load(rowmask_ptr + offs // K, mask=inb, other=0) != 0)
    u = tl.load(u_ptr + offs, mask=inb, other=0.0).to(tl.float32)

    cols = tl.arange(0, RP)
    tile = routed[:, None] & (cols[None, :] < R)
    rows = ec[:, None] * R + cols[None, :]
    P = tl.load(prob_ptr + rows, mask=tile, other=0.0).to(tl.float32)  # each row read once
    PH = tl.load(phys_ptr + rows, mask=tile, other=-1).to(tl.int64)

    total = tl.zeros([BLOCK], dtype=tl.float32)
    holders = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(R):
        p = tl.sum(tl.where(cols[None, :] == r, P, 0.0), axis=1)  # column r of the tile, exactly
        ph = tl.sum(tl.where(cols[None, :] == r, PH, 0), axis=1)
        ok = (ph >= 0) & (p > 0) & (p < float("inf"))  # NaN fails p > 0
        total += tl.where(ok, p, 0.0)
        holders += tl.where(ph >= 0, 1.0, 0.0)
    fallback = total <= 0.0
    x = u * tl.where(fallback, holders, total)

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    chosen = tl.full([BLOCK], -1, dtype=tl.int64)
    last = tl.full([BLOCK], -1, dtype=tl.int64)
    first = tl.full([BLOCK], -1, dtype=tl.int64)
    for r in tl.static_range(R):
        p = tl.sum(tl.where(cols[None, :] == r, P, 0.0), axis=1)
        ph = tl.sum(tl.where(cols[None, :] == r, PH, 0), axis=1)
        ok = (ph >= 0) & (p > 0) & (p < float("inf"))
        w = tl.where(fallback, tl.where(ph >= 0, 1.0, 0.0), tl.where(ok, p, 0.0))
        acc += w
        pick = (w > 0) & (chosen < 0) & (acc > x)
        chosen = tl.where(pick, ph, chosen)
        last = tl.where(w > 0, ph, last)
        if r == 0:
            first = tl.where(routed, ph, -1)
    chosen = tl.where(chosen < 0, last, chosen)  # u * total rounded onto the total
    out = tl.where(real, chosen, first)
    out = tl.where(routed, out, -1)
    tl.store(out_ptr + offs, out, mask=inb)
    tl.atomic_add(counts_ptr + ec, tl.full([BLOCK], 1, dtype=tl.int64).to(counts_ptr.dtype.element_ty),
                  mask=real & routed)
    if COUNT_INVALID:
        bad = real & ((e >= E) | (u < 0.0) | (u > 1.0) | (u != u))  # u != u: NaN
        tl.atomic_add(invalid_ptr + tl.zeros([BLOCK], dtype=tl.int64),
                      tl.full([BLOCK], 1, dtype=tl.int64).to(invalid_ptr.dtype.element_ty), mask=bad)


def dispatch_and_count_triton(topk_ids, prob, phys_map, counts, u, num_token_non_padded=None, row_valid=None,
                              block: int = 256, invalid=None):
    """Triton version of :func:`tempo.serving.kernels.dispatch_and_count_reference` (CUDA
    tensors; ``counts`` int64 or int32).  ``invalid``: optional int64/int32 ``[1]`` counter,
    incremented for each real pair with a logical id ``>= E`` or a uniform outside ``[0, 1]``
    (see the module docstring).  ``row_valid``: optional ``[T]`` mask, false rows are padding."""
    import torch

    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids must be [T, K], got shape {tuple(topk_ids.shape)}")
    T, K = topk_ids.shape
    if phys_map.dim() != 2 or phys_map.shape[0] == 0 or phys_map.shape[1] == 0:
        raise ValueError(f"the table is empty or not [E, R]: phys_map has shape {tuple(phys_map.shape)}")
    E, R = phys_map.shape
    if prob.shape != phys_map.shape or counts.shape != (E,) or u.numel() != T * K:
        raise ValueError("shape mismatch among topk_ids, prob, phys_map, counts and u")
    if not counts.is_contiguous():
        # the kernel increments counts_ptr + e: a strided view would receive the counts elsewhere
        raise ValueError("counts must be a contiguous [E] tensor (a row of the [L, E] counter is)")
    ids = topk_ids.reshape(-1).contiguous()
    out = torch.empty(T * K, dtype=torch.int64, device=ids.device)
    from_ptr = torch.is_tensor(num_token_non_padded)
    nvalid = num_token_non_padded if from_ptr else ids  # dummy pointer when unused
    if invalid is not None and (invalid.numel() != 1 or invalid.is_floating_point()):
        raise ValueError("invalid must be a one-element integer counter tensor")
    if row_valid is not None and tuple(row_valid.shape) != (T,):
        raise ValueError(f"row_valid must be a [T] = [{T}] tensor, got {tuple(row_valid.shape)}")
    rowmask = row_valid.to(torch.int8).contiguous() if row_valid is not None else ids  # dummy pointer when unused
    n_valid_scalar = T if (num_token_non_padded is None or from_ptr) else int(num_token_non_padded)
    grid = (triton.cdiv(T * K, block),)
    _dispatch_count_kernel[grid](ids, prob.contiguous(), phys_map.contiguous(), counts, u.contiguous(), out, nvalid,
                                 invalid if invalid is not None else counts, rowmask, T * K, K, E, n_valid_scalar,
                                 NVALID_FROM_PTR=from_ptr, COUNT_INVALID=invalid is not None,
                                 ROW_MASK=row_valid is not None, R=R, RP=triton.next_power_of_2(R), BLOCK=block)
    return out.view(T, K).to(topk_ids.dtype)
