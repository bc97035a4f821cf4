"""The ledger under the paper's reading: the sensitivity columns
and the readings x claims table, the verdict rules that compare like with like (seeds and
intervals, propagated rounding, the MILP's answer at its limit, pure-Python timing), stand-ins
counted apart, calibration readings giving "consistent", and the before/after comparison."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pandas as pd
import pytest

from tempo.book import claims, readings
from tempo.book.chapters import ch99_claims_ledger as ch99
from tempo.paper import claims_file
from tempo.paper import readings as paper_readings
from tempo.book.claims import Value, check
from tempo.book.claims.functions import ch01, ch03, ch04_regimes
from tempo.paper.readings import Reading
from tempo.core import paths


@pytest.fixture
def put(tmp_path, monkeypatch):
    """An empty build/ for one test; ``put(stem, df, experiment, tag, reading)`` writes a result
    and its .meta.json as tempo.studies.run does (``reading``: the config's id -> choice)."""
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")

    def _put(stem, df, experiment=None, tag=None, reading=None, profile="smoke"):
        d = paths.results_dir(profile)
        df.to_csv(d / f"{stem}.csv", index=False)
        cfg = {"reading": reading} if reading else {}
        (d / f"{stem}.meta.json").write_text(json.dumps({"experiment": experiment or stem.split("-")[0], "tag": tag,
                                                         "config": cfg, "profile": profile, "code_version": "test",
                                                         "written_utc": "2026-01-01T00:00:00Z"}))
    return _put


def _row(**kw):
    base = {"id": "x", "paper": 1.0, "paper_text": "1.0", "unit": "x", "needs": None}
    base.update(kw)
    return base


def _phase(gains_by_seed, shape="DSv3"):
    """A phase grid with one cell per seed and the given gains (the other columns consistent)."""
    rows = []
    for seed, g in enumerate(gains_by_seed):
        rows.append({"shape": shape, "ep": 8, "skew": 1.2, "replication": 1.25, "B": 128, "seed": seed, "winner": "M",
                     "tie": False, "gain_pct": g, "ms_metro": 100.0, "ms_token_lp": 110.0, "ms_uniform": 120.0,
                     "ms_tempo": 100.0 * (1 - g / 100)})
    return pd.DataFrame(rows)


PHASE_READING = Reading.paper().select(("synthetic_router", "placement_loads", "token_lp_face", "ensemble_lp",
                                        "tempo_preset", "metro_order", "ties"))


# ------------------------------------------------------------------ the verdict rules


def test_a_maximum_over_seeds_agrees_when_the_paper_lies_in_the_seeds_range():
    # paper 8.5 (precision 0.05): the seeds' maxima span 7.0-9.0 -> agrees; 9.0-12.0 -> deviates
    row = _row(paper=8.5, paper_text="8.5")
    assert check(row, Value(8.0, seeds=(7.0, 9.0), n_seeds=8))[0]
    assert not check(row, Value(10.0, seeds=(9.0, 12.0), n_seeds=8))[0]
    assert check(row, Value(10.0, seeds=(8.55, 12.0), n_seeds=8))[0]      # within the printed precision
    assert not check(row, Value(10.0, seeds=(8.56, 12.0), n_seeds=8))[0]
    # a range claim: each end within that end's seed range
    rng = _row(paper=[5, 17], paper_text=["5", "17"])
    assert check(rng, Value((3.0, 20.0), seeds=((1.0, 5.2), (15.0, 25.0)), n_seeds=8))[0]
    assert not check(rng, Value((3.0, 20.0), seeds=((1.0, 4.0), (15.0, 25.0)), n_seeds=8))[0]
    # a bound ignores the range: it must hold for ours (the extreme over every seed)
    low = _row(paper=-0.3, paper_text="-0.3", bound="lower")
    assert not check(low, Value(-0.5, seeds=(-0.5, 0.0), n_seeds=8))[0]
    assert check(low, Value(-0.2, seeds=(-0.2, 0.0), n_seeds=8))[0]


def test_the_phase_maximum_is_taken_per_seed_and_one_seed_is_the_alternative():
    f = {"phase_diagram": _phase([6.0, 9.0, 12.0, 7.0, 8.0, 10.0, 11.0, 13.0])}
    v = ch04_regimes._max_gain(f, "DSv3", reading=Reading.paper())
    assert v.seeds == (6.0, 13.0) and v.n_seeds == 8 and v.ours == pytest.approx(9.5)   # median of the maxima
    row = {**claims_file.claim_row("phase_max_gain_dsv3")}
    assert check(row, v)[0]                                   # 8.5 lies in 6-13
    one = ch04_regimes._max_gain(f, "DSv3", reading=Reading.paper(random_maxima="one_seed"))
    assert one.ours == 6.0 and one.n_seeds == 1 and not check(row, one)[0]
    # the minimum gain is a bound: the lowest seed decides
    mn = ch04_regimes.phase_min_gain({"phase_diagram": _phase([1.0, -0.5, 2.0])}, reading=Reading.paper())
    assert mn.ours == -0.5 and not check(claims_file.claim_row("phase_min_gain"), mn)[0]


def test_a_mean_gets_its_bootstrap_interval_over_seeds_within_each_cell():
    rng = np.random.default_rng(0)
    rows = [{"ep": 32, "skew": 1.2, "B": B, "seed": s, "gain_pct": 5.0 + B / 1000 + rng.normal(0, 0.5)}
            for B in (16, 64, 256, 1024) for s in range(8)]
    v = ch04_regimes.scale_mean_gain_s12({"phase_diagram-scale": pd.DataFrame(rows)}, reading=Reading.paper())
    lo, hi = v.ci
    assert lo < v.ours < hi and hi - lo < 1.0 and v.n_seeds == 8
    # stratified: resampling within cells keeps the grid, so a constant per-cell offset adds no width
    flat = claims.bootstrap_ci([1.0, 1.0, 5.0, 5.0], np.mean, strata=["a", "a", "b", "b"])
    assert flat == (3.0, 3.0)
    with pytest.raises(ValueError, match="strata"):
        claims.bootstrap_ci([1.0, 2.0, 3.0], np.mean, strata=["a"])


def test_printed_rounding_divides_what_the_paper_printed():
    # Section 2.2: fitted b (Table 6: 14.78) over the roofline floor as printed (13.1): 1.128 -> 1.13
    paper_r = ch01._roof_ratios(Reading.paper())
    raw = ch01._roof_ratios(Reading.paper(printed_rounding="unrounded"))
    assert paper_r["DSv3"] == pytest.approx(14.78 / 13.1) and raw["DSv3"] == pytest.approx(14.78 / 13.146, rel=1e-3)
    mn = ch01._roof("min", Reading.paper())
    assert check(claims_file.claim_row("roofline_ratio_min"), mn)[0]
    assert not check(claims_file.claim_row("roofline_ratio_min"), ch01._roof("min", Reading.paper(printed_rounding="unrounded")))[0]


def test_solve_time_compares_the_python_run_and_shows_the_compiled_one_beside():
    keys = {"ep": 8, "skew": 0.0, "replication": 1.25, "batch": 0}
    rt = pd.DataFrame([{**keys, "tokens_per_gpu": B, "runtime": r, "cpu_ms": ms, "wall_ms": 2 * ms}
                       for B in (16, 256, 1024) for r, ms in (("python", 2.0), ("compiled", 0.2))])
    svm = pd.DataFrame([{**keys, "tokens_per_gpu": B, "milp_s": 0.1} for B in (16, 256, 1024)])
    f = {"solver_vs_milp": svm, "solver_runtime": rt}
    v = ch03.solver_time_small_b(f, reading=Reading.paper())
    assert v.ours == 2.0 and "compiled: 0.200 ms" in v.note
    assert ch03.solver_time_small_b(f, reading=Reading.paper(solver_runtime="compiled")).ours == 0.2
    assert ch03.solver_speedup(f, reading=Reading.paper()).ours == pytest.approx(50.0)     # 100 ms / 2 ms
    assert ch03.solver_speedup(f, reading=Reading.paper(solver_runtime="compiled")).ours == pytest.approx(500.0)


def test_calibration_readings_give_consistent_never_reproduced(monkeypatch):
    from tempo.book.claims import ledger as led
    from tempo.book.claims.registry import REGISTRY, Spec

    specs = dict(paper_readings.specs())
    cal = specs["batch_fluctuation"]
    monkeypatch.setattr(paper_readings, "specs", lambda: {**specs, "batch_fluctuation": type(cal)(
        **{**cal.__dict__, "claims": ("x_calibrated",)})})
    monkeypatch.setitem(REGISTRY, "x_calibrated", Spec((), lambda f: 1.0, "model", "test"))
    e = led.evaluate(_row(id="x_calibrated", chapter="01"), "smoke")
    assert e["status"] == "consistent" and "batch_fluctuation" in e["note"]
    monkeypatch.setitem(REGISTRY, "x_calibrated", Spec((), lambda f: 3.0, "model", "test"))
    assert led.evaluate(_row(id="x_calibrated", chapter="01"), "smoke")["status"] == "deviates"


# ------------------------------------------------------------------ stand-ins


def test_stand_ins_are_counted_apart_and_never_a_verdict(put):
    from tempo.book import figures

    v = Value(20.0, evidence="gpu", stand_in="a partial grid")
    assert "stand-in" in claims.STATUSES and "stand-in" not in claims.VERDICTS
    df = pd.DataFrame({"id": ["a", "b", "c"], "chapter": ["05", "05", "01"],
                       "status": ["stand-in", "stand-in", "reproduced"]})
    c = claims.counts(df)
    assert c["stand-in"] == 2 and c["deviates"] == 0 and c["reproduced"] == 1
    assert "2 stand-ins" in claims.summary_markdown(df, "smoke")
    figures.ledger_by_chapter(df)  # the chart knows the status and its colour
    assert len(figures.LEDGER_COLORS) == len(claims.STATUSES) == len(ch99.STATUS_COLORS)
    assert v.stand_in and not claims.verdict_moves("stand-in", "needs a GPU")
    assert claims.verdict_moves("stand-in", "deviates") and not claims.verdict_moves("not run in this build", "deviates")


def test_a_recording_is_a_stand_in_unless_the_papers_testbed_on_appendix_b_grid():
    """One rule for the ledger and the calibration package: ch05.stand_in_reason is
    tempo.calib.preset.stand_in_reasons of its coverage (every cell of Appendix B's grid, the
    testbed's GPU generation or the manifest's testbed marker)."""
    from tempo.book.claims.functions.ch05 import stand_in_reason
    from tempo.calib import preset as P

    full = P.PRESETS["appendix-b"].grid()
    short = full[full.G.isin([1, 8]) & (full.n <= 2048)]
    h200, b200 = {"device": "NVIDIA H200"}, {"device": "NVIDIA B200"}
    assert stand_in_reason(b200, full, "B") == ""                      # Blackwell, the whole grid
    assert stand_in_reason({"device": "X", "testbed": "a"}, full, "A") == ""  # the marker names the node
    assert stand_in_reason(h200, full, "A") == ""                      # Hopper is Testbed A's generation
    why = stand_in_reason(h200, full, "B")                             # another generation, the whole grid
    assert why == "NVIDIA H200 (Hopper) is not Testbed B's generation (Blackwell)"
    why = stand_in_reason({"testbed": "B"}, short, "B")                # the testbed, a partial grid
    assert why.startswith("partial grid: ") and "Testbed" not in why
    assert stand_in_reason({"device": "NVIDIA H100", "testbed": "B"}, full, "A") == \
        "its manifest marks it as Testbed B's, not Testbed A's"      # the marker wins over the name
    both = stand_in_reason(h200, short, "B")
    assert "NVIDIA H200" in both and "partial grid" in both
    for cov_src in (h200, b200):
        assert stand_in_reason(cov_src, short, "A") == "; ".join(P.stand_in_reasons(P.coverage(short, cov_src), "A"))
    with pytest.raises(ValueError, match="testbed"):
        stand_in_reason(h200, full, "C")


# ------------------------------------------------------------------ sensitivity


def test_sensitivity_shows_each_alternative_beside_the_paper_reading(put):
    put("phase_diagram", _phase([9.0, 6.0, 12.0]), reading=PHASE_READING)
    alt = {**PHASE_READING, "token_lp_face": "maxflow_vertex"}
    put("phase_diagram-token_lp_face=maxflow_vertex", _phase([20.0, 21.0, 22.0]), tag="token_lp_face=maxflow_vertex",
        reading=alt)
    row = next(r for r in claims.claim_rows() if r["id"] == "phase_max_gain_dsv3")
    base = claims.evaluate(row, "smoke")
    assert base["status"] == "reproduced" and base["reading"] == "paper"     # 8.5 lies in 6-12
    sens = {(a["reading"], a["choice"]): a for a in claims.sensitivity(row, "smoke")}
    # one entry per alternative of every reading the claim is listed under
    want = {(r, c) for r in readings.readings_of("phase_max_gain_dsv3") for c in paper_readings.spec(r).choices
            if c != paper_readings.spec(r).paper}
    assert set(sens) == want
    assert sens[("token_lp_face", "maxflow_vertex")]["ours"] == "21" and \
        sens[("token_lp_face", "maxflow_vertex")]["status"] == "deviates"
    assert sens[("token_lp_face", "even_spread")]["status"] == "not run in this build"    # no such run
    assert sens[("random_maxima", "one_seed")]["ours"] == "9"                              # the first seed only
    assert sens[("skew_grid", "seven_skews")]["status"] == "not run in this build"
    led = claims.build_ledger("smoke")
    s = led.attrs["sensitivity"]
    assert {"id", "reading", "choice", "ours", "status", "paper_reading_status"} <= set(s.columns)
    r = led.set_index("id").loc["phase_max_gain_dsv3"]
    assert "token_lp_face=maxflow_vertex: 21 (deviates)" in r["under other readings"]
    written = pd.read_csv(paths.results_dir("smoke") / "claims_sensitivity.csv")
    assert len(written) == len(s)
    m = ch99.readings_claims(led)
    assert m.loc["phase_max_gain_dsv3", "token_lp_face"] == "verdict"
    assert m.loc["phase_max_gain_dsv3", "random_maxima"] == "verdict"     # 9 alone misses 8.5
    assert m.loc["phase_max_gain_dsv3", "ties"] == ""                   # ties does not list it
    moved = ch99.verdicts_moved_by(led).set_index("alternative")
    assert "phase_max_gain_dsv3 (reproduced -> deviates)" in moved.loc["token_lp_face = maxflow_vertex", "verdict moves"]
    view = claims.sensitivity_view("smoke", ["phase_max_gain_dsv3"])
    assert view.loc[("phase_max_gain_dsv3", "token_lp_face = maxflow_vertex"), "status"] == "deviates (verdict moves)"
    assert "<details>" in ch99.ledger_html(led)


def test_an_input_run_under_another_reading_is_named(put):
    put("phase_diagram", _phase([9.0]), reading={**PHASE_READING, "synthetic_router": "distinct_topk"})
    row = next(r for r in claims.claim_rows() if r["id"] == "phase_max_gain_dsv3")
    assert "inputs differ: synthetic_router=distinct_topk" in claims.evaluate(row, "smoke")["reading"]


def test_every_reading_a_claim_lists_can_move_it():
    """Each (claim, reading) pair of readings.yaml is one the ledger can compute: the reading is
    one an input experiment declares, one the claim's function reads (``uses``), or the phase
    grids' config-level skew grid."""
    from tempo.studies import READINGS

    bad = []
    for sp in paper_readings.specs().values():
        for cid in sp.claims:
            spec = claims.REGISTRY.get(cid)
            if spec is None:
                continue
            study = set().union(*[set(READINGS.get(s.split("-", 1)[0], ())) for s in spec.inputs]) if spec.inputs else set()
            grid = sp.id == "skew_grid" and any(s.split("-", 1)[0] in ("phase_diagram", "phase_boundary", "solver_vs_milp")
                                                for s in spec.inputs)
            if not (sp.id in study or sp.id in spec.uses or grid):
                bad.append((sp.id, cid))
            if sp.id in spec.uses:
                assert "reading" in inspect.signature(spec.fn).parameters, cid
    assert not bad, f"readings.yaml lists claims no input or function of theirs depends on: {bad}"


def test_alternative_ids_are_the_listed_readings_an_experiment_takes():
    assert readings.alternative_ids("mixed_regime") == ["synthetic_router"]
    assert "ties" in readings.alternative_ids("phase_diagram")
    assert "ties" not in readings.alternative_ids("phase_diagram-scale")        # no scale claim reads a winner label
    assert readings.alternative_ids("ablation-whole") == ["synthetic_router", "eplb_ties", "ablation_reference",
                                                          "chain_depth"]
    assert readings.alternative_ids("no_such_result") == []


# ------------------------------------------------------------------ before and after


def test_compare_ledgers_lists_moved_verdicts_with_the_reading_that_moved_them(tmp_path):
    before = pd.DataFrame({"id": ["a", "b", "c"], "status": ["deviates", "deviates", "reproduced"],
                           "ours": ["1", "2", "3"], "paper": ["1", "1", "3"], "note": ["", "", ""]})
    after = pd.DataFrame({"id": ["a", "b", "c"], "status": ["reproduced", "stand-in", "reproduced"],
                          "ours": ["1.5", "2", "3"], "paper": ["1", "1", "3"], "note": ["seeds", "partial grid", ""]})
    sens = pd.DataFrame({"id": ["a", "a"], "reading": ["random_maxima", "ties"], "choice": ["one_seed", "first_listed"],
                         "ours": ["1", "1.5"], "status": ["deviates", "reproduced"], "note": ["", ""],
                         "paper_reading_ours": ["1.5", "1.5"], "paper_reading_status": ["reproduced", "reproduced"]})
    before.to_csv(tmp_path / "before.csv", index=False)
    (tmp_path / "after").mkdir()
    after.to_csv(tmp_path / "after" / "claims.csv", index=False)
    sens.to_csv(tmp_path / "after" / "claims_sensitivity.csv", index=False)
    counts, moved = ch99.compare_ledgers(tmp_path / "before.csv", tmp_path / "after" / "claims.csv")
    assert counts.loc["deviates"].tolist() == [2, 0] and counts.loc["stand-in"].tolist() == [0, 1]
    m = moved.set_index("id")
    assert list(m.index) == ["a", "b"]
    assert m.loc["a", "before status under (after build)"] == "random_maxima=one_seed"
    assert m.loc["b", "before status under (after build)"] == "-" and m.loc["b", "note (after)"] == "partial grid"
    with pytest.raises(ValueError, match="no such file"):
        ch99.compare_ledgers(tmp_path / "missing.csv", tmp_path / "after" / "claims.csv")


def test_ledger_table_fits_four_columns_and_says_the_trace_recipe_once():
    from tempo.book.chapters import ch99_claims_ledger as ch99

    trace_note = f"needs a recorded routing trace: {claims.RECORD_TRACE}, then `make notebook NB=04_3_placement TRACE=trace.npz`"
    df = pd.DataFrame([{"id": "x", "status": "reproduced", "paper_text": "1.2", "ours": 1.25, "unit": "x",
                        "tolerance": "10%", "section": "Section 2", "claim": "B < 64 holds", "evidence": "e",
                        "provenance": "run.csv", "note": "a & b"},
                       {"id": "y", "status": "needs a recorded trace", "paper_text": "3", "ours": float("nan"), "unit": "%",
                        "tolerance": "", "section": "Section 5", "claim": "t", "evidence": "", "provenance": "",
                        "note": trace_note}])
    page = ch99.ledger_html(df)
    assert page.count("<th>") == 4 and "table-layout: fixed" in page
    assert "B &lt; 64 holds<br><small>a &amp; b</small>" in page and "<summary><small>source</small>" in page
    assert claims.RECORD_TRACE not in page and ch99.TRACE_RECIPE_REF in page
    assert "<code>make notebook NB=04_3_placement TRACE=trace.npz</code>" in page
    assert claims.RECORD_TRACE[1:] in ch99.trace_recipe()
    # a long note shows its first sentence and folds the rest, whole
    long = "computed cause: the worst instance is a giant. " + "More detail follows here, " * 20 + "end."
    html_ = ch99._note_html(long)
    assert html_.startswith("computed cause: the worst instance is a giant.<details>") and "end.</details>" in html_
    assert ch99._note_html("short & sweet") == "short &amp; sweet"


# ------------------------------------------------------------------ computed causes of deviations


def test_whole_activation_steps_and_the_ablation_cause():
    from tempo.book.claims.functions.ch03 import _ablation_cause, whole_step

    assert whole_step(25.0) == 4 and whole_step(16.6667) == 6 and whole_step(20.0) == 5
    assert whole_step(13.75) is None and whole_step(0.0) is None
    g = pd.DataFrame({"degradation_pct": [0.0] * 97 + [25.0, 1.0, 2.0], "ep": 32, "skew": 1.2, "tokens_per_gpu": 64})
    cause = _ablation_cause(g)
    assert cause.startswith("removing it changes the makespan in 3.0% of the 100 batches (by 9.33% on average")
    assert "; the largest, 25.00%, is one whole activation step (100/4) at EP32" in cause


def _two_grids(phase, scale):
    """An ablation result of one variant and one seed: ``phase`` and ``scale`` degradations."""
    rows = [{"grid": gname, "ep": 8 if gname == "phase" else 32, "skew": 0.0, "replication": 1.25,
             "tokens_per_gpu": B, "batch": i, "batch_seed": 0, "variant": "no ensemble", "degradation_pct": d}
            for gname, ds in (("phase", phase), ("scale", scale)) for i, d in enumerate(ds)
            for B in ([16, 64, 256, 1024, 2048] if gname == "phase" else [16])[:1]]
    return {"ablation-whole": pd.DataFrame(rows)}


@pytest.mark.parametrize("pooling, mean, p95", [("pooled", 0.5, 4.0), ("phase_grid", 0.0, 0.0),
                                                  ("scale_grid", 2.0, 7.85), ("equal_weights", 1.0, 4.35)])
def test_table2_statistics_per_pooling_of_the_two_grids(pooling, mean, p95):
    # 30 phase batches at 0 and 10 scale batches (0 x 6, 1, 4, 4, 11): pooled, the scale grid is a quarter;
    # the p95 interpolates as numpy does with equal weights (scale grid: 4 + 0.55 x 7)
    from tempo.book.claims.functions.ch03 import _ablation_stat
    from tempo.paper.readings import Reading

    f = _two_grids([0.0] * 30, [0.0] * 5 + [4.0, 1.0, 0.0, 4.0, 11.0])
    r = Reading.paper(ablation_pooling=pooling)
    assert _ablation_stat(f, "no ensemble", "mean", r).ours == pytest.approx(mean)
    assert _ablation_stat(f, "no ensemble", "p95", r).ours == pytest.approx(p95)


def test_a_weighted_p95_is_numpys_on_the_batches_that_carry_weight():
    from tempo.book.claims.functions.ch03 import _stat

    rng = np.random.default_rng(1)
    v = rng.exponential(size=50)
    w = np.r_[np.zeros(20), np.full(30, 1 / 30)]
    assert _stat(v, w, "p95") == pytest.approx(np.quantile(v[20:], 0.95))
    assert _stat(v, np.full(50, 1 / 50), "p95") == pytest.approx(np.quantile(v, 0.95))


def test_table2_cause_names_each_pooling_and_the_weight_that_gives_the_paper():
    from tempo.book.claims.functions.ch03 import _ablation_stat

    f = _two_grids([0.0] * 30, [0.0] * 5 + [4.0, 1.0, 0.0, 4.0, 11.0])
    v = _ablation_stat(f, "no ensemble", "mean")  # the paper's 0.4 = 0.2 x the scale grid's 2.0
    assert "judged per pooling of the grids (the open ablation_pooling reading): pooled 0.50 deviates, phase_grid " \
           "0.00 deviates, scale_grid 2.00 deviates, equal_weights 1.00 deviates; the ablation's phase grid runs B = 16 " \
           "(1 of Section 3.2's 8)" in v.note
    assert v.cause == "the grids' pooling: the paper's 0.4 at a scale-grid weight of 0.18 to 0.22 (pooled: 0.25)"


def test_a_deviation_without_its_own_cause_gets_one_from_the_readings():
    from tempo.book.claims.ledger import reading_cause

    alt = [{"reading": "metro_order", "choice": "descending_tokens", "ours": "2.9", "status": "reproduced"},
           {"reading": "ties", "choice": "first_listed", "ours": "4.5", "status": "deviates"}]
    assert reading_cause(alt) == ("computed cause: the verdict rests on a reading; it agrees under "
                                  "metro_order=descending_tokens (2.9)")
    assert reading_cause(alt[1:]).startswith("computed cause: outside the readings; it deviates under every "
                                             "alternative run too (1 of 1: ties=first_listed 4.5)")
    assert reading_cause([]) == ""


def test_a_claim_cause_reaches_the_note_only_when_it_deviates(put):
    from tempo.book.claims import ledger as L
    from tempo.book.claims.registry import REGISTRY, Spec, Value

    row = {"id": "x_cause", "needs": None, "paper": 1.0, "unit": "", "kind": "value", "chapter": "03",
           "section": "", "claim": "", "paper_text": "1.0", "tolerance": 0.01}
    try:
        REGISTRY["x_cause"] = Spec((), lambda f: Value(2.0, note="n", cause="because"), "synthetic", "")
        e = L.evaluate(row, "smoke")
        assert e["status"] == "deviates" and e["note"] == "computed cause: because; n"
        REGISTRY["x_cause"] = Spec((), lambda f: Value(1.0, note="n", cause="because"), "synthetic", "")
        e = L.evaluate(row, "smoke")
        assert e["status"] == "reproduced" and e["note"] == "n"
    finally:
        REGISTRY.pop("x_cause", None)


def _cells(rows):
    base = {"shape": "DSv2-Lite", "ep": 8, "skew": 0.0, "replication": 1.25, "batches": 3, "tie": False}
    out = []
    for seed, B, best, ms_best, ms_tempo in rows:
        ms = {"ms_metro": 200.0, "ms_token_lp": 200.0, "ms_uniform": 300.0}
        ms[f"ms_{best}"] = ms_best
        out.append({**base, "seed": seed, "B": B, "winner": "M" if best == "metro" else "L", **ms, "ms_tempo": ms_tempo,
                    "gain_pct": 100 * (1 - ms_tempo / ms_best)})
    return pd.DataFrame(out)


def test_min_gain_cause_counts_the_switching_band_apart_from_the_flat_cells():
    # seed 0: a flat cell a whole step (100/24) below METRO; seed 1: token-LP best, TEMPO 0.5% above it (in
    # the 1% band); seed 2: fine
    p = _cells([(0, 16, "metro", 24.0, 25.0), (0, 512, "token_lp", 100.0, 100.0), (1, 16, "metro", 24.0, 24.0),
                (1, 1024, "token_lp", 100.0, 100.5), (2, 16, "metro", 24.0, 23.0), (2, 1024, "token_lp", 100.0, 100.1)])
    v = ch04_regimes.phase_min_gain({"phase_diagram": p}, reading=Reading.paper())
    assert v.ours == pytest.approx(-100 / 24)
    assert v.cause.startswith("2 of 6 cells below -0.3%; 1 in TEMPO's 1% switching band (token-LP best, B = 1024; "
                              "TEMPO 0.50-0.50% above it)")
    assert "1 other below the best fixed policy, lowest at DSv2-Lite, s = 0, 1.25x, B = 16, seed 0: metro 24.00 us, " \
           "TEMPO 25.00 us, a whole step of 100/24" in v.cause
    assert "without these, 1 of 3 seeds fail" in v.cause


def test_max_gain_cause_names_the_cell_its_baseline_and_the_cells_above_the_paper():
    # DSv3's paper maximum is 8.5%: two seeds, three cells each; token-LP best at B = 256 with 20% gain
    p = _cells([(0, 16, "metro", 100.0, 95.0), (0, 256, "token_lp", 100.0, 80.0), (0, 512, "token_lp", 100.0, 90.0),
                (1, 16, "metro", 100.0, 99.0), (1, 256, "token_lp", 100.0, 88.0), (1, 512, "token_lp", 100.0, 95.0)])
    p["shape"] = "DSv3"
    v = ch04_regimes._max_gain({"phase_diagram": p}, "DSv3", reading=Reading.paper())
    assert v.ours == pytest.approx(16.0)
    assert v.cause.startswith("largest at s = 0, 1.25x, B = 256, seed 0: token_lp 100.0 us, TEMPO 80.0 us (mean of 3 "
                              "batches, a whole step of 100/5); ours / paper = 1.88; 1 of 3 cells per seed (median) above "
                              "8.5%, at B = 256, 512, best fixed there token_lp 3")
    assert "; lowest seed's maximum 12.00%;" in v.cause
    # at 80 us TEMPO gains 8.5% over 87.43 us: a 12.6% faster token-LP
    assert f"up to {100 * (1 - 80 / 0.915 / 100):.1f}%)" in v.cause


def test_the_readings_table_lists_every_reading_with_what_counts_against_it():
    led = pd.DataFrame({"id": ["phase_max_gain_dsv3"]})
    led.attrs["sensitivity"] = pd.DataFrame([
        {"id": "phase_max_gain_dsv3", "reading": "token_lp_face", "choice": "even_spread", "ours": "41", "status": "deviates",
         "note": "", "paper_reading_ours": "12.65", "paper_reading_status": "reproduced"},
        {"id": "phase_max_gain_dsv3", "reading": "token_lp_face", "choice": "maxflow_vertex", "ours": "12.7",
         "status": "reproduced", "note": "", "paper_reading_ours": "12.65", "paper_reading_status": "reproduced"}])
    t = ch99.readings_table(led).set_index("reading")
    assert list(t.index) == list(paper_readings.specs())
    face = t.loc["token_lp_face"]
    assert face["settled"] == "open" and face["paper's choice"] == "highs_vertex"
    assert "E_eff" in face["what supports the alternatives"]
    assert face["what each alternative gives"] == ("maxflow_vertex: moves no verdict; changes 1 other value(s) of 1 "
                                                   "computed | even_spread: moves phase_max_gain_dsv3 (reproduced -> "
                                                   "deviates, 41); changes 0 other value(s) of 1 computed")
    # every choice the text settles says what counts against it
    settled = [sp.id for sp in paper_readings.specs().values() if sp.settled == "yes" and not sp.against]
    assert not settled
    assert "<details>" in ch99.readings_html(led)


def test_a_claims_own_cause_keeps_the_readings_under_which_it_agrees():
    from tempo.book.claims.ledger import deviation_note

    alt = [{"reading": "chain_depth", "choice": "any_length", "ours": "5.6", "status": "reproduced"}]
    own = "computed cause: the s = 0 cells tie the best fixed policy"
    assert deviation_note(own, alt) == own + "; the verdict rests on a reading; it agrees under chain_depth=any_length (5.6)"
    assert deviation_note(own, [dict(alt[0], status="deviates")]) == own
    assert deviation_note("", alt).startswith("computed cause: the verdict rests on a reading")


def test_a_verdict_that_moves_under_an_unpublished_choice_is_shown_per_reading():
    from tempo.book.claims.ledger import unpublished_choice
    from tempo.paper import readings as paper_readings

    assert paper_readings.specs()["ablation_pooling"].unpublished and not paper_readings.specs()["ties"].unpublished
    e = {"status": "reproduced", "ours": 0.62, "note": "n"}
    alt = [{"reading": "ablation_pooling", "choice": "phase_grid", "ours": "0.43", "status": "deviates"},
           {"reading": "ties", "choice": "first_listed", "ours": "0.5", "status": "deviates"}]
    out = unpublished_choice(e, alt)
    assert out["status"] == "hangs on an unpublished choice" and out["status"] in claims.STATUSES
    assert "ablation_pooling=phase_grid: deviates (0.43)" in out["note"] and "ties=" not in out["note"]
    assert out["note"].endswith("; n")
    assert unpublished_choice(e, alt[1:]) == {}                      # an open reading the text could settle: no
    assert unpublished_choice(dict(e, status="needs a GPU"), alt) == {}
