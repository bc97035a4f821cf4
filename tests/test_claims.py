"""The claims registry, the tolerance policy and the recomputed ledger (tempo.book.claims)."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from tempo.book.claims.functions import ch02, ch03, ch04_drift, ch04_regimes
from tempo.book import claims
from tempo import studies as experiments
from tempo.core import paths
from tempo.paper import claims_file
from tempo.book.claims import Value, check, precision


@pytest.fixture
def build(tmp_path, monkeypatch):
    """An empty build/ for one test; ``put(stem, df)`` writes a result as experiments.run does."""
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")  # no recordings unless a test writes one

    def put(stem, df, profile="smoke"):
        d = paths.results_dir(profile)
        df.to_csv(d / f"{stem}.csv", index=False)
        (d / f"{stem}.meta.json").write_text(json.dumps({"experiment": stem, "config": {}, "profile": profile,
                                                         "code_version": "test", "written_utc": "2026-01-01T00:00:00Z"}))
    return put


def _row(**kw):
    base = {"id": "x", "paper": 1.0, "paper_text": "1.0", "unit": "x", "needs": None}
    base.update(kw)
    return base


# ------------------------------------------------------------------ coverage


def test_every_claim_has_a_function_or_a_declared_need():
    rows = claims.claim_rows()
    assert len(rows) >= 80
    lacking = [r["id"] for r in rows if r["id"] not in claims.REGISTRY and not r["needs"]]
    assert lacking == [], f"claims with neither a function in tempo.book.claims.functions nor a declared need: {lacking}"
    stray = set(claims.REGISTRY) - {r["id"] for r in rows}
    assert not stray, f"functions for claims not in claims.yaml: {stray}"


#: configuration values a notebook may type although the same digits occur in the paper's tables
CONFIG_VALUES = {"1.25", "1.75"}  # replication factors


def _all_paper_numbers() -> set:
    """Every number of data/paper/ as printed: claims.yaml, text_numbers.csv, the tables."""
    import yaml

    paper_numbers = set()
    raw = yaml.load((paths.PAPER / "claims.yaml").read_text(), Loader=yaml.BaseLoader)["claims"]
    for r in raw:
        paper_numbers.update(r["paper"] if isinstance(r["paper"], list) else [r["paper"]])
    paper_numbers.update(pd.read_csv(paths.PAPER / "text_numbers.csv", dtype=str).value)
    for t in sorted(paths.PAPER.glob("table*.csv")):
        for col in pd.read_csv(t, dtype=str).to_numpy().ravel():
            paper_numbers.update(re.findall(r"-?\d+\.\d+", str(col)))
    return paper_numbers


#: chapters whose Markdown prose types no paper number (they glue them from data/paper/ with
#: tempo.book.paper.glue and {glue:text}); a chapter joins this list once its prose is clean
PROSE_CLEAN = ["01_balance_time", "02_theory", "03_solver", "04_1_routing", "04_2_phase_diagram", "04_3_placement",
               "05_calibration", "06_runtime", "07_serving", "08_your_model", "98_reproduction_map", "99_claims_ledger"]

#: values the prose may type although the same digits occur in data/paper/: the toy's beta (us
#: per token), Zipf skews, replication factors, and an exercise's HBM bandwidth (TB/s)
PROSE_CONFIG_VALUES = CONFIG_VALUES | {"0.1", "1.0", "1.2", "1.5", "2.5", "4.8"}

#: references, not numbers: "Section 5.4", "Eq. 2", "Table 1", "Fig. 1b", "Appendix A.3", "Sections 5.11-5.13"
REFERENCE = re.compile(r"\b(?:Sections?|Eqs?\.|Tables?|Figs?\.|Figures?|Appendix|Lemmas?|Theorems?|Proposition)"
                       r"\s+[A-Z]?\d+(?:\.\d+)*[a-z]?(?:\s*(?:-|–|,|and)\s*[A-Z]?\d+(?:\.\d+)*[a-z]?)*")


def prose_paper_numbers(text: str, paper_numbers: set) -> list[str]:
    """Paper numbers with a decimal point typed into a notebook's Markdown prose (front matter,
    code cells and fenced code removed, references allowed)."""
    prose = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    prose = re.sub(r"^(```|~~~).*?^\1\s*$", "", prose, flags=re.S | re.M)
    prose = REFERENCE.sub("", prose)
    prose = re.sub(r"^\|\s*\d+(?:\.\d+)+\s", "| ", prose, flags=re.M)   # a table row labelled by its section, "| 5.9 ..."
    found = re.findall(r"(?<![\w.])\d+\.\d+(?!\.?\d)", prose)   # "0.880x" counts, a version "1.2.3" not
    return sorted({n for n in found if n in paper_numbers} - PROSE_CONFIG_VALUES)


def test_prose_check_finds_typed_numbers_and_allows_references():
    nums = {"4.1", "9.1", "0.880", "5.4", "1.2"}
    text = "---\nkernelspec: 4.1\n---\nThe median is 4.1% (Section 5.4, Eq. 2, Table 1), 0.880x at s = 1.2.\n" \
           "```{code-cell} ipython3\nx = 9.1\n```\nSee {glue:text}`p_giants` and Sections 5.4-5.13.\n" \
           "| 5.4 DSv3 | 9.1% |\n"
    assert prose_paper_numbers(text, nums) == ["0.880", "4.1", "9.1"]


def test_no_notebook_records_claims_or_types_paper_numbers():
    """Notebooks call experiments and show results: no record_claim, and no number of data/paper/
    (written with two or more decimals and three significant digits, so that configuration values cannot collide) typed into a code cell.
    The prose of every notebook is checked too, and must be clean in the chapters of PROSE_CLEAN."""
    raw_numbers = _all_paper_numbers()
    # three or more significant digits: quantiles (0.95) and grid values (0.25) are not paper numbers
    paper_numbers = {n.lstrip("+-") for n in raw_numbers if re.fullmatch(r"[+-]?\d+\.\d{2,}", n)
                     and len(n.lstrip("+-").replace(".", "").lstrip("0")) >= 3} - CONFIG_VALUES
    assert "0.880" in paper_numbers and "1.0102" in paper_numbers
    # in prose every printed decimal counts (4.1, 9.1): the digits there are read as the paper's
    prose_numbers = {n.lstrip("+-") for n in raw_numbers if re.fullmatch(r"[+-]?\d+\.\d+", n)}
    assert {"4.1", "9.1", "44.0", "0.880"} <= prose_numbers
    names = {nb.stem for nb in paths.NOTEBOOKS.glob("*.md")}
    assert set(PROSE_CLEAN) <= names, f"PROSE_CLEAN names no notebook: {sorted(set(PROSE_CLEAN) - names)}"
    prose_typed = {}
    for nb in sorted(paths.NOTEBOOKS.glob("*.md")):
        text = nb.read_text()
        assert "record_claim" not in text, nb.name
        for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, flags=re.S):
            typed = set(re.findall(r"(?<![\w.])\d+\.\d{2,}(?![\w.])", cell)) & paper_numbers
            assert not typed, f"{nb.name}: paper numbers typed into a code cell: {sorted(typed)}"
        prose_typed[nb.stem] = prose_paper_numbers(text, prose_numbers)
    dirty = {nb: typed for nb, typed in prose_typed.items() if nb in PROSE_CLEAN and typed}
    assert not dirty, f"paper numbers typed into the prose (glue them from data/paper/ with tempo.book.paper.glue): {dirty}"


# ------------------------------------------------------------------ the tolerance policy


def test_precision_is_half_a_unit_of_the_last_printed_digit():
    assert precision("0.880") == pytest.approx(0.0005)
    assert precision("156") == 0.5
    assert precision("-10.2") == pytest.approx(0.05)
    assert precision("1.0102") == pytest.approx(0.00005)


def test_tolerance_is_the_largest_of_precision_spread_and_our_interval():
    row = _row(paper=0.880, paper_text="0.880")
    assert check(row, Value(0.8804))[0] and not check(row, Value(0.8806))[0]
    # our bootstrap interval is wider: it sets the tolerance
    ok, why = check(row, Value(0.89, ci=(0.87, 0.91)))
    assert ok and why == "our 95% interval"
    assert not check(row, Value(0.93, ci=(0.92, 0.94)))[0]
    # the paper's reported spread
    ok, why = check(_row(paper=1.51, paper_text="1.51", spread=0.09), Value(1.59))
    assert ok and why == "paper spread"
    # a justified exception
    row = _row(paper=1.9, paper_text="1.9", tol=2, tol_kind="factor", tol_why="machine")
    assert check(row, Value(3.7))[0] and check(row, Value(1.0))[0] and not check(row, Value(7.16))[0]


def test_ranges_keep_both_ends_and_bounds_are_one_sided():
    row = _row(paper=[97, 99], paper_text=["97", "99"])
    assert check(row, Value((97.2, 99.4)))[0]
    assert not check(row, Value((100.0, 100.0)))[0]   # the high end is off
    assert not check(row, Value((90.0, 99.0)))[0]     # the low end is off
    assert check(row, Value(98.0))[0] and not check(row, Value(99.6))[0]  # a scalar must lie in the range
    up = _row(paper=1.0102, paper_text="1.0102", bound="upper")
    assert check(up, Value(1.0))[0] and not check(up, Value(1.0104))[0]
    lo = _row(paper=-0.3, paper_text="-0.3", bound="lower")
    assert check(lo, Value(5.0))[0] and not check(lo, Value(-0.36))[0]


def test_tight_bound_is_checked_from_both_sides():
    row = _row(paper=0.998, paper_text="0.998", bound="tight", limit=1.0)
    assert check(row, Value((0.9978, 0.9995)))[0]
    assert not check(row, Value((0.5, 0.9)))[0]       # far from tight: an upper bound alone would pass this
    assert not check(row, Value((0.998, 1.02)))[0]    # the bound itself exceeded


def test_yaml_validation_names_the_claim(monkeypatch):
    good = claims_file._yaml()
    bad = ({**good[0], "bound": "uper"},) + good[1:]
    monkeypatch.setattr(claims_file, "_yaml", lambda: bad)
    with pytest.raises(ValueError, match="toy_token_lp.*bound"):
        claims.claim_rows()
    bad = ({**good[0], "tol": 1},) + good[1:]
    monkeypatch.setattr(claims_file, "_yaml", lambda: bad)
    with pytest.raises(ValueError, match="tol_why"):
        claims.claim_rows()


# ------------------------------------------------------------------ the ledger, recomputed


def test_ledger_recomputes_and_missing_results_read_not_run(build):
    experiments.run("toy_dispatch", {"b": 15.0, "beta": 0.1}, "smoke")
    led = claims.build_ledger("smoke").set_index("id")
    assert led.loc["toy_tempo", "status"] == "reproduced" and led.loc["toy_tempo", "ours"] == pytest.approx(60)
    # the toy's token-LP time is arithmetic on the paper's inputs (b = 105 / 7), and so is the ratio
    assert led.loc["toy_ratio", "status"] == "consistent" and led.loc["toy_token_lp", "status"] == "consistent"
    assert led.loc["nstar_dsv3", "status"] == "consistent"           # arithmetic on Table 6: never "reproduced"
    assert led.loc["phase_max_gain_dsv3", "status"] == "not run in this build"
    assert led.loc["serve_qwen_govreport", "status"] == "needs a cluster"
    assert led.loc["fit_err_dsv3", "status"] == "needs a GPU"
    assert "toy_dispatch.csv" in led.loc["toy_tempo", "provenance"]
    c = claims.counts(led.reset_index())
    assert sum(c.values()) == len(claims.claim_rows())
    written = pd.read_csv(paths.results_dir("smoke") / "claims.csv")
    assert len(written) == len(claims.claim_rows()) and "provenance" in written
    # remove that experiment's result: its claims are "not run", never the old verdict
    (paths.results_dir("smoke") / "toy_dispatch.csv").unlink()
    led = claims.build_ledger("smoke").set_index("id")
    for cid in ("toy_token_lp", "toy_metro", "toy_tempo", "toy_ratio"):
        assert led.loc[cid, "status"] == "not run in this build", cid
        assert pd.isna(led.loc[cid, "ours"])


def test_a_result_without_provenance_counts_as_missing(build):
    build("toy_dispatch", pd.DataFrame({"policy": ["tempo"], "makespan_us": [60.0]}))
    (paths.results_dir("smoke") / "toy_dispatch.meta.json").unlink()
    assert claims.view("smoke", ["toy_tempo"]).status.item() == "not run in this build"


def test_trace_claims_never_get_a_verdict_from_synthetic_routing(build):
    t1 = pd.DataFrame({"B": [128] * 5, "uniform": [1.51] * 5, "metro": 1.1, "static": 1.2, "token_lp": 1.0, "spread": 1.5})
    build("proxy_mispricing", t1)
    v = claims.view("smoke", ["t1_uniform_b128"]).iloc[0]
    assert v.status == "needs a recorded trace"    # although the stand-in equals the paper's number
    assert "stand-in" in v.note and "1.51" in v.note
    # a recorded trace decides its claim
    rows = []
    for layer in range(2):
        for pol, ms in [("static", 100.0), ("uniform", 105.0), ("token_lp", 103.0), ("metro", 110.0), ("tempo", 90.0)]:
            rows.append({"step": 1, "layer": layer, "B": 64, "policy": pol, "makespan": ms + layer, "source": "recorded.npz"})
    build("trace_replay", pd.DataFrame(rows))
    v = claims.view("smoke", ["trace_oracle_gap"]).iloc[0]
    assert v.status == "reproduced" or v.status == "deviates"
    assert v["this artifact"].startswith("9.9")   # 1 - 91/101 = 9.90%


# ------------------------------------------------------------------ claim functions on small frames with known answers


def test_t9_is_checked_as_the_share_of_the_win_forfeited():
    t = pd.DataFrame({"B": 512, "batch": [0, 0], "objective": ["full 3-term (4)", "drop traffic (c2 gamma)"],
                      "ratio_to_static": [0.880, 0.946]})
    v = ch03.t9_drop_traffic_b512({"drift16_terms": t})
    assert v.ours == pytest.approx(55.0)   # (0.946 - 0.880) / (1 - 0.880)


def test_t10_uniform_refresh_is_checked_as_the_change():
    t = pd.DataFrame({"B": 128, "window": [0, 0], "policy": "uniform", "refresh": ["never", "cum16"], "ratio": [1.14, 1.31]})
    assert ch04_drift.t10_uni_cum16_b128({"faster_eplb": t}).ours == pytest.approx(0.17)


def test_tile_changed_counts_makespan_changes_per_size_and_shape():
    t = pd.DataFrame({"shape": "DSv3", "pairs_per_gpu": [4096] * 4 + [8192] * 4 + [16384] * 2,
                      "changed": [True, True, True, False, True, True, True, True, False, False],
                      "cut_pct": [1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 7.0, 0.0, 0.0],
                      "uniform_extra_tiles_pct": 3.0})
    f = {"tile_prefill": t}
    assert ch04_drift.tile_changed_share(f) == (75.0, 100.0)   # 16384 is outside the claim's 4096-8192
    assert ch04_drift.tile_prefill_gain(f) == (1.5, 5.5)


def test_scale_max_gain_uses_s0_on_ep32_64_only():
    s = pd.DataFrame({"ep": [8, 32, 32, 64, 64], "skew": [0.0, 0.0, 1.2, 0.0, 0.0],
                      "gain_pct": [30.0, 4.0, 16.7, 6.0, 8.0], "B": [16, 16, 16, 16, 32]})
    f = {"phase_diagram-scale": s}
    assert ch04_regimes.scale_max_gain(f).ours == 8.0            # not the s = 1.2 cell, not EP8
    assert ch04_regimes.scale_mean_gain_s0(f).ours == (4.0, 7.0)  # EP32 mean 4, EP64 mean 7


def test_phase_boundary_hits_is_a_fraction_and_columns_without_a_flip_miss():
    from tempo.studies.simulator import boundary_hits

    cols = []
    for s, winners in [(0.0, ["M", "M", "L", "L"]), (1.5, ["M", "M", "M", "M"])]:
        for B, w in zip([16, 64, 256, 1024], winners):
            cols.append({"shape": "DSv3", "ep": 8, "skew": s, "replication": 1.25, "B": B, "winner": w, "gain_pct": 0.0})
    bt = boundary_hits(pd.DataFrame(cols))
    assert bt.flips.tolist() == [True, False]
    assert not bt.hit.iloc[1]                      # no band to hit
    v = ch04_regimes.phase_boundary_hits({"phase_boundary": bt.assign(seed=0, shape="DSv3", ep=8)})
    assert v.ours == 100 * bt.hit.mean() and v.ours <= 50


def test_moonep_uses_sglang_static_and_keeps_both_ends():
    rows = []
    for base, shift in [("static", 0.0), ("first_replica", -20.0)]:
        for B, free in [(8, -4.8), (64, -10.2), (512, -30.0)]:
            rows.append({"tokens_per_gpu": B, "batch": 0, "baseline": base, "policy": "moonep_free", "change_pct": free + shift})
    assert ch04_drift._moon({"moonep_replay": pd.DataFrame(rows)}, "moonep_free") == (-10.2, -4.8)


def test_solver_grid_max_scores_against_the_milps_answer_with_the_bound_beside():
    # Section 4.2 "against a 10 s HiGHS MILP": its answer at the limit (milp_reference = incumbent);
    # the lower bound is the alternative, and it is named in the note
    from tempo.paper.readings import Reading

    s = pd.DataFrame({"ratio": [1.0, 0.99], "ratio_to_lb": [1.0, 1.03], "milp_optimal": [True, False],
                      "skew": [0.0, 1.2], "replication": [1.25, 1.5], "tokens_per_gpu": [16, 256]})
    v = ch03.solver_phase_grid_max({"solver_vs_milp": s}, reading=Reading.paper())
    assert v.ours == pytest.approx(1.0) and "1.03" in v.note
    assert "1 proven optimal" in v.note and "1 not proven" in v.note and "answer at its limit" in v.note
    lb = ch03.solver_phase_grid_max({"solver_vs_milp": s}, reading=Reading.paper(milp_reference="lower_bound"))
    assert lb.ours == pytest.approx(1.03)


def test_lemmas_are_scored_on_proven_instances_and_thm2_is_bracketed():
    lem = pd.DataFrame({"lemma": [2, 2, 2], "optimal": [True, True, False], "poly_over_milp": [1.0, 1.0, 0.9]})
    assert ch02._lemma({"lemmas": lem}, 2).ours == 1.0
    lem.loc[0, "poly_over_milp"] = 1.01
    assert ch02._lemma({"lemmas": lem}, 2).ours == 0.0
    p = pd.DataFrame({"rr_over_bound_lo": [0.9, 0.996], "rr_over_bound_hi": [0.95, 0.999], "opt_from": ["milp", "bracket"]})
    assert ch02.thm2_worst_ratio({"thm2_probe": p}).ours == (0.996, 0.999)


def test_bootstrap_interval_covers_the_median_and_shrinks_with_more_batches():
    rng = np.random.default_rng(1)
    small, big = rng.normal(1, 0.1, 10), rng.normal(1, 0.1, 1000)
    lo, hi = claims.bootstrap_ci(small)
    assert lo <= np.median(small) <= hi
    blo, bhi = claims.bootstrap_ci(big)
    assert bhi - blo < hi - lo
    assert claims.bootstrap_ci([2.0]) == (2.0, 2.0)


def test_a_reduced_grid_without_the_claims_cells_reads_not_run(build):
    cols = [{"shape": "DSv3", "ep": 8, "skew": 0.0, "replication": 1.25, "B": 16, "winner": "M", "gain_pct": 1.0,
             "ms_metro": 1.0, "ms_token_lp": 1.1, "ms_uniform": 1.2}]
    build("phase_diagram", pd.DataFrame(cols))
    v = claims.view("smoke", ["phase_max_gain_qwen3", "phase_max_gain_dsv3"])
    assert v.loc["phase_max_gain_qwen3", "status"] == "not run in this build"
    assert "no cell" in v.loc["phase_max_gain_qwen3", "note"]
    assert v.loc["phase_max_gain_dsv3", "status"] == "deviates"   # 1.0% vs 8.5%


def test_gpu_claims_read_a_deep_gemm_recording(build, tmp_path):
    """A deep_gemm recording under data/measured gives the Table 6 fit-error claim a verdict
    with the measurement as provenance; without one the claim needs a GPU."""
    import numpy as np

    from tempo import CostModel
    from tempo.measured import store

    led = claims.build_ledger("smoke").set_index("id")
    assert led.loc["fit_err_dsv3", "status"] == "needs a GPU"
    m = CostModel(a=0, b=14.78, c=0, beta=0.0945)  # Table 6's DSv3 fit: a recording it fits exactly
    rows = [(G, n) for G in (1, 2, 4, 8, 13) for n in (1, 4, 16, 64, 256, 1024)]
    df = pd.DataFrame(rows, columns=["G", "n"])
    df["N"], df["T"], df["kind"] = df.G * df.n, df.G * np.ceil(df.n / 128).astype(int), "grid"
    df["t_us"] = [max(m.b * G, m.beta * G * n) for G, n in rows]
    rec = store.ROOT / "gpu-x" / "2026-01-02-deep_gemm-dsv3"
    rec.mkdir(parents=True)
    df.to_csv(rec / "samples.csv.gz", index=False, compression="gzip")
    (rec / "fit.json").write_text("{}")
    (rec / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "device": "GPU X", "date": "2026-01-02",
                                                   "backend": "deep_gemm", "shape": "dsv3", "cells": len(df)}))
    led = claims.build_ledger("smoke").set_index("id")
    assert led.loc["fit_err_dsv3", "ours"] == pytest.approx(0.0, abs=0.5)
    # a partial grid (G up to 13, 1024 tokens per expert) is a stand-in, never a verdict
    assert led.loc["fit_err_dsv3", "status"] == "stand-in"
    assert "partial grid: 30 of Appendix B's 117 cells" in led.loc["fit_err_dsv3", "note"]
    assert "hardware_grid=short_grid: " in led.loc["fit_err_dsv3", "under other readings"]
    assert "measurement: GPU X, 2026-01-02" in led.loc["fit_err_dsv3", "provenance"]
    assert led.loc["tile_err", "status"] == "needs a GPU"  # no tile sweep in that recording
    # Appendix B's grid (G 1..40 x 1..4096 tokens per expert) gets a verdict
    from tempo.calib.preset import PRESETS

    full = PRESETS["appendix-b"].grid(tile_sweep=False)  # every cell of Appendix B's grid
    rows = list(zip(full.G.astype(int).tolist(), full.n.astype(int).tolist()))
    df = pd.DataFrame(rows, columns=["G", "n"])
    df["N"], df["T"], df["kind"] = df.G * df.n, df.G * np.ceil(df.n / 128).astype(int), "grid"
    df["t_us"] = [max(m.b * G, m.beta * G * n) for G, n in rows]
    df.to_csv(rec / "samples.csv.gz", index=False, compression="gzip")
    (rec / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "device": "GPU X", "date": "2026-01-02",
                                                   "backend": "deep_gemm", "shape": "dsv3", "cells": len(df)}))
    led = claims.build_ledger("smoke").set_index("id")
    # on another GPU than the paper's testbed it stays a stand-in
    assert led.loc["fit_err_dsv3", "status"] == "stand-in"
    assert "GPU X (cpu) is not Testbed A's generation (Hopper)" in led.loc["fit_err_dsv3", "note"]
    assert "partial" not in led.loc["fit_err_dsv3", "note"]
    (rec / "manifest.json").write_text(json.dumps({"machine": "gpu-x", "device": "GPU X", "date": "2026-01-02",
                                                   "backend": "deep_gemm", "shape": "dsv3", "cells": len(df),
                                                   "testbed": "A"}))
    led = claims.build_ledger("smoke").set_index("id")
    assert led.loc["fit_err_dsv3", "status"] == "deviates"  # 0% against the paper's 8.0%
    c = claims.counts(led.reset_index())
    assert c["stand-in"] == int((led.status == "stand-in").sum())


def test_moonep_charged_cause_counts_copies_against_what_the_paper_needs():
    rows = [{"tokens_per_gpu": B, "batch": b, "baseline": "static", "policy": p, "makespan_us": 100.0 if p == "static" else 110.0,
             "change_pct": 0.0 if p == "static" else 10.0, "fetched": 6, "fetched_max": 2 + b, "copy_us": 16.0}
            for B in (8, 64) for b in range(3) for p in ("static", "moonep_charged")]
    v = ch04_drift.moonep_charged_decode({"moonep_replay": pd.DataFrame(rows)})
    assert v.ours == (10.0, 10.0)
    # +277% of 100 us at 16 us a copy: 17 copies on one receiver; +320%: 20
    assert v.cause == ("median 6 copies per decode batch, 3 on the busiest receiver, 16.0 us each; the paper's +277 to "
                       "+320% of static's 100 us needs 17-20 on one receiver; the replay's fill makes at most 4")


def test_thm2_cause_states_the_ceiling_the_suite_sizes_allow():
    # an all-floor instance on 2 GPUs with 512 experts: k = 256 per GPU, ratio 256/257 at most
    p = pd.DataFrame([{"kind": "uniform", "experts": 512, "n_gpus": 2, "params": "dsv3-offline", "rr": 2560.0, "term": 10.0,
                       "opt_from": "milp", "rr_over_bound_lo": 256 / 257, "rr_over_bound_hi": 256 / 257},
                      {"kind": "giant", "experts": 32, "n_gpus": 8, "params": "dsv3-offline", "rr": 50.0, "term": 40.0,
                       "opt_from": "milp", "rr_over_bound_lo": 0.6, "rr_over_bound_hi": 0.7}])
    assert ch02.thm2_ceiling(p) == (256, 256 / 257, "E = 512, g = 2")
    v = ch02.thm2_worst_ratio({"thm2_probe": p})
    assert v.cause.startswith("the suite's sizes cap the ratio: k <= 256 experts on a GPU (E = 512, g = 2), ceiling "
                              "k/(k+1) = 0.99611; worst 0.99611 (uniform, E = 512, g = 2, dsv3-offline), 1.00000 of")
    # 0.998 printed to 0.0005: k / (k + 1) >= 0.9975 needs k >= 399
    assert v.cause.endswith("the paper's 0.998 needs k >= 399")


def test_s0_cause_gives_the_points_short_of_the_paper_per_ep():
    rows = [{"ep": ep, "skew": 0.0, "B": B, "seed": 1, "gain_pct": g, "ms_metro": 100.0, "ms_token_lp": 100.0 - g,
             "ms_uniform": 120.0, "ms_tempo": 100.0 - g}
            for ep, gains in ((32, (0.0, 2.0)), (64, (0.0, -1.0))) for B, g in zip((16, 1024), gains)]
    v = ch04_regimes.scale_mean_gain_s0({"phase_diagram-scale": pd.DataFrame(rows)}, reading=None)
    assert v.ours == (-0.5, 1.0)
    assert v.cause.startswith("paper 6.0 to 6.5%: EP32: mean 1.00%, 5.00 points short; level with the best fixed "
                              "policy in 1 of 2 cells, behind in 0")
    assert "EP64: mean -0.50%, 6.50 points short" in v.cause
