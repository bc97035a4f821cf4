"""Property tests: the public API against malformed inputs.

Each argument is drawn either valid or broken in one of many ways (NaN, inf, negative,
fractional, past int64, wrong type, wrong shape, ...), and an independent oracle says whether
the whole call is valid.  A valid call must return a correct answer; an invalid one must raise
``ValueError`` or ``TypeError``.  Any other exception type, or an answer to an invalid call (a
silent answer), fails the test."""
import math

import numpy as np
import pytest

import tempo
from tempo import CostModel, Dispatch, Instance, solve

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the property tests carry @pytest.mark.needs("hypothesis"); the others still run
    class _Stub:
        def __getattr__(self, name):
            return lambda *a, **k: (lambda f: f)

    HealthCheck = _Stub()
    given = settings = _Stub().decorator
    st = _Stub()
    SETTINGS = None
else:
    SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

INT64_MAX = 2**63 - 1


def _settings():
    return SETTINGS if SETTINGS is not None else (lambda f: f)
TALLY = {}


def _run(test, fn, valid: bool, names=()):
    """Call ``fn``; tally the outcome; fail on a wrong exception type or a silent answer.
    ``names``: words one of which the error message must contain (the argument's name)."""
    t = TALLY.setdefault(test, {"examples": 0, "valid": 0, "rejected": 0, "other_exceptions": 0, "silent": 0})
    t["examples"] += 1
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        if valid:
            raise AssertionError(f"a valid call was rejected: {exc}") from exc
        if names:
            assert any(n in str(exc) for n in names), f"message does not name {names}: {exc}"
        t["rejected"] += 1
        return None
    except Exception as exc:  # noqa: BLE001
        t["other_exceptions"] += 1
        raise AssertionError(f"{type(exc).__name__} instead of ValueError/TypeError: {exc}") from exc
    if not valid:
        t["silent"] += 1
        raise AssertionError(f"invalid input accepted, returned {out!r}")
    t["valid"] += 1
    return out


def _valid(data, p: float = 0.7) -> bool:
    """Draw whether the next argument is valid (probability ``p``), so whole calls are often valid."""
    return data.draw(st.integers(0, 99)) < 100 * p


# ---------------------------------------------------------------------------- counts
def _counts(kind, E, draw):
    """(value, valid, python ints or None) for one kind of counts argument."""
    ints = draw(st.lists(st.integers(0, 1000), min_size=E, max_size=E))
    if kind == "int":
        return ints, True, ints
    if kind == "np_int32":
        return np.array(ints, np.int32), True, ints
    if kind == "float_int":
        return [float(v) for v in ints], True, ints
    if kind == "huge_sum":  # every value fits, the sum does not
        v = [2**62] * max(E, 2)
        return v, False, None
    bad = {
        "negative": ints[:-1] + [-1] if E else [-1],
        "fraction": [v + 0.5 for v in ints] or [0.5],
        "nan": [float("nan")] + ints[1:],
        "inf": [float("inf")] + ints[1:],
        "past_int64": [2**64] + ints[1:],
        "float_past_int64": [1e19] + [float(v) for v in ints[1:]],
        "uint_past_int64": np.array([2**63 + 5] + ints[1:], dtype=np.uint64),
        "bool": [True] * max(E, 1),
        "string": [str(v) for v in ints] or ["1"],
        "none_entry": [None] + ints[1:],
        "complex": [complex(v, 1) for v in ints] or [1j],
        "ragged": [[1, 2], [3]],
        "two_d": [ints, ints],
        "none": None,
        "scalar_string": "12",
    }
    return bad[kind], False, None


COUNT_KINDS = ["int", "int", "int", "np_int32", "float_int", "huge_sum", "negative", "fraction", "nan", "inf",
               "past_int64", "float_past_int64", "uint_past_int64", "bool", "string", "none_entry", "complex",
               "ragged", "two_d", "none", "scalar_string"]
NGPU = [(1, True), (2, True), (3, True), (np.int64(2), True), (0, False), (-1, False), (2.5, False), (2.0, False),
        ("2", False), (None, False), (True, False)]


@pytest.mark.needs("hypothesis")
@_settings()
@given(st.data())
def test_instance_constructors(data):
    E = data.draw(st.integers(1, 5))
    kind = data.draw(st.sampled_from(COUNT_KINDS[:5] if _valid(data) else COUNT_KINDS[5:]))
    counts, c_ok, c_vals = _counts(kind, E, data.draw)
    n_gpus, g_ok = data.draw(st.sampled_from([x for x in NGPU if x[1] == _valid(data)]))
    which = data.draw(st.sampled_from(["init", "full", "placement"]))
    names = ("counts", "n_gpus", "replica_gpu", "phy2log")
    if which == "full":
        inst = _run("instance", lambda: Instance.full_replication(counts, n_gpus), c_ok and g_ok, names)
    elif which == "placement":
        g = int(n_gpus) if g_ok else 2
        per = data.draw(st.integers(0, 3))
        p2l_kind = "ok" if _valid(data) else data.draw(st.sampled_from(["out_of_range", "negative", "fraction",
                                                                         "ragged_len"]))
        p2l = data.draw(st.lists(st.integers(0, E - 1), min_size=g * per, max_size=g * per))
        p_ok = per > 0
        if p2l_kind == "out_of_range":
            p2l, p_ok = p2l + [E] * g, False
        elif p2l_kind == "negative":
            p2l, p_ok = p2l + [-1] * g, False
        elif p2l_kind == "fraction":
            p2l, p_ok = [v + 0.5 for v in p2l] or [0.5], False
        elif p2l_kind == "ragged_len" and g > 1:
            p2l, p_ok = p2l + [0], False
        covered = set(p2l) if p_ok else set()
        orphan = c_ok and any(c > 0 and e not in covered for e, c in enumerate(c_vals))
        inst = _run("instance", lambda: Instance.from_placement(counts, p2l, n_gpus),
                    c_ok and g_ok and p_ok and not orphan, names)
    else:
        g = int(n_gpus) if g_ok else 2
        R = data.draw(st.integers(1, 3))
        rep = data.draw(st.lists(st.lists(st.integers(-1, g - 1), min_size=R, max_size=R), min_size=E, max_size=E))
        r_kind = "ok" if _valid(data) else data.draw(st.sampled_from(["out_of_range", "below", "fraction", "rows",
                                                                       "one_d", "none"]))
        r_ok = True
        if r_kind == "out_of_range":
            rep, r_ok = [row[:-1] + [g] for row in rep], False
        elif r_kind == "below":
            rep, r_ok = [row[:-1] + [-2] for row in rep], False
        elif r_kind == "fraction":
            rep, r_ok = [[v + 0.5 for v in row] for row in rep], False
        elif r_kind == "rows":
            rep, r_ok = rep + [[0] * R], False
        elif r_kind == "one_d":
            rep, r_ok = [0] * E, False
        elif r_kind == "none":
            rep, r_ok = None, False
        orphan = c_ok and r_ok and any(c > 0 and all(v < 0 for v in row) for c, row in zip(c_vals, rep))
        inst = _run("instance", lambda: Instance(counts, rep, n_gpus), c_ok and g_ok and r_ok and not orphan, names)
    if inst is not None:  # the answer is right, not just returned
        assert inst.total_tokens == sum(c_vals) and inst.counts.tolist() == c_vals
        assert inst.n_gpus == int(n_gpus)


# ---------------------------------------------------------------------------- shares and makespan
@pytest.mark.needs("hypothesis")
@_settings()
@given(st.data())
def test_makespan_and_validate_reject_bad_shares(data):
    E, g = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    counts = data.draw(st.lists(st.integers(0, 500), min_size=E, max_size=E))
    inst = Instance([c for c in counts], [[r % g for r in range(e, e + 2)] if g > 1 else [0, -1] for e in range(E)], g)
    model = CostModel.named("dsv3-offline")
    w = np.where(inst.valid, 1.0, 0.0)
    good = np.array(counts, float)[:, None] * w / w.sum(axis=1, keepdims=True)
    kind = data.draw(st.sampled_from(["ok", "ok", "nan", "inf", "negative", "unused", "shape", "string", "short_row"]))
    s = good.copy()
    if kind == "nan":
        s[0, 0] = np.nan
    elif kind == "inf":
        s[0, 0] = np.inf
    elif kind == "negative":
        s[0, 0] = -3.0
    elif kind == "unused":
        if inst.valid.all():
            kind = "ok"
        else:
            e, r = np.argwhere(~inst.valid)[0]
            s[e, r] = 3.0
    elif kind == "shape":
        s = s[:, :1]
    elif kind == "string":
        s = s.astype(str)
    # makespan prices any share matrix that is finite, non-negative and on real slots
    priceable = kind in ("ok", "short_row")
    if kind == "short_row":
        s[0] *= 0.5
    ms = _run("shares", lambda: model.makespan(inst, s), priceable, ("shares",))
    if ms is not None:
        assert math.isfinite(ms) and ms >= 0
    # a dispatch must also sum to the counts
    valid = kind == "ok" or (kind == "short_row" and counts[0] == 0)
    d = _run("shares", lambda: Dispatch(s).validate(inst), valid, ("shares",))
    if d is not None:
        assert d.shares.min() >= 0 and np.all(d.shares[~inst.valid] == 0)


def test_validate_clears_solver_noise_exactly():
    inst = Instance([4, 0], [[0, 1], [1, -1]], 2)
    d = Dispatch([[4.0 + 5e-7, -5e-7], [0.0, 0.0]]).validate(inst)
    assert d.shares.min() == 0.0 and d.shares[0].tolist() == [4.0 + 5e-7, 0.0]
    with pytest.raises(ValueError, match="non-negative"):
        Dispatch([[4.001, -0.001], [0.0, 0.0]]).validate(inst)


# ---------------------------------------------------------------------------- cost model
NUM = [(0.0, True), (1.5, True), (3, True), (np.float32(2.0), True), (-1.0, False), (float("nan"), False),
       (float("inf"), False), ("3", False), (True, False), (None, False), ([1], False)]


@pytest.mark.needs("hypothesis")
@_settings()
@given(st.data())
def test_cost_model_parameters(data):
    kw, ok = {}, True
    for key in ("a", "b", "c", "beta", "b2"):
        want = _valid(data, 0.88)
        v, v_ok = data.draw(st.sampled_from([x for x in NUM if x[1] == want]))
        kw[key], ok = v, ok and v_ok
    want = _valid(data, 0.88)
    tile, t_ok = data.draw(st.sampled_from([x for x in [(128, True), (1, True), (np.int64(64), True), (0, False),
                                                        (-1, False), (True, False), (2.5, False), ("128", False)]
                                            if x[1] == want]))
    pair = data.draw(st.sampled_from(["none", "both"] if _valid(data, 0.88) else
                                     ["c2_only", "gamma_only", "bad_c2", "bad_gamma"]))
    c2, gamma, p_ok = {"none": (None, None, True), "both": (1.0, 0.1, True), "c2_only": (1.0, None, False),
                       "gamma_only": (None, 0.1, False), "bad_c2": ("3", 0.1, False),
                       "bad_gamma": (1.0, True, False)}[pair]
    m = _run("cost_model", lambda: CostModel(tile=tile, c2=c2, gamma=gamma, **kw), ok and t_ok and p_ok,
             ("a ", "b ", "c ", "beta", "b2", "tile", "c2", "gamma"))
    if m is not None:
        assert (m.a, m.b, m.c, m.beta, m.b2) == tuple(float(kw[k]) for k in ("a", "b", "c", "beta", "b2"))
        G, g_ok = data.draw(st.sampled_from([(1, True), (2.5, True), (0, False), (-1, False), (float("nan"), False),
                                             (float("inf"), False), (None, False), (True, False)]))
        n = _run("cost_model", lambda: m.n_star_at(G), g_ok, ("G",))
        if n is not None:
            assert n >= 0


# ---------------------------------------------------------------------------- solve and its options
OPTION_VALUES = [1.1, 0.5, 2, 0, -1, float("nan"), float("inf"), "x", True, None, ("bogus",), "vertex",
                 ("vertex",), ("vertex", "even"), "auto", "greedy"]


VALID_OPTIONS = {"alpha": [1.1, 2.0], "trigger": [1.3, 0.0], "min_chunk": [32, 1], "time_limit": [5.0],
                 "mip_rel_gap": [1e-6, 0.0], "threads": [1], "tau": [0.01, 0.0], "max_iter": [300, 0],
                 "fanout": [4, 0], "chain_depth": [None, 2], "lp_variants": ["auto", ("vertex",), ("vertex", "even")],
                 "seed": ["greedy", "whole", "static"], "vertex": [True, False], "chains": [True, False],
                 "local_search": [True, False], "partial": [True, False], "ensemble": [True, False],
                 "warm_start": [True, False]}


@pytest.mark.needs("hypothesis")
@_settings()
@given(st.data())
def test_solve_options(data):
    inst = Instance.full_replication([60, 30, 0, 12, 5], 3)
    model = CostModel.named("dsv3-offline")
    policy = data.draw(st.sampled_from(tempo.available_policies() if _valid(data, 0.9) else ["nope", "Tempo"]))
    keys = ["alpha", "trigger", "min_chunk", "time_limit", "mip_rel_gap", "threads", "tau", "max_iter", "fanout",
            "chain_depth", "lp_variants", "seed", "vertex", "chains", "bogus"]
    import inspect

    takes = set(list(inspect.signature(tempo.policies.get(policy)).parameters)[2:]) \
        if policy in tempo.available_policies() else set()
    if policy == "tempo":  # tempo takes TempoOptions fields as keyword overrides
        from tempo.policies.tempo_fast import TempoOptions

        takes |= set(TempoOptions.__dataclass_fields__)
    own = sorted(takes & set(VALID_OPTIONS))
    opts = {}
    for _ in range(data.draw(st.integers(0, 2))):
        k = data.draw(st.sampled_from(own)) if own and _valid(data, 0.8) else data.draw(st.sampled_from(keys))
        good = VALID_OPTIONS.get(k, [])
        opts[k] = data.draw(st.sampled_from(good)) if good and _valid(data) else data.draw(st.sampled_from(OPTION_VALUES))
    if policy not in tempo.available_policies():
        _run("solve", lambda: solve(inst, model, policy, **opts), False, ("policy",))
        return
    surely_bad = any(k not in takes for k in opts) or any(
        isinstance(v, float) and not math.isfinite(v) for v in opts.values()) or any(
        k == "lp_variants" and v not in ("auto", ("vertex",), ("vertex", "even")) for k, v in opts.items())
    t = TALLY.setdefault("solve", {"examples": 0, "valid": 0, "rejected": 0, "other_exceptions": 0, "silent": 0})
    if surely_bad:
        _run("solve", lambda: solve(inst, model, policy, **opts), False, tuple(opts) + ("option",))
        return
    t["examples"] += 1  # in-range or out-of-range values: an answer must be a valid dispatch
    try:
        d = solve(inst, model, policy, **opts)
    except (ValueError, TypeError) as exc:
        assert any(k in str(exc) for k in opts), f"message does not name the option: {exc}"
        t["rejected"] += 1
        return
    except Exception as exc:  # noqa: BLE001
        t["other_exceptions"] += 1
        raise AssertionError(f"{type(exc).__name__}: {exc} for {policy} {opts}") from exc
    t["valid"] += 1
    d.validate(inst)
    assert math.isfinite(model.makespan(inst, d))


def test_solve_named_errors():
    inst = Instance.full_replication([6, 3], 2)
    m = CostModel.named("dsv3-offline")
    for bad, word in [(dict(lp_variants=("bogus",)), "lp_variants"), (dict(lp_variants="vertex"), "lp_variants"),
                      (dict(tau=float("nan")), "tau"), (dict(fanout=-1), "fanout"), (dict(chain_depth=0), "chain_depth"),
                      (dict(max_iter=2.5), "max_iter"), (dict(frobnicate=1), "frobnicate")]:
        with pytest.raises((ValueError, TypeError), match=word):
            solve(inst, m, "tempo", **bad)
    for bad, word in [(dict(alpha=float("nan")), "alpha"), (dict(alpha=float("inf")), "alpha"),
                      (dict(trigger=float("nan")), "trigger")]:
        with pytest.raises(ValueError, match=word):
            solve(inst, m, "llep", **bad)
    for bad, word in [(dict(time_limit=float("nan")), "time_limit"), (dict(mip_rel_gap=-1), "mip_rel_gap"),
                      (dict(threads=0), "threads")]:
        with pytest.raises(ValueError, match=word):
            solve(inst, m, "milp", **bad)
    with pytest.raises(TypeError, match="policy"):
        solve(inst, m, ["tempo"])


def test_deep_crashes_are_argument_errors():
    with pytest.raises(ValueError, match="n_gpus"):
        Instance.from_placement([1, 2], [0, 1], 0)
    with pytest.raises(TypeError, match="counts"):
        Instance.full_replication(None, 2)
    with pytest.raises(ValueError, match="G must"):
        CostModel.named("dsv3-offline").n_star_at(0)
    with pytest.raises(ValueError, match="int64"):
        Instance.full_replication(np.array([2**62, 2**62]), 2)
    with pytest.raises(ValueError, match="shares"):
        CostModel.named("dsv3-offline").makespan(Instance.full_replication([4, 2], 2), np.full((2, 2), np.nan))


def test_zz_report_property_figures():
    """Prints the tallies (run with -s); fails if a property test recorded a bad outcome."""
    if not TALLY:
        pytest.skip("the property tests did not run in this session")
    for name, t in TALLY.items():
        print(f"\nproperty {name}: {t}")
        assert t["other_exceptions"] == 0 and t["silent"] == 0
