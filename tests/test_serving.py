"""Serving runtime (Section 4.4): tables, counters, the dispatch-and-count kernel, torn
publication, the solver process under faults, and a soak run of the refresher."""
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tempo
from tempo import CostModel, Instance
from tempo.world.placement import eplb_placement
from tempo.serving import DispatchTable, effective_probabilities, replica_map, validate_table, window_counts
from tempo.serving.refresher import Refresher, TorchPublisher
from tempo.serving.settings import ServingSettings
from tempo.serving.solver import TableSolver, check_counts, solve_tables
from tempo.world.workloads import expected_loads, sample_counts, zipf_popularity

from conftest import optional_module

torch = optional_module("torch")  # a test that touches torch is skipped without it; the numpy ones run


def S(deadline_s=300.0, refresh_s=0.2, **kw):
    """Serving settings for a test (seconds, as the tests think of them)."""
    return ServingSettings(deadline_ms=deadline_s * 1e3, refresh_ms=refresh_s * 1e3, **kw)


def kernel(*args, **kwargs):
    from tempo.serving.kernels import dispatch_and_count_reference

    return dispatch_and_count_reference(*args, **kwargs)


def _placement(L=3, E=16, g=4, rep=1.5, seed=0):
    pop = zipf_popularity(E, 1.0, seed=seed)
    return np.stack([eplb_placement(np.roll(pop, l), g, rep) for l in range(L)]), pop


# ------------------------------------------------------------------ tables
def test_replica_map_matches_instance_layout():
    p2l, _ = _placement()
    phys = replica_map(p2l)
    L, E, R = phys.shape
    per_gpu = p2l.shape[1] // 4
    for l in range(L):
        inst = Instance.from_placement(np.ones(E, int), p2l[l], 4)
        w = inst.replica_gpu.shape[1]
        gpu = np.where(phys[l] >= 0, phys[l] // per_gpu, -1)
        assert np.array_equal(gpu[:, :w], inst.replica_gpu)
        assert np.all(phys[l][:, w:] == -1)
        for e in range(E):  # every physical id of e, ascending
            assert phys[l, e][phys[l, e] >= 0].tolist() == np.flatnonzero(p2l[l] == e).tolist()


def test_replica_map_errors():
    with pytest.raises(ValueError, match="no physical replica"):
        replica_map([[0, 0, 2]])
    with pytest.raises(ValueError, match="negative"):
        replica_map([[0, -1]])
    with pytest.raises(ValueError, match="integer"):
        replica_map(np.array([[0.0, 1.0]]))


def test_effective_probabilities_and_validation():
    phys = np.array([[3, 7, -1], [2, -1, -1], [0, 1, 4]])
    prob = np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [np.nan, -1.0, 0.0]])
    eff = effective_probabilities(prob, phys)
    assert np.allclose(eff, [[0.25, 0.75, 0], [1, 0, 0], [1 / 3, 1 / 3, 1 / 3]])
    validate_table(np.array([[0.5, 0.5, 0]]), phys[:1])
    with pytest.raises(ValueError, match="padding"):
        validate_table(np.array([[0.5, 0.25, 0.25]]), phys[:1])
    with pytest.raises(ValueError, match="negative"):
        validate_table(np.array([[1.5, -0.5, 0]]), phys[:1])
    with pytest.raises(ValueError, match="non-finite"):
        validate_table(np.array([[np.nan, 0, 0]]), phys[:1])


# ------------------------------------------------------------------ counters
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_window_counts_across_wrap(dtype):
    info = np.iinfo(dtype)
    old = np.array([info.max - 5, 10, info.max], dtype)
    inc = np.array([17, 3, 1])
    with np.errstate(over="ignore"):
        new = (old.astype(np.uint64) + inc.astype(np.uint64)).astype(np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")).view(dtype)
    assert new[0] < old[0]  # it wrapped
    assert window_counts(new, old).tolist() == inc.tolist()


def test_window_counts_errors():
    with pytest.raises(ValueError, match="shape"):
        window_counts(np.zeros(3, np.int64), np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="dtype"):
        window_counts(np.zeros(3, np.int64), np.zeros(3, np.int32))


def test_counter_wrap_through_the_kernel():
    phys = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    prob = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    counts = torch.tensor([2**31 - 3, 5], dtype=torch.int32)
    before = counts.numpy().copy()
    ids = torch.zeros(10, 1, dtype=torch.int64)
    kernel(ids, prob, phys, counts, torch.rand(10))
    assert counts[0] < 0  # int32 wrapped
    assert window_counts(counts.numpy(), before).tolist() == [10, 0]


# ------------------------------------------------------------------ kernel
def test_kernel_split_matches_table_chi_square():
    from scipy.stats import chisquare

    p2l, _ = _placement(L=1, E=8, g=4, rep=2.0)
    phys = torch.tensor(replica_map(p2l)[0])
    g = torch.Generator().manual_seed(0)
    prob = torch.rand(phys.shape, generator=g) * (phys >= 0)
    T, K = 40000, 4
    ids = torch.randint(0, 8, (T, K), generator=g)
    counts = torch.zeros(8, dtype=torch.int64)
    out = kernel(ids, prob, phys, counts, torch.rand(T * K, generator=g))
    assert counts.tolist() == torch.bincount(ids.reshape(-1), minlength=8).tolist()
    eff = effective_probabilities(prob.numpy(), phys.numpy())
    tested = 0
    for e in range(8):
        cols = np.flatnonzero(phys[e].numpy() >= 0)
        got = np.array([(out[ids == e] == phys[e, c]).sum().item() for c in cols])
        assert got.sum() == (ids == e).sum()
        exp = eff[e, cols] * got.sum()
        if len(cols) > 1:
            assert chisquare(got, exp).pvalue > 1e-4
            tested += 1
    assert tested >= 4


def test_kernel_padding_rows_neither_routed_nor_counted():
    phys = torch.tensor([[5, 6], [7, -1]], dtype=torch.int32)
    prob = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    ids = torch.tensor([[0, 1], [0, 0], [0, 0], [0, 0]])  # rows 2, 3 are CUDA-graph padding
    counts = torch.zeros(2, dtype=torch.int64)
    out = kernel(ids, prob, phys, counts, torch.full((8,), 0.5), num_token_non_padded=torch.tensor(2))
    assert counts.tolist() == [3, 1]  # the padding rows would have made expert 0 a phantom hot expert
    assert out[:2].tolist() == [[6, 7], [6, 6]]
    assert out[2:].tolist() == [[5, 5], [5, 5]]  # a valid physical id, the first replica


def test_kernel_zero_nan_rows_and_masked_ids():
    phys = torch.tensor([[1, 2, -1], [3, -1, -1]], dtype=torch.int32)
    prob = torch.tensor([[0.0, 0.0, 5.0], [float("nan"), 0.0, 0.0]])  # mass only on padding / NaN
    ids = torch.tensor([[0, 1, -1]] * 3000)
    counts = torch.zeros(2, dtype=torch.int64)
    out = kernel(ids, prob, phys, counts, torch.rand(9000))
    assert set(out[:, 0].tolist()) == {1, 2}  # uniform fallback over the holders
    assert abs((out[:, 0] == 1).float().mean().item() - 0.5) < 0.05
    assert set(out[:, 1].tolist()) == {3}
    assert set(out[:, 2].tolist()) == {-1} and counts.tolist() == [3000, 3000]


def test_kernel_u_at_the_edges_stays_on_positive_columns():
    phys = torch.tensor([[0, 1, 2]], dtype=torch.int32)
    prob = torch.tensor([[0.3, 0.7, 0.0]])
    ids = torch.zeros(3, 1, dtype=torch.int64)
    out = kernel(ids, prob, phys, torch.zeros(1, dtype=torch.int64), torch.tensor([0.0, 0.3, 1.0 - 1e-9]))
    assert out[:, 0].tolist() == [0, 1, 1]


def test_kernel_input_errors():
    phys = torch.tensor([[0, 1]], dtype=torch.int32)
    with pytest.raises(ValueError, match="T, K"):
        kernel(torch.zeros(3, dtype=torch.int64), torch.ones(1, 2), phys, torch.zeros(1, dtype=torch.int64), torch.rand(3))
    with pytest.raises(ValueError, match="uniforms"):
        kernel(torch.zeros(3, 1, dtype=torch.int64), torch.ones(1, 2), phys, torch.zeros(1, dtype=torch.int64), torch.rand(2))


@pytest.mark.needs("torch")
def test_kernel_edges_fail_clearly():
    """Serving edges: out-of-range uniforms, ids >= E, empty tables and wrong types
    raise errors naming the argument instead of routing to a zero-probability column or
    dropping ids silently."""
    phys = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    prob = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    ids = torch.zeros(2, 1, dtype=torch.int64)

    def call(ids=ids, prob=prob, phys=phys, u=torch.full((2,), 0.5), counts=None):
        counts = torch.zeros(phys.shape[0], dtype=torch.int64) if counts is None else counts
        return kernel(ids, prob, phys, counts, u)

    assert call().tolist() == [[1], [1]]
    for bad in ([-0.5, 0.5], [float("nan"), 0.5], [0.5, 1.5]):
        with pytest.raises(ValueError, match="u must"):
            call(u=torch.tensor(bad))
    with pytest.raises(ValueError, match="ids >= E"):
        call(ids=torch.tensor([[0], [2]]))
    with pytest.raises(ValueError, match="empty"):
        call(ids=torch.zeros(0, 1, dtype=torch.int64), prob=torch.zeros(0, 2), phys=torch.zeros(0, 2, dtype=torch.int32),
             u=torch.zeros(0))
    with pytest.raises(ValueError, match="empty"):
        call(prob=torch.zeros(2, 0), phys=torch.zeros(2, 0, dtype=torch.int32))
    with pytest.raises(TypeError, match="integer"):
        call(ids=torch.zeros(2, 1))
    with pytest.raises(TypeError, match="topk_ids must be a torch tensor"):
        call(ids=np.zeros((2, 1), np.int64))


def test_counter_going_backwards_is_an_error_and_the_next_window_recovers():
    from tempo.serving import CumulativeCounts

    with pytest.raises(ValueError, match="backwards"):
        window_counts(np.array([5, 10], np.int32), np.array([10, 10], np.int32))  # was 4294967291
    with pytest.raises(ValueError, match="backwards"):
        window_counts(np.array([5], np.int64), np.array([10], np.int64))
    state = {"c": np.array([100, 50], np.int32)}
    cc = CumulativeCounts(lambda: state["c"])
    state["c"] = np.array([3, 1], np.int32)  # a counter reset
    with pytest.raises(ValueError, match="backwards"):
        cc.window()
    state["c"] = np.array([10, 4], np.int32)
    assert cc.window().tolist() == [7, 3]
    with pytest.raises(ValueError, match="integer"):
        check_counts(np.full((1, 2), 1e30), 1, 2)
    with pytest.raises(ValueError, match="empty"):
        replica_map(np.zeros((0, 4), np.int64))
    with pytest.raises(ValueError, match="n_logical"):
        replica_map([[0, 1]], n_logical=1.7)


@pytest.mark.needs("torch", "triton")
def test_triton_kernel_agrees_with_reference():
    if not torch.cuda.is_available():
        pytest.skip("the Triton kernel needs a CUDA GPU")
    pytest.importorskip("triton")
    from tempo.serving.triton_kernels import dispatch_and_count_triton

    p2l, _ = _placement(L=1, E=64, g=8, rep=1.5)
    phys = torch.tensor(replica_map(p2l)[0], device="cuda")
    prob = torch.rand(phys.shape, device="cuda") * (phys >= 0)
    prob[3] = 0  # a torn row
    ids = torch.randint(0, 64, (4096, 8), device="cuda")
    u = torch.rand(4096 * 8, device="cuda")
    c_ref = torch.zeros(64, dtype=torch.int64, device="cuda")
    c_tri = torch.zeros(64, dtype=torch.int64, device="cuda")
    nv = torch.tensor(4000, device="cuda")
    ref = kernel(ids, prob, phys, c_ref, u, nv)
    tri = dispatch_and_count_triton(ids, prob, phys, c_tri, u, nv)
    assert torch.equal(c_ref, c_tri)
    assert (ref == tri).float().mean().item() > 0.999  # float rounding at a cdf boundary may differ


# ------------------------------------------------------------------ torn publication
def _check_state(prob, phys):
    eff = effective_probabilities(prob, phys)
    assert np.allclose(eff.sum(-1), 1.0)
    assert np.all(eff[phys < 0] == 0)
    E = phys.shape[0]
    ids = torch.arange(E).repeat_interleave(8)[:, None]
    counts = torch.zeros(E, dtype=torch.int64)
    out = kernel(ids, torch.tensor(prob), torch.tensor(phys), counts, torch.rand(ids.numel()))
    holders = [set(phys[e][phys[e] >= 0].tolist()) for e in range(E)]
    assert all(o in holders[e] for o, e in zip(out[:, 0].tolist(), ids[:, 0].tolist()))


@pytest.mark.parametrize("order", ["element", "row", "reverse"])
def test_torn_publication_always_reads_a_valid_table(order):
    from tempo.serving.tables import torn_publication, torn_publication_report

    p2l, pop = _placement(L=1, E=12, g=4, rep=1.75)
    phys = replica_map(p2l)[0]
    old = solve_tables(sample_counts(pop, 16, 4, 4, seed=3), p2l, 4, CostModel.named("proxy-serving"))[0, 0]
    # the new table concentrates each expert on one replica: worst case for tearing
    new = np.zeros_like(old)
    for e in range(phys.shape[0]):
        new[e, np.flatnonzero(phys[e] >= 0)[-1]] = 1.0
    n = 0
    for live in torn_publication(old, new, phys, order):
        _check_state(live, phys)  # the kernel itself, at every intermediate state
        n += 1
    assert np.array_equal(live, new)
    assert n == (old.size if order != "row" else old.shape[0])
    rep = torn_publication_report(old, new, phys, order)
    assert rep["states"] == n and rep["invalid"] == 0
    # first-replica-only -> last-replica-only, element by element: rows pass through all zeros
    one = np.zeros_like(old)
    one[:, 0] = 1.0
    last = np.array([np.flatnonzero(r >= 0)[-1] for r in phys])  # a row reads all-zero from col 0 until its last replica
    assert torn_publication_report(one, new, phys, "element")["fallbacks"] == int(last.sum())
    with pytest.raises(ValueError, match="order"):
        next(torn_publication(old, new, phys, "random"))


# ------------------------------------------------------------------ solver and refresher
@pytest.fixture
def setup():
    L, E, g = 3, 16, 4
    p2l, pop = _placement(L, E, g)
    table = DispatchTable.from_placement(p2l)
    state = {"cum": np.zeros((L, E), np.int64)}
    return p2l, pop, table, state


def _feed(state, pop, n=1, seed=0):
    L = state["cum"].shape[0]
    state["cum"] += sample_counts(pop, 64, 4, 4, n_batches=L * n, seed=seed).reshape(n, L, -1).sum(0)


def test_table_solver_layers_match_direct_solve(setup):
    p2l, pop, table, state = setup
    w = sample_counts(pop, 64, 4, 4, n_batches=3, seed=5)
    model = CostModel.named("proxy-serving")
    out = TableSolver(p2l, 4, model).solve(w)
    for l in range(3):
        inst = Instance.from_placement(w[l], p2l[l], 4)
        exp = tempo.solve(inst, model, "tempo").probabilities(inst)
        assert np.allclose(out[0, l, :, :exp.shape[1]], exp, atol=1e-6)
    hier = TableSolver(p2l, 4, model, topology="hier", gpus_per_node=2).solve(w)
    assert out.shape == (1,) + table.phys.shape and hier.shape == (2,) + table.phys.shape
    for k in range(2):
        validate_table(hier[k], table.phys)
    with pytest.raises(ValueError, match="gpus_per_node"):
        TableSolver(p2l, 4, model, topology="hier")
    with pytest.raises(ValueError, match="shape"):
        check_counts(np.zeros((2, 16)), 3, 16)


def test_refresher_publishes_and_noop_never_solves(setup):
    p2l, pop, table, state = setup
    uniform = table.prob.copy()
    noop = Refresher(DispatchTable.from_placement(p2l), lambda: state["cum"], p2l, 4, S(solver="noop"))
    assert noop.kind == "noop"
    _feed(state, pop)
    assert noop.step() == "noop" and np.array_equal(noop.table.prob, uniform)
    r = Refresher(table, lambda: state["cum"], p2l, 4, S())
    try:
        assert r.step() == "idle"  # nothing counted since the refresher started
        _feed(state, pop, seed=1)
        assert r.step() == "published"
        table.validate()
        assert not np.array_equal(table.prob, uniform)
        lp = Refresher(DispatchTable.from_placement(p2l), lambda: state["cum"], p2l, 4, S(policy="token_lp"))
        _feed(state, pop, seed=2)
        assert lp.step() == "published"
        lp.stop()
    finally:
        r.stop()


def test_malformed_counts_are_rejected_and_logged(setup, caplog):
    p2l, pop, table, state = setup
    before = table.prob.copy()
    bad = {"fn": lambda w: -w}
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(), aggregate=lambda w: bad["fn"](w))
    try:
        _feed(state, pop)
        with caplog.at_level(logging.ERROR, logger="tempo.serving"):
            assert r.step() == "rejected"
            bad["fn"] = lambda w: w[:2]
            _feed(state, pop, seed=1)
            assert r.step() == "rejected"
        assert "negative" in caplog.text and "shape" in caplog.text
        assert np.array_equal(table.prob, before)
    finally:
        r.stop()


def test_deadline_drops_late_solves_and_discards_their_reply(setup, caplog):
    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(deadline_s=0.2))
    try:
        before = table.prob.copy()
        _feed(state, pop)
        assert r.step(delay_s=1.0) == "dropped"
        assert np.array_equal(table.prob, before)
        r.deadline_s = 300
        _feed(state, pop, seed=1)
        with caplog.at_level(logging.INFO, logger="tempo.serving"):
            assert r.step() == "published"  # waits past the late reply, which is dropped
        assert "late reply" in caplog.text
    finally:
        r.stop()


def test_killed_worker_keeps_last_table_and_restarts(setup):
    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S())
    try:
        assert r.solver.wait_ready(600)  # a loaded machine may take long to start a worker
        _feed(state, pop)
        assert r.step() == "published"
        good = table.prob.copy()
        pid = r.solver.pid
        _feed(state, pop, seed=1)
        res = {}
        th = threading.Thread(target=lambda: res.setdefault("out", r.step(delay_s=3.0)))
        th.start()
        time.sleep(0.5)
        os.kill(pid, 9)
        th.join(300)
        assert res["out"] == "died"
        assert np.array_equal(table.prob, good)
        assert r.solver.pid != pid and r.solver.restarts == 1
        assert r.solver.wait_ready(600)
        _feed(state, pop, seed=2)
        assert r.step() == "published"
    finally:
        r.stop()


def test_dead_worker_is_confirmed_before_it_is_reported(setup):
    """``died`` means reaped (joined); ``ensure_alive`` then really restarts, and a worker
    killed while idle is caught by the next request instead of a raw broken pipe."""
    from tempo.serving.solver import SolverProcess

    p2l, pop, table, state = setup
    w = sample_counts(pop, 64, 4, 4, n_batches=3, seed=4)
    with SolverProcess(p2l, 4) as sp:
        old = sp._procs[0]
        req = sp.submit(w, delay_s=5.0)
        os.kill(old.pid, 9)
        assert sp.result(req, 30) == ("died",)
        assert old.exitcode == -9  # reaped before reported
        assert sp.ensure_alive() and sp.restarts == 1 and sp.pid != old.pid
        assert sp.result(sp.submit(w), 300)[0] == "ok"
        idle = sp._procs[0]
        os.kill(idle.pid, 9)
        assert sp.result(sp.submit(w), 30) == ("died",)  # no BrokenPipeError escapes submit
        assert idle.exitcode == -9
        assert sp.ensure_alive() and sp.restarts == 2
        assert sp.result(sp.submit(w), 300)[0] == "ok"
        assert not sp.ensure_alive()  # nothing to restart


def _resume(pid) -> None:
    """SIGCONT a worker a test stopped, unless it is gone (None: nothing to do)."""
    import signal

    if pid is not None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def test_stopped_worker_is_killed_and_replaced(setup):
    """A worker stopped with SIGSTOP (as if wedged in native code) misses its deadlines;
    after ``max_misses`` in a row it is killed, reaped and replaced."""
    import signal

    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(max_misses=2))
    pid = None
    try:
        _feed(state, pop)
        assert r.step() == "published"
        pid = r.solver.pid
        os.kill(pid, signal.SIGSTOP)
        r.deadline_s = 0.2
        for seed in (1, 2):
            _feed(state, pop, seed=seed)
            assert r.step() == "dropped"
        assert r.solver.pid == pid and r.solver.restarts == 0
        r.deadline_s = 300
        _feed(state, pop, seed=3)
        assert r.step() == "published"  # the stopped worker was replaced before this refresh
        assert r.solver.pid != pid and r.solver.restarts == 1
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        pid = None
    finally:
        _resume(pid)
        r.stop()


def test_closed_solver_refuses_work_and_restarts_nothing(setup):
    """After close(), submit/result raise a clear error and ensure_alive restarts nothing;
    a bad n_gpus or model fails in the constructor, not on every request."""
    from tempo.serving.solver import SolverClosedError, SolverProcess

    p2l, pop, table, state = setup
    sp = SolverProcess(p2l, 4)
    procs = list(sp._procs)
    sp.close()
    assert all(p.exitcode is not None for p in procs)
    with pytest.raises(SolverClosedError, match="after close"):
        sp.submit(sample_counts(pop, 64, 4, 4, n_batches=3))
    with pytest.raises(SolverClosedError, match="after close"):
        sp.result(1, 1.0)
    assert sp.ensure_alive() is False and sp.pids == [] and not sp.alive() and sp.restarts == 0
    sp.close()  # idempotent
    with pytest.raises(ValueError, match="n_gpus"):
        SolverProcess(p2l, 5)
    with pytest.raises(ValueError, match="parameter set"):
        SolverProcess(p2l, 4, "nope")


_D1_SCRIPT = r"""
import sys, time
import numpy as np
from tempo.serving import DispatchTable
from tempo.serving.refresher import Refresher
from tempo.serving.settings import ServingSettings

L, E, g = 58, 256, 32  # a DSv3-sized table: 58 x 256 x 9 float32 = 534 KB, a window is 119 KB
rows = []
for k in range(g):  # 8 experts per GPU plus one redundant slot; expert 0 has 9 replicas
    rows += list(range(8 * k, 8 * k + 8)) + [0 if 1 <= k <= 8 else (100 if k == 0 else k - 1)]
p2l = np.tile(np.array(rows), (L, 1))
table = DispatchTable.from_placement(p2l)
assert table.prob.shape == (1, 58, 256, 9), table.prob.shape
cum = {"c": np.zeros((L, E), np.int64)}
rng = np.random.default_rng(0)
r = Refresher(table, lambda: cum["c"], p2l, g, ServingSettings(refresh_ms=200, deadline_ms=150))
out = []
for i in range(6):  # every solve overruns its deadline
    cum["c"] += rng.integers(0, 50, (L, E))
    out.append(r.step(delay_s=0.6))
r.deadline_s = 300
cum["c"] += rng.integers(0, 50, (L, E))
out.append(r.step())
t0 = time.monotonic()
r.stop()
print(" ".join(out), f"stop={time.monotonic() - t0:.1f}", flush=True)
"""


def test_full_table_pipe_cannot_deadlock(tmp_path):
    """With a DSv3-sized table and solves slower than the deadline, the old pipe protocol
    blocked forever in ``step()`` and ``stop()`` (both processes sending into full pipes).
    Run in a subprocess so a hang fails the test within a bounded time."""
    import subprocess
    import sys

    script = tmp_path / "d1.py"
    script.write_text(_D1_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [str(Path(tempo.__file__).parents[1]),
                                                                    os.environ.get("PYTHONPATH", "")] if p))
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=400, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("Refresher.step()/stop() hung with a full-size table and overrunning solves")
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    assert words[:6] == ["dropped"] * 6 and words[6] == "published", done.stdout
    assert float(words[7].split("=")[1]) < 5.0


_MAIN_SCRIPT = r"""
import os
if __name__ != "__main__":  # what a re-imported launcher main would do (torch, sglang, ...)
    open(os.environ["TEMPO_TEST_MARKER"], "w").write(__name__)
if __name__ == "__main__":
    import numpy as np
    from tempo.serving.solver import SolverProcess
    with SolverProcess(np.array([[0, 1, 2, 3, 0, 1, 2, 3]]), 4) as sp:
        print(sp.result(sp.submit(np.array([[5, 1, 1, 1]])), 120)[0])
"""


def test_worker_does_not_reimport_the_launchers_main(tmp_path):
    """The spawned solver never runs the launcher's ``__main__`` module."""
    import subprocess
    import sys

    script, marker = tmp_path / "launcher.py", tmp_path / "reimported"
    script.write_text(_MAIN_SCRIPT)
    env = dict(os.environ, TEMPO_TEST_MARKER=str(marker),
               PYTHONPATH=os.pathsep.join(p for p in [str(Path(tempo.__file__).parents[1]),
                                                      os.environ.get("PYTHONPATH", "")] if p))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr[-3000:]
    assert not marker.exists(), f"the worker re-imported the launcher's main as {marker.read_text()!r}"


def test_stop_cancels_a_waiting_refresh_without_stalling(setup):
    """stop() does not wait out a refresh in progress (the refresher passes
    its stop event to the solver's wait), and the busy worker is killed, not awaited."""
    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S())
    assert r.solver.wait_ready(600)
    _feed(state, pop)
    res = {}
    th = threading.Thread(target=lambda: res.setdefault("out", r.step(delay_s=60.0)))
    th.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    r.stop()
    th.join(60)
    assert res["out"] == "cancelled" and time.monotonic() - t0 < 10  # not the solve's 60 s
    assert r.solver.closed and not r.solver.alive()


def test_torch_publisher_copies_into_live_tensor(setup):
    p2l, pop, table, state = setup
    live = torch.tensor(table.prob)
    pub = TorchPublisher(live)
    new = np.zeros_like(table.prob)
    new[..., 0] = 1.0
    pub(new)
    assert torch.equal(live, torch.tensor(new))


def test_soak_refresher_on_drifting_workload():
    """Run the refresher in its thread for a bounded time against batches routed by the
    reference kernel on a drifting, skewed workload with a stale (drift-8) placement: every
    published table is a valid distribution, no pair is ever routed to a slot without its
    expert, and the live tables beat EPLB's uniform split in modeled block time."""
    from tempo.benchmarks.live import live_run

    from tempo import CostModel, Instance, solve
    from tempo.world.placement import drift_corrupt, eplb_placement
    from tempo.serving.tables import effective_probabilities
    from tempo.world.workloads import zipf_popularity

    tables, windows = [], []

    def keep(new, w):
        tables.append(new.copy())
        windows.append(np.array(w, copy=True))

    rows, stats = live_run(4.0, layers=2, drift=8, interval_s=0.1, on_publish=keep, min_published=5, max_seconds=120)
    assert stats.get("published", 0) >= 5 and not stats.get("rejected") and not stats.get("error")
    assert len(tables) == stats["published"]
    for t in tables:
        assert np.all(np.isfinite(t)) and np.all(t >= 0)
        assert np.allclose(t.sum(-1), 1.0, atol=1e-5)
    assert rows.invalid_routes.sum() == 0
    # quality, independent of timing: each published table priced on the window it was solved
    # from (one batch's worth of pairs, as the refresher prices it) against EPLB's uniform split
    # of the same counts.  (The per-batch live ratios in ``rows`` are noisy on a loaded machine:
    # a handful of batches per publication; the runtime chapter shows them.)
    model = CostModel.named("proxy-serving")
    pop = zipf_popularity(256, 1.0, seed=1)
    loads = expected_loads(pop, 8)  # live_run's placement: EPLB on the drift-corrupted long-run loads
    p2l = [eplb_placement(drift_corrupt(loads, 8, seed=7 + l), 8, 1.25) for l in range(2)]
    ratios = []
    for t, w in zip(tables, windows):
        for l in range(2):
            if w[l].sum() == 0:
                continue
            c = np.rint(w[l] * (32 * 8 * 8 / w[l].sum())).astype(np.int64)
            inst = Instance.from_placement(c, p2l[l], 8)
            k = inst.replica_gpu.shape[1]
            ms = model.makespan(inst, c[:, None] * effective_probabilities(t[0, l][:, :k], inst.replica_gpu))
            ratios.append(ms / model.makespan(inst, solve(inst, model, "uniform")))
    assert len(ratios) >= 5 and np.mean(ratios) < 0.97, ratios


def test_sharded_workers_give_the_same_table(setup):
    p2l, pop, table, state = setup
    from tempo.serving.solver import SolverProcess

    w = sample_counts(pop, 64, 4, 4, n_batches=3, seed=9)
    with SolverProcess(p2l, 4, "proxy-serving") as one, SolverProcess(p2l, 4, "proxy-serving", workers=2) as two:
        a = one.result(one.submit(w), 300)
        b = two.result(two.submit(w), 300)
        assert len(set(two.pids)) == 2
    assert a[0] == b[0] == "ok"
    assert np.array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="workers"):
        SolverProcess(p2l, 4, workers=4)


def test_thread_solver_publishes_without_a_process(setup):
    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(solver="thread"))
    try:
        assert r.kind == "thread"
        _feed(state, pop)
        assert r.step() == "published"
        table.validate()
        _feed(state, pop, seed=1)
        r.deadline_s = 1e-9
        assert r.step() == "dropped"
    finally:
        r.stop()



# (what tempo/serving/ may import, and that it holds no benchmark driver: tests/test_layers.py)


def test_extreme_tables_put_each_expert_on_its_first_then_its_last_replica():
    from tempo.serving.tables import extreme_tables, torn_publication_report

    phys = np.array([[0, 4, -1], [1, -1, -1], [2, 5, 6]])
    old, new = extreme_tables(phys)
    assert old.tolist() == [[1, 0, 0], [1, 0, 0], [1, 0, 0]]
    assert new.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]
    rep = torn_publication_report(old, new, phys)
    assert rep["invalid"] == 0 and rep["states"] > 1
    with pytest.raises(ValueError, match="phys"):
        extreme_tables(np.array([[-1, 0]]))


def test_calibrate_shapes_measures_each_shape_with_its_command(monkeypatch):
    from tempo.calib import record

    calls = []
    monkeypatch.setattr(record, "calibrate", lambda backend, shape, command="": calls.append((backend, shape, command)) or shape)
    assert record.calibrate_shapes("cpu", ["dsv3", "qwen3-30b"], command="nb") == ["dsv3", "qwen3-30b"]
    assert calls == [("cpu", "dsv3", "nb (dsv3)"), ("cpu", "qwen3-30b", "nb (qwen3-30b)")]
    for bad in ("dsv3", [], [1]):
        with pytest.raises(ValueError, match="shapes"):
            record.calibrate_shapes("cpu", bad)


# ------------------------------------------------------------------ process edges
def test_counts_never_pass_through_float():
    """Integer windows are taken exactly (2^63 - 1 stays 2^63 - 1), a uint64 beyond int64
    and a float window (2.5, or an integral 1e30) are refused with a clear error, not rounded."""
    big = np.array([[2**63 - 1, 0]], np.int64)
    assert check_counts(big, 1, 2).tolist() == [[2**63 - 1, 0]]
    assert check_counts(np.array([[7, 1]], np.uint32), 1, 2).dtype == np.int64
    with pytest.raises(ValueError, match="too large for int64"):
        check_counts(np.array([[2**63 + 1, 0]], np.uint64), 1, 2)
    for bad in (np.array([[2.5, 0.0]]), np.array([[1e30, 0.0]]), np.array([[True, False]])):
        with pytest.raises(ValueError, match="integer array"):
            check_counts(bad, 1, 2)
    with pytest.raises(ValueError, match="negative"):
        check_counts(np.array([[-1, 3]]), 1, 2)


def test_solver_process_answers_unknown_ids_and_waits_without_a_limit(setup):
    """An id never issued, already answered, or abandoned for a newer request is answered
    ("unknown",), not ("died",); ``timeout=None`` waits for the reply."""
    from tempo.serving.solver import SolverProcess

    p2l, pop, table, state = setup
    w = sample_counts(pop, 64, 4, 4, n_batches=3, seed=4)
    with SolverProcess(p2l, 4) as sp:
        assert sp.result(1, 1.0) == ("unknown",)  # never issued
        req = sp.submit(w)
        ok = sp.result(req, None)
        assert ok[0] == "ok" and ok[1].shape == (1,) + table.phys.shape
        assert sp.result(req, 1.0) == ("unknown",)  # answered already
        old = sp.submit(w, delay_s=0.5)
        assert sp.result(old, 0.05) == ("timeout",)  # abandoned
        new = sp.submit(w)
        assert sp.result(new, None)[0] == "ok"  # the late reply to the old one is dropped
        assert sp.result(old, 1.0) == ("unknown",)
        assert sp.result(-3, 1.0) == sp.result(10**9, 1.0) == ("unknown",)
        with pytest.raises(ValueError, match="timeout"):
            sp.result(new, -1.0)


def _fd_targets() -> dict:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def _ipc_targets() -> set:
    """The pipes and sockets this process holds open, as ``pipe:[inode]`` / ``socket:[inode]``.
    Other kinds are left out: libraries loaded by earlier tests (zmq's garbage collector, for
    one) open and close eventfds on their own threads at any time."""
    return {t for t in _fd_targets().values() if t.startswith(("pipe:", "socket:"))}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open fds through /proc")
def test_dropped_solver_process_stops_its_workers(setup):
    """A SolverProcess dropped without close() stops its workers when it is collected (a
    finalizer), and leaves none of its pipes or sockets open."""
    import gc

    from tempo.serving.solver import SolverProcess

    p2l, pop, table, state = setup
    SolverProcess(p2l, 4).close()  # warm the machinery (a first start opens a few lasting fds)
    gc.collect()
    before = _ipc_targets()
    pids, owned = [], set()
    for _ in range(3):
        ahead = _ipc_targets()
        sp = SolverProcess(p2l, 4, workers=2)
        pids += sp.pids
        owned |= _ipc_targets() - ahead  # the handle's connections and its workers' sentinels
        del sp
        gc.collect()
    assert len(owned) >= 4  # two workers, each a connection and a sentinel, three times over
    for pid in pids:  # reaped: no such process any more
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    deadline = time.monotonic() + 10.0  # pipes of a collected handle may close a moment later
    while (_ipc_targets() & owned or len(_ipc_targets()) > len(before)) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    now = _ipc_targets()
    assert not now & owned, f"still open after the handle was collected: {sorted(now & owned)}"
    assert len(now) <= len(before), f"{len(now) - len(before)} pipes or sockets leaked: {sorted(now - before)}"


def test_worker_never_ready_is_replaced_after_the_startup_timeout(setup):
    """``startup_timeout_s`` (ServingSettings, TEMPO_STARTUP_TIMEOUT_S) bounds how long a
    worker may take to come up; one stopped during start-up is killed and replaced after it."""
    import signal

    from tempo.serving.solver import SolverProcess, make_solver

    p2l, pop, table, state = setup
    assert ServingSettings().startup_timeout_s >= 150  # covers a cold numba compile (bench --cold-compile)
    assert ServingSettings.from_env({"TEMPO_STARTUP_TIMEOUT_S": "2.5"}).startup_timeout_s == 2.5
    with pytest.raises(ValueError, match="TEMPO_STARTUP_TIMEOUT_S"):
        ServingSettings(startup_timeout_s=0)
    sp = make_solver(S(startup_timeout_s=1.0), p2l, 4)
    pid = sp.pid
    try:
        assert isinstance(sp, SolverProcess) and sp.startup_timeout_s == 1.0
        os.kill(pid, signal.SIGSTOP)  # before it could import, warm up and say ready
        assert not sp.ensure_alive()  # still within its start-up time
        time.sleep(1.5)
        assert sp.ensure_alive() and sp.restarts == 1 and sp.pid != pid
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        pid = None
        assert sp.wait_ready(600)
    finally:
        _resume(pid)
        sp.close()


def test_no_table_for_n_windows_is_warned_and_counted(setup, caplog):
    """When every solve misses its deadline nothing is ever published; after
    ``stale_windows`` windows with traffic in a row the refresher says so (and again every as
    many windows), counting ``stale_warnings``; idle windows do not count."""
    p2l, pop, table, state = setup
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(solver="thread", deadline_s=0.05, stale_windows=3))
    try:
        with caplog.at_level(logging.WARNING, logger="tempo.serving"):
            outcomes = []
            for i in range(7):
                _feed(state, pop, seed=i)
                outcomes.append(r.step(delay_s=0.08))
                outcomes.append(r.step())  # an idle window between: not counted
        assert outcomes.count("dropped") == 7 and outcomes.count("idle") == 7
        assert r.stats["stale_warnings"] == 2
        assert caplog.text.count("no table published for") == 2 and "TEMPO_DEADLINE_MS" in caplog.text
        r.deadline_s = 300
        _feed(state, pop, seed=9)
        assert r.step() == "published" and r._dry == 0
    finally:
        r.stop()


@pytest.mark.parametrize("solver", ["process", "thread"])
def test_new_placement_without_restart_and_stale_tables_never_published(setup, solver):
    """Item 3: a rebalance hands the refresher the new placement; the same worker (no restart)
    solves it from the next refresh on, and a table solved for the old placement while the
    rebalance came in is dropped as ``stale``, never published."""
    p2l, pop, table, state = setup
    new = p2l.copy()
    new[1] = np.roll(p2l[1], 5)
    r = Refresher(table, lambda: state["cum"], p2l, 4, S(solver=solver))
    try:
        _feed(state, pop)
        assert r.step() == "published"
        pid = getattr(r.solver, "pid", None)
        res = {}
        _feed(state, pop, seed=1)
        th = threading.Thread(target=lambda: res.setdefault("out", r.step(delay_s=1.0)))
        th.start()
        time.sleep(0.3)
        r.set_placement(new, 1)  # mid-solve
        th.join(60)
        assert res["out"] == "stale"
        _feed(state, pop, seed=2)
        assert r.step() == "published" and r.epoch == 1 and r.stats["placements"] == 1
        phys = replica_map(new)
        assert np.array_equal(r.phys[..., :phys.shape[-1]], phys)
        table.validate()
        assert np.all(table.prob[0, 1][..., :phys.shape[-1]][phys[1] < 0] == 0)  # mass only on the new replicas
        assert getattr(r.solver, "pid", None) == pid and getattr(r.solver, "restarts", 0) == 0
    finally:
        r.stop()
