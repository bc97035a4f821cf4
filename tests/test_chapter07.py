"""Chapter 07's page functions (tempo.book.chapters.ch07_serving): sizes, the paper's numbers,
the microbenchmark's line, the serving status and the recordings beside the paper's figures."""
import pytest

from tempo.book.chapters import ch07_serving as ch07


def test_sizes_paper_numbers_and_claims():
    assert ch07.sizes("gpu") == {**ch07.sizes("full"), "gpu": True} and ch07.sizes("smoke")["steps"] == 3
    n = ch07.paper_numbers()
    assert n["p_wc_b32_vs_eplb_lo"] <= n["p_wc_b32_vs_eplb_hi"] and n["p_tight"] > 0
    t = ch07.claims_table()
    assert list(t.index) == list(range(len(t))) and list(t.columns) == ["id", "section", "claim", "paper", "unit", "kind"]
    assert "serve_qwen_govreport" in set(t.id)


def test_wallclock_glue():
    numbers, words = ch07.wallclock_glue("4 gloo ranks on this CPU", 3, {"agreement": 0.75, "pairs": 8, "gain_transfer_error_p": 2.5})
    assert words == {"eb_where": "4 gloo ranks on this CPU", "eb_ranks": "ranks the policies", "eb_agree_words": "75% agreement"}
    assert (numbers["eb_steps"], numbers["eb_pairs"], numbers["eb_agree"], numbers["eb_agree_pct"], numbers["eb_err"]) == (3, 8, 6, 75, 2.5)
    import pandas as pd

    # a model that prices every policy alike ranks nothing: no agreement number
    tied = pd.DataFrame({"expert_us": [100.0, 80.0, 60.0], "model_us": [73.9] * 3}, index=["static", "metro", "tempo"])
    numbers, words = ch07.wallclock_glue("cpu", 3, {"agreement": 0.6, "pairs": 3, "gain_transfer_error_p": 9.0}, tied)
    assert words["eb_ranks"] == "prices every policy alike" and numbers["eb_agree_pct"] != numbers["eb_agree_pct"]
    assert words["eb_agree_words"].startswith("no agreement is reported") and "nan" not in words["eb_agree_words"]
    assert ch07.model_ranking(tied) == {"pairs": 3, "separated": 0, "agree": 0}
    # a model that separates two of three pairs, one ordered as measured
    mixed = tied.assign(model_us=[70.0, 70.0, 75.0])
    assert ch07.model_ranking(mixed) == {"pairs": 3, "separated": 2, "agree": 0}
    numbers, words = ch07.wallclock_glue("cpu", 3, {"agreement": 0.0, "pairs": 3, "gain_transfer_error_p": 9.0}, mixed)
    assert (numbers["eb_pairs"], numbers["eb_separated"], numbers["eb_agree"], numbers["eb_agree_pct"]) == (3, 2, 0, 0)
    assert words["eb_ranks"] == "ranks the policies"


def test_serving_status_and_recordings(tmp_path):
    empty = ch07.serving_status(root=tmp_path)
    assert len(empty) == 1 and empty[0].data.startswith("**No serve-bench recording under `data/measured/`**")
    assert ch07.serving_recordings(8, root=tmp_path) is None and ch07.epbench_recordings(root=tmp_path) is None
    with pytest.raises(ValueError, match="figure must be"):
        ch07.serving_recordings(9, root=tmp_path)
    ep = ch07.epbench_recordings()                      # the gpu-check folders under data/measured/
    assert ep is None or ep.who.str.startswith("this artifact: ").all()


def test_recordings_agreement_text():
    import pandas as pd

    assert ch07.recordings_agreement_text(None) == ""
    pts = pd.DataFrame({"setting": ["B=64"] * 4, "policy": ["uniform", "uniform", "metro", "metro"],
                        "metric": ["off the best fixed policy"] * 4, "value": [0.0, 32.3, 1.0, 3.0],
                        "who": ["a (emulated on one GPU)", "b (emulated on one GPU)"] * 2})
    text = ch07.recordings_agreement_text(pts)
    assert text == ("2 recordings, up to 32.3 points apart (off the best fixed policy, uniform at B=64); median 17.1 over "
                    "2 quantities measured twice.")
    assert ch07.recordings_agreement_text(pts.iloc[[0, 2]]) == ""     # nothing measured twice
