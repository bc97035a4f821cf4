"""Chapter 06's page functions (tempo.book.chapters.ch06_runtime)."""
import numpy as np
import pandas as pd
import pytest

from tempo.book.chapters import ch06_runtime as ch06

torch = pytest.importorskip("torch")


def test_sizes():
    assert ch06.sizes("gpu") == ch06.sizes("full") and ch06.sizes("smoke")["seconds"] == 2.0


def test_the_kernel_walk():
    from tempo.serving.kernels import dispatch_and_count_reference as kernel

    p2l = np.array([0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 1, 2])
    phys, prob = ch06.demo_tables(p2l, hot_row=[0.1, 0.8, 0.1])
    assert phys[0].tolist() == [0, 3, 7] and prob[0].tolist() == pytest.approx([0.1, 0.8, 0.1])
    assert prob[1].sum().item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="hot_row"):
        ch06.demo_tables(p2l, hot_row=[0.5, 0.5])
    ids = torch.tensor([[0, 3], [0, 5], [0, 1], [2, 0], [0, 0], [0, 0]])
    counts = torch.zeros(8, dtype=torch.int64)
    out = kernel(ids, prob, phys, counts, torch.rand(ids.numel(), generator=torch.Generator().manual_seed(1)),
                 num_token_non_padded=torch.tensor(4))
    t = ch06.routed_pairs(ids, out, slots_per_gpu=3, real_rows=4)
    assert t.shape == (4, 12) and list(t.index) == ["logical", "physical", "GPU", "padding row"]
    assert t.loc["padding row"].tolist() == [False] * 8 + [True] * 4
    assert (t.loc["GPU"] == t.loc["physical"] // 3).all() and counts[0].item() == 4


def test_the_prose():
    live = pd.DataFrame({"t_s": [0.1, 0.2, 4.98, 5.1, 5.2], "tables_published": [0, 0, 1, 2, 2],
                         "invalid_routes": [0, 0, 0, 0, 0], "table_vs_uniform": [1.04, 1.06, 0.9, 0.8, 0.85]})
    numbers, words = ch06.live_glue(live, {"published": 2}, 2.0)
    assert (numbers["lv_batches"], numbers["lv_published"], numbers["lv_first"], numbers["lv_before_n"]) == (5, 2, 4.98, 2)
    # the uniform table is not the uniform policy: its median ratio is the data's, never "1"
    assert numbers["lv_before_med"] == pytest.approx(1.05) and (numbers["lv_before_lo"], numbers["lv_before_hi"]) == (1.04, 1.06)
    assert numbers["lv_after_med"] == pytest.approx(0.85) and numbers["lv_rel"] == pytest.approx(0.85 / 1.05)
    assert words == {"lv_outcomes": "{'published': 2}", "lv_arrival": "arrived 4.98 s after the start"}
    none, words = ch06.live_glue(live.assign(tables_published=0), {"published": 0}, 2.0)
    assert words["lv_arrival"] == "did not arrive within the run"
    assert none["lv_first"] != none["lv_first"] and none["lv_after_med"] != none["lv_after_med"] and none["lv_before_n"] == 5
    assert ch06.latency_markdown("serving: a\nserving: b") == "- a\n- b"
