"""Triton dispatch-and-count kernel (paper Section 4.4) against the torch reference, case by case.

Run as a script, in its own process, because the Triton interpreter must be chosen before
``triton`` is first imported::

    TRITON_INTERPRET=1 python tests/triton_cases.py --device cpu    # CI, no GPU (tests/test_triton_interpret.py)
    python tests/triton_cases.py --device cuda                      # a GPU node, compiled kernel

It prints one JSON object: ``{"triton": version, "interpret": bool, "device": ..., "seconds": ...,
"cases": {name: {"ok": bool, "pairs": int, "out_mismatch": int, "counts_equal": bool,
"dtype_ok": bool, "error": str|null}}}``.  Every comparison is exact: the same physical id for every
routed pair, the same output dtype, and identical cumulative counters.

Importing this module imports neither torch nor triton; ``CASE_NAMES`` lists the cases.
"""
from __future__ import annotations

import json
import os
import sys
import time

# name -> keyword arguments of make_case (see there)
CASES = {
    "basic": dict(),
    "int32 ids/phys/counts (SGLang dtypes)": dict(ids_dtype="int32", phys_dtype="int32", counts_dtype="int32"),
    "int32 counters": dict(counts_dtype="int32"),
    "int64 counters, int32 phys": dict(phys_dtype="int32"),
    "padding: nv = T - 7 (int)": dict(nv=("int", -7)),
    "padding: nv = 0": dict(nv=("int", "zero")),
    "padding: nv = T + 5 (beyond the batch)": dict(nv=("int", 5)),
    "padding: nv 0-d int64 tensor": dict(nv=("tensor64", -11)),
    "padding: nv 0-d int32 tensor": dict(nv=("tensor32", -3)),
    "padding: nv tensor = 0": dict(nv=("tensor64", "zero")),
    "row mask (DP-gathered padding)": dict(row_mask=0.4),
    "row mask and a prefix bound": dict(row_mask=0.3, nv=("tensor64", -9)),
    "row mask all padding": dict(row_mask=1.0),
    "zero (torn) rows": dict(zero_rows=0.3),
    "empty rows (no holder) and holes in phys_map": dict(holes=0.35, empty_rows=0.2),
    "negative ids": dict(neg_ids=0.3),
    "out-of-range ids (>= E)": dict(oob_ids=0.3),
    "negative and out-of-range ids, padding, int32 counters": dict(neg_ids=0.2, oob_ids=0.2, nv=("int", -9),
                                                                    counts_dtype="int32"),
    "NaN probabilities": dict(nan=0.25),
    "negative probabilities": dict(negative_p=0.3),
    "inf probabilities": dict(inf=0.1),
    "NaN / negative rows, whole-row": dict(nan_rows=0.2, negative_rows=0.2),
    "prob bf16": dict(prob_dtype="bfloat16"),
    "prob fp16": dict(prob_dtype="float16"),
    "prob fp64": dict(prob_dtype="float64"),
    "prob not masked by phys (mass on -1 columns)": dict(holes=0.4, unmasked=True),
    "u at 0 and 1 - 2^-24": dict(u_edges=True),
    "bad uniforms (NaN, < 0, > 1): counted as invalid": dict(bad_u=0.3, nv=("int", -5)),
    "tiny masses (1e-30)": dict(scale=1e-30),
    "R = 1": dict(R=1),
    "K = 1": dict(K=1),
    "T = 0": dict(T=0),
    "block 32, many programs with a tail": dict(T=77, K=3, block=32),
    "counters accumulate over two calls": dict(twice=True, counts_dtype="int32"),
    "R = 33 (DSv3 EP8, 32 redundant)": dict(R=33, E=9, holes=0.3, zero_rows=0.2),
    "R = 65 (DSv3 at 1.25x)": dict(R=65, E=7, holes=0.5, nan=0.05),
    "R = 33, in-kernel rank-invariant uniforms": dict(R=33, E=9, u_mode="weyl", step=123456789),
    "in-kernel rank-invariant uniforms, step 0": dict(u_mode="weyl", step=0),
    "in-kernel rank-invariant uniforms, step 2^40 + 3": dict(u_mode="weyl", step=2 ** 40 + 3, layer=61),
    "in-kernel hashed uniforms, rank 5": dict(u_mode="hash", step=77, rank=5, layer=3),
    "in-kernel hashed uniforms, int32 step, padding": dict(u_mode="hash", step=9, rank=1, step_dtype="int32",
                                                           nv=("tensor64", -5)),
    "strided ids (a column slice)": dict(strided=True, ids_dtype="int32"),
    "strided ids, in-kernel uniforms, R = 65": dict(strided=True, R=65, E=5, u_mode="weyl", step=3),
    "DP slots from device counts": dict(T=48, slots=(4, [12, 0, 5, 12])),
    "DP slots, prefix bound, in-kernel uniforms": dict(T=60, slots=(3, [20, 7, 1]), nv=("tensor64", -9),
                                                       u_mode="weyl", step=5),
    "DP slots, counts above the width (unknown: every row)": dict(T=40, slots=(2, [1 << 62, 3])),
    "everything at once": dict(T=61, K=5, E=23, R=6, ids_dtype="int32", phys_dtype="int32", counts_dtype="int32",
                               prob_dtype="bfloat16", neg_ids=0.1, oob_ids=0.1, zero_rows=0.2, holes=0.2,
                               empty_rows=0.1, nan=0.1, negative_p=0.1, nv=("tensor32", -6), block=64),
}
CASES.update({f"random seed {s}": dict(seed=100 + s, randomize=True) for s in range(12)})
CASE_NAMES = list(CASES)


def make_case(torch, device, seed=0, T=48, K=4, E=13, R=4, ids_dtype="int64", phys_dtype="int64",
              counts_dtype="int64", prob_dtype="float32", nv=None, zero_rows=0.0, holes=0.0, empty_rows=0.0,
              neg_ids=0.0, oob_ids=0.0, nan=0.0, negative_p=0.0, inf=0.0, nan_rows=0.0, negative_rows=0.0,
              unmasked=False, u_edges=False, scale=1.0, block=256, twice=False, randomize=False, row_mask=None,
              bad_u=0.0, u_mode="given", step=0, step_dtype="int64", rank=0, layer=0, strided=False,
              slots=None):
    """Tensors for one comparison (all on ``device``), deterministic in ``seed``."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.rand(*shape, generator=g)

    if randomize:  # a random mix of every feature
        pick = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))  # noqa: E731
        T, K, E, R = pick(0, 90), pick(1, 8), pick(1, 40), pick(1, 7)
        ids_dtype, phys_dtype, counts_dtype = (("int32", "int64")[pick(0, 1)] for _ in range(3))
        prob_dtype = ("float32", "bfloat16", "float16", "float64")[pick(0, 3)]
        zero_rows, holes, empty_rows, neg_ids, oob_ids, nan, negative_p = (0.3 * float(rnd(1)) for _ in range(7))
        nv = (("int", "tensor64", "tensor32")[pick(0, 2)], pick(-10, 3)) if pick(0, 2) else None
        block = (32, 64, 256)[pick(0, 2)]
    n_phys = max(2 * E, R, 1)
    phys = torch.stack([torch.randperm(n_phys, generator=g)[:R] for _ in range(E)]) if E else torch.zeros(0, R)
    phys = phys.long()
    phys[rnd(E, R) < holes] = -1
    phys[rnd(E) < empty_rows] = -1
    prob = rnd(E, R) * scale + (0 if scale < 1 else 0.01)
    if not unmasked:
        prob = prob * (phys >= 0)
    prob[rnd(E) < zero_rows] = 0.0
    prob[rnd(E, R) < nan] = float("nan")
    prob[rnd(E, R) < negative_p] *= -1
    prob[rnd(E, R) < inf] = float("inf")
    prob[rnd(E) < nan_rows] = float("nan")
    prob[rnd(E) < negative_rows] = -rnd(R)
    ids = torch.randint(0, max(E, 1), (T, K), generator=g)
    ids[rnd(T, K) < neg_ids] = -1 - torch.randint(0, 3, (1,), generator=g)
    ids[rnd(T, K) < oob_ids] = E + torch.randint(0, 3, (1,), generator=g)
    u = rnd(T * K)
    if u_edges and T * K:
        u[::2] = 0.0
        u[1::2] = 1.0 - 2.0 ** -24
    if bad_u:
        pick_u = rnd(T * K)
        u[pick_u < bad_u / 3] = float("nan")
        u[(pick_u >= bad_u / 3) & (pick_u < 2 * bad_u / 3)] = -0.5
        u[(pick_u >= 2 * bad_u / 3) & (pick_u < bad_u)] = 1.5
    nv_val = None
    if nv is not None:
        kind, off = nv
        n = 0 if off == "zero" else max(T + off, 0)
        nv_val = n if kind == "int" else torch.tensor(n, dtype=torch.int64 if kind == "tensor64" else torch.int32,
                                                     device=device)
    rv = None if row_mask is None else (rnd(T) >= row_mask).to(device)  # padding rows anywhere (DP slots)
    dt = lambda name: getattr(torch, name)  # noqa: E731
    counts = torch.randint(0, 5, (E,), generator=g).to(dt(counts_dtype))  # persistent, not starting at zero
    ids = ids.to(dt(ids_dtype)).to(device)
    if strided:  # the routed columns of a wider [T, K + 2] tensor, as a fused shared expert leaves them
        wide = torch.full((T, K + 2), 7, dtype=ids.dtype, device=device)
        wide[:, 1:K + 1] = ids
        ids = wide[:, 1:K + 1]
    dp = None
    if slots is not None:  # DP slots of equal width, real rows per slot on the device
        n_dp, real = slots
        dp = (torch.tensor(real, dtype=torch.int64, device=device), T // n_dp)
        width = T // n_dp
        rv = torch.tensor([(t % width) < real[t // width] for t in range(T)], device=device)
    kernel_u = None
    if u_mode != "given":  # the kernel draws its own; the reference gets the same values
        from tempo.serving.kernels import pair_uniforms

        u = pair_uniforms(T * K, layer, step, rank, hashed=u_mode == "hash")
        kernel_u = dict(step=torch.tensor([step], dtype=dt(step_dtype), device=device), layer=layer, rank=rank,
                        rank_invariant=u_mode == "weyl")
    return dict(ids=ids, prob=prob.to(dt(prob_dtype)).to(device),
                phys=phys.to(dt(phys_dtype)).to(device), counts=counts.to(device), u=u.to(device), nv=nv_val,
                block=block, calls=2 if twice else 1, rv=rv, dp=dp, kernel_u=kernel_u)


def oracle_inputs(torch, ids, E):
    """The reference's view of a batch the Triton kernel routes: a logical id ``>= E`` is an
    error for the reference and a masked slot (``-1``, not counted, tallied in ``invalid``) for
    the kernel, which cannot raise inside a captured graph."""
    return torch.where(ids >= E, torch.full_like(ids, -1), ids)


def oracle_uniforms(torch, u):
    """The reference's view of the uniforms: one outside ``[0, 1]`` is an error for it; the
    kernel takes it clamped (NaN as 1) and tallies it in ``invalid``."""
    return torch.nan_to_num(u.clamp(0, 1), nan=1.0)


def n_invalid(torch, ids, E, nv, rv=None, u=None):
    """Real (non-padding) pairs with an id ``>= E`` or a uniform outside ``[0, 1]``: what the
    kernel's ``invalid`` counter holds."""
    T, K = ids.shape
    n = T if nv is None else int(nv)
    real = torch.arange(T) < n
    if rv is not None:
        real &= rv.cpu().bool()
    bad = ids >= E
    if u is not None:
        uu = u.cpu().reshape(T, K)
        bad |= ~((uu >= 0) & (uu <= 1))
    return int(bad[real].sum())


def run_case(torch, ref_fn, tri_fn, device, name):
    c = make_case(torch, device, **CASES[name])
    c_ref, c_tri, c_cnt = c["counts"].clone(), c["counts"].clone(), c["counts"].clone()
    E = c["phys"].shape[0]
    ref_ids = oracle_inputs(torch, c["ids"], E)
    invalid = torch.zeros(1, dtype=torch.int64, device=c["ids"].device)
    ref_invalid = torch.zeros(1, dtype=torch.int64, device=c["ids"].device)
    res = {"ok": False, "pairs": int(c["ids"].numel()) * c["calls"], "out_mismatch": None, "counts_equal": None,
           "dtype_ok": None, "error": None}
    try:
        mism, dtype_ok = 0, True
        for _ in range(c["calls"]):
            ref = ref_fn(ref_ids, c["prob"], c["phys"], c_ref, oracle_uniforms(torch, c["u"]), c["nv"], row_valid=c["rv"])
            kw = dict(row_valid=c["rv"]) if c["dp"] is None else dict(dp_real=c["dp"][0], dp_width=c["dp"][1])
            if c["kernel_u"] is not None:
                kw.update(c["kernel_u"])
            tri = tri_fn(c["ids"], c["prob"], c["phys"], c_tri, None if c["kernel_u"] else c["u"], c["nv"],
                         block=c["block"], invalid=invalid, **kw)
            # the reference with its own invalid-pair counter takes the raw ids, as the runtime calls it
            cnt = ref_fn(c["ids"], c["prob"], c["phys"], c_cnt, c["u"], c["nv"], row_valid=c["rv"], invalid=ref_invalid)
            if device == "cuda":
                torch.cuda.synchronize()
            mism += int((ref.cpu() != tri.cpu()).sum()) + int((cnt.cpu() != tri.cpu()).sum())
            dtype_ok &= tri.dtype == ref.dtype == c["ids"].dtype and tri.shape == ref.shape
        want_invalid = c["calls"] * n_invalid(torch, c["ids"].cpu(), E, c["nv"], c["rv"], c["u"])
        res.update(out_mismatch=mism, counts_equal=bool(torch.equal(c_ref.cpu(), c_tri.cpu()))
                   and bool(torch.equal(c_cnt.cpu(), c_tri.cpu())) and c_tri.dtype == c["counts"].dtype
                   and int(invalid.item()) == want_invalid == int(ref_invalid.item()),
                   dtype_ok=bool(dtype_ok))
        res["ok"] = mism == 0 and res["counts_equal"] and res["dtype_ok"]
    except Exception as exc:  # reported per case, the test shows it
        res["error"] = f"{type(exc).__name__}: {exc}"[:500]
    return res


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--only", nargs="*", help="case names (default: all)")
    a = ap.parse_args(argv)
    if a.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("on CPU set TRITON_INTERPRET=1 before starting Python (the interpreter is chosen at import)")
    t0 = time.time()
    import torch
    import triton

    from tempo.serving.kernels import dispatch_and_count_reference
    from tempo.serving.triton_kernels import dispatch_and_count_triton

    t_import = time.time() - t0
    cases = {name: run_case(torch, dispatch_and_count_reference, dispatch_and_count_triton, a.device, name)
             for name in (a.only or CASE_NAMES)}
    print(json.dumps({"triton": triton.__version__, "torch": torch.__version__,
                      "interpret": os.environ.get("TRITON_INTERPRET") == "1", "device": a.device,
                      "import_seconds": round(t_import, 2), "seconds": round(time.time() - t0, 2), "cases": cases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
