"""Serving recovers by itself from a rank that lags its peers by more than the gloo group's
timeout (a late start, a stopped process): the summed-window group is rebuilt on every rank and
tables are published on every rank afterwards; meanwhile each rank solves from its own window.
Also a solver worker wedged in its warm-up is replaced after the warm-up bound."""
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_multirank import _launch  # noqa: E402

from tempo.serving.settings import ServingSettings  # noqa: E402

torch = pytest.importorskip("torch")

_LATE = r"""
import json, os, sys, time
from datetime import timedelta
import numpy as np
import torch
import torch.distributed as dist
from tempo.serving import refresher
from tempo.serving.runtime import GlooAggregator, TempoRuntime
from tempo.serving.settings import ServingSettings
from tempo.serving.tables import padded_replica_map, uniform_prob

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
timeout_s, late_s, bound_s = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
import faulthandler
faulthandler.dump_traceback_later(late_s + bound_s + 120, exit=True)  # a hang shows its stacks
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
store = dist.distributed_c10d._get_default_store()
group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
E, g = 8, 4
p2l = np.array([[0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 0]] * 2)
settings = ServingSettings(solver="thread", refresh_ms=100, deadline_ms=60000)


class Solver:  # what is aggregated is under test, not the solve: the uniform table of the window's placement
    kind, restarts = "thread", 0

    def __init__(self, p2l, *a, width=None, n_logical=None, **k):
        self.p2l, self.width, self.E = p2l, width, n_logical

    def set_placement(self, p2l):
        self.p2l = p2l

    def solve(self, window, deadline_s, steps=None, cancel=None, **opts):
        return ("ok", uniform_prob(padded_replica_map(self.p2l, self.E, self.width)), 0.001)

    def wait_ready(self, timeout):
        return True

    def alive(self):
        return True

    def close(self):
        pass


refresher.make_solver = lambda s, p2l, n, width=None, n_logical=None: Solver(p2l, width=width, n_logical=n_logical)
dist.barrier()
t0 = time.monotonic()  # the same moment on every rank (one machine: one monotonic clock)
if rank == world - 1:
    time.sleep(late_s)  # the last rank builds its runtime late (its refresher lags by late_s)
    store.set("arrived", repr(time.monotonic() - t0))
agg = GlooAggregator(group, world)
rt = TempoRuntime(p2l, g, settings=settings, aggregate=agg, rank=rank)
tables = []  # (seconds from t0, generation, summed) of every publication, from the refresher thread


def on_publish(new, window):
    tables.append((time.monotonic() - t0, agg.generation, not rt.refresher._local))


rt.refresher.on_publish = on_publish
pop = np.array([0.4, 0.2, 0.1, 0.1, 0.08, 0.06, 0.04, 0.02])
rng = np.random.default_rng(rank)
bad, done = 0, False
keys = [f"done/{r}" for r in range(world)]
# traffic until every rank has published summed-window tables from a rebuilt group (the outcome
# under test), or bound_s after the late rank's start
while time.monotonic() - t0 < late_s + bound_s:
    rt.on_forward()
    ids = torch.tensor(rng.choice(E, size=(16, 2), p=pop))
    for l in range(2):
        out = rt.dispatch(l, ids)
        bad += int(sum(rt.p2l[l][int(p)] != int(e) for p, e in zip(out.flatten(), ids.flatten())))
    if not done and sum(1 for t, gen, summed in tables if gen >= 1 and summed) >= 3:
        done = True
        store.set(f"done/{rank}", "1")
    if done and store.check(keys):
        break
    time.sleep(0.01)
stats = dict(rt.refresher.stats)
arrived = float(store.get("arrived"))  # set long ago: every rank reads the store before the barrier below
summed = [t for t, gen, s in tables if gen >= 1 and s]
print(json.dumps({"rank": rank, "stats": stats, "agg": dict(agg.stats), "generation": agg.generation,
                  "bad": bad, "done": done, "arrived_s": arrived, "tables": len(tables),
                  "local_tables": sum(1 for t, gen, s in tables if not s),
                  "summed_after_rebuild": len(summed),
                  "first_summed_after_arrival_s": summed[0] - arrived if summed else None}))
rt.close()
dist.barrier()  # rank 0 holds the store: no rank leaves while another still reads it
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # what is tested ends with close(); interpreter shutdown is not part of it
"""


@pytest.mark.needs("torch")
def test_late_rank_tables_resume_on_every_rank(tmp_path):
    """2 ranks, group timeout 2 s, the last rank starts 6 s late: the first summed-window round
    times out, each rank then solves from its own window and rebuilds the group once the late
    rank is there; every rank publishes summed-window tables from the rebuilt group, the first
    within 30 s of the late rank's start, with no error and no bad id."""
    res = _launch(tmp_path, _LATE, 2, 2.0, 6.0, 30.0, timeout=300)
    print(res)
    for r in res:
        assert r["bad"] == 0, r
        assert r["stats"].get("error", 0) == 0, r
        assert r["done"] and r["generation"] >= 1 and r["agg"]["rebuilt"] >= 1, r
        assert r["summed_after_rebuild"] >= 3, r
        assert r["first_summed_after_arrival_s"] is not None and 0 < r["first_summed_after_arrival_s"] <= 30, r
        assert r["arrived_s"] >= 6.0, r
    # while the late rank was away, rank 0's round failed and it solved from its own window
    assert res[0]["agg"]["failed"] >= 1 and res[0]["stats"]["local_windows"] >= 1 and res[0]["local_tables"] >= 1


_SYNC = r"""
import json, os, signal, sys, threading, time, zlib
from datetime import timedelta
import numpy as np
import torch
import torch.distributed as dist
from tempo.serving import refresher
from tempo.serving.runtime import TableSync, TempoRuntime
from tempo.serving.settings import ServingSettings
from tempo.serving.tables import padded_replica_map

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
timeout_s, stop_s, bound_s = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
victim = int(sys.argv[8])                   # the rank that stops itself
resumer = 1 if victim == 0 else 0           # the rank that resumes it
import faulthandler
faulthandler.dump_traceback_later(stop_s + bound_s + 120, exit=True)  # a hang shows its stacks
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=stop_s + bound_s + 60))
store = dist.distributed_c10d._get_default_store()
bcast = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
agree = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
E, g, every = 8, 4, 4
p2l = np.array([[0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 0]] * 2)
settings = ServingSettings(solver="thread", refresh_ms=100, deadline_ms=60000, agree_every=every)


class Solver:  # each table a different skew over the replicas, so a version is visible in the picks
    kind, restarts = "thread", 0

    def __init__(self, p2l, *a, width=None, n_logical=None, **k):
        self.p2l, self.width, self.E, self.n = p2l, width, n_logical, 0

    def set_placement(self, p2l):
        self.p2l = p2l

    def solve(self, window, deadline_s, steps=None, cancel=None, **opts):
        self.n += 1
        phys = padded_replica_map(self.p2l, self.E, self.width)
        w = np.where(phys >= 0, 1.0 + (np.arange(phys.shape[-1]) == self.n % phys.shape[-1]) * 3, 0.0)
        return ("ok", (w / w.sum(-1, keepdims=True))[None].astype(np.float32), 0.001)

    def wait_ready(self, timeout):
        return True

    def alive(self):
        return True

    def close(self):
        pass


refresher.make_solver = lambda s, p2l, n, width=None, n_logical=None: Solver(p2l, width=width, n_logical=n_logical)
shape = (1, 2, E, 12 - E + 1)
rt = TempoRuntime(p2l, g, settings=settings, rank_invariant=True,
                  sync=TableSync(rank, world, shape, bcast, agree, every))
if rank == resumer:  # resumes the stopped rank stop_s after it stopped itself
    def resume():
        mine = store.clone()  # a store client serialises its calls: this thread's blocking wait has its own
        pid = int(mine.get(f"pid/{victim}"))
        # the store's server runs in rank 0: the stop is seen in /proc, not through the store
        while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.01)
        time.sleep(stop_s)
        os.kill(pid, signal.SIGCONT)
    threading.Thread(target=resume, daemon=True).start()
elif rank == victim:
    store.set(f"pid/{victim}", str(os.getpid()))
pop = np.array([0.3, 0.25, 0.15, 0.1, 0.08, 0.06, 0.04, 0.02])
rng = np.random.default_rng(7)  # the same batches on every rank
log, bad, step, stopped_at, resumed, first_after = [], 0, 0, None, None, None
applied_at_resume = None
t_start = time.monotonic()
while True:
    step += 1
    if rank == victim and stopped_at is None and step % every == 0 and \
            store.check([f"warm/{r}" for r in range(world)]):
        stopped_at = step
        os.kill(os.getpid(), signal.SIGSTOP)  # a stopped rank: its peers' sync rounds time out
        store.set("resumed", repr(time.time()))
    rt.on_forward()
    ids = torch.tensor(rng.choice(E, size=(16, 2), p=pop))
    outs = [rt.dispatch(l, ids) for l in range(2)]
    for l, out in enumerate(outs):
        bad += int(sum(rt.p2l[l][int(p)] != int(e) for p, e in zip(out.flatten(), ids.flatten())))
    log.append((rt.sync.applied, zlib.crc32(np.concatenate([o.numpy().ravel() for o in outs]).tobytes())))
    applied = rt.stats["tables_applied"]
    if applied >= 2:
        store.set(f"warm/{rank}", "1")
    if resumed is None and store.check(["resumed"]):
        resumed, applied_at_resume = float(store.get("resumed")), applied
    if resumed is not None and first_after is None and applied > applied_at_resume:
        first_after = time.time() - resumed
    mine = int(resumed is not None and applied >= applied_at_resume + 2)
    if time.monotonic() - t_start > stop_s + bound_s + 30:
        mine = 1  # out of time: end together, the result says what happened
    flag = torch.tensor([mine], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # the forward pass's collective: ranks in lock step
    if flag[0]:
        break
    time.sleep(0.01)
stats = rt.stats
np.save(sys.argv[7] + f"/sync{rank}.npy", np.array(log, dtype=np.int64))
print(json.dumps({"rank": rank, "bad": bad, "steps": step,
                  "sync": {k: v for k, v in stats.items() if k.startswith("sync_")},
                  "applied": stats["tables_applied"], "applied_at_resume": applied_at_resume,
                  "first_applied_after_resume_s": first_after, "error": stats.get("error", 0)}))
dist.barrier()
rt.close()
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.needs("torch")
@pytest.mark.parametrize("world, victim", [(2, 1), (3, 0), (3, 2)])
def test_table_sync_recovers_from_a_stopped_rank(tmp_path, world, victim):
    """Rank-invariant dispatch on ``world`` ranks, sync groups with a 2 s timeout: rank
    ``victim`` (rank 0 publishes the tables, the others receive them) is stopped (SIGSTOP) for
    6 s at an agreement point, so the other ranks' agreement rounds time out.  The failed rounds
    are counted, every rank rebuilds the agreement group, and tables are applied on every rank
    again, the first within 30 s of the resume; the ranks apply the same version
    and pick the same physical ids at every step, before, during and after the fault; no bad id."""
    res = _launch(tmp_path, _SYNC, world, 2.0, 6.0, 30.0, tmp_path, victim, timeout=300)
    print(res)
    logs = [np.load(tmp_path / f"sync{r}.npy") for r in range(world)]
    assert len(logs[0]) > 0 and all(len(x) == len(logs[0]) for x in logs)
    for r in range(1, world):
        differ = np.flatnonzero((logs[r] != logs[0]).any(axis=1))
        assert differ.size == 0, f"ranks 0 and {r} differ at steps {differ[:10].tolist()}"
    for r in res:
        assert r["bad"] == 0 and r["error"] == 0, r
        assert r["applied"] >= r["applied_at_resume"] + 2, r  # tables applied again after the fault
        assert r["first_applied_after_resume_s"] is not None and r["first_applied_after_resume_s"] <= 30, r
        assert r["sync"].get("sync_agree_rebuilt", 0) >= 1, r
    # the fault happened: a rank that kept running saw its agreement round fail
    assert all(r["sync"].get("sync_agree_failed", 0) >= 1 for r in res if r["rank"] != victim), res


def _rejoin_all(failing: int, order, world: int = 3):
    """Step ``world`` GroupRejoin ranks in ``order`` over one in-process store until each has a
    group; the first build of rank ``failing`` fails (its rendezvous timed out while its
    peers' completed).  Returns (groups, the ranks' GroupRejoin)."""
    import torch.distributed as dist

    from tempo.serving.runtime import GroupRejoin

    store = dist.HashStore()
    calls = []

    def build(prefix_store, rank, world_size, timeout_s):
        generation = rejoins[rank].generation + 1
        calls.append((rank, generation))
        if rank == failing and sum(c[0] == rank for c in calls) == 1:
            raise RuntimeError("Socket Timeout")
        return {"rank": rank, "generation": generation}

    rejoins = [GroupRejoin("g", r, world, 2.0, store, build=build) for r in range(world)]
    groups = [None] * world
    for _ in range(50):
        for r in order:
            if groups[r] is None:
                groups[r] = rejoins[r].step()
        if all(g is not None for g in groups):
            break
    return groups, rejoins


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
@pytest.mark.parametrize("failing", [0, 1, 2])
def test_a_rebuild_that_fails_on_one_rank_fails_on_every_rank(failing, order):
    """Three ranks rebuild a group; the build of one rank fails while the others' succeed.  No
    rank uses the generation one rank failed (its peers would wait in their first collective
    for the group's timeout, 30 min in SGLang): every rank drops it, and every rank takes the
    next generation's group, whichever rank failed and whatever order the ranks step in."""
    groups, rejoins = _rejoin_all(failing, order)
    assert [g and g["generation"] for g in groups] == [2, 2, 2]
    assert [g["rank"] for g in groups] == [0, 1, 2]
    assert [rj.generation for rj in rejoins] == [2, 2, 2]
    assert [rj.stats["rebuild_failed"] for rj in rejoins] == [1, 1, 1]
    assert [rj.stats["rebuilt"] for rj in rejoins] == [1, 1, 1]


def test_a_rebuild_waits_for_every_rank():
    """No rank takes a group before every rank is ready and has built it."""
    import torch.distributed as dist

    from tempo.serving.runtime import GroupRejoin

    store = dist.HashStore()
    rejoins = [GroupRejoin("g", r, 3, 2.0, store, build=lambda s, rank, w, t: ("group", rank)) for r in range(3)]
    assert rejoins[0].step() is None and rejoins[1].step() is None   # rank 2 not ready yet
    assert rejoins[2].step() is None                                  # built; ranks 0 and 1 have not
    assert rejoins[0].step() is None                                  # built; rank 1 has not
    assert rejoins[1].step() == ("group", 1)                          # every rank has built
    assert rejoins[0].step() == ("group", 0) and rejoins[2].step() == ("group", 2)
    assert [rj.generation for rj in rejoins] == [1, 1, 1]


P2L = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 0, 3]])


def _resume(pid):
    if pid is not None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def test_worker_wedged_in_warm_up_is_replaced_within_30_s():
    """A worker stopped (SIGSTOP) before it is ready makes no progress: it is replaced once it
    has made none for ``warmup_timeout_s`` from its start (20 s by default; 8 s here), within
    10 s more of being stopped (so within 30 s by default), not after the start-up bound
    (900 s), and the new worker serves.  The compiled code is built before any worker starts
    (``built``), so a worker only loads it."""
    from tempo.serving.solver import SolverProcess

    assert ServingSettings().warmup_timeout_s == 20.0
    assert ServingSettings.from_env({"TEMPO_WARMUP_TIMEOUT_S": "7"}).warmup_timeout_s == 7.0
    with pytest.raises(ValueError, match="TEMPO_WARMUP_TIMEOUT_S"):
        ServingSettings(warmup_timeout_s=-1)
    assert SolverProcess.__dataclass_fields__["startup_timeout_s"].default is None  # the settings' 900 s
    bound = 8.0
    sp = SolverProcess(P2L, 2, "proxy-serving", warmup_timeout_s=bound)
    pid, started = sp.pid, sp._started[0]
    try:
        assert sp.built and sp.warmup_timeout_s == bound and sp.startup_timeout_s == 900.0
        os.kill(pid, signal.SIGSTOP)  # before it could import, load the code and say ready
        stopped = time.monotonic()
        window = np.full((2, 4), 5, np.int64)
        replies = []
        while sp.restarts == 0 and time.monotonic() - stopped < 120:
            replies.append(sp.solve(window, 0.2)[0])  # the refresher's call: replaces a wedged worker first
            time.sleep(0.2)
        replaced = time.monotonic()
        assert sp.restarts == 1 and sp.pid != pid, replies
        assert replaced - started >= bound, (replaced - started)  # never before the bound, from its start
        assert replaced - stopped <= bound + 10.0, (replaced - stopped)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        pid = None
        assert sp.wait_ready(300)
        ok = sp.solve(window, 60.0)
        assert ok[0] == "ok" and ok[1].shape == (1, 2, 4, 2)
    finally:
        _resume(pid)
        sp.close()


def test_a_slow_but_live_warm_up_is_not_replaced(monkeypatch):
    """The bound counts time without CPU progress: a worker that keeps computing (a busy
    machine) is left alone past ``warmup_timeout_s``; once its CPU time stops growing it is
    wedged after the bound.  (The worker's CPU time is simulated; no process is started.)"""
    from tempo.serving import solver

    class Proc:  # stands for a live worker process; nothing is ever signalled
        pid, exitcode = -1, None

        def is_alive(self):
            return True

        def join(self, timeout=None):
            pass

        def kill(self):
            raise AssertionError("a live warm-up was killed")

    def start(self, i):  # a worker warming up on built code
        self._procs[i], self._ready[i], self._broken[i], self._misses[i] = Proc(), False, False, 0
        self._started[i] = time.monotonic() - 5
        self._progress[i] = (self._started[i], solver._cpu_seconds(self._procs[i].pid))

    monkeypatch.setattr(solver, "build_solver_code", lambda *a, **k: True)
    monkeypatch.setattr(solver.SolverProcess, "_start", start)
    monkeypatch.setattr(solver.SolverProcess, "close", lambda self: None)
    ticks = iter(range(1, 10**6))
    monkeypatch.setattr(solver, "_cpu_seconds", lambda pid: float(next(ticks)))  # one CPU second per look
    sp = solver.SolverProcess(P2L, 2, "proxy-serving", warmup_timeout_s=0.5)
    sp._finalizer.detach()  # no worker was started
    assert sp.built and not sp._ready[0] and time.monotonic() - sp._started[0] > 0.5
    for _ in range(5):
        assert sp._wedged(0) is None
        time.sleep(0.2)
    assert not sp.ensure_alive() and sp.restarts == 0
    monkeypatch.setattr(solver, "_cpu_seconds", lambda pid: 1e6)  # no progress from now on
    assert sp._wedged(0) is None  # the last progress was seen now
    time.sleep(0.7)
    assert "no progress" in sp._wedged(0)


_COLD = r"""
import json, os, sys, time
t_start = time.monotonic()
import numpy as np
from tempo.serving.runtime import TempoRuntime
from tempo.serving.settings import ServingSettings

rank = int(sys.argv[1])
p2l = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 0, 3]])
rt = TempoRuntime(p2l, 2, settings=ServingSettings(refresh_ms=100, deadline_ms=5000), device="cpu")
t_ready = time.monotonic()
import torch
first = None
while time.monotonic() - t_start < 1200:
    rt.on_forward()
    rt.dispatch(0, torch.tensor([[0, 2]] * 32))
    if rt.refresher.stats["published"]:
        first = time.monotonic()
        break
    time.sleep(0.02)
print(json.dumps({"rank": rank, "runtime_s": t_ready - t_start, "first_table_after_start_s":
                  None if first is None else first - t_ready, "stats": dict(rt.refresher.stats),
                  "restarts": rt.refresher.solver.restarts, "built": rt.refresher.solver.built}))
rt.close()
"""


@pytest.mark.skipif(os.environ.get("TEMPO_SLOW_TESTS") != "1", reason="a cold numba compile: set TEMPO_SLOW_TESTS=1")
def test_two_ranks_starting_cold_build_once_and_serve_at_once(tmp_path):
    """Two server processes start at once with an empty numba cache: the build runs before
    serving (the runtime's construction returns only when the code is built), the ranks build in
    turn under the lock (no two writers), and each publishes its first table within seconds of
    its runtime being up; no worker is replaced."""
    import subprocess

    import tempo

    cache = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(tempo.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    script = tmp_path / "cold.py"
    script.write_text(_COLD)
    procs = [subprocess.Popen([sys.executable, str(script), str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for r in range(2)]
    outs = [p.communicate(timeout=2400) for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[1][-3000:] for o in outs)
    res = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    print(res)
    for r in res:
        assert r["built"] and r["restarts"] == 0, r
        assert r["first_table_after_start_s"] is not None and r["first_table_after_start_s"] <= 30, r
    assert any(f.suffix == ".nbi" for f in cache.rglob("*"))
    # the cache the two wrote is whole: a third process loads every function a solve needs from
    # it and compiles nothing
    check = subprocess.run([sys.executable, "-c", _LOADS], capture_output=True, text=True, env=env, timeout=1200)
    assert check.returncode == 0, check.stderr[-3000:]
    assert json.loads(check.stdout.strip().splitlines()[-1]) == {"compiles": 0}


_LOADS = r"""
import json
import numpy as np
from tempo.core.jit import compile_counter
from tempo.serving.settings import ServingSettings
from tempo.serving.solver import TableSolver
with compile_counter() as c:
    s = TableSolver(np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 0, 3]]), 2, ServingSettings().cost_model())
    s.solve(np.full((2, 4), 8, np.int64))
print(json.dumps({"compiles": c.compiles}))
"""


_LOCKER = r"""
import json, sys, time
from tempo.serving.solver import build_lock
t0 = time.time()
with build_lock():
    a = time.time()
    time.sleep(1.0)
    b = time.time()
print(json.dumps([t0, a, b]))
"""


def test_builds_of_one_cache_take_turns(tmp_path):
    """Two processes building into the same numba cache hold the build lock one after the
    other (never two writers); a third, with another cache, takes its own lock."""
    import subprocess

    import tempo

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(Path(tempo.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    other = dict(env, NUMBA_CACHE_DIR=str(tmp_path / "other"))
    from tempo.serving.solver import _build_lock_path

    paths = []
    for e in (env, other):
        os.environ["NUMBA_CACHE_DIR"], saved = e["NUMBA_CACHE_DIR"], os.environ.get("NUMBA_CACHE_DIR")
        try:
            paths.append(_build_lock_path())
        finally:
            if saved is None:
                os.environ.pop("NUMBA_CACHE_DIR")
            else:
                os.environ["NUMBA_CACHE_DIR"] = saved
    assert paths[0] != paths[1]
    procs = [subprocess.Popen([sys.executable, "-c", _LOCKER], stdout=subprocess.PIPE, text=True, env=e)
             for e in (env, env, other)]
    spans = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    (_, a1, b1), (_, a2, b2), (_, a3, b3) = spans
    assert b1 <= a2 or b2 <= a1, spans  # the same cache: one after the other
    assert all(p.returncode == 0 for p in procs)
