"""The fused dispatch-and-count kernel in Triton (paper Section 4.4): the contract of
:func:`tempo.serving.kernels.dispatch_and_count_reference`, one launch per MoE layer (zero
extra kernels relative to static dispatch), no host sync, safe inside a captured CUDA graph.

The uniforms (the arithmetic of :func:`tempo.serving.kernels.pair_uniforms`), the padding mask
and the strided id reads are all done inside the launch.  Inputs the reference rejects (an id
``>= E``, a uniform outside ``[0, 1]`` or NaN) cannot raise inside a graph: an out-of-range id
is routed to ``-1`` (not counted) and each such real pair is added to the optional ``invalid``
counter, read by the host at its next synchronisation.
"""
from __future__ import annotations

import triton
import triton.language as tl

# Uniform modes (the U constexpr)
U_GIVEN, U_WEYL, U_HASH = 0, 1, 2
# Row-mask modes (the ROW_MASK constexpr)
MASK_NONE, MASK_SLOTS, MASK_ROWS = 0, 1, 2

# The uniforms' constants are those of tempo.serving.kernels.pair_uniforms (literals here: a
# jitted function reads no module globals that are not constexprs).


@triton.jit(do_not_specialize=["n_pairs", "K", "E", "R", "s0", "s1", "prob_off", "phys_off", "counts_off",
                               "n_valid_scalar", "layer", "rank", "dp_width", "n_dp"])
def _dispatch_count_kernel(ids_ptr, prob_ptr, phys_ptr, counts_ptr, out_ptr, u_ptr, step_ptr, nvalid_ptr,
                           invalid_ptr, mask_ptr,
                           n_pairs, K, E, R, s0, s1, prob_off, phys_off, counts_off, n_valid_scalar, layer, rank,
                           dp_width, n_dp,
                           NVALID_FROM_PTR: tl.constexpr, COUNT_INVALID: tl.constexpr, ROW_MASK: tl.constexpr,
                           U: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = offs < n_pairs
    row = offs // K
    e = tl.load(ids_ptr + row * s0 + (offs - row * K) * s1, mask=inb, other=-1).to(tl.int64)
    routed = inb & (e >= 0) & (e < E)
    ec = tl.where(routed, e, 0)

    if NVALID_FROM_PTR:
        nv = tl.load(nvalid_ptr).to(tl.int64)
    else:
        nv = n_valid_scalar.to(tl.int64)
    real = inb & (row < nv)
    if ROW_MASK == 1:  # DP slots of equal width: slot = row // width, real when its position < real[slot]
        width = tl.maximum(dp_width.to(tl.int64), 1)
        slot = row // width
        n_real = tl.load(mask_ptr + slot, mask=inb & (slot < n_dp), other=0).to(tl.int64)
        real = real & (row - slot * width < n_real)
    if ROW_MASK == 2:  # a per-row mask
        real = real & (tl.load(mask_ptr + row, mask=inb, other=0) != 0)

    if U == 0:
        u = tl.load(u_ptr + offs, mask=inb, other=0.0).to(tl.float32)
    else:
        # 32-bit fixed point, every product below 2^63: exact in int64, as pair_uniforms
        step = tl.load(step_ptr).to(tl.int64) % 4294967296
        h = (offs % 4294967296) * 2654435769 % 4294967296
        h += layer.to(tl.int64) % 4294967296 * 3242174889 % 4294967296
        h += step * 1779033703 % 4294967296
        if U == 2:  # rank mixed in and hashed: independent-looking draws per rank
            h += rank.to(tl.int64) % 4294967296 * 3144134277 % 4294967296
            h = h % 4294967296
            h = h ^ (h >> 16)
            h = h * 2146121005 % 4294967296
            h = h ^ (h >> 15)
            h = h * 1540483477 % 4294967296
            h = h ^ (h >> 16)
        h = h % 4294967296
        u = (h >> 8).to(tl.float32) * 5.9604644775390625e-08  # 2^-24: [0, 1), exact

    pbase = prob_ptr + prob_off + ec * R
    hbase = phys_ptr + phys_off + ec * R
    total = tl.zeros([BLOCK], dtype=tl.float32)
    holders = tl.zeros([BLOCK], dtype=tl.float32)
    # Two passes over the row (valid mass and holders, then the walk to the first column past
    # u * total), in the torch reference's column order and float32 arithmetic.  A table
    # published between the passes mixes old and new entries: still a distribution over the
    # expert's replicas, and a walk past the end takes the last positive column, so the pick is
    # a replica either way.  R is a runtime loop bound, so the compiled code does not grow with
    # R (33 for DSv3 on EP8 with 32 redundant experts).
    for r in range(0, R):  # a runtime loop: nothing unrolled in R
        p = tl.load(pbase + r, mask=routed, other=0.0).to(tl.float32)
        ph = tl.load(hbase + r, mask=routed, other=-1).to(tl.int64)
        ok = (ph >= 0) & (p > 0) & (p < float("inf"))  # NaN fails p > 0
        total += tl.where(ok, p, 0.0)
        holders += tl.where(ph >= 0, 1.0, 0.0)
    fallback = total <= 0.0
    x = u * tl.where(fallback, holders, total)

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    chosen = tl.full([BLOCK], -1, dtype=tl.int64)
    last = tl.full([BLOCK], -1, dtype=tl.int64)
    for r in range(0, R):
        p = tl.load(pbase + r, mask=routed, other=0.0).to(tl.float32)
        ph = tl.load(hbase + r, mask=routed, other=-1).to(tl.int64)
        ok = (ph >= 0) & (p > 0) & (p < float("inf"))
        w = tl.where(fallback, tl.where(ph >= 0, 1.0, 0.0), tl.where(ok, p, 0.0))
        acc += w
        pick = (w > 0) & (chosen < 0) & (acc > x)
        chosen = tl.where(pick, ph, chosen)
        last = tl.where(w > 0, ph, last)
    chosen = tl.where(chosen < 0, last, chosen)  # u * total rounded onto the total
    first = tl.load(hbase, mask=routed, other=-1).to(tl.int64)
    out = tl.where(real, chosen, first)
    out = tl.where(routed, out, -1)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=inb)
    # counters are only read after a synchronisation: relaxed order suffices
    tl.atomic_add(counts_ptr + counts_off + ec, tl.full([BLOCK], 1, dtype=counts_ptr.dtype.element_ty),
                  mask=real & routed, sem="relaxed")
    if COUNT_INVALID:
        bad = real & (e >= E)
        if U == 0:
            bad = bad | (real & ((u < 0.0) | (u > 1.0) | (u != u)))  # u != u: NaN
        tl.atomic_add(invalid_ptr + tl.zeros([BLOCK], dtype=tl.int64),
                      tl.full([BLOCK], 1, dtype=invalid_ptr.dtype.element_ty), mask=bad, sem="relaxed")


def _launch(grid, *args, **meta):
    """The one launch (a separate function so that a test can count launches)."""
    _dispatch_count_kernel[grid](*args, **meta)


def dispatch_and_count_triton(topk_ids, prob, phys_map, counts, u=None, num_token_non_padded=None,
                              row_valid=None, block: int = 256, invalid=None, *, step=None, layer: int = 0,
                              rank: int = 0, rank_invariant: bool = True, dp_real=None, dp_width=None,
                              prob_off: int = 0, phys_off: int = 0, counts_off: int = 0, n_experts=None,
                              width=None):
    """Triton version of :func:`tempo.serving.kernels.dispatch_and_count_reference`.

    ``topk_ids [T, K]`` (any strides, int32 or int64) -> physical ids ``[T, K]`` of the same
    dtype; ``counts`` int64 or int32, incremented in place.

    Uniforms: ``u`` ``[T*K]`` when given; else computed in the kernel from the pair index,
    ``layer`` and ``step`` (a one-element integer device tensor), as :func:`tempo.serving.kernels.pair_uniforms`
    with ``hashed = not rank_invariant`` and ``rank``.

    Padding: rows ``>= num_token_non_padded`` (int or device scalar); ``row_valid`` (a ``[T]``
    mask) or, graph-safe, ``dp_real`` (int64 ``[n_dp]`` device tensor of real rows per DP slot)
    with ``dp_width`` (every slot's width, ``T = n_dp * dp_width``).

    ``invalid``: optional one-element integer counter, incremented for each real pair with a
    logical id ``>= E`` or a given uniform outside ``[0, 1]`` (see the module docstring).

    Flat tables: with ``n_experts`` (E) and ``width`` (R), ``prob``/``phys_map``/``counts`` may
    be whole contiguous tensors and ``prob_off``/``phys_off``/``counts_off`` the element offsets
    of this layer's ``[E, R]`` rows and ``[E]`` counters (no view is taken)."""
    import torch

    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids must be [T, K], got shape {tuple(topk_ids.shape)}")
    T, K = topk_ids.shape
    if n_experts is None:
        if phys_map.dim() != 2 or phys_map.shape[0] == 0 or phys_map.shape[1] == 0:
            raise ValueError(f"the table is empty or not [E, R]: phys_map has shape {tuple(phys_map.shape)}")
        E, R = phys_map.shape
        if prob.shape != phys_map.shape or counts.shape != (E,):
            raise ValueError("shape mismatch among topk_ids, prob, phys_map and counts")
    else:
        E, R = int(n_experts), int(width)
    for name, x in (("prob", prob), ("phys_map", phys_map), ("counts", counts)):
        if not x.is_contiguous():
            # the kernel addresses rows as ptr + e * R (+ r): a strided view would be read elsewhere
            raise ValueError(f"{name} must be contiguous (a row of the runtime's tables is)")
    if u is not None and u.numel() != T * K:
        raise ValueError(f"u must hold T*K = {T * K} uniforms, got {u.numel()}")
    if u is None and step is None:
        raise ValueError("give either u (uniforms) or step (a one-element device tensor)")
    if invalid is not None and (invalid.numel() != 1 or invalid.is_floating_point()):
        raise ValueError("invalid must be a one-element integer counter tensor")
    out = torch.empty((T, K), dtype=topk_ids.dtype, device=topk_ids.device)
    if T * K == 0:
        return out
    from_ptr = torch.is_tensor(num_token_non_padded)
    dummy = counts
    mask_mode, mask, n_dp, width_ = 0, dummy, 0, 0
    if row_valid is not None:
        if tuple(row_valid.shape) != (T,):
            raise ValueError(f"row_valid must be a [T] = [{T}] tensor, got {tuple(row_valid.shape)}")
        if row_valid.dtype == torch.bool:
            row_valid = row_valid.view(torch.uint8)
        mask_mode, mask = 2, row_valid
    elif dp_real is not None:
        n_dp, width_ = int(dp_real.numel()), int(dp_width)
        if n_dp * width_ != T:
            raise ValueError(f"dp_width * n_dp = {width_} * {n_dp} must equal the {T} rows")
        mask_mode, mask = 1, dp_real
    n_valid_scalar = T if (num_token_non_padded is None or from_ptr) else int(num_token_non_padded)
    s0, s1 = topk_ids.stride()
    grid = (triton.cdiv(T * K, block),)
    _launch(grid, topk_ids, prob, phys_map, counts, out, u if u is not None else dummy,
            step if step is not None else dummy, num_token_non_padded if from_ptr else dummy,
            invalid if invalid is not None else dummy, mask,
            T * K, K, E, R, s0, s1, int(prob_off), int(phys_off), int(counts_off), n_valid_scalar, int(layer),
            int(rank), width_, n_dp,
            NVALID_FROM_PTR=from_ptr, COUNT_INVALID=invalid is not None, ROW_MASK=mask_mode,
            U=0 if u is not None else (1 if rank_invariant else 2), BLOCK=block)
    return out
