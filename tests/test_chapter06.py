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
    assert (words["lv_outcomes"], words["lv_arrival"], words["lv_lead"]) == (
        "{'published': 2}", "arrived 4.98 s after the start", "Before it, the")
    assert "median 0.850 " in words["lv_after"] and "0.810 of the uniform table" in words["lv_after"]
    none, words = ch06.live_glue(live.assign(tables_published=0), {"published": 0}, 2.0)
    assert words["lv_arrival"] == "did not arrive within the run" and words["lv_lead"] == "All"
    # no solved table: the sentence says so instead of printing nan
    assert "nan" not in words["lv_after"] and words["lv_after"].startswith("No table arrived")
    assert none["lv_first"] != none["lv_first"] and none["lv_after_med"] != none["lv_after_med"] and none["lv_before_n"] == 5
    assert ch06.latency_markdown("serving: a\nserving: b") == "- a\n- b"


def test_the_running_example_as_a_table():
    table, n, w = ch06.toy_table()
    # 7 experts on 2 GPUs: 14 slots, expert e in slots e and 7 + e; tempo splits the hot expert
    # 300/300 and sends each cold expert whole to one GPU (three on one, three on the other)
    assert n["toy6_slots"] == 14 and (n["toy6_hot_slot0"], n["toy6_hot_slot1"]) == (0, 7)
    assert n["toy6_hot_p0"] == n["toy6_hot_p1"] == 0.5
    cold = table.iloc[1:][["GPU 0: probability", "GPU 1: probability"]].to_numpy()
    assert sorted(cold.ravel().tolist()) == [0.0] * 6 + [1.0] * 6 and (cold.sum(1) == 1).all() and cold[:, 0].sum() == 3
    assert n["toy6_tokens_max"] == n["toy6_tokens_min"] == 390 and n["toy6_G_max"] == 4 and n["toy6_makespan"] == 60
    assert list(table["GPU 1: slot"]) == list(range(7, 14))
    assert w == {"toy6_tokens": "each GPU receives 390 tokens"}
    assert n["toy6_hot_mean"] == 300 and n["toy6_hot_sd"] == pytest.approx(150 ** 0.5)   # 600 * 0.5 * 0.5 = 150
