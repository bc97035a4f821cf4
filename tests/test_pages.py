"""What every chapter page gives its reader besides the lesson: the one command that runs it."""
import re

from tempo.core import paths


def chapters():
    return sorted(p for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.md") if p.stem != "99_claims_ledger")


def test_every_chapter_prints_the_command_that_runs_it():
    for nb in chapters():
        text = nb.read_text()
        found = re.findall(r"`make notebook NB=(\w+)`", text.split("\n## ", 1)[0])
        assert found == [nb.stem], f"{nb.name}: the opening must print `make notebook NB={nb.stem}`, found {found}"


def test_tables_show_their_cells_whole():
    import pandas as pd

    from tempo.book import figures

    figures.enable_offline(static=False)
    note = "computed cause: the worst instance is a giant_ construction on 16 GPUs, " * 3
    assert note.strip() in pd.DataFrame({"note": [note]})._repr_html_()   # what a notebook displays
