"""The chapters' from-scratch implementations (code cells tagged ``from-scratch``: Eq. 1 and
METRO in 01, round-robin and the token LP in 02, a small tempo_fast in 03) run as printed, each
notebook's cells in order in one fresh namespace, and their own checks against ``tempo.solve``
hold."""
import re

import pytest

from tempo.core import paths

CELL = re.compile(r"^```\{code-cell\} ipython3\n:tags: \[([^\]]*)\]\n(.*?)^```$", re.S | re.M)


def scratch_cells(nb) -> list[str]:
    return [code for tags, code in CELL.findall(nb.read_text())
            if "from-scratch" in [t.strip() for t in tags.split(",")]]


def notebooks():
    return [nb for nb in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.md")) if scratch_cells(nb)]


def test_chapters_01_to_03_build_from_scratch():
    assert [nb.stem for nb in notebooks()] == ["01_balance_time", "02_theory", "03_solver"]


@pytest.mark.parametrize("nb", notebooks(), ids=lambda p: p.stem)
def test_from_scratch_cells_run_and_agree_with_the_library(nb):
    ns = {"__name__": "__from_scratch__"}
    for code in scratch_cells(nb):
        exec(compile(code, f"<{nb.stem} from-scratch>", "exec"), ns)
