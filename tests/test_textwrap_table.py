"""The ledger command's table wraps to the terminal width (issue 28)."""
import pandas as pd
import pytest

from tempo.book.textwrap_table import wrap_table


def test_every_line_fits_and_the_last_column_wraps_under_itself():
    df = pd.DataFrame({"id": ["a", "bb"], "status": ["reproduced", "deviates"], "ours": [1.5, None],
                       "note": ["word " * 60, "short"]})
    text = wrap_table(df, width=60)
    lines = text.splitlines()
    assert max(len(l) for l in lines) <= 60
    assert lines[0].split() == ["id", "status", "ours", "note"]
    lead = lines[0].index("note")
    assert lines[1].startswith("a ") and lines[1][lead:].startswith("word")
    assert all(l.startswith(" " * lead) and l[lead] == "w" for l in lines[2:-1])     # continuation under the note column
    assert lines[-1].startswith("bb") and lines[-1].endswith("short")
    assert " ".join(l[lead:] for l in lines[1:-1]).split() == ["word"] * 60          # nothing lost in the wrapping


def test_long_fixed_cells_are_cut_and_widths_checked(monkeypatch):
    df = pd.DataFrame({"id": ["x" * 50], "note": ["n"]})
    line = wrap_table(df, width=80, cap=10).splitlines()[1]
    assert line.startswith("xxxxxxx...") and line.endswith("n")
    monkeypatch.setenv("COLUMNS", "40")
    assert max(len(l) for l in wrap_table(pd.DataFrame({"a": ["1"], "note": ["w " * 100]})).splitlines()) <= 40
    with pytest.raises(ValueError, match="width"):
        wrap_table(df, width=5)
    with pytest.raises(ValueError, match="columns"):
        wrap_table(pd.DataFrame(), width=40)


def test_ledger_command_lines_fit_the_terminal(monkeypatch, capsys, tmp_path):
    import importlib

    from tempo.core import paths

    ledger = importlib.import_module("tempo.book.claims.ledger")   # the module (the package exports a function of that name)
    import os
    import shutil

    build = paths.ROOT / "build" / f"pytest-ledger-{os.getpid()}"  # an empty build (under ROOT: the command prints
    monkeypatch.setattr(paths, "BUILD", build)                     # the file relative to it); every claim gets a row
    monkeypatch.setenv("COLUMNS", "100")
    try:
        assert ledger.main(["--profile", "smoke"]) == 0
    finally:
        shutil.rmtree(build, ignore_errors=True)
    table = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert len(table) > 10 and max(len(l) for l in table) <= 100
