import pandas as pd
import pytest

from tempo import paper


def test_claims_yaml_is_complete_and_consistent():
    df = paper.claims()
    assert len(df) >= 60
    assert df.id.is_unique
    assert set(df.kind) <= set(paper.KINDS)
    assert set(df.needs.dropna()) <= {"trace", "gpu", "cluster"}
    for col in ["id", "section", "claim", "paper", "unit", "chapter"]:
        assert df[col].notna().all(), col
    # the Fig. 1b toy is in the ledger with the paper's numbers
    assert paper.claim("toy_tempo")["paper"] == 60


def test_paper_tables_load():
    for n in range(1, 12):
        assert len(paper.table(n)) > 0
    t1 = paper.table(1)
    assert t1[(t1.B == 128) & (t1.policy == "uniform")]["median"].item() == 1.51
    assert paper.text_number("fig1b", "token_lp_makespan") == 105
    with pytest.raises(ValueError):
        paper.table(12)


def test_side_by_side():
    p = pd.DataFrame({"B": [128, 512], "x": [1.0, 2.0]})
    o = pd.DataFrame({"B": [128, 512], "x": [1.1, 2.0]})
    s = paper.side_by_side(p, o, ["B"], "x")
    assert s["difference"].round(6).tolist() == [0.1, 0.0]
