"""``python -m tempo <command>``: bench | policies | params | solve | import-trace | calibrate | epbench | serve-bench."""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("  bench     benchmark table (make bench); --help for options\n"
              "  policies  list the dispatch policies\n"
              "  params    list the named cost-parameter sets\n"
              "  solve     dispatch one batch: --counts 600 30 30 --gpus 2 --params dsv3-offline --policy tempo\n"
              "  import-trace  SGLang expert-distribution recorder dumps -> routing trace: DUMP... -o trace.npz\n"
              "  calibrate     measure expert time here and fit the cost models: --backend auto --shape qwen3-30b\n"
              "  epbench       wall-clock EP microbenchmark: --device cpu --world-size 4 --shape tiny (or --emulate)\n"
              "  serve-bench   SGLang serving benchmark driver (GPU servers): --help\n"
              "  drift-location  stale-placement file for --init-expert-location: TRACE.npz --k 16 -o drift16.json")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "bench":
        from .bench import main as bench_main

        bench_main(rest)
    elif cmd == "policies":
        from . import available_policies

        print("\n".join(available_policies()))
    elif cmd == "params":
        from .params import params_table

        print(params_table().to_string())
    elif cmd == "solve":
        import numpy as np

        from . import CostModel, Instance, solve

        ap = argparse.ArgumentParser(prog="python -m tempo solve")
        ap.add_argument("--counts", type=int, nargs="+", required=True)
        ap.add_argument("--gpus", type=int, required=True)
        ap.add_argument("--params", default="dsv3-offline")
        ap.add_argument("--policy", default="tempo")
        a = ap.parse_args(rest)
        inst = Instance.full_replication(a.counts, a.gpus)
        model = CostModel.named(a.params)
        d = solve(inst, model, a.policy)
        print(json.dumps({"makespan_us": model.makespan(inst, d), "gpu_times_us": model.gpu_times(inst, d).tolist(),
                          "shares": np.round(d.shares, 3).tolist()}, indent=1))
    elif cmd == "epbench":
        from .serving.epbench import main as ep_main

        return ep_main(rest)
    elif cmd == "serve-bench":
        from .serving.servebench import main as sb_main

        return sb_main(rest)
    elif cmd == "drift-location":
        from .serving.servebench import drift_location
        from .workloads import read_trace

        ap = argparse.ArgumentParser(prog="python -m tempo drift-location",
                                     description="drift-K corrupted expert distribution for --init-expert-location")
        ap.add_argument("trace", help="routing trace (.npz, e.g. from import-trace)")
        ap.add_argument("--k", type=int, default=16)
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("-o", "--out", required=True)
        a = ap.parse_args(rest)
        counts, _ = read_trace(a.trace)
        drift_location(counts, a.k, a.out, a.seed)
        print(f"wrote {a.out}: drift-{a.k} logical_count for {counts.shape[1]} layers x {counts.shape[2]} experts")
    elif cmd == "calibrate":
        from .calib.record import main as calib_main

        return calib_main(rest)
    elif cmd == "import-trace":
        from .workloads import import_sglang_dumps

        ap = argparse.ArgumentParser(prog="python -m tempo import-trace",
                                     description="convert SGLang recorder dumps (per_pass: one file per rank; or stat)")
        ap.add_argument("dumps", nargs="+")
        ap.add_argument("-o", "--out", required=True)
        ap.add_argument("--model", default="", help="model name stored in the trace metadata")
        a = ap.parse_args(rest)
        counts = import_sglang_dumps(a.dumps, a.out, model=a.model)
        print(f"wrote {a.out}: {counts.shape[0]} steps x {counts.shape[1]} layers x {counts.shape[2]} experts")
    else:
        print(f"unknown command {cmd!r}; try: python -m tempo --help", file=sys.stderr)
        return 2
    return 0
