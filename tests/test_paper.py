import json

import pandas as pd
import pytest

from tempo import paper, paths


def test_claims_yaml_is_complete_and_consistent():
    df = paper.claims()
    assert len(df) >= 60
    assert df.id.is_unique
    assert set(df.kind) <= set(paper.KINDS)
    assert set(df.tol_kind) <= {"rel", "abs"}
    for col in ["id", "section", "claim", "paper", "unit", "tol", "chapter"]:
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


def test_within_tolerance():
    row = {"paper": 100.0, "tol": 0.05, "tol_kind": "rel"}
    assert paper.within(row, 104.9) and not paper.within(row, 105.1)
    row = {"paper": 1.0, "tol": 0.5, "tol_kind": "abs"}
    assert paper.within(row, 1.5) and not paper.within(row, 1.51)
    assert not paper.within(row, float("nan"))


def test_record_and_ledger(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    r = paper.record_claim("toy_tempo", 60.0, "smoke", note="computed")
    assert r["status"] == "reproduced"
    r = paper.record_claim("toy_metro", 80.0, "smoke", note="off")
    assert r["status"] == "deviates"
    with pytest.raises(ValueError, match="unknown claim"):
        paper.record_claim("nope", 1.0, "smoke")
    led = paper.ledger("smoke")
    st = led.set_index("id").status
    assert st["toy_tempo"] == "reproduced" and st["toy_metro"] == "deviates"
    assert st["serve_qwen_govreport"] == "needs hardware not present"
    assert st["phase_max_gain_dsv3"] == "not yet implemented"
    csv = pd.read_csv(tmp_path / "results" / "smoke" / "claims.csv")
    assert list(csv.columns) == ["id", "section", "paper", "ours", "status", "note"]
    counts = paper.ledger_counts(led)
    assert sum(counts.values()) == len(led)
    assert "1 deviate" in paper.ledger_summary_markdown(led, "smoke")


def test_side_by_side():
    p = pd.DataFrame({"B": [128, 512], "x": [1.0, 2.0]})
    o = pd.DataFrame({"B": [128, 512], "x": [1.1, 2.0]})
    s = paper.side_by_side(p, o, ["B"], "x")
    assert s["difference"].round(6).tolist() == [0.1, 0.0]


def test_bounded_claims():
    up = {"paper": 1.0102, "tol": 0.01, "tol_kind": "abs", "bound": "upper"}
    assert paper.within(up, 1.0) and paper.within(up, 1.02) and not paper.within(up, 1.03)
    lo = {"paper": -0.3, "tol": 0.7, "tol_kind": "abs", "bound": "lower"}
    assert paper.within(lo, 5.0) and not paper.within(lo, -1.1)
