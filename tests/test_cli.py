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

    for target, _, _ in cli.COMMANDS.values():
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


def test_every_command_help_has_an_example(capsys):
    for name, (_, _, example) in cli.COMMANDS.items():
        assert example.startswith(f"python -m tempo {name}"), name
        assert cli.main([name, "--help"]) == 0, name
        out = capsys.readouterr().out
        assert out.startswith("usage: python -m tempo " + name) and out.rstrip().endswith(example), name


@pytest.mark.parametrize("gpus", ["0", "4097", "1000000", "1000000000", "1" * 30])
def test_solve_gpus_out_of_range_is_a_usage_error(gpus, capsys):
    assert cli.main(["solve", "--counts", "5", "3", "--gpus", gpus]) == 2
    assert "argument --gpus: must be an integer >= 1 and <= 4096" in capsys.readouterr().err


def test_solve_too_many_replicas_is_a_usage_error(capsys):
    from tempo.core.argtypes import MAX_GPUS, MAX_SLOTS

    n = MAX_SLOTS // MAX_GPUS + 1
    assert cli.main(["solve", "--counts", *["1"] * n, "--gpus", str(MAX_GPUS)]) == 2
    assert f"argument --gpus: {n} experts on {MAX_GPUS} GPUs" in capsys.readouterr().err
