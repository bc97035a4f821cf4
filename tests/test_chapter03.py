"""Chapter 03's page functions (tempo.book.chapters.ch03_solver), on small frames with known answers."""
import pytest

import tempo
from tempo.book.chapters import ch03_solver as ch03


def test_toy_stage_trace():
    from tempo.studies import toy

    st = ch03.stage_trace(toy.toy_instance(), tempo.CostModel(a=0, b=15, c=0, beta=0.1))
    assert st.loc["whole", "seed"] == pytest.approx(66.0) and st.loc["whole", "local_search"] == pytest.approx(60.0)
    assert st.loc["greedy", "seed"] == pytest.approx(75.0) and st.loc["greedy", "chains"] == pytest.approx(60.0)


def test_solver_chapter_summaries_on_a_small_frame():
    import pandas as pd

    svm = pd.DataFrame({"tokens_per_gpu": [16, 512, 512, 1024], "ratio": [1.0, 0.9, 0.95, 1.02],
                        "milp_optimal": [True, False, True, True], "tempo": [10.0, 18.0, 19.0, 20.4],
                        "milp": [10.0, 20.0, 20.0, 20.0], "tempo_ms": [0.1, 0.2, 0.4, 0.6], "milp_s": [0.01, 10.0, 0.03, 0.05]})
    m = ch03.milp_summary(svm).set_index("quantity")["this artifact (phase grid)"]
    assert m["tempo / MILP, max"] == 1.02 and m["MILP proved optimal"] == "3 / 4"
    b1 = ch03.milp_below_one(svm, b=1.0).set_index("MILP")
    assert b1.loc["stopped at its time limit", "ratio below 1"] == 1
    assert b1.loc["reported optimal", "MILP minus tempo there, in floors b"] == [1.0]
    h = ch03.solver_headlines(svm)
    assert (h["below_one"], h["below_one_timed_out"], h["below_one_proven"], h["timed_out"]) == (2, 1, 1, 1)
    assert h["tempo_ms_median_large_b"] == pytest.approx(0.4) and h["milp_ms_median"] == pytest.approx(40.0)
    with pytest.raises(ValueError, match="b must"):
        ch03.milp_below_one(svm, b=0)
    abl = pd.DataFrame({"variant": ["no ensemble", "no ensemble", "no partial moves"], "degradation_pct": [0.0, 4.0, 1.0],
                        "ep": [8, 64, 8], "skew": [0.0, 1.2, 0.0], "tokens_per_gpu": [16, 1024, 16]})
    t2 = ch03.ablation_table(abl).set_index("variant")
    assert list(t2.index) == ["no ensemble", "no partial moves"]          # the order the experiment ran them
    assert t2.loc["no ensemble", "max % (ours)"] == 4.0 and t2.loc["no ensemble", "region of our max"] == "EP64, s=1.2, B=1024"
    assert t2.loc["no ensemble", "max % (paper)"] == 4.5
    st = pd.DataFrame({"stages": ["seed only", "+LP ensemble"] * 2, "B": [128, 128, 512, 512],
                       "ratio_to_static": [1.0, 0.9, 0.95, 0.88], "solve_ms": [0.1, 0.5, 0.2, 0.7]})
    t8 = ch03.stage_table(st)
    assert list(t8.index) == ["seed only", "+LP ensemble"] and t8.loc["+LP ensemble", 512] == 0.88
    assert t8.loc["+LP ensemble", "solve ms (B=512)"] == 0.7
    tm = pd.DataFrame({"objective": ["full 3-term (4)", "drop traffic (c2 gamma)"] * 2, "B": [128, 128, 512, 512],
                       "ratio_to_static": [0.90, 0.90, 0.88, 0.946]})
    gap = ch03.traffic_gap(tm)
    assert gap[512].item() == pytest.approx(6.6) and gap[128].item() == pytest.approx(0.0)


def test_sizes_tables_and_the_numbers_the_prose_glues():
    import pandas as pd

    assert ch03.sizes("gpu") == ch03.sizes("full") and ch03.sizes("smoke")["milp_limit"] == 2.0
    svm = pd.DataFrame({"tokens_per_gpu": [16, 512], "ratio": [1.0, 0.9], "milp_optimal": [True, False],
                        "tempo": [10.0, 18.0], "milp": [10.0, 20.0], "tempo_ms": [0.1, 0.2], "milp_s": [0.01, 10.0]})
    assert len(ch03.milp_tables(svm)) == 1                                  # no trace rows: one table
    both = pd.concat([svm.assign(routing="synthetic"), svm.assign(routing="trace")], ignore_index=True)
    tables = ch03.milp_tables(both)
    assert len(tables) == 3 and list(tables[2].columns)[-1] == "this artifact (the build's trace)"
    g = ch03.solver_glue(svm, 2.0)
    assert g["milp_limit"] == 2.0 and g["svm_below"] == 1 and g["p_speedup"] == "solver_speedup"
    abl = pd.DataFrame({"variant": ["no ensemble", "no partial moves"], "degradation_pct": [4.0, 1.0],
                        "ep": [64, 8], "skew": [1.2, 0.0], "tokens_per_gpu": [1024, 16]})
    numbers, regions = ch03.ablation_glue(abl, abl.assign(degradation_pct=[0.0, 2.0]))
    assert numbers["ensemble_max"] == 4.0 and numbers["partial_max_greedy"] == 2.0
    assert regions["ensemble_where"] == "EP64, s=1.2, B=1024" and regions["p_ensemble_where"] != ""


def test_the_running_example_stage_by_stage():
    table, n = ch03.toy_stages()
    # by hand (the page's arithmetic): whole seed max(45, 66) = 66, no whole move helps, the partial
    # migration reaches 4 floors a GPU = 60; the water-filling seed pays 5 floors (75), one chain move 60
    assert n["toy_whole_seed"] == 66.0 and n["toy_whole_chains"] == 66.0 and n["toy_whole_local_search"] == 60.0
    assert n["toy_greedy_seed"] == 75.0 and n["toy_greedy_chains"] == 60.0
    assert n["toy_opt"] == pytest.approx(60.0) and (table["exact optimum (MILP)"] == n["toy_opt"]).all()
    assert list(table.loc["whole", ["1 seed", "2 chain moves", "3 local search (partial moves)"]]) == [66.0, 66.0, 60.0]
