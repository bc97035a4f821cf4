"""Time the serving runtime's forward-path work on gloo ranks: ``update_layers`` per rebalance
chunk and the rank-invariant agreement (``on_forward``: the table switch agreed across ranks),
while rank 0's refresher publishes tables.

    python scripts/forward_path_timing.py --ranks 3 --steps 3000    # one JSON object on stdout

Each rank runs ``--steps`` forward steps of DSv3-like width (32 experts on 64 slots, R = 33,
8 layers, 2 layers per rebalance chunk every ``--rebalance-every`` steps); the solver is a stub
that returns the uniform table (what is timed is the forward path, not the solve).  Reports per
rank the median, 99th percentile and maximum in microseconds of each call, and the runtime's
own counters.  Times are wall times on this machine at its load, nothing is asserted."""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

RANK = r"""
import json, sys, time
import numpy as np
import torch
import torch.distributed as dist
from tempo.serving import refresher
from tempo.serving.runtime import TableSync, TempoRuntime
from tempo.serving.settings import ServingSettings
from tempo.serving.tables import padded_replica_map, uniform_prob

rank, world, port, steps, every = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
bcast, agree = dist.new_group(backend="gloo"), dist.new_group(backend="gloo")


class Stub:
    kind, restarts = "thread", 0

    def __init__(self, p2l, width, E):
        self.p2l, self.width, self.E = p2l, width, E

    def set_placement(self, p2l):
        self.p2l = p2l

    def solve(self, window, deadline_s, steps=None, cancel=None, **o):
        return ("ok", uniform_prob(padded_replica_map(self.p2l, self.E, self.width)), 0.0)

    def wait_ready(self, t):
        return True

    def alive(self):
        return True

    def close(self):
        pass


refresher.make_solver = lambda s, p2l, n, width=None, n_logical=None: Stub(p2l, width, n_logical)
L, E, g = 8, 32, 8
rng = np.random.default_rng(0)  # the same maps and batches on every rank
maps = [np.stack([rng.permutation(np.concatenate([np.arange(E)] * 2)) for _ in range(L)]) for _ in range(4)]
settings = ServingSettings(refresh_ms=30, deadline_ms=60000, agree_every=8)
shape = (1, L, E, 64 - E + 1)
rt = TempoRuntime(maps[0], g, settings=settings, rank_invariant=True,
                  sync=TableSync(rank, world, shape, bcast, agree, settings.agree_every))
fwd, upd = [], []
chunk = 0
for step in range(steps):
    if step and step % every == 0:
        layers = [(2 * chunk) % L, (2 * chunk + 1) % L]
        t0 = time.perf_counter()
        rt.update_layers(maps[(chunk // (L // 2)) % 3 + 1], layers)  # each map in 4 chunks
        upd.append(time.perf_counter() - t0)
        chunk += 1
    t0 = time.perf_counter()
    rt.on_forward()
    fwd.append(time.perf_counter() - t0)
    ids = torch.as_tensor(rng.integers(0, E, size=(32, 8)))
    for l in range(L):
        rt.dispatch(l, ids)
dist.barrier()
stats = rt.stats
rt.close()


def q(x):
    x = np.array(x) * 1e6
    return {"n": int(len(x)), "p50_us": round(float(np.median(x)), 1), "p99_us": round(float(np.percentile(x, 99)), 1),
            "max_us": round(float(x.max()), 1)} if len(x) else {}


print(json.dumps({"rank": rank, "update_layers": q(upd), "on_forward": q(fwd),
                  "stats": {k: v for k, v in stats.items() if "us" in k or k in ("tables_applied", "sync_agree_waits",
                                                                                  "rebalance_chunks", "steps")}}))
dist.barrier()
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--rebalance-every", type=int, default=100)
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(a.ranks), port, str(a.steps),
                               str(a.rebalance_every)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for r in range(a.ranks)]
    outs = [p.communicate(timeout=3600) for p in procs]
    if any(p.returncode for p in procs):
        sys.stderr.write("\n".join(o[1][-3000:] for o in outs))
        return 1
    print(json.dumps({"ranks": [json.loads(o[0].strip().splitlines()[-1]) for o in outs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
