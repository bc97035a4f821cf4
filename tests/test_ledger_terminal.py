"""``python -m tempo ledger``'s terminal output: the summary, the deviating claims' causes, widths."""
import pandas as pd

from tempo.book.claims import terminal
from tempo.book.claims.registry import STATUSES


def _ledger():
    rows = [{"id": f"claim_{i}", "status": s, "paper_text": "1.5", "ours": 2.0 + i, "unit": "x", "tolerance": "",
             "section": "5.1", "claim": "c", "evidence": "", "provenance": "", "note": ""}
            for i, s in enumerate(STATUSES)]
    rows[STATUSES.index("deviates")]["note"] = "computed cause: " + "the seed spreads the hot expert over every GPU " * 4
    return pd.DataFrame(rows)


def test_summary_counts_every_status_and_gives_the_deviating_causes():
    text = terminal.summary(_ledger(), "smoke", 80)
    assert text.startswith(f"Claims ledger, profile smoke: {len(STATUSES)} claims")
    for s in STATUSES:
        assert any(line.startswith(s) and " 1 " in line for line in text.splitlines()), s
    assert "Deviating claims (1), with the computed cause:" in text
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(f"claim_{STATUSES.index('deviates')}"))
    assert lines[i + 1].startswith("    the seed spreads the hot expert")
    assert "computed cause: the" not in text and "**" not in text and "](" not in text
    assert max(map(len, lines)) <= 80


def test_records_wrap_the_note_under_its_row():
    df = pd.DataFrame({"id": ["a", "bb"], "ours": ["1", "22"], "note": ["word " * 40, ""]})
    lines = terminal.records(df, "note", 50).splitlines()
    assert lines[0].split() == ["id", "ours"] and set(lines[1]) <= {"-", " "}
    assert lines[2].split() == ["a", "1"] and all(len(x) <= 50 for x in lines)
    assert lines[3].startswith("    word") and lines[-1].split() == ["bb", "22"]
    assert sum(x.count("word") for x in lines) == 40


def test_the_command_prints_the_summary_by_default_and_every_claim_with_all(capsys, monkeypatch):
    monkeypatch.setattr(terminal, "build_ledger", lambda profile: _ledger())
    monkeypatch.setattr(terminal, "skipped_recordings", lambda: [])
    assert terminal.main(["--profile", "smoke", "--width", "90"]) == 0
    out = capsys.readouterr().out
    assert "Deviating claims (1)" in out and "claim_0" not in out
    assert terminal.main(["--profile", "smoke", "--width", "90", "--all"]) == 0
    out = capsys.readouterr().out
    assert all(f"claim_{i}" in out for i in range(len(STATUSES)))
    assert terminal.main(["--profile", "smoke", "--status", "needs a GPU"]) == 0
    assert f"claim_{STATUSES.index('needs a GPU')} " in capsys.readouterr().out


def test_every_status_has_a_meaning():
    from tempo.book.claims.registry import CATEGORIES

    assert all(terminal.MEANING.get(s) for s in STATUSES)
    assert terminal.MEANING[CATEGORIES[0].status] == "measured on another GPU or on a partial grid: shown, not verdicts"
