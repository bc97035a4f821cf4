"""phase_anatomy / anatomy_gains: what sets TEMPO's gain in a phase-diagram cell."""
import pandas as pd
import pytest

from tempo.book.chapters.ch04_simulator import anatomy_gains
from tempo.paper.readings import Reading
from tempo.studies.simulator import phase_anatomy, phase_cell


@pytest.mark.parametrize("which", ["paper", "library"])
def test_anatomy_agrees_with_the_phase_cell_and_the_lower_bound(which):
    reading = getattr(Reading, which)()
    cell = {"shape": "DSv2-Lite", "skew": 1.0, "replication": 1.5, "B": 64}
    an = phase_anatomy({"cells": [cell], "batches": 2, "reading": dict(reading)})
    assert len(an) == 2 * 7 and set(an.placement) == {"router weights", "long-run loads"}
    # the long-run-load placement is the phase diagram's own: same makespans as phase_cell under the same reading
    pc = phase_cell({**cell, "ep": 8, "batches": 2, "seed": 0, "reading": dict(reading)}).iloc[0]
    rw = an[an.placement == "long-run loads"].set_index("policy").makespan_us
    for p in ("metro", "token_lp", "uniform", "tempo"):
        assert rw[p] == pytest.approx(pc[f"ms_{p}"], rel=1e-9)
    # nothing beats the lower bound; the token-LP optimum's faces have the same largest N
    assert (an.makespan_us >= an.lower_bound_us * (1 - 1e-9)).all()
    lp = an[an.policy.isin(["token_lp", "token_lp_vertex", "token_lp_highs"])].groupby("placement").max_N
    assert ((lp.max() - lp.min()) <= 1e-6 * lp.max()).all(), lp.describe()
    g = anatomy_gains(an).set_index("placement")
    assert g.loc["long-run loads", "gain_pct"] == pytest.approx(pc.gain_pct, rel=1e-9)
    assert (g.tempo_over_lb >= 1 - 1e-9).all()
    reps = an.groupby("placement").hot_replicas.first()
    top = an.iloc[0]
    if which == "library":
        # distinct top-8 routing caps the hottest expert's pair share at 1/8, below its router weight of ~0.21
        assert top.hot_pair_share <= 1 / 8 + 0.02 < top.hot_router_weight
        # ... so the router-weight ablation gives the hottest expert more replicas than its load earns
        assert reps["router weights"] > reps["long-run loads"], reps
    else:
        # independent draws: the pair share is the router weight, so the two placements coincide
        assert top.hot_pair_share == pytest.approx(top.hot_router_weight, rel=0.1)
        assert reps["router weights"] == reps["long-run loads"], reps


def test_anatomy_gains_known_answer():
    rows = [{"shape": "X", "skew": 1.0, "replication": 1.5, "B": 64, "placement": "router weights", "policy": p,
             "makespan_us": v, "lower_bound_us": 80.0}
            for p, v in {"metro": 120.0, "token_lp": 100.0, "token_lp_vertex": 90.0, "uniform": 110.0,
                         "tempo": 80.0, "tempo_paper": 85.0}.items()]
    g = anatomy_gains(pd.DataFrame(rows)).iloc[0]
    assert g.best_fixed == "token_lp" and g.gain_pct == pytest.approx(20.0)
    assert g.best_with_vertex == "token_lp_vertex" and g.gain_vs_vertex_pct == pytest.approx(100 * (1 - 80 / 90))
    assert g.tempo_over_lb == 1.0 and g.paper_preset_gain_pct == pytest.approx(15.0)
    with pytest.raises(ValueError, match="phase_anatomy"):
        anatomy_gains(pd.DataFrame({"shape": ["X"]}))


def test_the_anatomy_views_keep_every_value_under_headers_that_wrap():
    from tempo.book.chapters.ch04_simulator import anatomy_gains_view, anatomy_table

    rows = [{"shape": "X", "skew": 1.0, "replication": 1.25, "B": 64, "placement": "long-run loads", "policy": p,
             "makespan_us": v, "lower_bound_us": 80.0, "max_G": 9.0, "max_N": 96.0}
            for p, v in {"metro": 120.0, "token_lp": 100.0, "token_lp_vertex": 90.0, "uniform": 110.0,
                         "tempo": 80.0, "tempo_paper": 85.0}.items()]
    an = pd.DataFrame(rows)
    g = anatomy_gains_view(anatomy_gains(an))
    assert g.index[0] == ("X s=1 1.25x B=64", "long-run loads")
    assert list(g.iloc[0]) == ["token_lp", 20.0, "token_lp_vertex", 11.11, 1.0, 15.0]
    t = anatomy_table(an)
    assert t.loc[("X s=1 1.25x B=64", "tempo_paper")].tolist() == [85.0, 9.0, 96.0, 80.0]
    # no header wider than a word or two: every header has a space a narrow column can wrap at
    assert all(" " in c for c in list(g.columns) + list(t.columns))


def test_max_gain_cells_and_the_numbers_chapter_04_glues():
    from tempo.book.chapters.ch04_simulator import anatomy_numbers, max_gain_cells

    phase = pd.DataFrame({"shape": ["DSv3", "DSv3", "DSv2-Lite"], "skew": [1.0, 1.5, 0.5],
                          "replication": [1.25, 1.5, 1.5], "B": [64, 512, 128], "gain_pct": [3.0, 9.0, 4.0]})
    assert max_gain_cells(phase) == [{"shape": "DSv2-Lite", "skew": 0.5, "replication": 1.5, "B": 128},
                                     {"shape": "DSv3", "skew": 1.5, "replication": 1.5, "B": 512}]
    cell = {"shape": "DSv2-Lite", "skew": 1.0, "replication": 1.5, "B": 64}
    an = phase_anatomy({"cells": [cell], "batches": 2, "reading": dict(Reading.library())})  # distinct top-K
    why = anatomy_gains(an)
    got = anatomy_numbers(an, why)
    assert set(k.rsplit("_", 1)[1] for k in got) == {"dsv2"}       # only the shapes the anatomy holds
    g = why.set_index("placement")
    assert got["an_gain_dsv2"] == pytest.approx(g.loc["long-run loads", "gain_pct"])
    assert got["an_routerw_dsv2"] == pytest.approx(g.loc["router weights", "gain_pct"])
    assert got["an_lb_dsv2"] == pytest.approx(100 * (g.loc["long-run loads", "tempo_over_lb"] - 1))
    assert got["an_hot_reps_rw_dsv2"] > got["an_hot_reps_dsv2"]     # the ablation over-replicates the hot expert
    assert all(isinstance(v, float) for v in got.values())
