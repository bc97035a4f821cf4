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
