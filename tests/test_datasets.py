import json

import pytest

from tempo.world import datasets


def test_gsm8k_and_govreport_pairs():
    g = datasets.gsm8k([{"question": "2 + 3?", "answer": "5"}])
    assert g == [{"id": "0", "conversations": [{"from": "human", "value": "2 + 3?"}, {"from": "gpt", "value": "5"}]}]
    r = datasets.govreport([{"report": "R", "summary": "S"}])[0]["conversations"]
    assert r[0]["value"].endswith("\n\nR") and r[1]["value"] == "S"


def test_oasst1_keeps_first_level_replies_only():
    rows = [{"message_id": "a", "parent_id": None, "role": "prompter", "text": "Q"},
            {"message_id": "b", "parent_id": "a", "role": "assistant", "text": "A1"},
            {"message_id": "c", "parent_id": "a", "role": "assistant", "text": "A2"},
            {"message_id": "d", "parent_id": "b", "role": "prompter", "text": "follow-up"},
            {"message_id": "e", "parent_id": "d", "role": "assistant", "text": "deep reply"}]
    pairs = [(c["conversations"][0]["value"], c["conversations"][1]["value"]) for c in datasets.oasst1(rows)]
    assert pairs == [("Q", "A1"), ("Q", "A2")]


def test_convert_roundtrip_and_errors(tmp_path):
    src = tmp_path / "g.jsonl"
    src.write_text('{"question": "q1", "answer": "a1"}\n\n{"question": "q2", "answer": "a2"}\n')
    assert datasets.convert("gsm8k", src, tmp_path / "out.json") == 2
    assert json.loads((tmp_path / "out.json").read_text())[1]["conversations"][1]["value"] == "a2"
    with pytest.raises(ValueError, match="dataset must be one of"):
        datasets.convert("mmlu", src, tmp_path / "x.json")
    with pytest.raises(ValueError, match=r"GovReport record lacks field\(s\) \['report', 'summary'\]"):
        datasets.convert("govreport", src, tmp_path / "x.json")
