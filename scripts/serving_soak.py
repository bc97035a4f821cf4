"""Soak the serving runtime on gloo ranks through faults, and say whether every rank publishes
tables again after each one (not a CI test: it runs for minutes).

    python scripts/serving_soak.py --ranks 2 --mode summed     # one JSON object on stdout
    python scripts/serving_soak.py --ranks 4 --mode sync

Each rank runs a :class:`~tempo.serving.runtime.TempoRuntime` with the real solver process
(``--mode summed``: every rank solves the summed windows of a :class:`GlooAggregator`;
``--mode sync``: rank-invariant dispatch, rank 0 solves and a :class:`TableSync` applies its
tables on every rank at agreed steps).  Ranks run forward steps in lock step (one all-reduce per
step, as a model's collectives would), routing 64 token-slot pairs per layer and checking every
physical id against the placement in force.  The sync and aggregation groups time out after
``--group-timeout`` seconds.  Faults, in order, each followed by a wait until every rank has
published (``summed``) or applied (``sync``) two tables after it (the second one solved after it):

* the last rank starts ``--late`` seconds after the others (its groups' first rounds time out);
* ``--rebalances`` chunked EPLB rebalances (two chunks, the same steps on every rank), with,
  between them: a rank stopped (SIGSTOP) for ``--stop`` seconds, rank 0's solver worker killed
  (SIGKILL), the last solving rank's worker killed, and a solver worker stopped (SIGSTOP; it
  misses its deadlines and is replaced).

Reports, per fault, the seconds until each rank's next table (None: none within ``--bound``),
the bad ids (a physical id that is not a replica of the routed expert) and each rank's counters.
Times are wall times at this machine's load; the verdict is "a table on every rank after every
fault" and "0 bad ids".
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANK = r"""
import json, os, sys, time
from datetime import timedelta
import numpy as np
import torch
import torch.distributed as dist
from tempo.serving.runtime import GlooAggregator, TableSync, TempoRuntime
from tempo.serving.settings import ServingSettings

rank, world, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
timeout_s, late_s, out, deadline_ms = float(sys.argv[5]), float(sys.argv[6]), sys.argv[7], float(sys.argv[8])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=900))
# the soak's own keys, on the driver's store
store = dist.TCPStore("127.0.0.1", int(sys.argv[9]), is_master=False, timeout=timedelta(seconds=900))
mk = lambda: dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
groups = (mk(), mk()) if mode == "sync" else (mk(),)
E, g, L = 8, 4, 2
base = np.array([[0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 0]] * L)
placements = [np.roll(base, k, axis=1) for k in range(12)]  # every expert keeps a replica
settings = ServingSettings(refresh_ms=100, deadline_ms=deadline_ms, agree_every=4)
if rank == world - 1 and late_s > 0:
    time.sleep(late_s)  # a late rank: its peers' first rounds time out
kw = dict(rank_invariant=True, sync=TableSync(rank, world, (1, L, E, 12 - E + 1), *groups, settings.agree_every)) \
    if mode == "sync" else dict(aggregate=GlooAggregator(groups[0], world))
rt = TempoRuntime(base, g, settings=settings, rank=rank, **kw)
store.set(f"pid/{rank}", str(os.getpid()))
if rt.refresher is not None:
    store.set(f"solver/{rank}", ",".join(map(str, rt.refresher.solver.pids)))
pop = np.array([0.3, 0.25, 0.15, 0.1, 0.08, 0.06, 0.04, 0.02])
rng = np.random.default_rng(rank if mode == "summed" else 0)
bad = routed = steps = 0
done_rebalances = 0
pending_chunk = None
tables = lambda: rt.stats.get("published", 0) if mode == "summed" else rt.stats["tables_applied"]
while True:
    steps += 1
    # one all-reduce per step: the ranks' lock step, the stop flag and the rebalances asked for
    asked = int(store.get("rebalances")) if store.check(["rebalances"]) else 0
    stop = int(store.check(["stop"]))
    t = torch.tensor([-stop, asked], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    if t[0] < 0:
        break
    if pending_chunk is not None:  # the second chunk of a rebalance, one step after the first
        rt.update_layers(pending_chunk, [1])
        pending_chunk = None
    elif int(t[1]) > done_rebalances:
        done_rebalances += 1
        new = placements[done_rebalances % len(placements)]
        rt.update_layers(new, [0])
        pending_chunk = new
    rt.on_forward()
    ids = torch.tensor(rng.choice(E, size=(32, 2), p=pop))
    for l in range(L):
        outp = rt.dispatch(l, ids).numpy().ravel()
        bad += int((rt.p2l[l][outp] != ids.numpy().ravel()).sum())
        routed += outp.size
    if steps % 5 == 0:
        store.set(f"tables/{rank}", f"{tables()} {time.time()} {done_rebalances}")
        if rt.refresher is not None:
            store.set(f"solver/{rank}", ",".join(map(str, rt.refresher.solver.pids)))
    time.sleep(0.01)
stats = rt.stats
res = {"rank": rank, "steps": steps, "bad": bad, "routed": routed, "rebalances": done_rebalances,
       "stats": {k: v for k, v in stats.items() if v}}
if mode == "summed":
    res["aggregation"] = dict(rt.aggregate.stats)
rt.close()
with open(out, "w") as f:
    json.dump(res, f)
dist.barrier()
os._exit(0)
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mode", choices=("summed", "sync"), default="summed")
    ap.add_argument("--group-timeout", type=float, default=3.0)
    ap.add_argument("--late", type=float, default=8.0)
    ap.add_argument("--stop", type=float, default=8.0)
    ap.add_argument("--rebalances", type=int, default=12)
    ap.add_argument("--deadline-ms", type=float, default=10000.0, help="the solve deadline (a loaded machine)")
    ap.add_argument("--bound", type=float, default=180.0, help="seconds to wait for tables after a fault")
    ap.add_argument("--workdir", default=None, help="where the ranks' scripts and logs go (default: a new temporary folder)")
    a = ap.parse_args(argv)
    import torch.distributed as dist

    work = Path(a.workdir or tempfile.mkdtemp(prefix="tempo-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    script = work / "rank.py"
    script.write_text(RANK)
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in [root, os.environ.get("PYTHONPATH", "")] if p))
    import datetime

    port, soak_port = _port(), _port()
    # the driver's store: the ranks publish their pids and table counts there, the driver asks
    # for rebalances and the stop there
    store = dist.TCPStore("127.0.0.1", soak_port, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=900))
    args = lambda r, late: [sys.executable, str(script), str(r), str(a.ranks), str(port), a.mode,
                            str(a.group_timeout), str(late), str(work / f"r{r}.json"), str(a.deadline_ms), str(soak_port)]
    t_start = time.time()
    procs = [subprocess.Popen(args(r, a.late if r == a.ranks - 1 else 0), env=env, stderr=open(work / f"r{r}.err", "w"))
             for r in range(a.ranks)]
    ranks = range(a.ranks)

    def tables(r):
        if not store.check([f"tables/{r}"]):
            return -1, 0.0
        n, t, _ = store.get(f"tables/{r}").decode().split()
        return int(n), float(t)

    def after(fault: str, t0: float, before: dict):
        """Wait until every rank holds two tables more than ``before`` (the second was solved
        after ``t0``: a rank solves one window at a time); seconds per rank (None: none)."""
        got = {}
        while time.time() - t0 < a.bound and len(got) < a.ranks:
            for r in ranks:
                n, t = tables(r)
                if r not in got and n >= before[r] + 2:
                    got[r] = round(t - t0, 2)
            time.sleep(0.2)
        row = {"fault": fault, "seconds_to_table": [got.get(r) for r in ranks]}
        print(json.dumps(row), file=sys.stderr, flush=True)
        return row

    def snapshot():
        return {r: tables(r)[0] for r in ranks}

    faults = []
    for r in ranks:  # every rank up (the late one included)
        store.wait([f"pid/{r}"])
    faults.append(after(f"rank {a.ranks - 1} late by {a.late:g} s", t_start, {r: 0 for r in ranks}))
    solving = [0] if a.mode == "sync" else list(ranks)
    extra = {3: "stop rank", 6: "kill worker 0", 8: "kill worker last", 10: "stop worker 0"}
    for k in range(1, a.rebalances + 1):
        before, t0 = snapshot(), time.time()
        store.set("rebalances", str(k))
        faults.append(after(f"rebalance {k}", t0, before))
        what = extra.get(k)
        if what is None:
            continue
        before, t0 = snapshot(), time.time()
        if what == "stop rank":
            pid = int(store.get(f"pid/{a.ranks - 1}"))
            os.kill(pid, signal.SIGSTOP)
            time.sleep(a.stop)
            os.kill(pid, signal.SIGCONT)
            what = f"rank {a.ranks - 1} stopped {a.stop:g} s"
        else:
            r = 0 if what.endswith("0") else solving[-1]
            pid = int(store.get(f"solver/{r}").decode().split(",")[0])
            os.kill(pid, signal.SIGKILL if what.startswith("kill") else signal.SIGSTOP)
            what = f"rank {r}'s solver worker {'killed' if what.startswith('kill') else 'stopped'}"
        faults.append(after(what, t0, before))
    store.set("stop", "1")
    rcs = [p.wait(timeout=300) for p in procs]
    res = [json.loads((work / f"r{r}.json").read_text()) if (work / f"r{r}.json").exists() else None for r in ranks]
    ok = all(all(s is not None for s in f["seconds_to_table"]) for f in faults)
    bad = sum(r["bad"] for r in res if r)
    print(json.dumps({"ranks": a.ranks, "mode": a.mode, "rcs": rcs, "faults": faults, "tables_after_every_fault": ok,
                      "bad_ids": bad, "routed_pairs": sum(r["routed"] for r in res if r), "per_rank": res,
                      "seconds": round(time.time() - t_start, 1)}))
    return 0 if ok and bad == 0 and not any(rcs) else 1


if __name__ == "__main__":
    sys.exit(main())
