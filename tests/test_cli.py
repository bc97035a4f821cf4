"""``python -m tempo``: the command table, and the commands that only read and write files."""
import json

import numpy as np
import pytest

from tempo import cli
from tempo.world.traces import read_trace


def test_help_lists_every_command(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
    assert cli.main(["frobnicate"]) == 2


def test_every_command_resolves():
    import importlib

    for target, _ in cli.COMMANDS.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func))


def test_solve_and_policies(capsys):
    assert cli.main(["solve", "--counts", "600", "30", "30", "30", "30", "30", "30", "--gpus", "2", "--params",
                     "dsv3-offline"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["makespan_us"] > 0 and len(res["gpu_times_us"]) == 2
    assert cli.main(["policies"]) == 0
    assert "tempo" in capsys.readouterr().out.split()


def test_import_trace_and_drift_location(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    lc = np.random.default_rng(0).integers(0, 50, size=(3, 2, 16))
    torch.save({"logical_count": torch.tensor(lc)}, tmp_path / "stat.pt")
    assert cli.main(["import-trace", str(tmp_path / "stat.pt"), "-o", str(tmp_path / "t.npz"), "--model", "m"]) == 0
    counts, meta = read_trace(tmp_path / "t.npz")
    assert np.array_equal(counts, lc) and meta["source"] == "sglang-recorder" and meta["model"] == "m"
    assert cli.main(["drift-location", str(tmp_path / "t.npz"), "--k", "2", "-o", str(tmp_path / "d.json")]) == 0
    d = json.loads((tmp_path / "d.json").read_text())
    assert np.array(d["logical_count"]).shape == (2, 16)
    assert "drift-2" in capsys.readouterr().out
