"""``python -m tempo <command> [options]``; ``python -m tempo <command> --help`` for each."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

#: command -> ("module:function" taking the remaining argv, one-line help)
COMMANDS = {
    "bench": ("tempo.bench:main", "solver and serving benchmark table (make bench)"),
    "policies": ("tempo.cli:policies", "list the dispatch policies"),
    "params": ("tempo.cli:params", "list the named cost-parameter sets (paper Tables 6, 7)"),
    "solve": ("tempo.cli:solve_one", "dispatch one batch: --counts 600 30 30 --gpus 2 --policy tempo"),
    "calibrate": ("tempo.calib.record:main", "measure expert time here and fit the cost models"),
    "epbench": ("tempo.serving.epbench:main", "wall-clock EP microbenchmark (gloo CPU ranks, NCCL GPUs, --emulate)"),
    "serve-bench": ("tempo.serving.servebench:main", "SGLang serving benchmark driver (GPU servers)"),
    "import-trace": ("tempo.workloads:import_main", "SGLang expert-distribution recorder dumps -> routing trace"),
    "drift-location": ("tempo.serving.servebench:drift_main", "drift-K placement file for --init-expert-location"),
    "ledger": ("tempo.claims:main", "rebuild the claims ledger from this build's results: --profile full"),
}


def policies(argv) -> int:
    from . import available_policies

    print("\n".join(available_policies()))
    return 0


def params(argv) -> int:
    from .params import params_table

    print(params_table().to_string())
    return 0


def solve_one(argv) -> int:
    import numpy as np

    from . import CostModel, Instance, solve

    ap = argparse.ArgumentParser(prog="python -m tempo solve", description="dispatch one batch under full replication")
    ap.add_argument("--counts", type=int, nargs="+", required=True)
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--params", default="dsv3-offline")
    ap.add_argument("--policy", default="tempo")
    a = ap.parse_args(argv)
    inst = Instance.full_replication(a.counts, a.gpus)
    model = CostModel.named(a.params)
    d = solve(inst, model, a.policy)
    print(json.dumps({"makespan_us": model.makespan(inst, d), "gpu_times_us": model.gpu_times(inst, d).tolist(),
                      "shares": np.round(d.shares, 3).tolist()}, indent=1))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:15s} {text}")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"unknown command {cmd!r}; try: python -m tempo --help", file=sys.stderr)
        return 2
    module, func = COMMANDS[cmd][0].split(":")
    return getattr(importlib.import_module(module), func)(rest) or 0
