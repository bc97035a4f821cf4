"""``python -m tempo <command> [options]``; ``python -m tempo <command> --help`` for each.

Exit status: 0 on success; 2 for a usage error (a bad argument, reported with the argument's
name before any work starts, or an input file refused: :class:`tempo.core.io.BadInput`); 1 when
the work itself failed (reported in one line; ``TEMPO_DEBUG=1`` shows the traceback).
"""
from __future__ import annotations

import importlib
import json
import os
import sys

from .core.argtypes import MAX_SLOTS, MAX_TOKENS, ArgumentParser, choice, count_int, gpu_count, params_name
from .core.io import BadInput

#: command -> ("module:function" taking the remaining argv, one-line help, an example command line)
COMMANDS = {
    "warmup": ("tempo.cli:warmup", "compile the solver ahead (numba, cached on disk; make runs it after installing)",
               "python -m tempo warmup"),
    "solve": ("tempo.cli:solve_one", "dispatch one batch under full replication",
              "python -m tempo solve --counts 600 30 30 30 30 30 30 --gpus 2 --policy tempo"),
    "policies": ("tempo.cli:policies", "list the dispatch policies", "python -m tempo policies --long"),
    "params": ("tempo.cli:params", "list the named cost-parameter sets (paper Tables 6, 7)", "python -m tempo params"),
    "ledger": ("tempo.book.claims.terminal:main", "the claims ledger of a build: counts per status, the deviating claims",
               "python -m tempo ledger --profile smoke --all"),
    "bench": ("tempo.benchmarks.bench:main", "solver and serving benchmark table, each target met or missed (make bench)",
              "python -m tempo bench --compare 8cd688e"),
    "calibrate": ("tempo.calib.command:main", "measure expert time here and fit the cost models",
                  "python -m tempo calibrate --backend auto --shape tiny --max-seconds 60"),
    "gpu-check": ("tempo.benchmarks.gpucheck:main",
                  "first run on a GPU node: environment, kernels, numerics, timer bias, short grids",
                  "python -m tempo gpu-check --out build/gpu-check"),
    "epbench": ("tempo.benchmarks.epbench:main", "wall-clock EP microbenchmark (gloo CPU ranks, NCCL GPUs, --emulate)",
                "python -m tempo epbench --device cpu --world-size 4 --shape tiny"),
    "serve-bench": ("tempo.benchmarks.servebench:main", "SGLang serving benchmark driver (GPU servers)",
                    "python -m tempo serve-bench --dry-run --tp 8 --ep 8 --policies static,tempo"),
    "import-trace": ("tempo.world.traces:import_main", "SGLang expert-distribution recorder dumps -> routing trace",
                     "python -m tempo import-trace dumps/*.pt -o trace.npz"),
    "make-traces": ("tempo.world.recorded:make_main",
                    "public routing recordings -> data/traces/ traces and profiles",
                    "python -m tempo make-traces --source ../shared/data/routing"),
    "routing-profiles": ("tempo.world.skew:main", "the named routing profiles and their Zipf-equivalent skews",
                         "python -m tempo routing-profiles"),
    "drift-location": ("tempo.benchmarks.servebench:drift_main", "drift-K placement file for --init-expert-location",
                       "python -m tempo drift-location trace.npz --k 16 -o drift16.json"),
    "ingest": ("tempo.book.ingest:main", "store GPU / cluster recordings under data/measured/ as ledger evidence",
               "python -m tempo ingest --dry-run build/gpu-check/epbench.csv"),
}
COMMANDS["milp-references"] = ("tempo.book.milp_store:main",
                               "prove the MILP references of the solver chapter's grids once into data/milp/",
                               "python -m tempo milp-references")


# ---------------------------------------------------------------------------- small commands
def policies(argv) -> int:
    """Print the registered policies' names (sorted), or with ``--long`` their registry entries
    (family, needs a model, servable, options, label) in the registry's order."""
    from .policies import available_policies, select, spec

    ap = ArgumentParser(prog="python -m tempo policies", description="list the dispatch policies")
    ap.add_argument("--long", "-l", action="store_true",
                    help="one row per policy: family, whether it needs a cost model, whether serving runs it, "
                         "its options dataclass, its named variants, its label")
    if not ap.parse_args(argv).long:
        print("\n".join(available_policies()))
        return 0
    import shutil

    from tabulate import tabulate

    head = ("policy", "family", "model", "serving", "options", "variants", "label")
    rows = []
    for name in select():
        s = spec(name)
        rows.append((name, s.family, "needs" if s.needs_model else "-", "yes" if s.servable else "-",
                     s.options.__name__ if s.options else "-", ", ".join(s.variants) or "-",
                     s.label + (" [full replication only]" if s.full_replication else "")))
    # the variants wrapped at 16 characters, the label into what the terminal has left (tabulate
    # pads a header by 2)
    caps = [None] * 5 + [16]
    lead = sum(min(max(len(h) + 2, *(len(r[i]) for r in rows)), caps[i] or 99) + 2 for i, h in enumerate(head[:-1]))
    label_w = max(20, shutil.get_terminal_size((100, 24)).columns - lead)
    print(tabulate(rows, headers=head, tablefmt="simple", maxcolwidths=caps + [label_w]))
    return 0


def params(argv) -> int:
    from .core.params import params_table

    ArgumentParser(prog="python -m tempo params",
                   description="list the named cost-parameter sets (paper Tables 6, 7)").parse_args(argv)
    print(params_table().to_string())
    return 0


def solve_one(argv) -> int:
    import numpy as np

    from . import CostModel, Instance, available_policies, solve

    ap = ArgumentParser(prog="python -m tempo solve", description="dispatch one batch under full replication")
    ap.add_argument("--counts", type=count_int, nargs="+", required=True, help="tokens per expert")
    ap.add_argument("--gpus", type=gpu_count, required=True, help="GPUs (1 to 4096)")
    ap.add_argument("--params", type=params_name, default="dsv3-offline")
    ap.add_argument("--policy", type=choice(available_policies, "policy"), default="tempo")
    a = ap.parse_args(argv)
    if sum(a.counts) > MAX_TOKENS:
        ap.fail("--counts", f"the counts sum to {sum(a.counts)}, above 2^53 = {MAX_TOKENS} (float64 is exact, and so "
                            "is every solver, only below it)")
    if len(a.counts) * a.gpus > MAX_SLOTS:
        ap.fail("--gpus", f"{len(a.counts)} experts on {a.gpus} GPUs is {len(a.counts) * a.gpus} replicas under full "
                          f"replication, above {MAX_SLOTS}")
    inst = Instance.full_replication(a.counts, a.gpus)
    model = CostModel.named(a.params)
    d = solve(inst, model, a.policy)
    print(json.dumps({"makespan_us": model.makespan(inst, d), "gpu_times_us": model.gpu_times(inst, d).tolist(),
                      "shares": np.round(d.shares, 3).tolist()}, indent=1))
    return 0


def warmup(argv) -> int:
    """Compile every solver path ahead (:mod:`tempo.policies.warmup`); numba caches the machine
    code on disk, so the first solve of a new process loads it instead of compiling."""
    from .policies.warmup import warmup as run

    ap = ArgumentParser(prog="python -m tempo warmup", description=warmup.__doc__.split(";")[0])
    ap.add_argument("--quiet", "-q", action="store_true", help="print only the summary line")
    a = ap.parse_args(argv)
    if not a.quiet:
        print("warming up every policy (compiles only what the on-disk cache lacks):", file=sys.stderr)
    r = run(log=None if a.quiet else (lambda line: print(line, file=sys.stderr)))
    what = (f"compiled {r['compiles']} function{'s' * (r['compiles'] > 1)} in {r['compile_s']:.0f} s" if r["compiles"]
            else "nothing to compile (the cache was warm)")
    print(f"warmup: {r['calls']} solves, {what}; {r['wall_s']:.1f} s in all")
    return 0


# ---------------------------------------------------------------------------- entry point
def _print_example(cmd: str) -> None:
    print(f"\nexample:\n  {COMMANDS[cmd][2]}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, (_, text, _) in COMMANDS.items():
            print(f"  {name:17s}{text}")
        print("\nexample:\n  python -m tempo solve --counts 600 30 30 30 30 30 30 --gpus 2")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"unknown command {cmd!r}; try: python -m tempo --help", file=sys.stderr)
        return 2
    module, func = COMMANDS[cmd][0].split(":")
    try:
        return getattr(importlib.import_module(module), func)(rest) or 0
    except SystemExit as exc:  # argparse: 2 for usage errors, 0 for --help
        code = exc.code
        code = code if isinstance(code, int) else (0 if code is None else 1)
        if code == 0 and ("-h" in rest or "--help" in rest):
            _print_example(cmd)
        return code
    except KeyboardInterrupt:
        print(f"python -m tempo {cmd}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped (`| head`): quiet, as a shell tool would be
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BadInput as exc:  # an input file refused (too big, too deep, not a regular file, malformed)
        if os.environ.get("TEMPO_DEBUG"):
            raise
        print(f"python -m tempo {cmd}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the work failed: one line, not a traceback (TEMPO_DEBUG=1 for it)
        if os.environ.get("TEMPO_DEBUG"):
            raise
        print(f"python -m tempo {cmd}: failed: {type(exc).__name__}: {exc} (TEMPO_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1
