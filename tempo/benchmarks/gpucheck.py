"""``python -m tempo gpu-check`` (``make gpu-check``): the first thing to run on a GPU node.

About seven minutes on one H200 (default budget 420 s), written to one folder.

Each section runs under its own budget and ``try``.  A section *fails* when it raises or a check
does not hold (the command then exits 1 naming each); a backend that cannot run here is
*skipped* with its reason; a *flag* (exit status unchanged) marks two measurements that disagree
by more than 15% (epbench's expert time against the node's calibrated fit).

Sections, in order (each ``section_<name>(ctx) -> dict``): ``env``, ``triton``, ``rowmask``,
``serving``, ``nccl``, ``numerics``, ``timer``, ``grids``, ``epbench``.

Output (``--out``, default ``build/gpu-check``): ``<date>-gpu-check/`` with ``results.json``,
``summary.md`` (also printed), ``manifest.json``, the per-section CSVs, and one calibration
recording per grid, ``<date>-<backend>-<shape>-gpucheck/`` (``-2`` for a second run that day),
readable by :func:`tempo.measured.catalog.load_recording`.  ``--record`` writes into
``data/measured/<machine>/`` instead.  Folders are written through :mod:`tempo.measured.store`:
whole when the run ends; an interrupted run leaves a hidden temporary folder, named in the message.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

from ..calib.grid import tiles
from ..calib.record import fit_all, fit_model
from ..calib.shapes import roofline_us, shape
from ..core import paths
from ..core.argtypes import float_range
from ..core.params import params_table
from ..measured import catalog, store
from ..serving.kernels import pair_uniforms
from ..serving.runtime import DpPadding, TempoRuntime
from ..serving.settings import ServingSettings

SECTIONS = ("env", "triton", "rowmask", "serving", "nccl", "numerics", "timer", "grids", "epbench")
#: seconds per section at the default total budget of 420 s (scaled with ``--budget-s``); the
#: grid section stops starting cells at its deadline, the timer section skips its largest graphs
#: when too little is left, and the others run to their end (a few seconds to a minute each)
BUDGET = {"env": 10, "triton": 25, "rowmask": 15, "serving": 40, "nccl": 20, "numerics": 60, "timer": 45,
          "grids": 145, "epbench": 60}
H200_HBM_TB_S = 4.8  # the datasheet bandwidth the paper's 9.2 us bound uses
PAPER_DSV3_H200_BOUND_US = 9.2
FIT_TOL = 0.15  # epbench's expert time vs the calibrated fit: flagged beyond this relative gap

#: the short grids' n values, in the order they are measured (the G values: each backend's checks)
N_ORDER = (1, 256, 16, 1024, 4, 64, 2048, 2, 128, 8, 512, 32)


def grids() -> list:
    """gpu-check's short grids: ``(backend, shape, G values)`` for every registered GPU backend's
    ``checks``, best backend first."""
    from ..calib.backends import backend_class, gpu_backends

    return [(b, sh, tuple(Gs)) for b in gpu_backends() for sh, Gs in backend_class(b).checks]


def _run(cmd: list, timeout: float = 20) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (r.stdout or r.stderr).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({type(exc).__name__})"


def cuda_home() -> str | None:
    """Where DeepGEMM's JIT looks for nvcc: ``CUDA_HOME``, ``CUDA_PATH``, the folder above the
    ``nvcc`` on PATH, else ``/usr/local/cuda`` if it exists (sgl-deep-gemm's ``find_cuda_home``)."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    if nvcc:
        return str(Path(nvcc).resolve().parent.parent)
    return "/usr/local/cuda" if os.path.exists("/usr/local/cuda") else None


def _expect(ctx, ok: bool, msg: str) -> bool:
    """A check of the running section: when ``ok`` is false, the section fails with ``msg``."""
    if not ok:
        ctx.setdefault("failed", []).append(msg)
    return bool(ok)


def _flag(ctx, msg: str) -> None:
    """A disagreement worth a look that is not a failure (printed; the exit status is unchanged)."""
    ctx.setdefault("flags", []).append(msg)


def _left(ctx) -> float:
    return ctx["deadline"] - time.time()


# ------------------------------------------------------------------------------------ sections
def section_env(ctx) -> dict:
    """Driver, clocks, versions, compute capability, L2 size, DeepGEMM's CUDA home and nvcc
    (:func:`tempo.calib.backends.import_deep_gemm`), which calibration backends can run and
    why not, and the device-to-device copy bandwidth."""
    import torch

    from ..calib.backends import backend_status, cuda_home_setup, gpu_driver

    out = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "driver": gpu_driver()}
    # backend_status imports deep_gemm through import_deep_gemm, which sets CUDA_HOME up first
    out["backends"] = {k: {"ok": ok, "why": why} for k, (ok, why) in backend_status().items()}
    out["cuda_home"] = cuda_home()
    setup = cuda_home_setup()
    out["cuda_home_setup"] = setup if setup is not None else "not needed (deep_gemm imported before, or no GPU)"
    q = ("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,"
         "temperature.gpu,memory.total,persistence_mode,compute_mode")
    line = _run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"])
    out["nvidia_smi"] = dict(zip(q.split(","), [v.strip() for v in line.splitlines()[0].split(",")])) \
        if "," in line else line
    home_nvcc = os.path.join(out["cuda_home"], "bin", "nvcc") if out["cuda_home"] else None
    nvcc = home_nvcc if home_nvcc and os.path.exists(home_nvcc) else shutil.which("nvcc")
    out["nvcc"] = _run([nvcc, "--version"]).splitlines()[-1] if nvcc and os.path.exists(nvcc) else "not found"
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        out["triton"] = f"unavailable: {type(exc).__name__}: {exc}"
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA GPU: " + out["backends"]["torch_bf16"]["why"])
    p = torch.cuda.get_device_properties(0)
    out.update(device=torch.cuda.get_device_name(0), capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
               l2_bytes=int(getattr(p, "L2_cache_size", 0)), memory_gib=round(p.total_memory / 2**30, 1))
    # device-to-device copy: bytes read + written over the median time of 10 copies of 2 GiB
    n = 2**30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_(0, 255)
    for _ in range(2):
        b.copy_(a)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    out["copy_tb_s"] = round(2 * n / float(np.median(times)) / 1e12, 3)
    del a, b
    torch.cuda.empty_cache()
    ctx["copy_tb_s"] = out["copy_tb_s"]
    ctx["machine"] = store.slug(out["device"]) or "unknown"
    return out


def _triton_case(rng, T, K, E, R, holes, counts_dtype, ids_dtype, nv_kind):
    import torch

    phys = torch.full((E, R), -1, dtype=torch.int32)
    for e in range(E):
        k = int(rng.integers(1, R + 1)) if holes else R
        phys[e, :k] = torch.as_tensor(rng.choice(4 * E * R, size=k, replace=False), dtype=torch.int32)
    prob = torch.as_tensor(rng.random((E, R)), dtype=torch.float32) * (phys >= 0)
    prob[int(rng.integers(E))] = 0  # a torn (all-zero) row: uniform over holders
    if E > 2:
        prob[1, 0] = float("nan")  # a NaN entry
        prob[2, -1] = -1.0  # a negative entry
    ids = torch.as_tensor(rng.integers(-2, E + 3, size=(T, K)), dtype=ids_dtype)  # negative and >= E ids too
    u = torch.as_tensor(rng.random(T * K), dtype=torch.float32)
    nv = {"none": None, "int": max(0, T - 7), "tensor": torch.tensor(max(0, T - 5))}[nv_kind]
    return ids, prob, phys, u, nv, counts_dtype


def section_triton(ctx) -> dict:
    """The Triton dispatch-and-count kernel against the torch reference on CUDA (padding,
    zero rows, bad ids, int32/int64 counters), then one captured graph replayed while ids,
    uniforms, table and padding bound change underneath it; a speed line."""
    import torch

    from ..calib.backends import GraphTimer
    from ..serving.kernels import dispatch_and_count_reference as ref
    from ..serving.triton_kernels import dispatch_and_count_triton as tri

    rng = np.random.default_rng(0)
    cases = []
    # widths R = P - E + 1 of real deployments: 33 (DSv3 EP8 with 32 redundant experts, Qwen3-30B
    # at 1.25x) and 65 (DSv3 at 1.25x)
    for T, K, E, R, holes in ((1, 1, 1, 1, False), (37, 4, 9, 3, True), (300, 8, 64, 4, True), (4096, 8, 256, 9, True),
                              (0, 8, 16, 2, False), (4096, 8, 256, 33, True), (1024, 8, 256, 65, True)):
        for counts_dtype in (torch.int64, torch.int32):
            for ids_dtype, nv_kind in ((torch.int64, "tensor"), (torch.int32, "int"), (torch.int64, "none")):
                cases.append(_triton_case(rng, T, K, E, R, holes, counts_dtype, ids_dtype, nv_kind))
    rows = []
    for i, (ids, prob, phys, u, nv, cdt) in enumerate(cases):
        E = prob.shape[0]
        c_ref = torch.zeros(E, dtype=cdt)
        c_tri = torch.zeros(E, dtype=cdt, device="cuda")
        invalid = torch.zeros(1, dtype=torch.int64, device="cuda")
        # ids >= E: an error for the reference, a masked slot tallied in `invalid` for the kernel
        o_ref = ref(torch.where(ids >= E, torch.full_like(ids, -1), ids), prob, phys, c_ref, u, nv)
        nv_d = nv.cuda() if torch.is_tensor(nv) else nv
        o_tri = tri(ids.cuda(), prob.cuda(), phys.cuda(), c_tri, u.cuda(), nv_d, invalid=invalid).cpu()
        n_real = ids.shape[0] if nv is None else min(int(nv), ids.shape[0])
        same = float((o_ref == o_tri).float().mean()) if o_ref.numel() else 1.0
        rows.append({"case": i, "T": ids.shape[0], "K": ids.shape[1], "E": prob.shape[0], "R": prob.shape[1],
                     "counts": str(cdt).split(".")[-1], "ids": str(ids.dtype).split(".")[-1],
                     "padding": "none" if nv is None else ("tensor" if torch.is_tensor(nv) else "int"),
                     "counts_equal": bool(torch.equal(c_ref, c_tri.cpu())), "ids_agree": same,
                     "invalid_ok": int(invalid.item()) == int((ids[:n_real] >= E).sum()),
                     "dtype_ok": o_tri.dtype == ids.dtype})
    # uniforms drawn in the kernel (the serving path) against the same draws in torch

    for T, K, E, R, invariant, layer, step in ((512, 8, 256, 33, True, 3, 41), (64, 8, 256, 65, False, 60, 2**33 + 7)):
        ids, prob, phys, _, nv, cdt = _triton_case(rng, T, K, E, R, True, torch.int64, torch.int32, "tensor")
        u = pair_uniforms(T * K, layer, step, rank=5, hashed=not invariant)
        c_ref, c_tri = torch.zeros(E, dtype=cdt), torch.zeros(E, dtype=cdt, device="cuda")
        invalid = torch.zeros(1, dtype=torch.int64, device="cuda")
        o_ref = ref(torch.where(ids >= E, torch.full_like(ids, -1), ids), prob, phys, c_ref, u, nv)
        o_tri = tri(ids.cuda(), prob.cuda(), phys.cuda(), c_tri, None, nv.cuda(), invalid=invalid,
                    step=torch.tensor([step], device="cuda"), layer=layer, rank=5, rank_invariant=invariant).cpu()
        n_real = min(int(nv), T)
        rows.append({"case": len(rows), "T": T, "K": K, "E": E, "R": R, "counts": str(cdt).split(".")[-1],
                     "ids": "int32", "padding": "tensor", "uniforms": "kernel, " + ("rank-invariant" if invariant
                                                                                   else "hashed"),
                     "counts_equal": bool(torch.equal(c_ref, c_tri.cpu())),
                     "ids_agree": float((o_ref == o_tri).float().mean()),
                     "invalid_ok": int(invalid.item()) == int((ids[:n_real] >= E).sum()),
                     "dtype_ok": o_tri.dtype == ids.dtype})
    df = pd.DataFrame(rows)
    # one captured graph, replayed while everything it reads changes in place
    E, R, T, K = 64, 4, 512, 8
    s_ids = torch.zeros(T, K, dtype=torch.int64, device="cuda")
    s_prob = torch.zeros(E, R, device="cuda")
    s_phys = torch.zeros(E, R, dtype=torch.int32, device="cuda")
    s_u = torch.zeros(T * K, device="cuda")
    s_nv = torch.tensor(T, device="cuda")
    s_cnt = torch.zeros(E, dtype=torch.int64, device="cuda")
    holder = {}

    def fn():
        holder["out"] = tri(s_ids, s_prob, s_phys, s_cnt, s_u, s_nv)

    def load(seed):
        r = np.random.default_rng(seed)
        ids, prob, phys, u, _, _ = _triton_case(r, T, K, E, R, True, torch.int64, torch.int64, "none")
        nv = int(r.integers(0, T + 1))
        s_ids.copy_(ids)
        s_prob.copy_(prob)
        s_phys.copy_(phys)
        s_u.copy_(u)
        s_nv.fill_(nv)
        return ids, prob, phys, u, nv

    load(100)
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        fn()  # JIT compile before capture
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    graph_rows = []
    for k in range(8):
        ids, prob, phys, u, nv = load(200 + k)
        s_cnt.zero_()
        g.replay()
        torch.cuda.synchronize()
        c_ref = torch.zeros(E, dtype=torch.int64)
        o_ref = ref(torch.where(ids >= E, torch.full_like(ids, -1), ids), prob, phys, c_ref, u, nv)
        graph_rows.append({"replay": k, "n_valid": nv, "counts_equal": bool(torch.equal(c_ref, s_cnt.cpu())),
                           "ids_agree": float((o_ref == holder["out"].cpu()).float().mean())})
    gdf = pd.DataFrame(graph_rows)
    # speed: 4096 x 8 pairs over 256 experts, by table width, graph replays timed with the spin
    # timer; the uniforms drawn in the kernel, as served
    timer = GraphTimer(replays=50)
    speed = {}
    for R in (9, 33, 65):
        ids, prob, phys, u, nv, _ = _triton_case(np.random.default_rng(5), 4096, 8, 256, R, True, torch.int32,
                                                 torch.int32, "tensor")
        ids, prob, phys, nv = ids.cuda(), prob.cuda(), phys.cuda(), nv.cuda()
        cnt = torch.zeros(256, dtype=torch.int64, device="cuda")
        step = torch.zeros(1, dtype=torch.int64, device="cuda")
        speed[R] = timer.time(lambda c: tri(ids, prob, phys, cnt, None, nv, step=step, layer=1), 1)
    us = speed[9]
    ctx["files"]["triton.csv"] = pd.concat([df.assign(kind="eager"), gdf.assign(kind="graph")], ignore_index=True)
    r = {"cases": len(df), "counts_exact": int(df.counts_equal.sum()), "ids_agree_min": float(df.ids_agree.min()),
         "invalid_counter_ok": int(df.invalid_ok.sum()),
         "dtype_ok": int(df.dtype_ok.sum()), "graph_replays": len(gdf),
         "graph_counts_exact": int(gdf.counts_equal.sum()), "graph_ids_agree_min": float(gdf.ids_agree.min()),
         "speed_4096x8_us": round(us, 2), "speed_mpairs_s": round(4096 * 8 / us, 1),
         **{f"speed_4096x8_R{R}_us": round(v, 2) for R, v in speed.items()}}
    _expect(ctx, r["counts_exact"] == r["cases"], f"counts differ from the reference in {r['cases'] - r['counts_exact']} cases")
    _expect(ctx, r["ids_agree_min"] == 1.0, f"physical ids differ from the reference (agreement {r['ids_agree_min']:.4f})")
    _expect(ctx, r["invalid_counter_ok"] == r["cases"], "the invalid-pair counter is wrong in "
            f"{r['cases'] - r['invalid_counter_ok']} cases")
    _expect(ctx, r["dtype_ok"] == r["cases"], "the output dtype differs from the ids' dtype")
    _expect(ctx, r["graph_counts_exact"] == r["graph_replays"] and r["graph_ids_agree_min"] == 1.0,
            "the captured graph's replays differ from the reference")
    return r


def rowmask_check(device: str = "cuda", graph_replays: int = 8, seed: int = 0) -> dict:
    """The dispatch kernel with the DP-gathered padding mask (:class:`DpPadding.row_mask`)
    against the torch reference.  Eager cases: equal and unequal slot widths, real counts of 0,
    of a whole slot and beyond it, with and without a prefix bound; the mask itself against the
    rows it must keep.  With CUDA, one graph that builds the mask inside (as
    ``TempoRuntime.dispatch`` does under capture) replayed ``graph_replays`` times with new real
    counts written in place.  On CPU the Triton kernel needs ``TRITON_INTERPRET=1`` (set before
    triton is first imported); the graph part is then skipped."""
    import torch

    from ..serving.kernels import dispatch_and_count_reference as ref
    from ..serving.triton_kernels import dispatch_and_count_triton as tri

    rng = np.random.default_rng(seed)
    rows = []
    E, R, K = 24, 3, 4
    for n_dp, widths, real, nv in ((4, [8] * 4, [8, 0, 3, 5], None), (4, [8] * 4, [9, 2, 0, 100], 29),
                                   (2, [16, 16], [16, 16], None), (3, [5, 9, 2], [5, 1, 0], None),
                                   (3, [5, 9, 2], [0, 9, 7], 12), (8, [32] * 8, list(rng.integers(0, 33, 8)), None),
                                   (4, [64, 1, 30, 7], [10, 1, 30, 0], None)):
        T = sum(widths)
        ids, prob, phys, u, _, _ = _triton_case(rng, T, K, E, R, True, torch.int64, torch.int64, "none")
        ids = torch.where(ids >= E, torch.full_like(ids, -1), ids)
        dp = DpPadding(n_dp, device)
        dp.set_real(real)
        mask = dp.row_mask(T, widths)
        want = np.concatenate([np.arange(w) < r for w, r in zip(widths, real)])
        c_ref = torch.zeros(E, dtype=torch.int64)
        o_ref = ref(ids, prob, phys, c_ref, u, nv, torch.as_tensor(want))
        c_tri = torch.zeros(E, dtype=torch.int64, device=device)
        o_tri = tri(ids.to(device), prob.to(device), phys.to(device), c_tri, u.to(device), nv, mask).cpu()
        rows.append({"kind": "eager", "n_dp": n_dp, "widths": str(widths), "real": str([int(x) for x in real]),
                     "prefix": nv, "mask_ok": bool(np.array_equal(mask.cpu().numpy(), want)),
                     "counts_equal": bool(torch.equal(c_ref, c_tri.cpu())), "ids_equal": bool(torch.equal(o_ref, o_tri))})
    if str(device).startswith("cuda"):
        n_dp, width = 4, 16
        T = n_dp * width
        ids, prob, phys, u, _, _ = _triton_case(rng, T, K, E, R, True, torch.int64, torch.int64, "none")
        s_ids = torch.where(ids >= E, torch.full_like(ids, -1), ids).to(device)
        s_prob, s_phys, s_u = prob.to(device), phys.to(device), u.to(device)
        cnt = torch.zeros(E, dtype=torch.int64, device=device)
        dp = DpPadding(n_dp, device)
        holder = {}

        def fn():
            holder["out"] = tri(s_ids, s_prob, s_phys, cnt, s_u, None, dp.row_mask(T, [width] * n_dp))

        dp.set_real([width] * n_dp)
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            fn()  # JIT compile outside the capture
        torch.cuda.current_stream().wait_stream(st)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        for k in range(graph_replays):
            real = [int(x) for x in rng.integers(0, width + 1, n_dp)]
            dp.set_real(real)
            cnt.zero_()
            g.replay()
            torch.cuda.synchronize()
            want = np.concatenate([np.arange(width) < r for r in real])
            c_ref = torch.zeros(E, dtype=torch.int64)
            o_ref = ref(s_ids.cpu(), prob, phys, c_ref, u, None, torch.as_tensor(want))
            rows.append({"kind": "graph", "n_dp": n_dp, "widths": str([width] * n_dp), "real": str(real),
                         "prefix": None, "mask_ok": True, "counts_equal": bool(torch.equal(c_ref, cnt.cpu())),
                         "ids_equal": bool(torch.equal(o_ref, holder["out"].cpu()))})
    df = pd.DataFrame(rows)
    eager, graph = df[df.kind == "eager"], df[df.kind == "graph"]
    return {"eager_cases": len(eager), "masks_ok": int(eager.mask_ok.sum()),
            "counts_exact": int(eager.counts_equal.sum()), "ids_exact": int(eager.ids_equal.sum()),
            "graph_replays": len(graph), "graph_exact": int((graph.counts_equal & graph.ids_equal).sum()),
            "graph": "ran" if len(graph) else "skipped: no CUDA device (captured graphs need one)", "table": df}


def section_rowmask(ctx) -> dict:
    """The kernel with the DP-gathered padding mask (:class:`DpPadding`): equal and unequal
    slot widths against the reference, then a captured graph that builds the mask inside and
    reads new real counts at each replay."""
    r = rowmask_check("cuda")
    ctx["files"]["rowmask.csv"] = r.pop("table")
    n = r["eager_cases"]
    _expect(ctx, r["masks_ok"] == n, f"DpPadding.row_mask wrong in {n - r['masks_ok']}/{n} cases")
    _expect(ctx, r["counts_exact"] == n and r["ids_exact"] == n,
            f"row-masked kernel differs from the reference (counts {r['counts_exact']}/{n}, ids {r['ids_exact']}/{n})")
    _expect(ctx, r["graph_replays"] > 0 and r["graph_exact"] == r["graph_replays"],
            f"row mask inside a captured graph: {r['graph_exact']}/{r['graph_replays']} replays exact")
    return r


# ---- the serving runtime, through its public API only (one place to edit if that API changes)
def serving_runtime(physical_to_logical_map, n_gpus: int, device: str, dp_size: int, **settings):
    """The one place gpu-check builds a :class:`tempo.serving.runtime.TempoRuntime`:
    ``TempoRuntime(physical_to_logical_map, n_gpus, device=..., settings=ServingSettings(**settings),
    dp_size=...)``."""

    return TempoRuntime(physical_to_logical_map, n_gpus, device=device, settings=ServingSettings(**settings),
                        dp_size=dp_size)


def runtime_tensors(rt) -> dict:
    """The runtime's device tensors a captured graph holds pointers to (tables and counters)."""
    return {"phys": rt.phys, "prob": rt.prob, "counts": rt.counts}


def runtime_stats(rt) -> dict:
    """The runtime's ``stats`` (an attribute or a method), else its refresher's counters; {}
    when neither exists."""
    s = getattr(rt, "stats", None)
    if callable(s):
        s = s()
    if s is None:
        ref = getattr(rt, "refresher", None)
        s = getattr(ref, "stats", None) if ref is not None else None
    try:
        return {str(k): (int(v) if isinstance(v, (int, np.integer)) else v) for k, v in dict(s or {}).items()}
    except (TypeError, ValueError):
        return {"stats": str(s)}


def _random_map(rng, L: int, E: int, P: int) -> np.ndarray:
    """``[L, P]`` physical -> logical: every expert once, ``P - E`` distinct experts twice."""
    return np.stack([rng.permutation(np.concatenate([np.arange(E), rng.choice(E, P - E, replace=False)]))
                     for _ in range(L)]).astype(np.int64)


def serving_check(device: str = "cuda", replays: int = 2000, seed: int = 0, buckets=(1, 2, 4, 8, 16, 32, 48, 64),
                  refresh_ms: float = 5.0, graphs: bool | None = None, deadline: float | None = None) -> dict:
    """TempoRuntime as SGLang drives it, checked pick by pick (:func:`section_serving`).

    4 layers, 32 logical experts on 64 physical slots (4 GPUs; table width R = P - E + 1 = 33,
    as DSv3 on EP8 with 32 redundant experts), top-4, attention DP 4 with
    slots of ``bs`` rows (``bs`` in ``buckets``): one dispatch per (layer, bucket).  With CUDA
    (``graphs`` default) each is captured as a CUDA graph (global capture mode) under
    ``capture_guard`` while the refresher runs (every ``refresh_ms``, solving in its thread);
    on CPU they run eagerly.  Then ``replays`` forward steps: new ids in the static input
    (some masked, -1), new real token counts per DP rank through ``on_forward``, one dispatch;
    every routed pick must be a physical slot holding its logical expert, and the layer's
    counters must grow by exactly the real rows' routed ids.  Midway ``update_layers`` moves
    layers 0 and 2 to a new map: the tensors' pointers must not change, and the picks of those
    layers must follow the new map (valid under it, and some of them invalid under the old).
    ``deadline`` (``time.time()``): stop replaying early, reported."""
    import torch

    graphs = str(device).startswith("cuda") if graphs is None else bool(graphs)
    rng = np.random.default_rng(seed)
    L, E, n_gpus, per_gpu, K, n_dp = 4, 32, 4, 16, 4, 4
    P = n_gpus * per_gpu
    p2l = _random_map(rng, L, E, P)
    new = p2l.copy()
    moved = [0, 2]
    while True:
        new[moved] = _random_map(rng, len(moved), E, P)
        if all((new[m] != p2l[m]).any() for m in moved):
            break
    rt = serving_runtime(p2l, n_gpus, device, n_dp, refresh_ms=refresh_ms, deadline_ms=refresh_ms, solver="thread")
    out = {"device": str(device), "graphs": 0, "replays": 0, "layers": L, "experts": E, "slots": P, "dp": n_dp}
    try:
        keys = [(layer, bs) for layer in range(L) for bs in buckets]
        ids_buf = {k: torch.full((n_dp * k[1], K), -1, dtype=torch.int64, device=device) for k in keys}
        holder, run = {}, {}
        for k in keys:
            layer, bs = k

            def fn(k=k, layer=layer, bs=bs):
                holder[k] = rt.dispatch(layer, ids_buf[k], None, dp_widths=[bs] * n_dp)
            run[k] = fn
        if graphs:
            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                for k in keys:
                    run[k]()  # ids all -1: nothing counted; compiles the kernel before capture
            torch.cuda.current_stream().wait_stream(st)
            torch.cuda.synchronize()
            time.sleep(3 * refresh_ms / 1e3)  # the refresher is running
            out["stats_before_capture"] = runtime_stats(rt)
            captured = {}
            with rt.capture_guard():
                for k in keys:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        run[k]()
                    captured[k] = g
            out["graphs"] = len(captured)
            for k in keys:
                run[k] = captured[k].replay
        ptrs = {name: t.data_ptr() for name, t in runtime_tensors(rt).items()}
        counts = runtime_tensors(rt)["counts"]
        cur = p2l
        bad_picks = count_errors = new_only = moved_picks = 0
        t0 = time.time()
        for i in range(int(replays)):
            if deadline is not None and time.time() > deadline:
                out["stopped_early"] = f"deadline reached after {i} replays"
                break
            if i == int(replays) // 2:
                out["stats_before_update"] = runtime_stats(rt)
                rt.update_layers(new, moved)
                cur = new
                out["pointers_unchanged"] = {name: t.data_ptr() == ptrs[name] for name, t in runtime_tensors(rt).items()}
            k = keys[int(rng.integers(len(keys)))]
            layer, bs = k
            T = n_dp * bs
            ids = rng.integers(0, E, size=(T, K))
            ids[rng.random((T, K)) < 0.05] = -1
            real = [int(x) for x in rng.integers(0, bs + 1, n_dp)]
            before = counts[layer].cpu().numpy().copy()
            rt.on_forward(real)
            ids_buf[k].copy_(torch.from_numpy(ids))
            run[k]()
            picks = holder[k].cpu().numpy()
            after = counts[layer].cpu().numpy()
            routed = ids >= 0
            ok = np.where(routed, cur[layer][np.clip(picks, 0, P - 1)] == ids, picks == -1) & (picks < P)
            bad_picks += int((~ok).sum())
            keep = np.concatenate([np.arange(bs) < r for r in real])
            want = np.bincount(ids[keep][ids[keep] >= 0], minlength=E)
            count_errors += int(not np.array_equal(after - before, want))
            if cur is new and layer in moved:
                valid = routed & (picks >= 0)
                moved_picks += int(valid.sum())
                new_only += int((valid & (p2l[layer][np.clip(picks, 0, P - 1)] != ids)).sum())
            out["replays"] = i + 1
        out["seconds_replaying"] = round(time.time() - t0, 2)
        out.update(bad_picks=bad_picks, count_errors=count_errors, moved_layer_picks=moved_picks,
                   picks_only_valid_under_new_map=new_only, stats_after=runtime_stats(rt))
        out.setdefault("pointers_unchanged", "update not reached")
    finally:
        rt.close()
    return out


def section_serving(ctx) -> dict:
    """:class:`tempo.serving.runtime.TempoRuntime` on CUDA: 32 dispatch graphs captured while
    the refresher runs, 2,000 replays with new ids and DP token counts (every pick a replica of
    its expert, counters exact), ``update_layers`` midway (pointers unchanged, picks follow)."""
    r = serving_check("cuda", deadline=ctx["deadline"] + 30)
    _expect(ctx, r["graphs"] == 32, f"{r['graphs']} of 32 graphs captured")
    _expect(ctx, r["bad_picks"] == 0, f"{r['bad_picks']} picks are not a replica of their expert")
    _expect(ctx, r["count_errors"] == 0, f"the counters differ from the real rows in {r['count_errors']} replays")
    pu = r["pointers_unchanged"]
    _expect(ctx, isinstance(pu, dict) and all(pu.values()), f"update_layers moved a tensor: {pu}")
    _expect(ctx, r["picks_only_valid_under_new_map"] > 0,
            "after update_layers no pick of a moved layer needed the new map (the picks do not follow it)")
    if r["stats_after"] and not r["stats_after"].get("published"):
        _flag(ctx, f"serving: the refresher published no table during the check (stats {r['stats_after']})")
    return r


def collectives_check(backend: str = "nccl", device: str = "cuda", steps: int = 2) -> dict:
    """One rank of ``backend`` (NCCL on a GPU, gloo on CPU): the collectives epbench's rank
    worker uses, on ``device`` tensors, against their known answers -- ``all_gather`` of a
    list, ``barrier``, ``all_to_all_single`` with split sizes, ``all_reduce`` MAX -- then
    epbench's own worker (:func:`tempo.benchmarks.epbench._worker`) for ``steps`` steps."""
    import tempfile

    import torch
    import torch.distributed as dist

    from .epbench import DEFAULT_POLICIES, _free_port, _worker

    out = {"backend": backend, "device": str(device)}
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        t = torch.arange(5, dtype=torch.int64, device=device)
        got = [torch.zeros(5, dtype=torch.int64, device=device)]
        dist.all_gather(got, t)
        out["all_gather"] = bool(torch.equal(got[0], t))
        dist.barrier()
        out["barrier"] = True
        x = torch.randn(7, 16, device=device)
        y = torch.empty_like(x)
        dist.all_to_all_single(y, x, [7], [7])
        out["all_to_all_single"] = bool(torch.equal(x, y))
        m = torch.tensor([3.0, -1.0], device=device)
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        out["all_reduce_max"] = m.tolist() == [3.0, -1.0]
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()
    args = {"device": "cpu" if device == "cpu" else "cuda", "world_size": 1, "shape": "tiny", "experts": 16, "top_k": 4,
            "tokens": 16, "steps": steps, "warmup": 1, "skew": 1.0, "replication": 1.25, "params": "dsv3-offline",
            "policies": list(DEFAULT_POLICIES[:2]), "seed": 0, "threads": 1, "expert_kernel": "loop",  # no JIT here
            "init": f"tcp://127.0.0.1:{_free_port()}"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rows.csv")
        _worker(0, 1, args, path)
        df = pd.read_csv(path)
    out.update(worker_rows=len(df), worker_layer_us=round(float(df.layer_us.median()), 2),
               worker_expert_us=round(float(df.expert_us.median()), 2), worker_kernel=str(df.kernel.iloc[0]))
    return out


def section_nccl(ctx) -> dict:
    """A one-rank NCCL smoke of epbench's collectives (all_gather, barrier,
    all_to_all_single, all_reduce MAX), then epbench's rank worker for two steps."""
    r = collectives_check("nccl", "cuda")
    for k in ("all_gather", "barrier", "all_to_all_single", "all_reduce_max"):
        _expect(ctx, r[k] is True, f"{k} on one NCCL rank returned a wrong answer")
    _expect(ctx, r["worker_rows"] == 2 * 2 and r["worker_expert_us"] > 0, "epbench's NCCL worker recorded no rows")
    return r


def deep_gemm_broken() -> str | None:
    """Why an installed ``deep_gemm`` does not import (an ABI mismatch with torch, a missing
    library), or None: not installed (a backend that is not here), or it imports.  On a GPU
    node an installed DeepGEMM that does not load is a broken environment, not a skip."""
    import importlib.util

    try:
        if importlib.util.find_spec("deep_gemm") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        from ..calib.backends import import_deep_gemm

        import_deep_gemm()
    except Exception as exc:  # noqa: BLE001 -- any failure of an installed package is the finding
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return None


def section_numerics(ctx) -> dict:
    """Each GPU backend against a float32 reference (DeepGEMM: both GEMMs against the
    dequantised fp8 operands and the fp8 SiLU-and-mul output, ``n`` not a multiple of the tile)."""
    from ..calib.backends import backend_class, backend_status, gpu_backends

    out = {}
    broken = deep_gemm_broken()
    if broken is not None:
        out["deep_gemm_installed"] = {"error": f"installed but does not load: {broken}"}
        _expect(ctx, False, f"DeepGEMM is installed but does not load ({broken})")
        ctx.setdefault("broken", set()).add("deep_gemm")
    st = backend_status()
    cells = ((1, 1), (1, 77), (3, 130), (8, 200))
    for name in gpu_backends():
        cls = backend_class(name)
        if not st[name][0]:
            out[name] = {"skipped": st[name][1]}
            continue
        for sh in ("qwen3-30b", "dsv3"):
            try:
                be = cls(shape(sh), 8, 256, l2_factor=0.01)  # numerics only: no rotation needed
                res = {f"G={G},n={n}": be.check_numerics(G, n) for G, n in cells}
                del be
            except Exception as exc:  # noqa: BLE001 -- reported; the other backends still run
                out[f"{name}/{sh}"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                _expect(ctx, False, f"{name}/{sh}: {type(exc).__name__}: {str(exc)[:200]}")
                ctx.setdefault("broken", set()).add(name)
                continue
            out[f"{name}/{sh}"] = res
            for cell, parts in res.items():
                for part, err in parts.items():
                    tol = cls.numerics_tol.get(part, 1e-2)
                    _expect(ctx, err <= tol, f"{name}/{sh} {cell}: {part} error {err:.3g} > {tol:g}")
    return out


def _best_gpu_backend(ctx):
    from ..calib.backends import backend_status, gpu_backends

    st = backend_status()
    for name in gpu_backends():
        if st[name][0] and name not in ctx.get("broken", ()):
            return name
    raise RuntimeError("no GPU backend runs here: " + "; ".join(f"{k}: {v[1]}" for k, v in st.items()))


def section_timer(ctx) -> dict:
    """The launch bias of the timer, measured: identical graphs timed three ways, the L2 effect
    of the weight rotation, and the largest graphs."""
    import torch

    from ..calib.backends import GraphTimer, backend_status, copies_for, gpu_backends, make_backend

    rows = []
    # (a) a tiny graph: one small bf16 GEMM, launch-latency bound
    x = torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    t = GraphTimer(replays=200)
    graphs = t.capture(lambda c: x @ w, 1)
    for spin in (0.0, 10.0, 50.0, 200.0):
        rows.append({"graph": "gemm 16x1024x1024 bf16", "method": f"events, spin {spin:g} us",
                     "us": t.time_graphs(graphs, spin_us=spin)})
    rows.append({"graph": "gemm 16x1024x1024 bf16", "method": "back-to-back x200 / 200",
                 "us": t.back_to_back(graphs, 200)})
    del graphs
    # (b) the calibration cell most exposed: Qwen3-30B at G = 1, n = 1, one copy vs copies over 2x L2
    name = _best_gpu_backend(ctx)
    be = make_backend(name, shape("qwen3-30b"), 1, 1)
    fn = be.region([1], expected_m=1)
    fn(0)
    torch.cuda.synchronize()
    for label, copies, spin in (("1 copy (L2-resident)", 1, 50.0), (f"{be.copies} copies (>= 2x L2)", be.copies, 50.0),
                                (f"{be.copies} copies, no spin", be.copies, 0.0)):
        tm = GraphTimer(replays=60, spin_us=spin)
        rows.append({"graph": f"{name} qwen3-30b G=1 n=1", "method": label, "us": tm.time(fn, copies)})
    formula = (f"copies_for({shape('qwen3-30b').bytes(be.bytes_per_param):.3g} B, L2 {be.l2}) = "
               f"{copies_for(be.expert_bytes, be.l2)}")
    del be, fn
    # (c) the largest graphs: DSv3, G = 40, n = 4096 on every GPU backend that runs
    st = backend_status()
    large = {}
    for b in gpu_backends():
        if not st[b][0] or b in ctx.get("broken", ()):
            large[b] = f"skipped: {st[b][1] if not st[b][0] else 'broken in an earlier section'}"
            continue
        if _left(ctx) < 15:
            large[b] = f"skipped: {_left(ctx):.0f} s left of the section's budget"
            continue
        try:
            be = make_backend(b, shape("dsv3"), 40, 4096, replays=20)
            fn = be.region([4096] * 40, expected_m=4096)
            fn(0)
            torch.cuda.synchronize()
            graphs = be.timer.capture(fn, be.cell_copies(40))
            g = f"{b} dsv3 G=40 n=4096"
            for spin in (0.0, 50.0, 500.0):
                rows.append({"graph": g, "method": f"events, spin {spin:g} us", "us": be.timer.time_graphs(graphs, spin)})
            rows.append({"graph": g, "method": "back-to-back x10 / 10", "us": be.timer.back_to_back(graphs, 10)})
            large[b] = "ran"
            del graphs, fn, be
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            large[b] = f"FAILED {type(exc).__name__}: {str(exc)[:200]}"
            _expect(ctx, False, f"largest graph on {b}: {type(exc).__name__}: {str(exc)[:200]}")
    df = pd.DataFrame(rows)
    ctx["files"]["timer.csv"] = df
    r = {f"{a} | {b}": round(u, 3) for a, b, u in df[["graph", "method", "us"]].itertuples(index=False)}
    r["copies_formula"] = formula
    r["largest_graphs"] = large
    return r


def _grid_cells(Gs, budget_order=N_ORDER):
    return [(G, n) for G in Gs for n in budget_order]


def section_grids(ctx) -> dict:
    """Short calibration grids (each GPU backend's ``checks``) fitted with Eq. 1 (Table 6's
    zero-intercept form and the full form), ``b`` beside the weight-streaming roofline at the
    datasheet and at the measured copy bandwidth."""
    from ..calib.backends import backend_class, backend_status, make_backend

    st = backend_status()
    out = {}
    deadline = ctx["deadline"]
    todo = grids()
    for i, (backend, sh, Gs) in enumerate(todo):
        if not st[backend][0]:
            out[f"{backend}/{sh}"] = {"skipped": st[backend][1]}
            continue
        t_end = time.time() + max(0.0, deadline - time.time()) / (len(todo) - i)  # an equal share of what is left
        t0 = time.time()
        rows = []
        try:
            be = make_backend(backend, shape(sh), max(Gs), max(N_ORDER))
            for G, n in _grid_cells(Gs):
                if time.time() > t_end:
                    break
                c0 = time.time()
                t_us = be.measure(G, n)
                rows.append({"G": G, "n": n, "kind": "grid", "t_us": t_us, "cell_s": round(time.time() - c0, 2)})
        except Exception as exc:  # noqa: BLE001 -- reported; the other grids still run
            out[f"{backend}/{sh}"] = {"error": f"after {len(rows)} cells: {type(exc).__name__}: {str(exc)[:300]}"}
            _expect(ctx, False, f"{backend}/{sh} after {len(rows)} cells: {type(exc).__name__}: {str(exc)[:200]}")
            ctx.setdefault("broken", set()).add(backend)
            continue
        info = be.info()
        del be
        samples = pd.DataFrame(rows)
        res = {"cells": len(samples), "of": len(Gs) * len(N_ORDER), "seconds": round(time.time() - t0, 1)}
        if len(samples) >= 6:
            samples["N"] = samples.G * samples.n
            samples["T"] = samples.G * tiles(samples.n)
            fits = fit_all(samples[["G", "n", "N", "T", "kind", "t_us"]], name=f"{backend}-{sh}")
            ctx.setdefault("fits", {})[(backend, sh)] = fits
            z = fits["max_affine_no_intercept"]
            bytes_per = backend_class(backend).bytes_per_param
            res.update(b_us=round(z["params"]["b"], 3), beta_us=round(z["params"]["beta"], 5),
                       n_star=round(z["params"]["n_star"], 1), fit_error=round(z["error"], 4),
                       full_fit={k: round(v, 4) for k, v in fits["max_affine"]["params"].items()},
                       full_fit_error=round(fits["max_affine"]["error"], 4),
                       roofline_datasheet_us=round(roofline_us(sh, H200_HBM_TB_S, bytes_per), 2),
                       roofline_measured_copy_us=round(roofline_us(sh, ctx.get("copy_tb_s") or H200_HBM_TB_S,
                                                                  bytes_per), 2))
            table = samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).to_csv(index=False)
            files = {"samples.csv.gz": gzip.compress(table.encode(), mtime=0),
                     "fit.json": json.dumps(fits, indent=1).encode()}
            man = {"kind": "calibration", "machine": ctx.get("machine"), **info, "backend": backend, "shape": sh,
                   "d_model": shape(sh).d_model, "d_ff": shape(sh).d_ff, "date": ctx["date"], "cells": len(samples),
                   "duration_s": res["seconds"], "command": ctx["command"] + "  (grid section)",
                   "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                   "grid": "gpu-check short grid: G in " + str(list(Gs)) + ", n in " + str(sorted(N_ORDER)) +
                           " measured in the order " + str(list(N_ORDER)) + " per G until the section's budget ran out"}
            out_dir = ctx["root"]
            res["recording"] = store.write(out_dir.name, f"{ctx['date']}-{backend}-{sh}-gpucheck", files, man,
                                           out_dir.parent).path.name
        out[f"{backend}/{sh}"] = res
    return out


def fit_comparison(df: pd.DataFrame, fits: dict | None, tol: float = FIT_TOL) -> dict:
    """epbench rows beside the calibrated fit of the same backend and shape: the fitted form
    with the smallest grid error among Eq. 1 (``max_affine``) and Eq. 2 (``tile``), then
    :func:`tempo.benchmarks.epbench.compare_with_fit`.  ``fits`` None (no grid ran for this
    backend and shape): ``{"skipped": why}``."""
    from .epbench import compare_with_fit

    if not fits:
        return {"skipped": "no calibrated fit of this backend and shape in this run (the grids section did not fit one)"}
    forms = [f for f in ("max_affine", "tile") if isinstance(fits.get(f), dict)]
    form = min(forms, key=lambda f: fits[f]["error"])
    return {"form": form, "fit_error": round(float(fits[form]["error"]), 4),
            **compare_with_fit(df, fit_model(fits, form), tol)}


def section_epbench(ctx) -> dict:
    """``epbench --emulate`` for a few steps on one GPU with graph-timed expert regions; the
    regions timed three ways (eager behind a 30 us and a 2 ms spin, graph); the expert time
    beside the grid section's fit for the same loads, flagged beyond 15%."""
    from ..calib.shapes import shape as get_shape
    from .epbench import (DEFAULT_POLICIES, make_expert_backend, plan_steps, run_emulated, sglang_expected_m,
                          summarize, time_three_ways, transfer)

    args = {"device": "cuda", "world_size": 8, "shape": "qwen3-30b", "experts": None, "top_k": 8, "tokens": 64,
            "steps": 6, "warmup": 1, "skew": 1.0, "replication": 1.25, "params": "qwen3-30b-offline",
            "policies": list(DEFAULT_POLICIES), "seed": 0, "expert_kernel": "auto", "timing": "graph"}
    if args["params"] not in set(params_table().index):
        args["params"] = "dsv3-offline"
    sh = get_shape(args["shape"])
    placement, counts = plan_steps(sh.n_experts, args["world_size"], args["tokens"], args["top_k"],
                                   args["steps"] + args["warmup"], args["skew"], args["replication"], args["seed"])
    per_gpu = placement.size // args["world_size"]
    em = sglang_expected_m(args["tokens"], args["world_size"], args["top_k"], placement.size)
    kernel = "auto" if _best_gpu_backend(ctx) == "deep_gemm" else "loop"
    failed = None
    try:
        be = make_expert_backend(kernel, sh, per_gpu, int(counts.max()), "cuda", seed=0, copies=args["world_size"])
        df = run_emulated({**args, "expert_kernel": kernel}, backend=be)
    except Exception as exc:  # noqa: BLE001 -- the fp8 region failed: say so, then run the loop
        failed = f"{type(exc).__name__}: {str(exc)[:300]}"
        _expect(ctx, False, f"epbench's {kernel} expert region failed: {failed}")
        be = make_expert_backend("loop", sh, per_gpu, int(counts.max()), "cuda", seed=0, copies=args["world_size"])
        df = run_emulated({**args, "expert_kernel": "loop"}, backend=be)
    ctx["files"]["epbench.csv"] = df
    s = summarize(df)
    tr = transfer(df)
    out = {"kernel": str(df.kernel.iloc[0]) + (f" (fp8 failed: {failed})" if failed else ""), "backend": be.name,
           "expected_m": em, "args": {k: v for k, v in args.items() if k != "policies"},
           "expert_us_median": {p: round(v, 2) for p, v in s.expert_us.items()},
           "measured_vs_static": {p: round(v, 3) for p, v in s["measured_vs_static"].items()},
           "model_vs_static": {p: round(v, 3) for p, v in s["model_vs_static"].items()}, **tr}
    # the same regions three ways: eager behind 30 us (launches inside the events), eager behind 2 ms, graph
    if _left(ctx) > 10:
        sub = [json.loads(x) for x in df["loads"].iloc[:10]]
        three = time_three_ways(be, sub, em)
        ctx["files"]["epbench_ways.csv"] = three
        med = three.groupby("way").expert_us.median()
        out["three_ways_us"] = {k: round(float(v), 2) for k, v in med.items()}
        out["three_ways_vs_graph"] = {k: round(float(v / med["graph"]), 3) for k, v in med.items()}
        fits = ctx.get("fits", {}).get((be.name, args["shape"]))
        if fits:
            out["three_ways_vs_fit"] = {w: fit_comparison(g.reset_index(drop=True), fits)["ratio_median"]
                                        for w, g in three.groupby("way")}
    else:
        out["three_ways_us"] = f"skipped: {_left(ctx):.0f} s left of the section's budget"
    cmp = fit_comparison(df, ctx.get("fits", {}).get((be.name, args["shape"])))
    out["vs_fit"] = cmp
    if cmp.get("disagree"):
        _flag(ctx, f"epbench: the graph-timed expert time is {cmp['ratio_median']:.2f}x the calibrated fit "
                   f"({cmp['form']}) for the same loads, beyond +-{FIT_TOL:.0%}")
    del be
    return out


def load_check(path) -> tuple[dict, str, dict]:
    """``(results, summary markdown, {section csv name: DataFrame})`` of one gpu-check folder
    (:func:`tempo.measured.catalog.load_check`; the summary rebuilt from the results when the
    folder has none)."""
    res, md, files = catalog.load_check(path)
    return res, md if md is not None else summary_md(res), files


def newest_check(chk: pd.DataFrame):
    """:func:`load_check` of the newest gpu-check folder of ``chk``
    (``tempo.measured.catalog.recordings("gpu-check")``), or None when there is none."""
    return load_check(chk.path.iloc[0]) if len(chk) else None


FUNCS = {"env": section_env, "triton": section_triton, "rowmask": section_rowmask, "serving": section_serving,
         "nccl": section_nccl, "numerics": section_numerics, "timer": section_timer, "grids": section_grids,
         "epbench": section_epbench}


# ------------------------------------------------------------------------------------ driver
def _numerics_line(k: str, v: dict) -> str:
    if "skipped" in v:
        return f"- numerics {k}: skipped ({v['skipped']})"
    if "error" in v:
        return f"- numerics {k}: FAILED ({v['error']})"
    parts = []
    for cell, e in v.items():
        parts.append(f"{cell} " + (f"{e:.2e}" if isinstance(e, (int, float)) else
                                   "/".join(f"{p} {x:.2e}" for p, x in e.items())))
    return f"- numerics {k} (|out-ref|/|ref| vs fp32): " + ", ".join(parts)


def failed_sections(results: dict) -> dict:
    """``{section: [reasons]}`` of every section that raised or whose checks failed."""
    out = {}
    for name in results.get("seconds", {}):
        r = results.get(name, {})
        if not isinstance(r, dict):
            continue
        why = ([r["error"]] if "error" in r and isinstance(r["error"], str) else []) + list(r.get("failed", []))
        if why:
            out[name] = why
    return out


def summary_md(results: dict) -> str:
    """The summary a person pastes into a note (also written to ``summary.md``)."""
    L = [f"# gpu-check {results['date']} on {results.get('env', {}).get('device', '?')}", ""]
    env = results.get("env", {})
    if "error" not in env:
        smi = env.get("nvidia_smi", {})
        L.append(f"- environment: driver {env.get('driver')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
                 f"triton {env.get('triton')}, nvcc {env.get('nvcc')}, CUDA_HOME {env.get('cuda_home')}; "
                 f"{env.get('sms')} SMs" + (f" (SM {env['capability']})" if env.get("capability") else "") +
                 f", L2 {env.get('l2_bytes', 0) / 2**20:.0f} MiB, {env.get('memory_gib')} GiB; "
                 f"SM clock {smi.get('clocks.sm', '?') if isinstance(smi, dict) else '?'} "
                 f"(max {smi.get('clocks.max.sm', '?') if isinstance(smi, dict) else '?'}); "
                 f"device-to-device copy {env.get('copy_tb_s')} TB/s (read + write)")
        setup = env.get("cuda_home_setup")
        if isinstance(setup, dict):
            L.append(f"  - DeepGEMM's CUDA home: {setup.get('cuda_home')} (nvcc {setup.get('nvcc')}, "
                     f"{setup.get('source')}; {setup.get('reason')})")
        for k, v in env.get("backends", {}).items():
            L.append(f"  - backend {k}: {'runs' if v['ok'] else 'unavailable'} ({v['why']})")
    for name in SECTIONS[1:]:
        r = results.get(name)
        if r is None:
            continue
        if "error" in r:
            L.append(f"- {name}: FAILED ({r['error']})")
        else:
            n0 = len(L)
            try:
                _section_lines(L, name, r)
            except (KeyError, TypeError, ValueError) as exc:  # a partial result never loses the summary
                del L[n0:]
                L.append(f"- {name}: " + json.dumps({k: v for k, v in r.items() if k not in ("failed", "flags")},
                                                    default=str)[:600] + f" (summary line: {type(exc).__name__} {exc})")
        for msg in r.get("failed", []):
            L.append(f"  - CHECK FAILED: {msg}")
        for msg in r.get("flags", []):
            L.append(f"  - FLAG: {msg}")
    L.append("")
    fails = failed_sections(results)
    L.append("Failed sections: " + ("; ".join(f"{k} ({'; '.join(v)[:300]})" for k, v in fails.items()) if fails
                                    else "none") + ".")
    L.append("Sections: " + ", ".join(f"{k} {v:.0f} s" for k, v in results["seconds"].items()) +
             f"; total {sum(results['seconds'].values()):.0f} s.")
    return "\n".join(L) + "\n"


def _section_lines(L: list, name: str, r: dict) -> None:
    """The summary lines of one section that did not raise."""
    if name == "triton":
        L.append(f"- triton vs reference on CUDA: counts exact in {r['counts_exact']}/{r['cases']} cases, ids agree "
                 f">= {r['ids_agree_min']:.4f}, output dtype kept {r['dtype_ok']}/{r['cases']}, invalid-pair counter "
                 f"right {r.get('invalid_counter_ok', '-')}/{r['cases']}; captured graph "
                 f"replayed {r['graph_replays']}x with new inputs: counts exact {r['graph_counts_exact']}/"
                 f"{r['graph_replays']}, ids agree >= {r['graph_ids_agree_min']:.4f}; 4096x8 pairs in "
                 f"{r['speed_4096x8_us']} us ({r['speed_mpairs_s']} M pairs/s)")
    elif name == "rowmask":
        L.append(f"- row mask (DP padding) on CUDA: masks right {r['masks_ok']}/{r['eager_cases']}, counts exact "
                 f"{r['counts_exact']}/{r['eager_cases']}, ids exact {r['ids_exact']}/{r['eager_cases']}; inside a "
                 f"captured graph {r['graph_exact']}/{r['graph_replays']} replays exact")
    elif name == "serving":
        L.append(f"- TempoRuntime on {r['device']}: {r['graphs']} graphs captured under capture_guard with the "
                 f"refresher running, {r['replays']} replays: {r['bad_picks']} invalid picks, {r['count_errors']} "
                 f"counter mismatches; update_layers midway: pointers unchanged {r['pointers_unchanged']}, "
                 f"{r['picks_only_valid_under_new_map']}/{r['moved_layer_picks']} picks of the moved layers "
                 f"valid only under the new map; refresher stats {r.get('stats_after')}")
    elif name == "nccl":
        L.append(f"- one-rank NCCL: all_gather {r['all_gather']}, barrier {r['barrier']}, all_to_all_single "
                 f"{r['all_to_all_single']}, all_reduce MAX {r['all_reduce_max']}; epbench worker {r['worker_rows']} "
                 f"rows ({r['worker_kernel']}), layer {r['worker_layer_us']} us, expert {r['worker_expert_us']} us")
    elif name == "numerics":
        for k, v in r.items():
            if k not in ("failed", "flags"):
                L.append(_numerics_line(k, v))
    elif name == "timer":
        L.append("- timer: " + "; ".join(f"{k} {v}" for k, v in r.items() if k not in ("failed", "flags")))
    elif name == "grids":
        for k, v in r.items():
            if k in ("failed", "flags"):
                continue
            if "skipped" in v:
                L.append(f"- grid {k}: skipped ({v['skipped']})")
            elif "error" in v:
                L.append(f"- grid {k}: FAILED ({v['error']})")
            elif "b_us" in v:
                L.append(f"- grid {k}: {v['cells']}/{v['of']} cells in {v['seconds']} s; zero-intercept Eq. 1 fit "
                         f"b = {v['b_us']} us, beta = {v['beta_us']} us/token, n* = {v['n_star']}, error "
                         f"{100 * v['fit_error']:.1f}%; roofline {v['roofline_datasheet_us']} us at 4.8 TB/s, "
                         f"{v['roofline_measured_copy_us']} us at the measured copy bandwidth"
                         + (f" (paper's H200 bound for DSv3: {PAPER_DSV3_H200_BOUND_US} us)" if "dsv3" in k else ""))
            else:
                L.append(f"- grid {k}: only {v['cells']} cells in {v['seconds']} s, not fitted")
    elif name == "epbench":
        L.append(f"- epbench --emulate ({r['kernel']}, {r['args']['world_size']} ranks, {r['args']['steps']} steps, "
                 f"{r['args'].get('timing', 'eager')}-timed): "
                 f"expert time vs static measured {r['measured_vs_static']}, modelled {r['model_vs_static']}; "
                 f"ranking agreement {r['agreement']:.0%} over {r['pairs']} pairs")
        if isinstance(r.get("three_ways_us"), dict):
            L.append(f"  - the same regions three ways (median makespan, us): {r['three_ways_us']}; "
                     f"relative to the graph: {r['three_ways_vs_graph']}")
        v = r.get("vs_fit")
        if isinstance(v, dict) and "ratio_median" in v:
            L.append(f"  - beside the calibrated fit ({v['form']}, grid error {100 * v['fit_error']:.1f}%) for the "
                     f"same loads: measured {v['expert_us_median']:.1f} us, fit {v['fit_us_median']:.1f} us, "
                     f"ratio {v['ratio_median']:.2f} (10-90%: {v['ratio_p10']:.2f}-{v['ratio_p90']:.2f}; per rank "
                     f"{v.get('rank_ratio_median', float('nan')):.2f}, correlation {v.get('rank_corr', float('nan')):.2f})"
                     + (f" -- DISAGREES beyond +-{v['tol']:.0%}" if v.get("disagree") else ""))
        elif isinstance(v, dict):
            L.append(f"  - beside the calibrated fit: skipped ({v.get('skipped')})")


def run(out: Path, sections=SECTIONS, budget_s: float = 420.0, command: str = "") -> dict:
    scale = budget_s / sum(BUDGET.values())
    date = dt.date.today().isoformat()
    out = Path(out)
    with store.Stage(out.name, f"{date}-gpu-check", out.parent) as stage:
        results = _run(stage, out, date, sections, scale, command)
    return results


def _run(stage, out: Path, date: str, sections, scale: float, command: str) -> dict:
    """:func:`run`'s sections, written into the stage as they finish, then committed."""
    ctx = {"root": out, "date": date, "files": {}, "command": command, "budget": {k: v * scale for k, v in BUDGET.items()}}
    results = {"date": date, "command": command, "seconds": {}}
    t_start = time.time()
    for name in sections:
        t0 = time.time()
        ctx["deadline"] = t0 + ctx["budget"][name]
        ctx["failed"], ctx["flags"] = [], []
        print(f"[gpu-check] {name} ...", flush=True)
        try:
            results[name] = FUNCS[name](ctx)
        except Exception as exc:  # noqa: BLE001 -- a failed section is reported, the others run
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}", "traceback": traceback.format_exc()[-3000:]}
            print(results[name]["traceback"], file=sys.stderr, flush=True)
        if ctx["failed"]:
            results[name]["failed"] = list(ctx["failed"])
        if ctx["flags"]:
            results[name]["flags"] = list(ctx["flags"])
        results["seconds"][name] = round(time.time() - t0, 1)
        verdict = "FAILED" if ("error" in results[name] or ctx["failed"]) else "done"
        print(f"[gpu-check] {name} {verdict} in {results['seconds'][name]} s", flush=True)
        stage.write_text("results.json", json.dumps(results, indent=1, default=str))  # nothing lost if cut off
        for fname, df in ctx.pop("files").items():
            stage.write_bytes(fname + ".gz", gzip.compress(df.to_csv(index=False).encode(), mtime=0))
        ctx["files"] = {}
    md = summary_md(results)
    stage.write_text("summary.md", md)
    man = {"machine": ctx.get("machine"), "date": date, "command": command, "duration_s": round(time.time() - t_start, 1),
           "sections": list(sections), "failed_sections": sorted(failed_sections(results)),
           "device": results.get("env", {}).get("device"),
           "driver": results.get("env", {}).get("driver"), "torch": results.get("env", {}).get("torch"),
           "triton": results.get("env", {}).get("triton"),
           "deep_gemm": results.get("env", {}).get("backends", {}).get("deep_gemm", {}).get("why"),
           "kind": "gpu-check"}
    stage.commit(man)
    return results


def main(argv=None) -> int:
    """Exit status: 0 when every section passed (skipped backends and flags included), 1 when a
    section failed (each is named, with why), or without a CUDA GPU; 2 for a usage error."""

    ap = argparse.ArgumentParser(prog="python -m tempo gpu-check", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder (default build/gpu-check); with --record, the root that stands in "
                                  "for data/measured (the check goes to OUT/<machine>/)")
    ap.add_argument("--record", action="store_true", help="write the recording under data/measured/<machine>/")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--budget-s", type=float_range(0.0, 86400.0, lo_open=True), default=420.0,
                    help="total time budget in seconds (default 420)")
    a = ap.parse_args(argv)
    secs = [s for s in a.sections.split(",") if s]
    bad = [s for s in secs if s not in SECTIONS]
    if bad or not secs:
        ap.error(f"--sections: unknown {bad or 'empty list'}; choose from {', '.join(SECTIONS)}")
    if not a.budget_s > 0:
        ap.error("--budget-s must be positive")
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        print(f"gpu-check needs torch with CUDA: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("gpu-check needs a CUDA GPU: torch " + torch.__version__ + " sees none", file=sys.stderr)
        return 1

    if a.record:
        out = store.root(a.out) / (store.slug(torch.cuda.get_device_name(0)) or "unknown")
    else:
        out = Path(a.out) if a.out else paths.BUILD / "gpu-check"
        try:
            store.safe_name(out.name, "--out")
        except ValueError as exc:
            ap.error(f"{exc}: the check's folders go under it as <date>-gpu-check/")
    cmd = "python -m tempo gpu-check " + " ".join(argv if argv is not None else sys.argv[2:])
    if "env" not in secs:
        secs = ["env"] + secs  # the environment is always recorded
    secs = [s for s in SECTIONS if s in secs]  # in the order the sections depend on each other
    res = run(out, secs, a.budget_s, cmd)
    print(summary_md(res))
    failed = failed_sections(res)
    flags = [f for k in secs for f in res.get(k, {}).get("flags", [])]
    print(f"written to {out}")
    if flags:
        print("flags: " + " | ".join(flags))
    if failed:
        print("gpu-check FAILED sections: " + "; ".join(f"{k}: {' / '.join(v)[:400]}" for k, v in failed.items()),
              file=sys.stderr)
        return 1
    return 0
