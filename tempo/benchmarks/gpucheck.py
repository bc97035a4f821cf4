"""``python -m tempo gpu-check`` (``make gpu-check``): the first thing to run on a GPU node.

One command, a few minutes on one H200, that needs only the GPU environment and writes
everything to one folder.  Each section runs under its own time budget and its own ``try``:
a section that fails is reported with its error and the others still run.

1. ``env``      driver, clocks, versions, L2 size, nvcc and CUDA_HOME, which calibration
                backends can run and why not, and the device-to-device copy bandwidth.
2. ``triton``   the Triton dispatch-and-count kernel against the torch reference on CUDA
                (padding, zero rows, negative and out-of-range ids, int32/int64 counters),
                then one captured CUDA graph replayed while the ids, uniforms, table and
                padding bound change underneath it; a speed line.
3. ``numerics`` each GPU backend against a float32 reference (DeepGEMM: the dequantised fp8
                operands; every group's real rows, ``n`` not a multiple of the tile).
4. ``timer``    the timer's launch bias: the same graphs timed on an idle stream, with a spin
                ahead of the start event, and back to back; and the L2 effect of rotating
                one weight copy against copies spanning 2x L2.
5. ``grids``    short calibration grids -- DSv3 and Qwen3-30B on DeepGEMM fp8, Qwen3-30B on
                torch bf16 -- fitted with Eq. 1 (the zero-intercept form of Table 6 and the
                full form), ``b`` beside the weight-streaming roofline (Section 2.2: DSv3 fp8
                on an H200 at 4.8 TB/s is 9.2 us; also at the measured copy bandwidth).
6. ``epbench``  ``epbench --emulate`` for a few steps on one GPU.

Output folder (``--out``, default ``build/gpu-check``): ``<date>-gpu-check/`` with
``results.json``, ``summary.md`` (also printed: paste it into a note), ``manifest.json`` and the
per-section CSVs, and one calibration recording per grid, ``<date>-<backend>-<shape>-gpucheck/``
(a second run the same day adds ``-2``), in
the format :func:`tempo.calib.record.load_recording` reads.  ``--record`` writes into
``data/measured/<machine>/`` instead, where the calibration chapter and the ledger find it.
"""
from __future__ import annotations

import argparse
import datetime as dt
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

SECTIONS = ("env", "triton", "numerics", "timer", "grids", "epbench")
#: seconds per section at the default total budget (scaled with ``--budget-s``)
BUDGET = {"env": 25, "triton": 60, "numerics": 60, "timer": 30, "grids": 240, "epbench": 45}
H200_HBM_TB_S = 4.8  # the datasheet bandwidth the paper's 9.2 us bound uses
PAPER_DSV3_H200_BOUND_US = 9.2

#: the short grids: (backend, shape, G values, n values in the order they are measured)
N_ORDER = (1, 256, 16, 1024, 4, 64, 2048, 2, 128, 8, 512, 32)
GRIDS = (("deep_gemm", "dsv3", (1, 8, 16)), ("deep_gemm", "qwen3-30b", (1, 8, 16)),
         ("torch_bf16", "qwen3-30b", (1, 8)))


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


# ------------------------------------------------------------------------------------ sections
def section_env(ctx) -> dict:
    import torch

    from ..calib.backends import backend_status, gpu_driver

    out = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "driver": gpu_driver(), "cuda_home": cuda_home()}
    q = ("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,"
         "temperature.gpu,memory.total,persistence_mode,compute_mode")
    line = _run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"])
    out["nvidia_smi"] = dict(zip(q.split(","), [v.strip() for v in line.splitlines()[0].split(",")])) \
        if "," in line else line
    nvcc = shutil.which("nvcc") or (os.path.join(out["cuda_home"], "bin", "nvcc") if out["cuda_home"] else None)
    out["nvcc"] = _run([nvcc, "--version"]).splitlines()[-1] if nvcc and os.path.exists(nvcc) else "not found"
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        out["triton"] = f"unavailable: {type(exc).__name__}: {exc}"
    out["backends"] = {k: {"ok": ok, "why": why} for k, (ok, why) in backend_status().items()}
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
    ctx["machine"] = _slug(out["device"])
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
    import torch

    from ..calib.backends import GraphTimer
    from ..serving.kernels import dispatch_and_count_reference as ref
    from ..serving.triton_kernels import dispatch_and_count_triton as tri

    rng = np.random.default_rng(0)
    cases = []
    for T, K, E, R, holes in ((1, 1, 1, 1, False), (37, 4, 9, 3, True), (300, 8, 64, 4, True), (4096, 8, 256, 9, True),
                              (0, 8, 16, 2, False)):
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
    # speed: 4096 x 8 pairs over 256 experts x 9 replicas, graph replays timed with the spin timer
    ids, prob, phys, u, nv, _ = _triton_case(np.random.default_rng(5), 4096, 8, 256, 9, True, torch.int64,
                                             torch.int64, "tensor")
    ids, prob, phys, u, nv = ids.cuda(), prob.cuda(), phys.cuda(), u.cuda(), nv.cuda()
    cnt = torch.zeros(256, dtype=torch.int64, device="cuda")
    timer = GraphTimer(replays=50)
    us = timer.time(lambda c: tri(ids, prob, phys, cnt, u, nv), 1)
    ctx["files"]["triton.csv"] = pd.concat([df.assign(kind="eager"), gdf.assign(kind="graph")], ignore_index=True)
    return {"cases": len(df), "counts_exact": int(df.counts_equal.sum()), "ids_agree_min": float(df.ids_agree.min()),
            "invalid_counter_ok": int(df.invalid_ok.sum()),
            "dtype_ok": int(df.dtype_ok.sum()), "graph_replays": len(gdf),
            "graph_counts_exact": int(gdf.counts_equal.sum()), "graph_ids_agree_min": float(gdf.ids_agree.min()),
            "speed_4096x8_us": round(us, 2), "speed_mpairs_s": round(4096 * 8 / us, 1)}


def section_numerics(ctx) -> dict:
    from ..calib.backends import DeepGemmBackend, TorchBf16Backend, backend_status
    from ..calib.shapes import shape

    out = {}
    st = backend_status()
    cells = ((1, 1), (1, 77), (3, 130), (8, 200))
    for name, cls in (("deep_gemm", DeepGemmBackend), ("torch_bf16", TorchBf16Backend)):
        if not st[name][0]:
            out[name] = {"skipped": st[name][1]}
            continue
        for sh in ("qwen3-30b", "dsv3"):
            try:
                be = cls(shape(sh), 8, 256, l2_factor=0.01)  # numerics only: no rotation needed
                out[f"{name}/{sh}"] = {f"G={G},n={n}": be.check_numerics(G, n) for G, n in cells}
                del be
            except Exception as exc:  # noqa: BLE001 -- reported; the other backend still runs
                out[f"{name}/{sh}"] = {"skipped": f"FAILED {type(exc).__name__}: {str(exc)[:300]}"}
                ctx.setdefault("broken", set()).add(name)
    return out


def section_timer(ctx) -> dict:
    """The launch bias of the timer, measured: identical graphs timed three ways, and the L2
    effect of the weight rotation."""
    import torch

    from ..calib.backends import DeepGemmBackend, GraphTimer, TorchBf16Backend, backend_status, copies_for
    from ..calib.shapes import shape

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
    # (b) the calibration cell most exposed: Qwen3-30B at G = 1, n = 1, one copy vs copies over 2x L2
    name = "deep_gemm" if backend_status()["deep_gemm"][0] and "deep_gemm" not in ctx.get("broken", ()) \
        else "torch_bf16"
    try:
        be = (DeepGemmBackend if name == "deep_gemm" else TorchBf16Backend)(shape("qwen3-30b"), 1, 1)
    except Exception:  # noqa: BLE001
        if name != "deep_gemm":
            raise
        name, be = "torch_bf16", TorchBf16Backend(shape("qwen3-30b"), 1, 1)
    fn = be._fn(1, 1)
    fn(0)
    torch.cuda.synchronize()
    for label, copies, spin in (("1 copy (L2-resident)", 1, 50.0), (f"{be.copies} copies (>= 2x L2)", be.copies, 50.0),
                                (f"{be.copies} copies, no spin", be.copies, 0.0)):
        tm = GraphTimer(replays=60, spin_us=spin)
        rows.append({"graph": f"{name} qwen3-30b G=1 n=1", "method": label, "us": tm.time(fn, copies)})
    df = pd.DataFrame(rows)
    ctx["files"]["timer.csv"] = df
    r = {f"{a} | {b}": round(u, 3) for a, b, u in df[["graph", "method", "us"]].itertuples(index=False)}
    r["copies_formula"] = f"copies_for({shape('qwen3-30b').bytes(1.0 if name == 'deep_gemm' else 2.0):.3g} B, " \
                          f"L2 {be.l2}) = {copies_for(be.expert_bytes, be.l2)}"
    return r


def _grid_cells(Gs, budget_order=N_ORDER):
    return [(G, n) for G in Gs for n in budget_order]


def section_grids(ctx) -> dict:
    from ..calib.backends import backend_status, make_backend
    from ..calib.record import fit_all
    from ..calib.grid import tiles
    from ..calib.shapes import roofline_us, shape

    st = backend_status()
    out = {}
    deadline = ctx["deadline"]
    share = {"deep_gemm": 0.4, "torch_bf16": 0.2}
    for backend, sh, Gs in GRIDS:
        if not st[backend][0]:
            out[f"{backend}/{sh}"] = {"skipped": st[backend][1]}
            continue
        t_end = min(deadline, time.time() + share[backend] * ctx["budget"]["grids"])
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
            out[f"{backend}/{sh}"] = {"skipped": f"FAILED after {len(rows)} cells: {type(exc).__name__}: {str(exc)[:300]}"}
            ctx.setdefault("broken", set()).add(backend)
            continue
        info = be.info()
        del be
        samples = pd.DataFrame(rows)
        res = {"cells": len(samples), "of": len(Gs) * len(N_ORDER), "seconds": round(time.time() - t0, 1)}
        if len(samples) >= 4:
            samples["N"] = samples.G * samples.n
            samples["T"] = samples.G * tiles(samples.n)
            fits = fit_all(samples[["G", "n", "N", "T", "kind", "t_us"]], name=f"{backend}-{sh}")
            z = fits["max_affine_no_intercept"]
            bytes_per = 1.0 if backend == "deep_gemm" else 2.0
            res.update(b_us=round(z["params"]["b"], 3), beta_us=round(z["params"]["beta"], 5),
                       n_star=round(z["params"]["n_star"], 1), fit_error=round(z["error"], 4),
                       full_fit={k: round(v, 4) for k, v in fits["max_affine"]["params"].items()},
                       full_fit_error=round(fits["max_affine"]["error"], 4),
                       roofline_datasheet_us=round(roofline_us(sh, H200_HBM_TB_S, bytes_per), 2),
                       roofline_measured_copy_us=round(roofline_us(sh, ctx.get("copy_tb_s") or H200_HBM_TB_S,
                                                                  bytes_per), 2))
            rec = _fresh(ctx["root"] / f"{ctx['date']}-{backend}-{sh}-gpucheck")
            samples[["G", "n", "N", "T", "kind", "t_us"]].sort_values(["G", "n"]).to_csv(
                rec / "samples.csv.gz", index=False, compression="gzip")
            (rec / "fit.json").write_text(json.dumps(fits, indent=1))
            man = {"machine": ctx.get("machine"), **info, "backend": backend, "shape": sh,
                   "d_model": shape(sh).d_model, "d_ff": shape(sh).d_ff, "date": ctx["date"], "cells": len(samples),
                   "duration_s": res["seconds"], "command": ctx["command"] + "  (grid section)",
                   "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
                   "grid": "gpu-check short grid: G in " + str(list(Gs)) + ", n in " + str(sorted(N_ORDER)) +
                           " measured in the order " + str(list(N_ORDER)) + " per G until the section's budget ran out"}
            (rec / "manifest.json").write_text(json.dumps(man, indent=1))
            res["recording"] = rec.name
        out[f"{backend}/{sh}"] = res
    return out


def section_epbench(ctx) -> dict:
    from .epbench import DEFAULT_POLICIES, run_emulated, summarize, transfer

    args = {"device": "cuda", "world_size": 8, "shape": "qwen3-30b", "experts": None, "top_k": 8, "tokens": 64,
            "steps": 6, "warmup": 1, "skew": 1.0, "replication": 1.25, "params": "qwen3-30b-offline",
            "policies": list(DEFAULT_POLICIES), "seed": 0, "expert_kernel": "auto"}
    from ..core.params import params_table

    if args["params"] not in set(params_table().index):
        args["params"] = "dsv3-offline"
    fallback = None
    try:
        df = run_emulated(args)
    except Exception as exc:  # noqa: BLE001 -- the fp8 expert kernel failed: run the loop, say so
        fallback = f"{type(exc).__name__}: {str(exc)[:300]}"
        df = run_emulated({**args, "expert_kernel": "loop"})
    ctx["files"]["epbench.csv"] = df
    s = summarize(df)
    tr = transfer(df)
    return {"kernel": str(df.kernel.iloc[0]) + (f" (fp8 failed: {fallback})" if fallback else ""), "args": {k: v for k, v in args.items() if k != "policies"},
            "expert_us_median": {p: round(v, 2) for p, v in s.expert_us.items()},
            "measured_vs_static": {p: round(v, 3) for p, v in s["measured_vs_static"].items()},
            "model_vs_static": {p: round(v, 3) for p, v in s["model_vs_static"].items()}, **tr}


def checks(root=None) -> pd.DataFrame:
    """Every gpu-check folder under ``data/measured/`` (newest first): machine, date, device,
    sections, path."""
    from ..core import paths

    rows = []
    for m in sorted(Path(root or paths.MEASURED).glob("*/*/manifest.json")):
        man = json.loads(m.read_text())
        if "sections" not in man:
            continue
        rows.append({"machine": man.get("machine"), "date": man.get("date"), "device": man.get("device"),
                     "sections": ", ".join(man.get("sections", [])), "path": m.parent})
    df = pd.DataFrame(rows, columns=["machine", "date", "device", "sections", "path"])
    return df.iloc[::-1].sort_values("date", ascending=False, kind="stable").reset_index(drop=True)


def load_check(path) -> tuple[dict, str, dict]:
    """``(results, summary markdown, {section csv name: DataFrame})`` of one gpu-check folder."""
    path = Path(path)
    res = json.loads((path / "results.json").read_text())
    md = (path / "summary.md").read_text() if (path / "summary.md").exists() else summary_md(res)
    files = {p.name.split(".")[0]: pd.read_csv(p) for p in sorted(path.glob("*.csv.gz"))}
    return res, md, files


def newest_check(chk: pd.DataFrame):
    """:func:`load_check` of the newest gpu-check folder of ``chk`` (:func:`checks`), or None
    when there is none."""
    return load_check(chk.path.iloc[0]) if len(chk) else None


FUNCS = {"env": section_env, "triton": section_triton, "numerics": section_numerics, "timer": section_timer,
         "grids": section_grids, "epbench": section_epbench}


# ------------------------------------------------------------------------------------ driver
def _fresh(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``, ... : the first that does not exist yet (created), so a
    second run on the same day never overwrites the first one's recording."""
    cand, k = Path(path), 1
    while cand.exists():
        k += 1
        cand = Path(f"{path}-{k}")
    cand.mkdir(parents=True)
    return cand


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:60] or "unknown"


def summary_md(results: dict) -> str:
    """The summary a person pastes into a note (also written to ``summary.md``)."""
    L = [f"# gpu-check {results['date']} on {results.get('env', {}).get('device', '?')}", ""]
    env = results.get("env", {})
    if "error" not in env:
        smi = env.get("nvidia_smi", {})
        L.append(f"- environment: driver {env.get('driver')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
                 f"triton {env.get('triton')}, nvcc {env.get('nvcc')}, CUDA_HOME {env.get('cuda_home')}; "
                 f"{env.get('sms')} SMs, L2 {env.get('l2_bytes', 0) / 2**20:.0f} MiB, {env.get('memory_gib')} GiB; "
                 f"SM clock {smi.get('clocks.sm', '?') if isinstance(smi, dict) else '?'} "
                 f"(max {smi.get('clocks.max.sm', '?') if isinstance(smi, dict) else '?'}); "
                 f"device-to-device copy {env.get('copy_tb_s')} TB/s (read + write)")
        for k, v in env.get("backends", {}).items():
            L.append(f"  - backend {k}: {'runs' if v['ok'] else 'unavailable'} ({v['why']})")
    for name in SECTIONS[1:]:
        r = results.get(name)
        if r is None:
            continue
        if "error" in r:
            L.append(f"- {name}: FAILED ({r['error']})")
            continue
        if name == "triton":
            L.append(f"- triton vs reference on CUDA: counts exact in {r['counts_exact']}/{r['cases']} cases, ids agree "
                     f">= {r['ids_agree_min']:.4f}, output dtype kept {r['dtype_ok']}/{r['cases']}, invalid-pair counter "
                     f"right {r.get('invalid_counter_ok', '-')}/{r['cases']}; captured graph "
                     f"replayed {r['graph_replays']}x with new inputs: counts exact {r['graph_counts_exact']}/"
                     f"{r['graph_replays']}, ids agree >= {r['graph_ids_agree_min']:.4f}; 4096x8 pairs in "
                     f"{r['speed_4096x8_us']} us ({r['speed_mpairs_s']} M pairs/s)")
        elif name == "numerics":
            for k, v in r.items():
                if "skipped" in v:
                    L.append(f"- numerics {k}: skipped ({v['skipped']})")
                else:
                    L.append(f"- numerics {k} (|out-ref|/|ref| vs fp32): " +
                             ", ".join(f"{c} {e:.2e}" for c, e in v.items()))
        elif name == "timer":
            L.append("- timer: " + "; ".join(f"{k} {v}" for k, v in r.items()))
        elif name == "grids":
            for k, v in r.items():
                if "skipped" in v:
                    L.append(f"- grid {k}: skipped ({v['skipped']})")
                elif "b_us" in v:
                    L.append(f"- grid {k}: {v['cells']}/{v['of']} cells in {v['seconds']} s; zero-intercept Eq. 1 fit "
                             f"b = {v['b_us']} us, beta = {v['beta_us']} us/token, n* = {v['n_star']}, error "
                             f"{100 * v['fit_error']:.1f}%; roofline {v['roofline_datasheet_us']} us at 4.8 TB/s, "
                             f"{v['roofline_measured_copy_us']} us at the measured copy bandwidth"
                             + (f" (paper's H200 bound for DSv3: {PAPER_DSV3_H200_BOUND_US} us)" if "dsv3" in k else ""))
                else:
                    L.append(f"- grid {k}: only {v['cells']} cells in {v['seconds']} s, not fitted")
        elif name == "epbench":
            L.append(f"- epbench --emulate ({r['kernel']}, {r['args']['world_size']} ranks, {r['args']['steps']} steps): "
                     f"expert time vs static measured {r['measured_vs_static']}, modelled {r['model_vs_static']}; "
                     f"ranking agreement {r['agreement']:.0%} over {r['pairs']} pairs")
    L.append("")
    L.append("Sections: " + ", ".join(f"{k} {v:.0f} s" for k, v in results["seconds"].items()) +
             f"; total {sum(results['seconds'].values()):.0f} s.")
    return "\n".join(L) + "\n"


def run(out: Path, sections=SECTIONS, budget_s: float = 420.0, command: str = "") -> dict:
    scale = budget_s / sum(BUDGET.values())
    date = dt.date.today().isoformat()
    out = Path(out)
    folder = _fresh(out / f"{date}-gpu-check")
    ctx = {"root": out, "date": date, "files": {}, "command": command, "budget": {k: v * scale for k, v in BUDGET.items()}}
    results = {"date": date, "command": command, "seconds": {}}
    t_start = time.time()
    for name in sections:
        t0 = time.time()
        ctx["deadline"] = t0 + ctx["budget"][name]
        print(f"[gpu-check] {name} ...", flush=True)
        try:
            results[name] = FUNCS[name](ctx)
        except Exception as exc:  # noqa: BLE001 -- a failed section is reported, the others run
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}", "traceback": traceback.format_exc()[-3000:]}
            print(results[name]["traceback"], file=sys.stderr, flush=True)
        results["seconds"][name] = round(time.time() - t0, 1)
        print(f"[gpu-check] {name} done in {results['seconds'][name]} s", flush=True)
        (folder / "results.json").write_text(json.dumps(results, indent=1, default=str))  # nothing lost if cut off
        for fname, df in ctx.pop("files").items():
            df.to_csv(folder / (fname + ".gz"), index=False, compression="gzip")
        ctx["files"] = {}
    md = summary_md(results)
    (folder / "summary.md").write_text(md)
    man = {"machine": ctx.get("machine"), "date": date, "command": command, "duration_s": round(time.time() - t_start, 1),
           "sections": list(sections), "device": results.get("env", {}).get("device"),
           "driver": results.get("env", {}).get("driver"), "torch": results.get("env", {}).get("torch"),
           "files": sorted(p.name for p in folder.iterdir())}
    (folder / "manifest.json").write_text(json.dumps(man, indent=1))
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tempo gpu-check", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder (default build/gpu-check; with --record data/measured/<machine>)")
    ap.add_argument("--record", action="store_true", help="write the recording under data/measured/<machine>/")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--budget-s", type=float, default=420.0, help="total time budget in seconds (default 420)")
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
    from ..core import paths

    if a.out:
        out = Path(a.out)
    elif a.record:
        out = paths.MEASURED / _slug(torch.cuda.get_device_name(0))
    else:
        out = paths.BUILD / "gpu-check"
    cmd = "python -m tempo gpu-check " + " ".join(argv if argv is not None else sys.argv[2:])
    if "env" not in secs:
        secs = ["env"] + secs  # the environment is always recorded
    res = run(out, secs, a.budget_s, cmd)
    print(summary_md(res))
    failed = [k for k in secs if "error" in res.get(k, {})]
    print(f"written to {out}" + (f"; failed sections: {', '.join(failed)}" if failed else ""))
    return 1 if "env" in failed else 0
