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


def test_wallclock_text():
    text = ch07.wallclock_text("4 gloo ranks on this CPU", 3, {"agreement": 0.75, "pairs": 8, "gain_transfer_error_p": 2.5})
    assert text.startswith("4 gloo ranks on this CPU, 3 steps: model-to-measured pairwise ranking agreement 75% over 8 pairs")
    assert "mean gain-transfer error 2.5 points" in text


def test_serving_status_and_recordings(tmp_path):
    empty = ch07.serving_status(root=tmp_path)
    assert len(empty) == 1 and empty[0].data.startswith("**No serving measurement has been recorded by this artifact**")
    assert ch07.serving_recordings(8, root=tmp_path) is None and ch07.epbench_recordings(root=tmp_path) is None
    with pytest.raises(ValueError, match="figure must be"):
        ch07.serving_recordings(9, root=tmp_path)
    ep = ch07.epbench_recordings()                      # the gpu-check folders under data/measured/
    assert ep is None or ep.who.str.startswith("this artifact: ").all()
