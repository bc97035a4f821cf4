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

torch = pytest.importorskip("torch")

_LATE = r"""
import json, sys, time
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
"""


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
