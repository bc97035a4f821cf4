"""Appendix B's calibration preset in parts (tempo.calib.preset): the part plan
estimated from the H200 recordings, parts run with a fake backend whose measure() is instant
(each part measures what parts 1..K left, the recordings resume one another and complete), the
command line's dry run and usage errors, and the coverage/generation classifier on the real
recordings."""
import json

import numpy as np
import pandas as pd
import pytest

from tempo.calib import preset as P
from tempo.calib import command, record
from tempo.measured.catalog import load_recording, recordings
from tempo.measured.store import ROOT as MEASURED

H200 = MEASURED / "nvidia-h200"


@pytest.fixture(scope="module")
def costs():
    return P.cost_models(P.cell_costs(backends=P.PRESETS["appendix-b"].backends), ("deep_gemm", "torch_bf16"))


# ------------------------------------------------------------------------------- estimates and plan
def test_cell_costs_come_from_the_recordings_own_timings():
    c = P.cell_costs().set_index("recording")
    s, _, man = load_recording(H200 / "2026-11-30-deep_gemm-qwen3-30b-gpucheck")
    row = c.loc["2026-11-30-deep_gemm-qwen3-30b-gpucheck"]
    assert row.duration_s == man["duration_s"] == 72.8 and row.cells == len(s) == 36
    device = P.LAUNCHES_PER_CELL * s.t_us.sum() * 1e-6
    assert row.overhead_s == pytest.approx((72.8 - device) / 36)
    assert 1.9 < row.overhead_s < 2.1  # DeepGEMM: about 2 s per cell (capture, compilation), device time ~0
    assert set(c.backend) == {"deep_gemm", "torch_bf16"}  # the CPU recording is not an H200's


def test_cell_cost_model_takes_the_slowest_recording_and_scales_by_weights(costs):
    dg = costs["deep_gemm"]
    c = P.cell_costs()
    assert dg.overhead_s == pytest.approx(c[c.backend == "deep_gemm"].overhead_s.max())
    assert dg.ref_shape == "dsv3"  # the recording with the most cells (58)
    # device time scales with the expert's weights: a DSv2-Lite cell costs less than a DSv3 one
    big = dg.seconds("dsv3", 40, 4096) - dg.overhead_s
    small = dg.seconds("dsv2-lite", 40, 4096) - dg.overhead_s
    w = P.get_shape("dsv2-lite").weights() / P.get_shape("dsv3").weights()
    assert small == pytest.approx(big * w) and big > 0
    with pytest.raises(ValueError, match="no recording of backend 'nope'"):
        P.cost_models(c, ["nope"])


def test_plan_covers_every_cell_once_in_parts_that_fit(costs):
    plan = P.plan_parts("appendix-b", costs)
    pre = P.PRESETS["appendix-b"]
    assert len(pre.grid()) == 149 and int((pre.grid().kind == "grid").sum()) == 117
    assert len(plan) == 6 * 149
    assert not plan.duplicated(["backend", "shape", "G", "n"]).any()
    summ = P.plan_summary(plan)
    assert (summ.est_s <= P.PART_S).all()
    assert list(summ.part) == list(range(1, len(summ) + 1))
    assert len(summ) == 4  # three fp8 recordings of about 5.8 min each, then the bf16 loop's three
    # parts in plan order: a recording's cells are contiguous and cheapest first
    for (b, s), c in plan.groupby(["backend", "shape"]):
        assert (np.diff(c.part.to_numpy()) >= 0).all()
        assert (np.diff((c.G * c.n).to_numpy()) >= 0).all()


@pytest.mark.parametrize("part_s", [60, 120, 200])
def test_smaller_parts_still_fit_and_every_recording_starts_fittable(costs, part_s):
    plan = P.plan_parts("appendix-b", costs, part_s=part_s)
    summ = P.plan_summary(plan)
    assert (summ.est_s <= part_s + 1e-9).all()
    assert len(summ) > 4
    first = plan.groupby(["backend", "shape"]).part.min()
    for (b, s), k in first.items():  # a recording begins with enough cells to fit it
        assert ((plan.part == k) & (plan.backend == b) & (plan["shape"] == s)).sum() >= P.MIN_FIT_CELLS


def test_plan_refuses_bad_part_seconds(costs):
    for bad in (0, 40, "360", True):
        with pytest.raises(ValueError, match="part_s"):
            P.plan_parts("appendix-b", costs, part_s=bad)
    with pytest.raises(ValueError, match="unknown preset"):
        P.plan_parts("appendix-c", costs)


def test_parse_part():
    assert P.parse_part("2", 4) == 2 and P.parse_part("2/4", 4) == 2 and P.parse_part(" 4 / 4 ", 4) == 4
    for bad, words in [("5", "between 1 and 4"), ("0", "between 1 and 4"), ("2/3", "this plan has 4"),
                       ("x", "K or K/N"), ("1/", "K or K/N"), ("-1", "K or K/N")]:
        with pytest.raises(ValueError, match=words):
            P.parse_part(bad, 4)


# ------------------------------------------------------------------------------- running parts
class Fake:
    """A backend whose measure() is instant: a max-affine time with a tile step, distinct per cell."""

    def __init__(self, log, fail_after=None):
        self.log, self.fail_after = log, fail_after

    def info(self):
        return {"device": "NVIDIA H200", "timing": "fake"}

    def measure(self, G, n):
        if self.fail_after is not None and len(self.log) >= self.fail_after:
            raise KeyboardInterrupt
        self.log.append((G, n))
        return max(10.0 + 11.0 * G + 3.0 * G * (np.ceil(n / 128) - 1), 14.0 + 0.066 * G * n) + 0.001 * n


@pytest.fixture
def fake(monkeypatch, tmp_path):
    import tempo.calib.backends as backends

    calls, opts = [], {}
    monkeypatch.setattr(backends, "make_backend", lambda name, sh, G, n, **kw: Fake(calls, **opts))
    monkeypatch.setattr(P, "runnable", lambda b: (True, "fake"))
    return calls, opts, tmp_path


def _recs(root):
    return {(m["backend"], m["shape"]): (f.parent, m) for f in root.glob("*/*/manifest.json")
            for m in [json.loads(f.read_text())]}


def test_parts_in_order_complete_the_preset(fake, costs):
    calls, _, root = fake
    plan = P.plan_parts("appendix-b", costs, part_s=200)
    n = int(plan.part.max())
    for k in range(1, n + 1):
        calls.clear()
        res = P.run_part(k, plan, root, progress=False, date="2026-12-01")
        own = plan[plan.part == k]
        assert sorted(calls) == sorted(zip(own.G, own.n))  # exactly its own cells
        assert res == {**res, "part": k, "of": n, "measured": len(own), "left": 0, "stopped": False}
        recs = _recs(root)
        for (b, s), c in plan[plan.part <= k].groupby(["backend", "shape"]):
            folder, man = recs[(b, s)]
            assert folder.name == f"2026-12-01-{b}-{s}" and folder.parent.name == "nvidia-h200"
            assert man["preset"] == "appendix-b" and man["cells"] == len(c) and man["cells_planned"] == 149
            assert man["complete"] == (len(c) == 149)
            assert (folder / "samples.partial.csv").exists() == (len(c) < 149)
    for (b, s), (folder, man) in _recs(root).items():
        samples, fits, _ = load_recording(folder)
        assert man["complete"] and len(samples) == 149 and set(fits) >= {"tile", "max_affine_no_intercept"}
        assert P.recording_coverage(folder)["covers_grid"]
    # a rerun of any part measures nothing
    calls.clear()
    assert P.run_part(n, plan, root, progress=False)["measured"] == 0 and calls == []


def test_an_interrupted_part_is_finished_by_the_next(fake, costs):
    calls, opts, root = fake
    plan = P.plan_parts("appendix-b", costs)  # 4 parts: one recording each, then the bf16 three
    opts["fail_after"] = 40
    with pytest.raises(KeyboardInterrupt):
        P.run_part(1, plan, root, progress=False)
    folder = root / "nvidia-h200"
    (partial,) = folder.glob("*-deep_gemm-dsv3/samples.partial.csv")
    assert len(record.read_partial(partial)[0]) == 40
    date = partial.parent.name[:10]
    # on a later day the parts keep writing into the recording the first part began
    assert P.segment_date(root, "deep_gemm", "dsv3", today="2099-01-01") == date
    assert P.segment_date(root, "deep_gemm", "qwen3-30b", today="2099-01-01") == "2099-01-01"
    first = list(calls)
    opts.clear()
    calls.clear()
    res = P.run_part(2, plan, root, progress=False)
    own1, own2 = plan[plan.part == 1], plan[plan.part == 2]
    k = len(own1) - 40
    assert len(calls) == k + len(own2) and res["measured"] == len(calls) and res["left"] == 0
    assert set(calls[:k]) == set(zip(own1.G, own1.n)) - set(first)  # part 1's leftovers first
    assert set(calls[k:]) == set(zip(own2.G, own2.n))
    man = json.loads((partial.parent / "manifest.json").read_text())
    assert man["complete"] and not partial.exists() and man["part"] == "2/4"


def test_a_part_out_of_time_leaves_the_rest_for_the_next(fake, costs):
    calls, _, root = fake
    plan = P.plan_parts("appendix-b", costs)
    t = iter([0.0] + [1e6] * 100)  # the part's time is up after its start
    res = P.run_part(4, plan, root, progress=False, clock=lambda: next(t))
    assert res["stopped"] and res["measured"] == 0 and res["left"] == len(plan) and calls == []


def test_run_part_refuses_backends_that_cannot_run(fake, costs, monkeypatch):
    _, _, root = fake
    monkeypatch.setattr(P, "runnable", lambda b: (False, "no GPU here") if b == "deep_gemm" else (True, ""))
    plan = P.plan_parts("appendix-b", costs)
    with pytest.raises(RuntimeError, match="deep_gemm: no GPU here"):
        P.run_part(1, plan, root, progress=False)
    with pytest.raises(ValueError, match="between 1 and 4"):
        P.run_part(5, plan, root, progress=False)


def test_calibrate_cells_must_be_in_the_grid(fake):
    _, _, root = fake
    grid = pd.DataFrame({"G": [1, 2], "n": [1, 1]})
    with pytest.raises(ValueError, match="not in grid"):
        record.calibrate("fake", "tiny", grid, out_root=root, progress=False, cells=pd.DataFrame({"G": [3], "n": [1]}))


# ------------------------------------------------------------------------------- the command line
def test_dry_run_prints_the_plan(capsys):
    assert command.main(["--preset", "appendix-b", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 parts of at most 360 s" in out and "part 1/4: 149 cells" in out
    assert "--part K/4" in out and "2026-11-30-deep_gemm-qwen3-30b-gpucheck" in out
    assert command.main(["--preset", "appendix-b", "--dry-run", "--part", "2/4"]) == 0
    assert "part 2/4 measures what parts 1..2 left: up to 298 cells (149 of its own)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--part", "1"], "argument --part: needs --preset"),
    (["--dry-run"], "argument --dry-run: needs --preset"),
    (["--preset", "appendix-b"], "needs --part K"),
    (["--preset", "appendix-b", "--part", "9"], "argument --part: part must be between 1 and 4"),
    (["--preset", "appendix-b", "--part", "1/3"], "this plan has 4"),
    (["--preset", "appendix-b", "--part", "1", "--shape", "dsv3"], "argument --shape: cannot be combined"),
    (["--preset", "appendix-b", "--part", "1", "--fresh"], "argument --fresh: cannot be combined"),
    (["--preset", "appendix-b", "--dry-run", "--part-seconds", "30"], "argument --part-seconds: must be above"),
    (["--preset", "appendix-c", "--dry-run"], "invalid choice"),
])
def test_usage_errors(capsys, argv, words):
    with pytest.raises(SystemExit) as e:
        command.main(argv)
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_cli_runs_a_part_with_the_fake(fake, capsys):
    calls, _, root = fake
    assert command.main(["--preset", "appendix-b", "--part", "1/4", "--out", str(root)]) == 0
    out = capsys.readouterr().out
    assert "part 1/4: measured 149 cells; next: --part 2/4" in out and "149 of 149 cells, complete" in out


# ------------------------------------------------------------------------------- coverage
def test_coverage_of_the_real_recordings():
    cov = {r.path.name: P.recording_coverage(r.path) for r in recordings("calibration").itertuples()}
    d = cov["2026-11-30-deep_gemm-dsv3"]
    assert (d["grid_cells"], d["grid_planned"], d["G"], d["n_min"], d["n_max"], d["tile_cells"]) == \
        (26, 117, [1, 8], 1, 4096, 32)
    assert not d["covers_grid"] and d["missing_G"] == [2, 4, 6, 13, 20, 28, 40]
    assert d["generation"] == "Hopper" and d["testbed_generation"] == {"A": True, "B": False}
    g = cov["2026-11-30-deep_gemm-dsv3-gpucheck"]
    assert (g["grid_cells"], g["G"], g["n_max"]) == (24, [1, 8, 16], 2048)  # G = 16 is off Appendix B's ladder
    assert P.stand_in_reasons(d, "A") == ["partial grid: 26 of Appendix B's 117 cells (G [1, 8], n 1-4096)"]
    assert P.stand_in_reasons(d, "B")[1] == "NVIDIA H200 (Hopper) is not Testbed B's generation (Blackwell)"
    c = cov["2026-11-29-cpu-qwen3-30b"]
    assert c["generation"] == "cpu" and not any(c["testbed_generation"].values())
    assert not any(v["covers_grid"] for v in cov.values())  # no recording holds Appendix B's grid yet
    with pytest.raises(ValueError, match="testbed must be"):
        P.stand_in_reasons(d, "C")


def test_coverage_of_a_full_grid_and_generations():
    g = P.PRESETS["appendix-b"].grid()
    cov = P.coverage(g, {"device": "NVIDIA B200"})
    assert cov["covers_grid"] and cov["grid_cells"] == 117 and cov["tile_cells"] == 32
    assert P.stand_in_reasons(cov, "B") == [] and len(P.stand_in_reasons(cov, "A")) == 1
    assert not P.coverage(g.iloc[1:], {"device": "NVIDIA B200"})["covers_grid"]
    with pytest.raises(ValueError, match="columns G and n"):
        P.coverage(pd.DataFrame({"G": [1]}))
    for name, gen in [("NVIDIA H200", "Hopper"), ("NVIDIA H100 80GB HBM3", "Hopper"), ("NVIDIA H20", "Hopper"),
                      ("NVIDIA B200", "Blackwell"), ("NVIDIA GB200", "Blackwell"), ("NVIDIA A100-SXM4-80GB", "Ampere"),
                      ("NVIDIA L40S", "Ada"), ("Tesla V100-SXM2-16GB", "Volta"), ("AMD EPYC", "cpu"),
                      ("AMD EPYC 9B14 96-Core Processor", "cpu"), (None, "unknown"), ("NVIDIA Foo", "unknown")]:
        assert P.gpu_generation(name) == gen, name
