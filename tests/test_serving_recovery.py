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
timeout_s, late_s, traffic_s = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
import faulthandler
faulthandler.dump_traceback_later(late_s + traffic_s + 120, exit=True)  # a hang shows its stacks
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
E, g = 8, 4
p2l = np.array([[0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 0]] * 2)
settings = ServingSettings(solver="thread", refresh_ms=100, deadline_ms=60000)
windows = []


class Solver:  # what is aggregated is under test, not the solve: the uniform table of the window's placement
    kind, restarts = "thread", 0

    def __init__(self, p2l, *a, width=None, n_logical=None, **k):
        self.p2l, self.width, self.E = p2l, width, n_logical

    def set_placement(self, p2l):
        self.p2l = p2l

    def solve(self, window, deadline_s, steps=None, cancel=None, **opts):
        windows.append(int(np.asarray(window).sum()))
        return ("ok", uniform_prob(padded_replica_map(self.p2l, self.E, self.width)), 0.001)

    def wait_ready(self, timeout):
        return True

    def alive(self):
        return True

    def close(self):
        pass


refresher.make_solver = lambda s, p2l, n, width=None, n_logical=None: Solver(p2l, width=width, n_logical=n_logical)
dist.barrier()
t0 = time.monotonic()  # the same moment on every rank
if rank == world - 1:
    time.sleep(late_s)  # the last rank builds its runtime late (its refresher lags by late_s)
end = t0 + late_s + traffic_s
agg = GlooAggregator(group, world)
rt = TempoRuntime(p2l, g, settings=settings, aggregate=agg, rank=rank)
pop = np.array([0.4, 0.2, 0.1, 0.1, 0.08, 0.06, 0.04, 0.02])
rng = np.random.default_rng(rank)
published, bad, first_after_rebuild = [], 0, None
while time.monotonic() < end:
    rt.on_forward()
    ids = torch.tensor(rng.choice(E, size=(16, 2), p=pop))
    for l in range(2):
        out = rt.dispatch(l, ids)
        bad += int(sum(rt.p2l[l][int(p)] != int(e) for p, e in zip(out.flatten(), ids.flatten())))
    n = rt.refresher.stats["published"]
    if not published or n != published[-1][1]:
        published.append((time.monotonic() - t0, n))
    if first_after_rebuild is None and agg.stats["rebuilt"] and n > 0 and agg.generation > 0 and not agg.broken \
            and not rt.refresher._local:
        first_after_rebuild = time.monotonic() - t0
    time.sleep(0.01)
stats = dict(rt.refresher.stats)
print(json.dumps({"rank": rank, "stats": stats, "agg": dict(agg.stats), "generation": agg.generation,
                  "broken": agg.broken, "local_now": rt.refresher._local, "bad": bad,
                  "published_final": stats.get("published", 0),
                  "published_late": stats.get("published", 0) - max([n for t, n in published if t < late_s + 5] or [0]),
                  "first_summed_table_s": first_after_rebuild}))
rt.close()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # what is tested ends with close(); interpreter shutdown is not part of it
"""


@pytest.mark.skipif(os.environ.get("TEMPO_SLOW_TESTS") != "1",
                    reason="waits on process timing under load: set TEMPO_SLOW_TESTS=1 (a soak, not CI)")
@pytest.mark.needs("torch")
def test_late_rank_tables_resume_on_every_rank(tmp_path):
    """2 ranks, group timeout 2 s, the last rank starts 6 s late: the first summed-window round
    times out, each rank then solves from its own window and rebuilds the group once the late
    rank is there; summed windows and tables resume on both ranks (before: every round failed
    from then on, an error every period, no table on either rank)."""
    traffic = float(os.environ.get("TEMPO_LATE_RANK_TRAFFIC_S", "20"))
    res = _launch(tmp_path, _LATE, 2, 2.0, 6.0, traffic, timeout=300)
    for r in res:
        assert r["bad"] == 0, r
        assert r["stats"].get("error", 0) == 0, r
        assert r["generation"] >= 1 and not r["broken"] and not r["local_now"], r
        assert r["first_summed_table_s"] is not None, r
        assert r["published_late"] >= 1, r  # tables from 5 s after the late rank started on
    assert res[0]["agg"]["failed"] >= 1 and res[0]["stats"]["local_windows"] >= 1


P2L = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 0, 3]])


def _resume(pid):
    if pid is not None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(os.environ.get("TEMPO_SLOW_TESTS") != "1",
                    reason="waits on process timing under load: set TEMPO_SLOW_TESTS=1 (a soak, not CI)")
def test_worker_wedged_in_warm_up_is_replaced_within_30_s():
    """A worker stopped (SIGSTOP) before it is ready makes no progress: it is replaced once it
    has made none for ``warmup_timeout_s`` (20 s by default) from its start, not after the
    start-up bound (900 s), and the new worker serves.  The compiled code is built before any worker
    starts (``built``), so a worker only loads it."""
    from tempo.serving.solver import SolverProcess

    assert ServingSettings().warmup_timeout_s == 20.0
    assert ServingSettings.from_env({"TEMPO_WARMUP_TIMEOUT_S": "7"}).warmup_timeout_s == 7.0
    with pytest.raises(ValueError, match="TEMPO_WARMUP_TIMEOUT_S"):
        ServingSettings(warmup_timeout_s=-1)
    sp = SolverProcess(P2L, 2, "proxy-serving")
    pid = sp.pid
    t0 = time.monotonic()
    try:
        assert sp.built and sp.warmup_timeout_s == 20.0 and sp.startup_timeout_s == 900.0
        os.kill(pid, signal.SIGSTOP)  # before it could import, load the code and say ready
        window = np.full((2, 4), 5, np.int64)
        replies = []
        while sp.restarts == 0 and time.monotonic() - t0 < 120:
            replies.append(sp.solve(window, 0.2)[0])  # the refresher's call: replaces a wedged worker first
            time.sleep(0.2)
        replaced_s = time.monotonic() - t0
        assert sp.restarts == 1 and sp.pid != pid, replies
        assert 20.0 <= replaced_s <= 30.0, replaced_s
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        pid = None
        assert sp.wait_ready(300)
        ok = sp.solve(window, 60.0)
        assert ok[0] == "ok" and ok[1].shape == (1, 2, 4, 2)
    finally:
        _resume(pid)
        sp.close()


@pytest.mark.skipif(os.environ.get("TEMPO_SLOW_TESTS") != "1",
                    reason="waits on process timing under load: set TEMPO_SLOW_TESTS=1 (a soak, not CI)")
def test_a_slow_but_live_warm_up_is_not_replaced(monkeypatch):
    """The bound counts time without CPU progress: a worker that keeps computing (a busy
    machine) is left alone past ``warmup_timeout_s``."""
    from tempo.serving import solver

    sp = solver.SolverProcess(P2L, 2, "proxy-serving", warmup_timeout_s=0.5)
    try:
        sp._ready[0] = False  # as if still warming up
        sp._started[0] = time.monotonic() - 5
        ticks = iter(range(1, 10**6))
        monkeypatch.setattr(solver, "_cpu_seconds", lambda pid: float(next(ticks)))  # one CPU second per look
        for _ in range(5):
            assert sp._wedged(0) is None
            time.sleep(0.2)
        monkeypatch.setattr(solver, "_cpu_seconds", lambda pid: 7.0)  # no progress from now on
        sp._wedged(0)
        time.sleep(0.7)
        assert "no progress" in sp._wedged(0)
    finally:
        sp.close()


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
