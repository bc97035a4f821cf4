"""The policy registry: a policy registers once with what callers need, and
every caller enumerates the registry.  A toy policy registered here, in this file only, shows
up in the CLI's list, ``make bench``'s table, the serving settings and the figure colours."""
from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass, fields

import numpy as np
import pytest

import tempo
from tempo import policies
from tempo.core.cost import CostModel
from tempo.core.instance import Dispatch, Instance
from tempo.policies.milp import MilpOptions
from tempo.policies.proxies import LlepOptions, TokenLpOptions
from tempo.policies.tempo_fast import TempoOptions

TOY = "toy_registry_test"
TOY_COLOR = "#123456"


@dataclass(frozen=True)
class ToyOptions:
    """The toy's one option: how many slots to rotate each expert's home slot by (>= 0)."""

    shift: int = 0

    def __post_init__(self):
        if isinstance(self.shift, bool) or not isinstance(self.shift, (int, np.integer)):
            raise TypeError(f"toy option shift must be an integer, got {self.shift!r}")
        if self.shift < 0:
            raise ValueError(f"toy option shift must be >= 0, got {self.shift!r}")


def toy(inst: Instance, model: CostModel | None = None, shift: int = 0) -> Dispatch:
    """Every expert whole on one of its valid slots (the ``shift``-th, cyclically)."""
    shares = np.zeros(inst.replica_gpu.shape)
    for e in range(inst.n_experts):
        slots = np.flatnonzero(inst.valid[e])
        if slots.size:
            shares[e, slots[shift % slots.size]] = inst.counts[e]
    return Dispatch(shares)


@pytest.fixture
def toy_policy():
    """Register the toy (a servable proxy with one option) for one test, then remove it."""
    policies.register(TOY, needs_model=False, options=ToyOptions, family="proxy", servable=True, color=TOY_COLOR,
                      label="toy: each expert whole on a rotated slot", variants={"toy_shifted": {"shift": 1}})(toy)
    try:
        yield TOY
    finally:
        policies.unregister(TOY)


# ------------------------------------------------------------------ a new policy reaches every caller
def test_toy_policy_reaches_every_caller(toy_policy, capsys):
    from tempo import cli
    from tempo.benchmarks import bench
    from tempo.book import figures
    from tempo.serving import settings, solver

    # the CLI's policy list (`python -m tempo policies`, plain and --long)
    assert cli.main(["policies"]) == 0
    assert TOY in capsys.readouterr().out.split()
    assert cli.main(["policies", "--long"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith(TOY + " ")]
    assert len(row) == 1 and "proxy" in row[0] and "ToyOptions" in row[0] and "toy_shifted" in row[0]
    assert TOY in tempo.available_policies()  # what solve() and the CLI's --policy accept
    # make bench: the timed policies, a one-cell table with the toy's column, and the family grid's proxies
    assert TOY in bench.timed_policies()
    df = bench.run(eps=(2,), experts=(16,), tokens=(8,), reps=1, milp_limit=0, baseline=None, progress=False)
    assert f"{TOY}_ms" in df.columns and math.isfinite(df[f"{TOY}_ms"].iloc[0])
    assert {TOY, "toy_shifted"} <= set(bench.family_proxies())
    inst = Instance.full_replication([6, 3, 1], 2)
    px = bench.proxy_makespans(inst, CostModel.named("dsv3-offline"))
    assert {TOY, "toy_shifted"} <= set(px)
    # the serving settings (servable=True), and the serving solver runs it
    assert TOY in settings.servable_policies()
    assert settings.ServingSettings(policy=TOY).policy == TOY
    assert TOY in solver.servable()
    p2l = np.array([[0, 1, 2, 3]])
    tables = solver.TableSolver(p2l, 2, "dsv3-offline", policy=TOY).solve(np.array([[5, 0, 7, 2]]))
    assert tables.shape[:3] == (1, 1, 4) and np.allclose(tables.sum(axis=-1), 1.0)
    # the figure colours
    assert figures.policy_colors()[TOY] == TOY_COLOR


def test_toy_policy_is_gone_after_unregister(toy_policy):
    from tempo.benchmarks import bench
    from tempo.book import figures
    from tempo.serving import settings

    policies.unregister(TOY)
    try:
        assert TOY not in tempo.available_policies() and TOY not in bench.timed_policies()
        assert TOY not in settings.servable_policies() and TOY not in figures.policy_colors()
        with pytest.raises(ValueError, match="TEMPO_POLICY"):
            settings.ServingSettings(policy=TOY)
    finally:  # the fixture removes it again
        policies.register(TOY, needs_model=False, options=ToyOptions, family="proxy", servable=True,
                          color=TOY_COLOR)(toy)


def test_toy_options_are_checked_by_solve(toy_policy):
    inst = Instance.full_replication([6, 3, 1], 2)
    d = tempo.solve(inst, None, TOY, shift=1)  # needs_model=False: no model needed
    assert d.meta["policy"] == TOY and np.allclose(d.shares.sum(axis=1), inst.counts)
    with pytest.raises(ValueError, match="shift"):
        tempo.solve(inst, None, TOY, shift=-1)
    with pytest.raises(TypeError, match="shift"):
        tempo.solve(inst, None, TOY, shift=1.5)
    with pytest.raises(TypeError, match="frobnicate"):
        tempo.solve(inst, None, TOY, frobnicate=1)
    assert policies.variant("toy_shifted") == (TOY, {"shift": 1})


def test_needs_model_comes_from_the_spec():
    def priced(inst, model):
        return Dispatch(np.zeros(inst.replica_gpu.shape))

    policies.register("toy_priced", needs_model=True, options=None, family="tempo", servable=False,
                      color="#654321")(priced)
    try:
        inst = Instance.full_replication([0, 0], 2)
        with pytest.raises(ValueError, match="needs a cost model"):
            tempo.solve(inst, None, "toy_priced")
        assert tempo.solve(inst, CostModel.named("dsv3-offline"), "toy_priced").meta["policy"] == "toy_priced"
        assert "toy_priced" in policies.select(needs_model=True)
    finally:
        policies.unregister("toy_priced")
    assert set(policies.select(needs_model=True)) == {"tempo", "milp"}


# ------------------------------------------------------------------ the registry itself
def test_builtin_registry():
    names = policies.select()
    assert sorted(names) == tempo.available_policies() == policies.available()
    # the documented listing order
    assert names == ["static", "static_sglang", "uniform", "metro", "llep", "semi_matching", "token_lp", "round_robin",
                     "tempo", "milp"]
    assert policies.select(servable=True) == ["token_lp", "tempo"]
    assert policies.select(full_replication=True) == ["round_robin"]
    assert policies.select(family="exact") == ["milp"]
    assert policies.select(family="proxy", variants=True)[-4:] == ["token_lp", "token_lp_vertex", "token_lp_highs", "round_robin"]
    colors = [policies.spec(p).color for p in names]
    assert len(set(colors)) == len(colors)  # one colour per policy
    for p in names:
        s = policies.spec(p)
        assert s.name == p and s.fn is policies.get(p) and s.family in policies.FAMILIES
        if s.options is not None:
            s.options()  # the defaults are valid
            with pytest.raises(FrozenInstanceError):
                setattr(s.options(), fields(s.options)[0].name, None)
    with pytest.raises(FrozenInstanceError):
        policies.spec("tempo").servable = False


def test_variants_and_check_names():
    assert policies.variant("tempo") == ("tempo", {})
    assert policies.variant("token_lp_vertex") == ("token_lp", {"vertex": True})
    assert policies.variant("tempo_paper") == ("tempo", {"options": "paper"})
    with pytest.raises(ValueError, match="nope"):
        policies.variant("nope")
    assert policies.check_names(["tempo", "token_lp_vertex"]) == ("tempo", "token_lp_vertex")
    with pytest.raises(ValueError, match="Table 9"):
        policies.check_names(["tempo", "tmepo"], "Table 9")
    with pytest.raises(ValueError, match="family"):
        policies.select(family="nope")
    with pytest.raises(ValueError, match="unknown policy"):
        policies.spec("nope")


def test_register_refuses_bad_descriptions():
    reg = dict(needs_model=False, options=None, family="proxy", servable=False, color="#000000")

    def plain(inst, model=None):
        return Dispatch(np.zeros(inst.replica_gpu.shape))

    def takes_shift(inst, model=None, shift: int = 0):
        return Dispatch(np.zeros(inst.replica_gpu.shape))

    with pytest.raises(ValueError, match="registered twice"):
        policies.register("tempo", **reg)(plain)
    with pytest.raises(ValueError, match="registered twice"):
        policies.register("x_toy", **{**reg, "options": None}, variants={"token_lp_vertex": {}})(plain)
    with pytest.raises(ValueError, match="family"):
        policies.register("x_toy", **{**reg, "family": "heuristic"})(plain)
    with pytest.raises(ValueError, match="color"):
        policies.register("x_toy", **{**reg, "color": "green"})(plain)
    with pytest.raises(TypeError, match="servable"):
        policies.register("x_toy", **{**reg, "servable": 1})(plain)
    with pytest.raises(TypeError, match="options"):  # options not described
        policies.register("x_toy", **reg)(takes_shift)
    with pytest.raises(TypeError, match="frozen dataclass"):
        policies.register("x_toy", **{**reg, "options": dict})(takes_shift)

    @dataclass(frozen=True)
    class WrongDefault:
        shift: int = 1

    with pytest.raises(TypeError, match="do not match"):
        policies.register("x_toy", **{**reg, "options": WrongDefault})(takes_shift)
    with pytest.raises(TypeError, match="do not match"):  # a field the function does not take
        policies.register("x_toy", **{**reg, "options": ToyOptions})(plain)
    assert "x_toy" not in policies.available()
    with pytest.raises(TypeError):  # the description is keyword-only and complete
        policies.register("x_toy")


# ------------------------------------------------------------------ the options dataclasses validate themselves
@pytest.mark.parametrize("cls, field, bad, exc", [
    (TempoOptions, "seed", "random", ValueError),
    (TempoOptions, "seed", 1, ValueError),
    (TempoOptions, "chains", 1, TypeError),
    (TempoOptions, "restarts", None, TypeError),
    (TempoOptions, "chain_depth", 0, ValueError),
    (TempoOptions, "chain_depth", 1, ValueError),
    (TempoOptions, "chain_depth", 2.0, TypeError),
    (TempoOptions, "chain_depth", "x", TypeError),
    (TempoOptions, "tau", 1.0, ValueError),
    (TempoOptions, "tau", -0.1, ValueError),
    (TempoOptions, "tau", float("nan"), ValueError),
    (TempoOptions, "tau", True, TypeError),
    (TempoOptions, "max_iter", -1, ValueError),
    (TempoOptions, "max_iter", 2.5, TypeError),
    (TempoOptions, "fanout", -1, ValueError),
    (TempoOptions, "fanout", None, TypeError),
    (TempoOptions, "lp_variants", "vertex", TypeError),
    (TempoOptions, "lp_variants", ("bogus",), ValueError),
    (TempoOptions, "lp_variants", (), ValueError),
    (LlepOptions, "alpha", 0, ValueError),
    (LlepOptions, "alpha", float("inf"), ValueError),
    (LlepOptions, "alpha", "x", TypeError),
    (LlepOptions, "min_chunk", 0, ValueError),
    (LlepOptions, "min_chunk", 2.0, TypeError),
    (LlepOptions, "trigger", -1, ValueError),
    (LlepOptions, "trigger", float("nan"), ValueError),
    (TokenLpOptions, "vertex", 1, TypeError),
    (MilpOptions, "time_limit", 0, ValueError),
    (MilpOptions, "time_limit", float("nan"), ValueError),
    (MilpOptions, "warm_start", "yes", TypeError),
    (MilpOptions, "mip_rel_gap", -1e-9, ValueError),
    (MilpOptions, "threads", 0, ValueError),
    (MilpOptions, "threads", 1.0, TypeError),
])
def test_options_dataclasses_name_the_bad_option(cls, field, bad, exc):
    with pytest.raises(exc, match=field):
        cls(**{field: bad})


@pytest.mark.parametrize("cls, good", [
    (TempoOptions, dict(seed="whole", chain_depth=2, restarts=False)),
    (TempoOptions, dict(chain_depth=None, tau=0.0, max_iter=0, fanout=0, lp_variants=("vertex", "even"))),
    (TempoOptions, dict(chain_depth=np.int64(5), tau=np.float64(0.5), chains=np.bool_(False), lp_variants=["even"])),
    (LlepOptions, dict(alpha=2.0, min_chunk=1, trigger=0.0)),
    (TokenLpOptions, dict(vertex=True)),
    (MilpOptions, dict(time_limit=1e-6, warm_start=True, mip_rel_gap=0.0, threads=4)),
    (MilpOptions, dict(warm_start=Dispatch(np.zeros((1, 1))))),
])
def test_options_dataclasses_accept_good_values(cls, good):
    o = cls(**good)
    assert all(getattr(o, k) is v for k, v in good.items())


def test_chain_depth_rule_is_the_same_everywhere():
    """chain_depth: None or >= 2 for TempoOptions, for solve() and for the presets (the paper's 2)."""
    inst = Instance.full_replication([60, 30, 0, 12, 5], 3)
    m = CostModel.named("dsv3-offline")
    for depth in (0, 1):
        with pytest.raises(ValueError, match="chain_depth"):
            TempoOptions(chain_depth=depth)
        with pytest.raises(ValueError, match="chain_depth"):
            tempo.solve(inst, m, "tempo", chain_depth=depth)
    assert TempoOptions.preset("paper").chain_depth == 2
    a = tempo.solve(inst, m, "tempo", chain_depth=2)
    b = tempo.solve(inst, m, "tempo", chain_depth=3)
    for d in (a, b):
        d.validate(inst)
