"""The page functions of chapters 08 (your model), 98 (the reproduction map) and 99 (the claims
ledger): tempo.book.chapters.ch08_your_model, ch98_reproduction_map, ch99_claims_ledger."""
import pandas as pd
import pytest

from tempo.book.chapters import ch08_your_model as ch08
from tempo.book.chapters import ch98_reproduction_map as ch98
from tempo.book.chapters import ch99_claims_ledger as ch99


def test_floor_estimate_and_fit_summary():
    from tempo.calib.shapes import ExpertShape

    mine = ExpertShape("qwen3-235b", d_model=4096, d_ff=1536, n_experts=128, top_k=8)
    t = ch08.floor_estimate(mine, hbm_bytes_per_s=4.8e12).iloc[0]
    assert t["expert MB (fp8)"] == pytest.approx(3 * 4096 * 1536 / 1e6)
    assert t["roofline floor (us)"] == pytest.approx(3 * 4096 * 1536 / 4.8e12 * 1e6)
    assert t["roofline floor (us)"] < t["expected b, from (us)"] < t["to (us)"]
    with pytest.raises(ValueError, match="hbm_bytes_per_s"):
        ch08.floor_estimate(mine, hbm_bytes_per_s=0)
    from tempo import CostModel

    samples = pd.DataFrame({"G": [1, 2, 4], "N": [10.0, 20.0, 400.0], "T": [1, 2, 4], "t_us": [15.0, 30.0, 60.0]})
    s = ch08.fit_summary(CostModel(a=0, b=15, c=0, beta=0.1), samples).iloc[0]
    assert (s["a (us)"], s["b (us)"], s["beta (us/token)"]) == (0, 15, 0.1) and s["mean fit error %"] >= 0


def test_reproduction_map_tables():
    rmap = ch98.checked_map()
    c = ch98.counts_table(rmap)
    assert c.index.name == "category" and c["items"].sum() == len(rmap)
    f = ch98.expected_floors(4.8)
    assert len(f) == 3 and "expected b, low (us)" in f.columns and (f["expected b, low (us)"] < f["expected b, high (us)"]).all()


def test_ledger_views(tmp_path):
    from tempo.book import claims

    df = pd.DataFrame({"status": ["reproduced", "deviates"]})
    text = ch99.summary_markdown(df, "smoke")
    assert text.startswith("**Claims ledger** (2 claims, profile `smoke`") and "Claims ledger](claims-ledger)" not in text
    assert len(ch99.STATUS_COLORS) == len(claims.STATUSES)
    view = ch99.recordings_view(root=tmp_path)
    assert view[0].data.startswith("No recording has been ingested yet") and view[1].data.startswith("Claims read from")


def test_the_running_example_under_a_fit():
    import tempo
    from tempo.calib import fit_cost_model
    from tempo.measured import catalog

    # the toy's own model: chapter 01's numbers (token LP 105, METRO 69, tempo 60 with the hot expert split)
    table, n, w = ch08.toy_under(tempo.CostModel(a=0.0, b=15.0, c=0.0, beta=0.1))
    assert (n["toy8_token_lp"], n["toy8_metro"], n["toy8_tempo"], n["toy8_milp"]) == pytest.approx((105, 69, 60, 60))
    assert w == {"toy8_hot": "still splits the hot expert over 2 GPUs", "toy8_tiles": "has no tile term (Eq. 1)"}
    # the H200 DSv3 recording's Eq. 1 fit (the page's my_model): no tile cost, so tempo splits the
    # hot expert 300/300 and each GPU runs it and three cold experts (4 floors, 330 tokens)
    r = catalog.pick(catalog.recordings("calibration"), "dsv3", "deep_gemm")
    model = fit_cost_model(catalog.load_recording(r.path)[0], "max_affine").model
    table, n, w = ch08.toy_under(model)
    assert w["toy8_hot"] == "still splits the hot expert over 2 GPUs" and n["toy8_tempo"] == pytest.approx(n["toy8_milp"])
    assert n["toy8_tempo"] == pytest.approx(max(model.a + 4 * model.b, model.c + 330 * model.beta), rel=1e-9)
    assert n["toy8_tempo"] < n["toy8_metro"] < n["toy8_token_lp"]
