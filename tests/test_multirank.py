"""Several ranks with rank-invariant dispatch (``--moe-a2a-backend none``, Issue 15 item 3):
3 gloo processes run the runtime on the same batches while rank 0's refresher publishes
versioned tables and EPLB rebalances two layers in two chunks; every rank must pick the same
physical id for the same (token, slot) at every forward step."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tempo

torch = pytest.importorskip("torch")

_RANK = r"""
import sys, time
import numpy as np
import torch
import torch.distributed as dist
from tempo.serving.runtime import TableSync, TempoRuntime
from tempo.serving.settings import ServingSettings

rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
bcast, agree = dist.new_group(backend="gloo"), dist.new_group(backend="gloo")  # same order on every rank
E, g = 8, 4
p2l = np.array([[0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 0]] * 2)         # 12 slots, 3 per GPU
new = np.array([[0, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 1],
                [4, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 4]])
settings = ServingSettings(refresh_ms=30, deadline_ms=60000, agree_every=2)
rt = TempoRuntime(p2l, g, settings=settings, rank_invariant=True,
                  sync=TableSync(rank, world, (2, E, 12 - E + 1), bcast, agree, settings.agree_every))
pop = np.array([0.3, 0.25, 0.15, 0.1, 0.08, 0.06, 0.04, 0.02])
rng = np.random.default_rng(7)  # the same batches on every rank
ids_log, logical_log, applied_log, p2l_log = [], [], [], []
phase, mark, step = 0, 0, 0
while phase < 3 and step < 20000:
    # decisions from agreed state only (sync.applied is the same on every rank at every step)
    if rt.sync.applied >= mark + 2:
        phase += 1
        mark = rt.sync.applied
        if phase < 3:
            rt.update_layers(new, [phase - 1])  # a chunked rebalance: layer 0, later layer 1
    rt.on_forward()
    step += 1
    ids = torch.tensor(rng.choice(E, size=(16, 2), p=pop))
    ids_log.append([rt.dispatch(l, ids).numpy() for l in range(2)])
    logical_log.append(ids.numpy())
    applied_log.append(rt.sync.applied)
    p2l_log.append(rt.p2l.copy())
    time.sleep(0.005)
dist.barrier()
rt.close()
np.savez(out, ids=np.array(ids_log), logical=np.array(logical_log), applied=np.array(applied_log), p2l=np.array(p2l_log), phase=phase,
         prob=rt.prob.numpy())
dist.barrier()
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_pick_the_same_replica_at_every_step(tmp_path):
    world = 3
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in [str(Path(tempo.__file__).parents[1]),
                                                      os.environ.get("PYTHONPATH", "")] if p))
    port = str(_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(world), port, str(tmp_path / f"r{r}.npz")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for r in range(world)]
    try:
        outs = [p.communicate(timeout=540)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-3000:] for o in outs)
    runs = [np.load(tmp_path / f"r{r}.npz") for r in range(world)]
    assert all(int(r["phase"]) == 3 for r in runs), "the ranks never saw enough published tables"
    ref = runs[0]
    for r in runs[1:]:
        assert np.array_equal(r["applied"], ref["applied"])  # same version at the same step
        assert np.array_equal(r["p2l"], ref["p2l"])
        differ = np.argwhere(r["ids"] != ref["ids"])
        assert differ.size == 0, f"ranks disagree at (step, layer, token, slot) {differ[:5].tolist()}"
        assert np.array_equal(r["prob"], ref["prob"])
    applied = ref["applied"]
    assert applied[-1] >= 6 and len(np.unique(applied)) >= 4  # tables before, between and after the chunks
    # every pick is a replica of its expert under the placement in force at that step
    steps, L = ref["ids"].shape[:2]
    p2l = ref["p2l"]
    for s in range(steps):
        for layer in range(L):
            assert np.array_equal(p2l[s, layer][ref["ids"][s, layer]], ref["logical"][s])
    # the placement changed layer 0 first, then layer 1, mid-run
    changes = [s for s in range(1, steps) if not np.array_equal(p2l[s], p2l[s - 1])]
    assert len(changes) == 2
    assert not np.array_equal(p2l[changes[0], 0], p2l[changes[0] - 1, 0])
    assert np.array_equal(p2l[changes[0], 1], p2l[changes[0] - 1, 1])


_AGG = r"""
import json, sys, time
import numpy as np
import torch.distributed as dist
from tempo.serving import DispatchTable
from tempo.serving.refresher import Refresher
from tempo.serving.runtime import GlooAggregator

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
agg = GlooAggregator(dist.new_group(backend="gloo"), world)
p2l = np.array([[0, 1, 2, 3, 0, 1]])
cum = {"c": np.zeros((1, 4), np.int64)}
seen = []
real = agg.__call__
r = Refresher(DispatchTable.from_placement(p2l), lambda: cum["c"], p2l, 2, policy="noop", interval_s=0.05,
              aggregate=lambda w: seen.append(real(w)) or seen[-1])
r.aggregate.finish = agg.finish
dist.barrier()
r.start()
for _ in range(30):
    cum["c"] += rank + 1
    time.sleep(0.02)
time.sleep(0.0 if rank == 1 else 1.0)  # rank 1 stops first; rank 0 is still refreshing
t0 = time.monotonic()
r.stop()
print(json.dumps({"stop_s": time.monotonic() - t0, "stats": dict(r.stats), "sums": [int(s.sum()) for s in seen]}))
dist.barrier()
"""


def test_stopping_one_rank_never_stalls_the_others(tmp_path):
    """Review finding 13 / issue 15 item 6: window aggregation runs in rounds that end together,
    so a rank whose refresher stops first leaves no peer blocked in an all-reduce (the old
    refresher's stop() then waited 5 s for a thread stuck in gloo)."""
    import json

    script = tmp_path / "agg.py"
    script.write_text(_AGG)
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in [str(Path(tempo.__file__).parents[1]),
                                                      os.environ.get("PYTHONPATH", "")] if p))
    port = str(_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", port], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for r in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(o[1][-3000:] for o in outs)
    res = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert all(x["stop_s"] < 2.0 for x in res), res
    assert res[0]["stats"].get("stopped") == 1  # rank 0's refresher ended with its peer's last round
    assert res[0]["stats"].get("noop", 0) >= 3 and res[1]["stats"].get("noop", 0) >= 3
    # every round summed both ranks' windows: rank 0 adds 1 per tick, rank 1 adds 2
    assert sum(res[0]["sums"]) == sum(res[1]["sums"]) > 0
