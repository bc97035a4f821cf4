"""Serving benchmark driver (paper Sections 5.8-5.15): ``python -m tempo serve-bench``.

For every window and policy: launch an SGLang server with the policy's
``--ep-dispatch-algorithm``, run a ``sglang.benchmark.serving`` workload, stop it; each policy is
paired with ``static`` back-to-back in the same window (order alternating), since drift between
windows exceeds the effects measured (Section 5.11).  :func:`apply_window_rule` excludes a pair
only for an infrastructure failure read from the run records (Section 5.10), never by outcome.

Writes to ``--out`` (default ``build/serve-bench``): ``runs.csv`` (one row per run),
``pairs.csv`` (one per kept pair: deltas against same-window static), ``records.jsonl`` and
``manifest.json``; ``python -m tempo ingest OUT`` stores it.  ``--dry-run`` prints the commands.
Two nodes (Section 5.15, EP16): ``--nnodes 2 --dist-init-addr NODE0:PORT``; node 0 runs the
driver and the client, node 1 the same command with ``--node-rank 1`` (node 0 prints it), which
launches its half of each server and stops it when node 0's ``/health`` goes down; a resumed
node 0 needs node 1 started with ``--skip-runs``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..core import paths
from ..core.io import atomic_write_csv, atomic_write_text
from ..measured import store

log = logging.getLogger(__name__)
#: the most bytes read from a run's own output file (records.jsonl, a benchmark result, a config.json)
MAX_READ = 256 * 2**20
#: policy -> (--ep-dispatch-algorithm, extra environment)
POLICIES = {
    "static": ("static", {}),
    "dynamic": ("dynamic", {}),
    "lp": ("lp", {}),
    "tempo": ("tempo", {}),
    "tempo_noop": ("tempo_noop", {}),
    "tempo_tokenlp": ("tempo", {"TEMPO_POLICY": "token_lp"}),
    "tempo_hier": ("tempo", {"TEMPO_TOPOLOGY": "hier"}),
    "tempo_flat": ("tempo", {"TEMPO_TOPOLOGY": "flat"}),
    "tempo_inthread": ("tempo", {"TEMPO_SOLVER": "thread"}),
}
METRICS = ["output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
           "median_itl_ms", "p99_itl_ms"]
TINY_MODEL = paths.ROOT / "data" / "models" / "tiny-qwen3-moe"
#: the DSv3-shape proxy of Sections 5.11-5.13 (DSv3 expert geometry, 1 dense + 4 MoE layers)
DSV3_PROXY_MODEL = paths.ROOT / "data" / "models" / "dsv3-proxy"
#: model architectures SGLang 0.5.23's LPLB (``lp``) accepts (``srt/eplb/lplb_solver.py``)
LPLB_ARCHS = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                        "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle", "Glm4MoeLiteForCausalLM",
                        "GlmMoeDsaForCausalLM"})


@dataclass
class Workload:
    """One ``sglang.benchmark.serving`` workload."""

    name: str = "random-decode"
    dataset: str = "random"  # random | sharegpt
    num_prompts: int = 512
    input_len: int = 256
    output_len: int = 1024
    request_rate: str = "inf"  # Poisson rate (req/s) or inf
    max_concurrency: int | None = 256
    dataset_path: str | None = None
    seed: int = 1
    range_ratio: float = 1.0

    def args(self, base_url: str, out: str) -> list[str]:
        a = [sys.executable, "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", base_url,
             "--dataset-name", self.dataset, "--num-prompts", str(self.num_prompts), "--request-rate",
             str(self.request_rate), "--seed", str(self.seed), "--output-file", out]
        if self.dataset == "random":
            a += ["--random-input-len", str(self.input_len), "--random-output-len", str(self.output_len),
                  "--random-range-ratio", str(self.range_ratio)]
        if self.dataset_path:
            a += ["--dataset-path", self.dataset_path]
        if self.max_concurrency:
            a += ["--max-concurrency", str(self.max_concurrency)]
        return a


@dataclass
class ServerSpec:
    model: str = str(TINY_MODEL)
    tp: int = 8
    ep: int = 8
    a2a: str = "deepep"
    redundant: int = 32
    dummy_weights: bool = False
    init_expert_location: str | None = None  # e.g. a drift-K corrupted distribution (Section 5.12)
    extra: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)  # extra environment of every tempo server (TEMPO_*)
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None  # host:port of node 0, for SGLang's torch.distributed init

    def __post_init__(self):
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"node_rank must lie in [0, nnodes = {self.nnodes}), got {self.node_rank}")
        if self.nnodes > 1 and not self.dist_init_addr:
            raise ValueError("dist_init_addr (host:port of node 0) is required with nnodes > 1")
        if self.tp % self.nnodes:
            raise ValueError(f"tp = {self.tp} must be a multiple of nnodes = {self.nnodes} (SGLang's check)")

    def args(self, algorithm: str, port: int) -> list[str]:
        host = "0.0.0.0" if self.nnodes > 1 else "127.0.0.1"  # node 1 watches node 0's /health
        a = [sys.executable, "-m", "sglang.launch_server", "--model-path", self.model, "--host", host,
             "--port", str(port), "--tp-size", str(self.tp), "--ep-size", str(self.ep),
             "--moe-a2a-backend", self.a2a, "--ep-num-redundant-experts", str(self.redundant),
             "--ep-dispatch-algorithm", algorithm]
        if self.dummy_weights:
            a += ["--load-format", "dummy"]
        if self.init_expert_location:
            a += ["--init-expert-location", self.init_expert_location]
        if self.nnodes > 1:  # SGLang 0.5.23 flags (arg_groups/fields/parallel.py)
            a += ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank),
                  "--dist-init-addr", self.dist_init_addr]
        return a + list(self.extra)

    def for_node(self, node_rank: int) -> "ServerSpec":
        """The same server's half on another node."""
        from dataclasses import replace

        return replace(self, node_rank=int(node_rank), env=dict(self.env), extra=list(self.extra))


def other_node_command(argv: list[str], node_rank: int) -> list[str]:
    """The exact ``serve-bench`` command another node runs: node 0's arguments with
    ``--node-rank`` set (an existing ``--node-rank`` / ``--node-rank=`` replaced)."""
    out, skip = [], False
    for i, x in enumerate(argv):
        if skip:
            skip = False
            continue
        if x == "--":
            out += ["--node-rank", str(node_rank)] + argv[i:]
            break
        if x == "--node-rank":
            skip = True
            continue
        if x.startswith("--node-rank="):
            continue
        out.append(x)
    else:
        out += ["--node-rank", str(node_rank)]
    return [sys.executable, "-m", "tempo", "serve-bench"] + out


def node0_health_url(dist_init_addr: str, port: int) -> str:
    """Node 0's server health endpoint: the host of ``--dist-init-addr``, the server ``--port``."""
    host = dist_init_addr.rsplit(":", 1)[0].strip("[]")
    return f"http://{host}:{port}/health"


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def follow(spec: ServerSpec, policies: list[str], workloads: list, windows: int, port: int, baseline: str = "static",
           skip_runs: int = 0, health=None, launch=None, poll_s: float = 2.0, startup_timeout: float = 900,
           log=print, clock=time.monotonic) -> list[dict]:
    """Node ``spec.node_rank`` > 0 of a multi-node campaign: the same run plan as :func:`drive`
    on node 0, servers only.  For each run: launch this node's half of the server, wait until
    node 0's server has been healthy and is no longer (node 0 finished the run) -- or this
    server exited, or node 0 never came up within ``startup_timeout`` -- then stop it.
    ``health()`` (node 0 up?), ``launch(cmd, env) -> Popen`` and ``clock`` are injectable for tests."""
    import signal

    health = health or (lambda: _up(node0_health_url(spec.dist_init_addr, port)))
    launch = launch or (lambda cmd, env: subprocess.Popen(cmd, env=env, start_new_session=True))
    plan = [(w, wl, p, o) for wl in workloads for (w, p, o) in schedule(policies, windows, baseline)]
    done = []
    for w, wl, p, o in plan[skip_runs:]:
        algo, env_extra = POLICIES[p]
        env_extra = {**(spec.env if algo in ("tempo", "tempo_noop") else {}), **env_extra}
        cmd = spec.args(algo, port)
        log(f"serve-bench node {spec.node_rank}: window {w} {wl.name} {p}: {shlex.join(cmd)}")
        proc = launch(cmd, {**os.environ, **env_extra})
        seen_up, t0, why = False, clock(), None
        while why is None:
            if proc.poll() is not None:
                why = "server exited"
            elif health():
                seen_up = True
            elif seen_up:
                why = "node 0 finished the run"
            elif clock() - t0 > startup_timeout:
                why = "node 0 never became healthy"
            if why is None:
                time.sleep(poll_s)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        done.append({"window": w, "workload": wl.name, "policy": p, "order": o, "ended": why})
    return done


def drift_location(logical_count, k: int, out, seed: int = 0) -> dict:
    """Write an ``--init-expert-location`` file for the stale-placement studies (Section
    5.12): per layer, the ``k`` hottest experts' counts swapped with random cold ones
    (:func:`tempo.world.placement.drift_corrupt`), as SGLang's ``{"logical_count": [L][E]}`` JSON,
    from which SGLang builds its EPLB placement.  ``logical_count`` is ``[L, E]`` or
    ``[steps, L, E]`` (summed)."""
    import numpy as np

    from ..world.placement import drift_corrupt

    c = np.asarray(logical_count, dtype=np.float64)
    if c.ndim == 3:
        c = c.sum(axis=0)
    if c.ndim != 2:
        raise ValueError(f"logical_count must be [L, E] or [steps, L, E], got shape {c.shape}")
    bad = drift_corrupt(c, k, seed=seed)
    data = {"logical_count": np.rint(bad).astype(np.int64).tolist()}
    from ..core.io import atomic_write_text

    atomic_write_text(Path(out), json.dumps(data))  # refuses a FIFO or a device node at out
    return data


def drift_main(argv=None) -> int:
    """``python -m tempo drift-location TRACE.npz --k 16 -o drift16.json``."""
    from ..core.argtypes import ArgumentParser, input_file, int_range, output_file
    from ..world.traces import read_trace

    ap = ArgumentParser(prog="python -m tempo drift-location",
                        description="drift-K corrupted expert distribution for --init-expert-location")
    ap.add_argument("trace", type=input_file, help="routing trace (.npz, e.g. from import-trace)")
    ap.add_argument("--k", type=int_range(0, 65536), default=16, help="hot experts swapped per layer (at most E/2)")
    ap.add_argument("--seed", type=int_range(0, 2**32 - 1), default=0)
    ap.add_argument("-o", "--out", required=True, type=output_file)
    a = ap.parse_args(argv)
    try:
        counts, _ = read_trace(a.trace)
    except ValueError as exc:
        ap.fail("trace", str(exc))
    if 0 in counts.shape:
        ap.fail("trace", f"{a.trace} holds no routing (shape {counts.shape})")
    if a.k > counts.shape[2] // 2:
        ap.fail("--k", f"must lie in [0, E/2 = {counts.shape[2] // 2}] for this trace's {counts.shape[2]} experts, "
                       f"got {a.k}")
    drift_location(counts, a.k, a.out, a.seed)
    print(f"wrote {a.out}: drift-{a.k} logical_count for {counts.shape[1]} layers x {counts.shape[2]} experts")
    return 0


# ---------------------------------------------------------------------------- parsing and the window rule
def parse_result(path) -> dict:
    """The last JSON line of a ``sglang.benchmark.serving --output-file`` (one line per run)."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{p} does not exist: the benchmark wrote no result")
    from ..core.io import loads_json, read_regular

    lines = [l for l in read_regular(p, MAX_READ, str(p), follow=True).decode("utf-8", "replace").splitlines()
             if l.strip()]
    if not lines:
        raise ValueError(f"{p} is empty: the benchmark wrote no result")
    rec = loads_json(lines[-1], f"{p} (last line)")
    if not isinstance(rec, dict):
        raise ValueError(f"{p}: the last line is not a result object")
    missing = [m for m in METRICS if m not in rec]
    if missing:
        raise ValueError(f"{p}: result lacks {missing}")
    return rec


def classify(run: dict) -> str:
    """Infrastructure status of one run record, from the record alone: ``ok``,
    ``server_failed``, ``bench_failed`` or ``incomplete``."""
    if not run.get("server_healthy", False) or run.get("server_died", False):
        return "server_failed"
    if run.get("bench_rc", 1) != 0 or run.get("result") is None:
        return "bench_failed"
    res = run["result"]
    sent = run.get("num_prompts") or res.get("num_prompts")
    if sent and res.get("completed", sent) < sent:
        return "incomplete"
    return "ok"


def apply_window_rule(runs: list[dict], baseline: str = "static") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs -> (all runs with status, kept pairs with deltas vs the same window's baseline run).

    A (window, policy) pair is kept iff both its run and the window's baseline run are
    ``ok``; the status is decided before any metric is compared.  A metric the benchmark did
    not report gives a NaN delta."""
    rows = []
    for r in runs:
        row = {k: r.get(k) for k in ("window", "policy", "order", "workload")}
        row["status"] = classify(r)
        if r.get("result"):
            row.update({m: r["result"].get(m) for m in METRICS + ["completed"]})
        rows.append(row)
    df = pd.DataFrame(rows)
    pairs = []
    for (w, wl), grp in df.groupby(["window", "workload"]):
        st = grp[grp.policy == baseline]
        for _, r in grp[grp.policy != baseline].iterrows():
            base = st[st.order.isin([r.order - 1, r.order + 1])] if len(st) > 1 else st
            if base.empty:
                continue
            b = base.iloc[0]
            keep = r.status == "ok" and b.status == "ok"
            p = {"window": w, "workload": wl, "policy": r.policy, "kept": keep,
                 "baseline": baseline,
                 "excluded_because": "" if keep else f"{r.policy}:{r.status}, {baseline}:{b.status}"}
            if keep:
                p["throughput_delta_pct"] = 100 * (r.output_throughput / b.output_throughput - 1)
                for m in ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms"):
                    ok = all(isinstance(x, (int, float)) and x == x for x in (r[m], b[m])) and b[m]
                    p[f"{m}_delta_pct"] = 100 * (r[m] / b[m] - 1) if ok else float("nan")
            pairs.append(p)
    return df, pd.DataFrame(pairs)


def schedule(policies: list[str], windows: int, baseline: str = "static") -> list[tuple[int, str, int]]:
    """(window, policy, order) runs: per window, each policy other than the baseline paired
    with its own baseline run right before (even windows) or after (odd windows) it."""
    out = []
    for w in range(windows):
        order = 0
        for p in policies:
            if p == baseline:
                continue
            pair = [baseline, p] if w % 2 == 0 else [p, baseline]
            for q in pair:
                out.append((w, q, order))
                order += 1
    return out


def expected_window_s(policies: list[str], n_workloads: int, startup_s: float, bench_s: float,
                      stop_s: float = 30.0, baseline: str = "static") -> dict:
    """Planning estimate of one window's wall clock (not a measurement): the window runs
    ``schedule(policies, 1)`` once per workload -- every policy but the baseline paired with its
    own baseline run -- and each run starts a server (``startup_s``: weight load, DeepGEMM JIT,
    graph capture), runs the benchmark (``bench_s``) and stops it (``stop_s``, at most 60 s
    before SIGKILL).  Returns ``runs`` and ``seconds``."""
    if n_workloads < 1 or min(startup_s, bench_s, stop_s) < 0:
        raise ValueError("n_workloads must be >= 1 and the times non-negative")
    runs = len(schedule(policies, 1, baseline)) * int(n_workloads)
    return {"runs": runs, "seconds": runs * (startup_s + bench_s + stop_s)}


#: the serving chapter's recipes for :func:`window_estimates`: (name, policies, workloads, and
#: the per-run seconds assumed for server start, benchmark and stop -- planning guesses, not
#: measurements)
RECIPES = [("1-GPU smoke test (tiny model)", ["dynamic", "tempo", "tempo_noop"], 1, 90, 30, 10),
           ("DSv3-shape proxy, EP8 (5.11-5.13)", ["static", "tempo", "tempo_noop", "dynamic"], 3, 180, 90, 30),
           ("Qwen3-235B-FP8, EP8 (5.9-5.10)", ["static", "tempo", "tempo_noop", "dynamic"], 3, 420, 120, 30),
           ("Qwen3-235B-FP8, two-node EP16 (Table 5)", ["static", "dynamic", "tempo_noop", "tempo_flat", "tempo_hier"],
            1, 600, 120, 60)]


def window_estimates(recipes=None) -> "pd.DataFrame":
    """One row per recipe: its runs per window and the minutes a window takes
    (:func:`expected_window_s`, the baseline ``dynamic`` when the recipe lists it first)."""
    import pandas as pd

    rows = []
    for name, pols, n_wl, start, bench, stop in (RECIPES if recipes is None else recipes):
        e = expected_window_s(pols, n_wl, start, bench, stop, baseline="dynamic" if pols[0] == "dynamic" else "static")
        rows.append({"recipe": name, "policies": ",".join(pols), "workloads": n_wl, "server start s (assumed)": start,
                     "benchmark s (assumed)": bench, "stop s (assumed)": stop, "runs per window": e["runs"],
                     "minutes per window (estimate)": round(e["seconds"] / 60)})
    return pd.DataFrame(rows)


def baseline_for(a2a: str) -> str:
    """The baseline SGLang accepts: ``static`` with an a2a backend; with ``--moe-a2a-backend
    none`` SGLang rejects ``static`` and ``lp`` (each rank would pick a different replica,
    ``srt/arg_groups/parallel_hook.py`` in 0.5.23) and defaults to ``dynamic``."""
    return "dynamic" if a2a == "none" else "static"


def refused(policies: list[str], a2a: str, architecture: str | None, gpus_per_node: int | None) -> dict:
    """Policies SGLang 0.5.23 (or the plugin) would refuse in this configuration, with why."""
    out = {}
    for p in policies:
        if a2a == "none" and p in ("static", "lp"):
            out[p] = f"SGLang rejects --ep-dispatch-algorithm {p} with --moe-a2a-backend none (use dynamic)"
        elif p == "lp" and architecture is not None and architecture not in LPLB_ARCHS:
            out[p] = (f"SGLang's LPLB supports only {', '.join(sorted(LPLB_ARCHS))}; the model is {architecture} "
                      "(srt/eplb/lplb_solver.py)")
        elif p == "tempo_hier" and not gpus_per_node:
            out[p] = "tempo_hier needs --gpus-per-node (TEMPO_GPUS_PER_NODE)"
    return out


def model_architecture(model: str) -> str | None:
    """``architectures[0]`` of a local model's config.json (None when not local)."""
    cfg = Path(model) / "config.json"
    if not cfg.is_file():
        return None
    from ..core.io import read_json

    try:
        archs = read_json(cfg, MAX_READ, str(cfg), follow=True).get("architectures") or [None]
    except (OSError, ValueError, AttributeError):
        return None
    return archs[0] if isinstance(archs, list) and archs else None


# ---------------------------------------------------------------------------- running
def _healthy(port: int, timeout: float, proc) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(2)
    return False


def run_one(spec: ServerSpec, policy: str, workload: Workload, out_dir: Path, port: int, tag: str,
            startup_timeout: float = 900) -> dict:
    """Launch a server with ``policy``, run ``workload``, stop the server; the run record."""
    algo, env_extra = POLICIES[policy]
    env_extra = {**(spec.env if algo in ("tempo", "tempo_noop") else {}), **env_extra}
    env = {**os.environ, **env_extra}
    log = open(out_dir / f"{tag}.server.log", "w")
    cmd = spec.args(algo, port)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    rec = {"policy": policy, "server_cmd": shlex.join(cmd), "env": env_extra, "num_prompts": workload.num_prompts}
    try:
        rec["server_healthy"] = _healthy(port, startup_timeout, proc)
        if rec["server_healthy"]:
            out = out_dir / f"{tag}.jsonl"
            bcmd = workload.args(f"http://127.0.0.1:{port}", str(out))
            rec["bench_cmd"] = shlex.join(bcmd)
            with open(out_dir / f"{tag}.bench.log", "w") as blog:
                rec["bench_rc"] = subprocess.call(bcmd, stdout=blog, stderr=subprocess.STDOUT)
            try:
                rec["result"] = parse_result(out)
            except ValueError as exc:
                rec["result"], rec["parse_error"] = None, str(exc)
            rec["server_died"] = proc.poll() is not None
    finally:
        import signal

        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
    return rec


def drive(spec: ServerSpec, policies: list[str], workloads: list[Workload], windows: int, out_dir: Path,
          port: int = 30000, runner=run_one, progress: bool = True,
          baseline: str = "static") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the whole schedule (``runner`` is injectable for tests) and write runs.csv,
    pairs.csv and manifest.json under ``out_dir``; a run already recorded in
    ``records.jsonl`` is not repeated (an interrupted campaign resumes)."""
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise ValueError(f"unknown policies {bad}; known: {', '.join(POLICIES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rec_path = out_dir / "records.jsonl"
    done = {}
    if rec_path.exists():
        from ..core.io import loads_json, read_regular

        for no, line in enumerate(read_regular(rec_path, MAX_READ, str(rec_path)).decode("utf-8", "replace")
                                  .splitlines(), 1):
            try:
                r = loads_json(line, f"{rec_path} line {no}")
                done[(r["window"], r["workload"], r["policy"], r["order"])] = r
            except (ValueError, KeyError, TypeError) as exc:  # a line torn by a kill: that run is made again
                log.warning("%s line %d is not a run record (%s); the run is made again", rec_path, no, exc)
    plan = [(w, wl, p, o) for wl in workloads for (w, p, o) in schedule(policies, windows, baseline)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), initial=sum(1 for k in plan if (k[0], k[1].name, k[2], k[3]) in done),
                   desc="serve-bench", unit="run")
    t0 = time.time()
    for w, wl, p, o in plan:
        key = (w, wl.name, p, o)
        if key in done:
            continue
        rec = runner(spec, p, wl, out_dir, port, f"w{w}-{wl.name}-{o:02d}-{p}")
        rec.update({"window": w, "workload": wl.name, "policy": p, "order": o})
        with open(rec_path, "a") as f:
            f.write(json.dumps(rec, default=str) + "\n")
        done[key] = rec
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    runs, pairs = apply_window_rule(list(done.values()), baseline)
    atomic_write_csv(runs, out_dir / "runs.csv")
    atomic_write_csv(pairs, out_dir / "pairs.csv")
    manifest = {"policies": policies, "baseline": baseline, "windows": windows, "workloads": [vars(w) for w in workloads],
                "server": vars(spec), "duration_s": round(time.time() - t0, 1), "argv": sys.argv,
                "window_rule": "exclude a pair only for server_failed / bench_failed / incomplete runs"}
    try:
        import torch

        manifest["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        manifest["torch"] = torch.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        manifest["sglang"] = version("sglang")
    except Exception:
        pass
    atomic_write_text(out_dir / "manifest.json", json.dumps(manifest, indent=1, default=str))
    return runs, pairs


def main(argv=None) -> int:
    from ..core.argtypes import ArgumentParser, choice, comma_list, float_range, input_file, int_range, output_dir

    ap = ArgumentParser(prog="python -m tempo serve-bench", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(TINY_MODEL), help="model path (default: the tiny random Qwen3-MoE config)")
    ap.add_argument("--dummy-weights", action="store_true", help="--load-format dummy (random weights)")
    ap.add_argument("--tp", type=int_range(1, 1024), default=8)
    ap.add_argument("--ep", type=int_range(1, 4096), default=8)
    ap.add_argument("--a2a", default="deepep", type=choice(["deepep", "none", "mooncake", "mori", "flashinfer"], "backend"),
                    help="--moe-a2a-backend; with 'none' the baseline is dynamic (SGLang rejects static and lp)")
    ap.add_argument("--redundant", type=int_range(0, 65536), default=32)
    ap.add_argument("--init-expert-location", type=input_file,
                    help="placement source, e.g. a drift-K corrupted distribution")
    ap.add_argument("--gpus-per-node", type=int_range(1, 1024), help="TEMPO_GPUS_PER_NODE for tempo_hier / tempo_flat")
    ap.add_argument("--random-range-ratio", type=float_range(0.0, 1.0), default=1.0,
                    help="random dataset: lengths uniform in [ratio*L, L] (SGLang's default 0 gives [1, L])")
    ap.add_argument("--policies", type=comma_list(choice(POLICIES, "policy"), "policy"),
                    default="static,tempo,tempo_noop")
    ap.add_argument("--windows", type=int_range(1, 1000), default=3)
    ap.add_argument("--dataset", default="random", choices=["random", "sharegpt"])
    ap.add_argument("--dataset-path", type=input_file)
    ap.add_argument("--num-prompts", type=int_range(1, 10**7), default=512)
    ap.add_argument("--input-len", type=int_range(1, 2**21), default=256)
    ap.add_argument("--output-len", type=int_range(1, 2**21), default=1024)
    ap.add_argument("--request-rates", type=comma_list(float_range(0.0, lo_open=True, allow_inf=True), "rate"),
                    default="inf", help="comma list: Poisson rates (req/s) or inf")
    ap.add_argument("--concurrency", type=comma_list(int_range(1, 10**6), "integer"), default="256",
                    help="comma list of --max-concurrency values")
    ap.add_argument("--out", type=output_dir, default=str(paths.ROOT / "build" / "serve-bench"))
    ap.add_argument("--port", type=int_range(1, 65535), default=30000)
    ap.add_argument("--nnodes", type=int_range(1, 1024), default=1,
                    help="nodes one server spans (SGLang --nnodes; 2 for the paper's EP16, Section 5.15)")
    ap.add_argument("--node-rank", type=int_range(0, 1023), default=0,
                    help="this node (SGLang --node-rank): 0 runs the driver, others only the servers")
    ap.add_argument("--dist-init-addr", help="host:port of node 0 for SGLang's distributed init (--nnodes > 1)")
    ap.add_argument("--skip-runs", type=int_range(0, 10**6), default=0,
                    help="node rank > 0 only: runs node 0 skips when it resumes (already in records.jsonl)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands of the first window and exit")
    ap.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: extra sglang.launch_server arguments")
    a = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if Path(a.out).resolve().is_relative_to(store.root().resolve()):
        ap.fail("--out", f"{a.out} lies under {store.root()}, which only `python -m tempo ingest` writes: run into "
                         "a work folder (default build/serve-bench), then `python -m tempo ingest OUT`")
    if a.node_rank >= a.nnodes:
        ap.fail("--node-rank", f"must lie in [0, --nnodes = {a.nnodes}), got {a.node_rank}")
    if a.tp % a.ep:  # SGLang's expert-parallel group lies inside the TP group
        ap.fail("--ep", f"must divide --tp = {a.tp}, got {a.ep}")
    if a.gpus_per_node and (a.ep % a.gpus_per_node or a.gpus_per_node > a.ep):
        ap.fail("--gpus-per-node", f"must divide --ep = {a.ep} (whole nodes per EP group), got {a.gpus_per_node}")
    if a.dist_init_addr is not None:
        host, _, dport = a.dist_init_addr.rpartition(":")
        if not host or not dport.isdigit() or not 1 <= int(dport) <= 65535:
            ap.fail("--dist-init-addr", f"must be host:port with a port in [1, 65535], got {a.dist_init_addr!r}")
    if a.nnodes > 1:
        host, _, dport = (a.dist_init_addr or "").rpartition(":")
        if not host or not dport.isdigit():
            ap.fail("--dist-init-addr", f"is required with --nnodes {a.nnodes}, as host:port of node 0 "
                    f"(got {a.dist_init_addr!r})")
        if a.tp % a.nnodes:
            ap.fail("--tp", f"must be a multiple of --nnodes = {a.nnodes} (SGLang splits TP over nodes), got {a.tp}")
    follower = a.node_rank > 0
    if a.dataset == "sharegpt" and a.dataset_path is None and not follower:
        ap.fail("--dataset-path", "is required with --dataset sharegpt")
    if a.model.startswith((".", "/", "~")) and not Path(a.model).expanduser().exists():
        ap.fail("--model", f"{a.model!r} does not exist")
    extra = [x for x in a.server_args if x != "--"]
    if a.dataset_path is None and not a.dry_run and not follower:
        # both datasets read ShareGPT prompts: without a local file the client downloads from the hub
        ap.fail("--dataset-path", "is required (a local ShareGPT JSON file): sglang.benchmark.serving samples "
                "prompts from ShareGPT for --dataset random too and would otherwise download it")
    spec = ServerSpec(a.model, a.tp, a.ep, a.a2a, a.redundant, a.dummy_weights,
                      None if a.init_expert_location is None else str(a.init_expert_location), extra,
                      nnodes=a.nnodes, node_rank=a.node_rank, dist_init_addr=a.dist_init_addr)
    rate_s = ["inf" if r == float("inf") else f"{r:g}" for r in a.request_rates]
    workloads = [Workload(f"{a.dataset}-r{r}-c{c}", a.dataset, a.num_prompts, a.input_len, a.output_len, r, int(c),
                          None if a.dataset_path is None else str(a.dataset_path), range_ratio=a.random_range_ratio)
                 for r in rate_s for c in a.concurrency]
    policies = list(dict.fromkeys(a.policies))
    baseline = baseline_for(a.a2a)
    if baseline not in policies:
        policies = [baseline] + policies
    no = refused(policies, a.a2a, model_architecture(a.model), a.gpus_per_node)
    for p, why in no.items():
        print(f"serve-bench: not running {p}: {why}", file=sys.stderr)
    policies = [p for p in policies if p not in no]
    if len(policies) < 2:
        ap.fail("--policies", "nothing to compare: no policy besides the baseline can run in this configuration")
    if a.gpus_per_node:
        spec.env["TEMPO_GPUS_PER_NODE"] = str(a.gpus_per_node)
    if a.nnodes > 1 and not follower:
        for r in range(1, a.nnodes):
            print(f"serve-bench: on node {r} run (same arguments, --node-rank {r}):\n  "
                  f"{shlex.join(other_node_command(argv, r))}", file=sys.stderr)
    if a.dry_run:
        print(f"# {len(schedule(policies, 1, baseline)) * len(workloads)} server runs per window "
              f"({len(workloads)} workloads), {a.windows} windows; each run starts a server, benchmarks, stops it")
        for w, p, o in schedule(policies, 1, baseline):
            algo, env = POLICIES[p]
            env = {**(spec.env if algo in ("tempo", "tempo_noop") else {}), **env}
            pre = " ".join(f"{k}={v}" for k, v in env.items())
            print(pre, shlex.join(spec.args(algo, a.port)))
            if follower:
                continue
            print("   ", shlex.join(workloads[0].args(f"http://127.0.0.1:{a.port}", f"{a.out}/w0-{o:02d}-{p}.jsonl")))
            for r in range(1, a.nnodes):
                print(f"    node {r}:", pre, shlex.join(spec.for_node(r).args(algo, a.port)))
        return 0
    if follower:
        ended = follow(spec, policies, workloads, a.windows, a.port, baseline, skip_runs=a.skip_runs)
        print(f"serve-bench node {a.node_rank}: {len(ended)} runs followed")
        return 0
    runs, pairs = drive(spec, policies, workloads, a.windows, Path(a.out), a.port, baseline=baseline)
    kept = pairs[pairs.kept] if len(pairs) else pairs
    print(f"{len(runs)} runs, {int(pairs.kept.sum()) if len(pairs) else 0} of {len(pairs)} pairs kept "
          f"(baseline {baseline}); results in {a.out}")
    if len(kept):
        print(kept.groupby(["workload", "policy"]).throughput_delta_pct.agg(["median", "min", "max", "count"]).round(2))
    ok = int((runs.status == "ok").sum()) if len(runs) else 0
    if ok == 0:  # nothing succeeded: never exit 0
        status = runs.status.value_counts().to_dict() if len(runs) else {}
        print(f"python -m tempo serve-bench: failed: no run succeeded ({status}); see the logs in {a.out}",
              file=sys.stderr)
        return 1
    return 0
