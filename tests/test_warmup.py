"""Compile ahead: after ``python -m tempo warmup`` a new process solves without compiling; a compile
that does happen says so on stderr once."""
import subprocess
import sys
import types

import numpy as np

from tempo.core import jit, paths

FIRST_USE = """
import numpy as np
import tempo
from tempo.core.jit import compile_counter
from tempo.policies import solve_batch
with compile_counter() as c:
    inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
    model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
    d = tempo.solve(inst, model, policy="tempo")
    assert model.makespan(inst, d) == 60.0
    tempo.solve(inst, model, policy="tempo", options="paper")
    tempo.solve(tempo.Instance.full_replication(np.arange(1, 65) * 7, n_gpus=8), tempo.CostModel.named("dsv3-offline"))
    layout = np.tile(np.arange(4).repeat(2).reshape(8, 1), (2, 1, 1))
    solve_batch(np.array([[5, 9, 1, 0, 3, 3, 8, 2]] * 2), layout, 4, model)
print("compiles", c.compiles)
"""


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=paths.ROOT, capture_output=True, text=True, timeout=3600)


def test_after_warmup_a_new_process_compiles_nothing():
    w = _run("-m", "tempo", "warmup", "--quiet")
    assert w.returncode == 0, w.stderr
    assert w.stdout.startswith("warmup: ") and " solves, " in w.stdout
    first = _run("-c", FIRST_USE)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["compiles", "0"]
    assert jit.COMPILE_NOTICE not in first.stderr


def _probe(x):
    return x + 1


def test_a_compile_prints_the_notice_once(capsys, monkeypatch):
    from numba import njit

    monkeypatch.setitem(jit._state, "announced", False)
    jit.announce_compiles()
    ours = types.FunctionType(_probe.__code__, {}, "_probe")
    ours.__module__ = "tempo.probe"
    f = njit(ours)
    with jit.compile_counter() as c:
        assert f(1) == 2 and f(1.5) == 2.5 and f(np.int8(3)) == 4
    assert c.compiles == 3
    err = capsys.readouterr().err
    assert err.count(jit.COMPILE_NOTICE) == 1 and err.strip() == jit.COMPILE_NOTICE


def test_other_packages_compiles_print_nothing(capsys, monkeypatch):
    from numba import njit

    monkeypatch.setitem(jit._state, "announced", False)
    jit.announce_compiles()
    theirs = types.FunctionType(_probe.__code__, {}, "_probe")
    theirs.__module__ = "someone_else"
    with jit.compile_counter() as c:
        assert njit(theirs)(2) == 3
    assert c.compiles == 0 and jit.COMPILE_NOTICE not in capsys.readouterr().err
