"""``python -m tempo ingest``: recordings stored under data/measured/, and the cluster claims they decide."""
import gzip
import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from tempo.book.claims.functions import ch05, ch06, ch07
from tempo.book import claims, ingest
from tempo import cli
from tempo.core import paths
from tempo.measured import catalog, store

EP8 = "python -m tempo epbench --device cuda --world-size 8 --shape dsv3 --tokens {B} --steps 10"
POLICIES = ("static", "uniform", "token_lp", "metro", "tempo")


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty data/measured (and build/) for one test."""
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    return tmp_path / "measured"


def epbench_csv(path, layer, model=None, emulated=False, steps=10, kernel="deep_gemm_fp8_masked"):
    """An epbench --csv file: per policy a layer time (us) on every step (+ a small per-step wiggle
    shared by all policies, so per-step ratios are exact)."""
    rows = []
    for s in range(steps):
        for i, (pol, t) in enumerate(layer.items()):
            lt = t * (1 + 0.01 * (s % 3))
            rows.append({"step": s, "policy": pol, "order": i, "layer_us": lt,
                         "expert_us": lt if emulated else lt - 0.2 * t,
                         "model_us": (model or layer)[pol], "kernel": kernel, "order_seed": 0})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def ledger_row(cid, profile="smoke"):
    row = {r["id"]: r for r in claims.claim_rows()}[cid]
    return claims.evaluate(row, profile)


# ------------------------------------------------------------------ storing


def test_epbench_layout_manifest_and_idempotency(root, tmp_path):
    src = epbench_csv(tmp_path / "wc-b32.csv", {"static": 110.0, "uniform": 100.0, "tempo": 88.0})
    folder, created = ingest.ingest(src, machine="testbed-a", date="2026-11-30", command=EP8.format(B=32) +
                                    f" --csv {tmp_path}/wc-b32.csv")
    assert created and folder == root / "testbed-a" / "2026-11-30-epbench-dsv3-ep8-b32"
    assert sorted(p.name for p in folder.iterdir()) == ["epbench.csv.gz", "manifest.json"]
    man = json.loads((folder / "manifest.json").read_text())
    assert man["kind"] == "epbench" and man["machine"] == "testbed-a" and man["date"] == "2026-11-30"
    assert (man["device"], man["emulate"], man["world_size"], man["tokens"], man["shape"]) == ("cuda", False, 8, 32, "dsv3")
    assert man["source"] == "wc-b32.csv" and man["tempo_version"]
    stored = (folder / "epbench.csv.gz").read_bytes()
    assert man["files"]["epbench.csv.gz"]["sha256"] == hashlib.sha256(stored).hexdigest()
    assert gzip.decompress(stored) == src.read_bytes()
    assert man["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    text = (folder / "manifest.json").read_text()
    assert str(tmp_path) not in text and "--csv wc-b32.csv" in man["command"]   # no machine paths
    # the same content again: no new folder, whatever the options
    again, created = ingest.ingest(src, machine="other", date="2026-12-01", command=EP8.format(B=32))
    assert not created and again == folder
    assert [p.name for p in root.rglob("manifest.json")] == ["manifest.json"]
    # other content under the same name: a suffixed folder, and no temporary folder left behind
    src2 = epbench_csv(tmp_path / "wc-b32-second.csv", {"static": 111.0, "uniform": 100.0, "tempo": 87.0})
    folder2, created = ingest.ingest(src2, machine="testbed-a", date="2026-11-30", command=EP8.format(B=32))
    assert created and folder2.name == "2026-11-30-epbench-dsv3-ep8-b32-2"
    assert sorted(p.name for p in (root / "testbed-a").iterdir()) == [folder.name, folder2.name]


def test_refuses_large_files_and_writes_nothing_on_failure(root, tmp_path, monkeypatch):
    src = epbench_csv(tmp_path / "wc.csv", {"uniform": 100.0, "tempo": 88.0}, steps=200)
    monkeypatch.setattr(ingest, "MAX_BYTES", 500)
    with pytest.raises(ingest.IngestError, match=r"PATH: wc.csv: epbench.csv.gz would be .* over the 0 MiB limit"):
        ingest.ingest(src, machine="m", command=EP8.format(B=32))
    assert not root.exists() or not any(root.rglob("*.gz"))
    monkeypatch.setattr(ingest, "MAX_BYTES", 5 * 2**20)

    def boom(*a):
        raise OSError("disk full")
    monkeypatch.setattr(store.os, "rename", boom)
    with pytest.raises(OSError, match="disk full"):
        ingest.ingest(src, machine="m", command=EP8.format(B=32))
    assert list((root / "m").iterdir()) == []   # atomic: neither the folder nor its temporary copy


def test_cli_errors_name_the_argument(root, tmp_path, capsys):
    src = epbench_csv(tmp_path / "wc.csv", {"uniform": 100.0, "tempo": 88.0}, kernel="loop")
    cases = [(["ingest", str(tmp_path / "missing.csv")], "argument PATH"),
             (["ingest", str(src), "--machine", "m", "--date", "30/11/2026"], "argument --date"),
             (["ingest", str(src)], "argument --machine"),           # a loop-kernel CSV does not say where it ran
             (["ingest", str(src), "--machine", "m", "--command", "python -m tempo calibrate"], "argument --command"),
             (["ingest", str(tmp_path)], "argument PATH")]
    (tmp_path / "bad.csv.gz").write_bytes(b"not gzip")
    cases.append((["ingest", str(tmp_path / "bad.csv.gz"), "--machine", "m"], "not a readable gzip file"))
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    cases.append((["ingest", str(tmp_path / "bad.csv"), "--machine", "m"], "lacks the columns"))
    for argv, msg in cases:
        assert cli.main(argv) == 2, argv
        assert msg in capsys.readouterr().err, argv
    assert not root.exists()


def test_a_gpu_run_ingested_on_its_node_takes_the_nodes_gpu_name(root, tmp_path, monkeypatch):
    src = epbench_csv(tmp_path / "wc.csv", {"uniform": 100.0, "tempo": 88.0}, kernel="loop")
    monkeypatch.setattr(ingest, "local_gpu_name", lambda: "NVIDIA H200")
    folder, _ = ingest.ingest(src, date="2026-11-30", command=EP8.format(B=32))
    assert folder.parent.name == "nvidia-h200"
    assert "nvidia-smi" in json.loads((folder / "manifest.json").read_text())["machine_from"]
    monkeypatch.setattr(ingest, "local_gpu_name", lambda: None)
    with pytest.raises(ingest.IngestError, match="--machine"):
        ingest.prepare(epbench_csv(tmp_path / "wc2.csv", {"uniform": 100.0, "tempo": 87.0}), command=EP8.format(B=32))


def test_calibration_folder_is_validated_and_copied(root, tmp_path):
    from tempo.calib import record

    d = tmp_path / "cal" / "nvidia-h200" / "2026-11-30-deep_gemm-dsv3"
    d.mkdir(parents=True)
    s = pd.DataFrame({"G": [1] * 4 + [8] * 4, "n": [1, 64, 256, 1024] * 2})
    s = s.assign(N=s.G * s.n, T=s.G * np.ceil(s.n / 128), kind="grid", t_us=10 + s.G * 8.0 + 0.1 * s.G * s.n)
    s.to_csv(d / "samples.csv.gz", index=False, compression="gzip")
    (d / "fit.json").write_text(json.dumps(record.fit_all(s)))
    (d / "manifest.json").write_text(json.dumps({
        "machine": "nvidia-h200", "device": "NVIDIA H200", "backend": "deep_gemm", "shape": "dsv3", "date": "2026-11-30",
        "cells": len(s), "command": f"python -m tempo calibrate --backend deep_gemm --out {tmp_path}/cal"}))
    folder, created = ingest.ingest(d)
    assert created and folder == root / "nvidia-h200" / "2026-11-30-deep_gemm-dsv3"
    assert (folder / "samples.csv.gz").read_bytes() == (d / "samples.csv.gz").read_bytes()
    man = json.loads((folder / "manifest.json").read_text())
    assert man["kind"] == "calibration" and man["command"].endswith("--out cal") and str(tmp_path) not in json.dumps(man)
    rec = catalog.recordings("calibration")
    assert list(rec.path) == [folder] and rec.backend.item() == "deep_gemm"   # the GPU claims' reader finds it
    row = ledger_row("fit_err_dsv3")   # read by the ledger: an H200 on a partial grid is a stand-in (hardware_grid)
    assert row["status"] == "stand-in" and "NVIDIA H200" in row["note"] and "partial grid" in row["note"]
    assert ingest.ingest(folder) == (folder, False)        # already under data/measured: nothing to copy
    (d / "fit.json").unlink()
    with pytest.raises(ingest.IngestError, match="no fit.json"):
        ingest.prepare(d)


def test_trace_is_validated_and_stored_readable(root, tmp_path):
    from tempo.world.traces import read_trace, write_trace

    counts = np.arange(2 * 3 * 8).reshape(2, 3, 8)
    write_trace(tmp_path / "qwen.npz", counts, model="qwen3-235b", source=f"{tmp_path}/dumps/stat.pt")
    with pytest.raises(ingest.IngestError, match="--machine"):
        ingest.prepare(tmp_path / "qwen.npz")
    folder, _ = ingest.ingest(tmp_path / "qwen.npz", machine="testbed-b", date="2026-11-29")
    assert folder.name == "2026-11-29-trace-qwen"
    got, meta = read_trace(folder / "trace.npz")
    assert (got == counts).all() and meta["source"] == "stat.pt" and meta["model"] == "qwen3-235b"
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ingest.IngestError, match="not a routing trace"):
        ingest.prepare(tmp_path / "junk.npz", machine="m")


# ------------------------------------------------------------------ epbench claims


def test_wc_b32_reads_the_cluster_recording_and_the_ledger_row_turns(root, tmp_path, capsys):
    assert ledger_row("wc_b32_vs_eplb")["status"] == "needs a cluster"
    src = epbench_csv(tmp_path / "wc-b32.csv", {"static": 110.0, "uniform": 100.0, "token_lp": 95.0, "tempo": 88.0})
    assert cli.main(["ingest", str(src), "--machine", "testbed-a", "--date", "2026-11-30",
                     "--command", EP8.format(B=32)]) == 0
    out = capsys.readouterr().out
    assert "wc_b32_vs_eplb: reproduced, ours 12" in out
    v = ch07.wc_b32_vs_eplb({})
    assert v.ours == pytest.approx(12.0) and v.evidence == "cluster"   # 1 - 88/100 on every step
    e = ledger_row("wc_b32_vs_eplb")
    assert e["status"] == "reproduced" and e["ours"] == pytest.approx(12.0)
    assert e["provenance"].startswith("measurement: testbed-a, 2026-11-30, "
                                      "data/measured/testbed-a/2026-11-30-epbench-dsv3-ep8-b32")
    # a newer run outside the paper's 11-14%: the newest recording decides
    src = epbench_csv(tmp_path / "wc-b32-new.csv", {"uniform": 100.0, "tempo": 95.0})
    ingest.ingest(src, machine="testbed-a", date="2026-12-01", command=EP8.format(B=32))
    assert ledger_row("wc_b32_vs_eplb")["status"] == "deviates" and ch07.wc_b32_vs_eplb({}).ours == pytest.approx(5.0)


def test_an_emulated_or_cpu_epbench_run_decides_no_cluster_claim(root, tmp_path):
    layer = {"static": 110.0, "uniform": 100.0, "tempo": 88.0}
    src = epbench_csv(tmp_path / "emu.csv", layer, emulated=True)
    # the command forgot --emulate: layer time == expert time on every row gives it away
    folder, _ = ingest.ingest(src, machine="nvidia-h200", date="2026-11-30", command=EP8.format(B=32))
    man = json.loads((folder / "manifest.json").read_text())
    assert man["emulate"] is True and "emulate_note" in man and folder.name.endswith("-emulated")
    e = ledger_row("wc_b32_vs_eplb")
    assert e["status"] == "needs a cluster" and e["ours"] is None
    assert "stand-in" in e["note"] and "12 %" in e["note"] and "--emulate" in e["note"]
    assert "epbench --device cuda" in e["note"]                       # the command that records it
    assert "nvidia-h200/2026-11-30-epbench-dsv3-ep8-b32-emulated" in e["provenance"]
    # four gloo CPU ranks: a CPU stand-in
    cpu = epbench_csv(tmp_path / "cpu.csv", layer, kernel="loop")
    ingest.ingest(cpu, machine="amd-epyc", date="2026-12-02",
                  command="python -m tempo epbench --world-size 8 --shape dsv3 --tokens 32")
    e = ledger_row("wc_b32_vs_eplb")
    assert e["status"] == "needs a cluster" and "CPU stand-in" in e["note"] and "device cpu" in e["note"]
    # a real cluster run, although older, decides
    ingest.ingest(epbench_csv(tmp_path / "real.csv", layer), machine="testbed-a", date="2026-11-01",
                  command=EP8.format(B=32))
    assert ledger_row("wc_b32_vs_eplb")["status"] == "reproduced"


def test_within_best_and_rank_agreement_over_the_b_ladder(root, tmp_path):
    b32 = {"static": 130.0, "uniform": 100.0, "token_lp": 115.0, "metro": 107.0, "tempo": 88.0}
    ingest.ingest(epbench_csv(tmp_path / "b32.csv", b32), machine="a", date="2026-11-30", command=EP8.format(B=32))
    ingest.ingest(epbench_csv(tmp_path / "b2048.csv", {"static": 150.0, "uniform": 120.0, "token_lp": 100.0,
                                                       "metro": 111.0, "tempo": 104.0}),
                  machine="a", date="2026-11-30", command=EP8.format(B=2048))
    v = ch07.wc_within_best({})
    assert v.ours == pytest.approx(4.0) and v.evidence == "cluster"   # B=2048: 104 / token-LP's 100
    assert "B=32: -12.0% vs uniform" in v.note
    assert ledger_row("wc_within_best")["status"] == "reproduced"
    assert ch05.calib_rank_agreement({}).ours == pytest.approx(100.0)  # the model orders every pair as measured
    # a newer B=32 run whose model swaps metro and token-LP: 1 of its 10 pairs disagrees
    ingest.ingest(epbench_csv(tmp_path / "b32-model.csv", b32,
                              model={"static": 5.0, "uniform": 2.0, "token_lp": 3.0, "metro": 3.5, "tempo": 1.0}),
                  machine="a", date="2026-12-01", command=EP8.format(B=32))
    v = ch05.calib_rank_agreement({})
    assert v.ours == pytest.approx(95.0) and "19 of 20" in v.note     # newest per B: 9/10 + 10/10
    assert ledger_row("calib_rank_agreement")["status"] == "deviates"


def test_rank_agreement_ignores_pairs_inside_the_noise_band():
    df = pd.DataFrame({"policy": ["a", "b", "c"], "expert_us": [100.0, 101.0, 150.0], "model_us": [2.0, 1.0, 0.5]})
    assert ch05.rank_agreement(df) == (0, 2)   # a-b within 3%; a-c and b-c ordered the other way


# ------------------------------------------------------------------ serve-bench claims


def serve_folder(path, server, workloads, pairs, runs=(), gpus=8):
    """A serve-bench output folder: pairs (window, workload, policy, kept, throughput, p99 TPOT deltas),
    runs (window, workload, policy, status, output and request throughput)."""
    path.mkdir(parents=True)
    pd.DataFrame([dict(zip(["window", "workload", "policy", "kept", "throughput_delta_pct", "p99_tpot_ms_delta_pct"], p))
                  for p in pairs]).assign(baseline="static", excluded_because="").to_csv(path / "pairs.csv", index=False)
    cols = ["window", "workload", "policy", "status", "output_throughput", "request_throughput"]
    runs = list(runs) or [(p[0], p[1], q, "ok", 1000.0, 1.0) for p in pairs for q in (p[2], "static")]
    pd.DataFrame([dict(zip(cols, r)) for r in runs], columns=cols).assign(order=0).to_csv(path / "runs.csv", index=False)
    wl = [{"name": n, "dataset": d, "num_prompts": 512, "input_len": 256, "output_len": 1024, "request_rate": r,
           "max_concurrency": c, "dataset_path": f"/data/{f}" if f else None, "seed": 1, "range_ratio": 1.0}
          for n, d, r, c, f in workloads]
    srv = {"model": "/models/Qwen3-235B-A22B-FP8", "tp": 8, "ep": 8, "a2a": "deepep", "redundant": 32,
           "dummy_weights": False, "init_expert_location": None, "extra": [], "env": {}, **server}
    (path / "manifest.json").write_text(json.dumps({
        "policies": sorted({p[2] for p in pairs} | {"static"}), "baseline": "static", "windows": 3, "workloads": wl,
        "server": srv, "argv": ["/opt/tempo/__main__.py", "serve-bench", "--model", srv["model"], "--out", str(path)],
        "gpus": ["NVIDIA H200"] * gpus}))
    (path / "records.jsonl").write_text(json.dumps({"window": 0, "server_cmd": f"python -m sglang.launch_server "
                                                    f"--model-path {srv['model']}"}) + "\n")
    return path


GOV = ("sharegpt-rinf-c256", "sharegpt", "inf", 256, "govreport.json")
POISSON = ("sharegpt-r8-c256", "sharegpt", "8", 256, "ShareGPT_V3.json")
DECODE = ("random-rinf-c256", "random", "inf", 256, "ShareGPT_V3.json")


def test_serve_qwen_claims_from_pairs(root, tmp_path):
    pairs = [(0, GOV[0], "tempo", True, 4.0, 1.0), (1, GOV[0], "tempo", True, 5.0, 1.0), (2, GOV[0], "tempo", True, 6.5, 1.0),
             (3, GOV[0], "tempo", False, 50.0, 1.0),                  # excluded by the window rule: never counted
             (0, POISSON[0], "tempo", True, 0.0, -15.0), (1, POISSON[0], "tempo", True, 0.0, -16.0),
             (2, POISSON[0], "tempo", True, 0.0, -15.6)]
    runs = [(w, DECODE[0], p, "ok", 1000.0, t) for w in range(3) for p, t in [("tempo", 15.0), ("lp", 10.0)]]
    runs += [(w, DECODE[0], "tempo_inthread", "ok", 910.0, 1.0) for w in range(3)]
    src = serve_folder(tmp_path / "sb", {}, [GOV, POISSON, DECODE], pairs, runs)
    folder, _ = ingest.ingest(src, date="2026-11-30")
    assert folder == root / "nvidia-h200" / "2026-11-30-serve-bench-qwen3-235b-a22b-fp8-ep8"
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "pairs.csv.gz", "records.jsonl.gz",
                                                          "runs.csv.gz", "serve-bench.json.gz"]
    stored = "".join(gzip.decompress(p.read_bytes()).decode() for p in folder.glob("*.gz")) + \
        (folder / "manifest.json").read_text()
    assert "/models/" not in stored and "/data/" not in stored and str(tmp_path) not in stored
    man = json.loads((folder / "manifest.json").read_text())
    assert man["command"] == "python -m tempo serve-bench --model Qwen3-235B-A22B-FP8 --out sb"
    assert man["ep"] == 8 and man["gpus"] == 8 and man["workloads"][0]["dataset_file"] == "govreport.json"

    assert ch07.serve_qwen_govreport({}).ours == pytest.approx(5.0)
    assert ch07.serve_qwen_p99({}).ours == pytest.approx(-15.6)
    assert ch07.serve_vs_lplb({}).ours == pytest.approx(50.0)      # 15 / 10 request/s in every window
    v = ch06.serve_gil_tax({})
    assert v.ours == pytest.approx(9.0) and v.evidence == "cluster"   # 1 - 910/1000, same windows
    for cid, status in [("serve_qwen_govreport", "reproduced"), ("serve_qwen_p99", "reproduced"),
                        ("serve_vs_lplb", "reproduced")]:
        e = ledger_row(cid)
        assert e["status"] == status, cid
        assert "data/measured/nvidia-h200/2026-11-30-serve-bench-qwen3-235b-a22b-fp8-ep8" in e["provenance"]
    assert ledger_row("serve_qwen_ep16_hier")["status"] == "needs a cluster"   # no EP16 run
    assert ingest.decided(folder, "smoke").set_index("id").loc["serve_qwen_p99", "status"] == "reproduced"


def test_serve_ep16_and_tight_budget_need_their_scenario(root, tmp_path):
    c1024 = ("sharegpt-rinf-c1024", "sharegpt", "inf", 1024, "ShareGPT_V3.json")
    hier = [(w, c1024[0], "tempo_hier", True, x, 0.0) for w, x in enumerate([3.0, 4.1, 6.0])]
    flat = [(w, c1024[0], "tempo_flat", True, -3.5, 0.0) for w in range(3)]
    ingest.ingest(serve_folder(tmp_path / "ep16", {"model": "/m/dsv3-proxy", "tp": 16, "ep": 16,
                                                   "init_expert_location": "/x/drift16.json"}, [c1024], hier + flat),
                  date="2026-11-30")
    v = ch07.serve_ep16_hier({})
    assert v.ours == pytest.approx(4.1) and v.evidence == "cluster" and "flat -3.5%" in v.note
    assert ledger_row("serve_ep16_hier")["status"] == "reproduced"
    # the same numbers with fresh placement: not the drift-16 scenario -> a stand-in only
    ingest.ingest(serve_folder(tmp_path / "ep16-fresh", {"model": "/m/dsv3-proxy", "tp": 16, "ep": 16}, [c1024],
                               [(w, c1024[0], "tempo_hier", True, 9.0, 0.0) for w in range(3)]), date="2026-12-01")
    assert ch07.serve_ep16_hier({}).ours == pytest.approx(4.1)       # the cluster-grade recording still decides

    tight = [(w, DECODE[0], "tempo_noop", True, x, 0.0) for w, x in enumerate([-5.0, -5.4, -6.0])]
    tight += [(w, DECODE[0], "tempo", True, 0.3, 0.0) for w in range(3)]
    ingest.ingest(serve_folder(tmp_path / "tight", {"model": "/m/dsv3-proxy", "redundant": 16,
                                                    "init_expert_location": "/x/drift16.json"}, [DECODE], tight),
                  date="2026-11-30")
    v = ch07.serve_tight_budget({})
    assert v.ours == pytest.approx(-5.4) and v.evidence == "cluster" and "tempo +0.3%" in v.note
    assert ledger_row("serve_tight_budget")["status"] == "reproduced"


def test_a_serve_run_off_the_papers_setting_is_a_stand_in(root, tmp_path):
    pairs = [(w, GOV[0], "tempo", True, 5.0, 0.0) for w in range(3)]
    ingest.ingest(serve_folder(tmp_path / "tiny", {"model": "/m/tiny-qwen3-moe", "tp": 1, "ep": 1}, [GOV], pairs,
                               gpus=0), machine="laptop", date="2026-11-30")
    e = ledger_row("serve_qwen_govreport")
    assert e["status"] == "needs a cluster" and "CPU stand-in" in e["note"]
    assert "EP1, not EP8" in e["note"] and "model tiny-qwen3-moe, not qwen3-235b" in e["note"]
    assert "no GPUs recorded" in e["note"] and "python -m tempo ingest sb-govreport" in e["note"]


def test_the_serving_figures_draw_ingested_recordings(root, tmp_path):
    """Chapter 07's Fig. 13 finds a serve-bench run once `python -m tempo ingest` stored it (the
    stored folder holds pairs.csv.gz and the run's manifest as serve-bench.json.gz)."""
    from tempo.book.chapters import ch07_serving

    c1024 = ("sharegpt-rinf-c1024", "sharegpt", "inf", 1024, "ShareGPT_V3.json")
    hier = [(w, c1024[0], "tempo_hier", True, x, 0.0) for w, x in enumerate([3.0, 4.1, 6.0])]
    assert ch07_serving.serving_recordings(13, root=root) is None
    folder, _ = ingest.ingest(serve_folder(tmp_path / "ep16", {"model": "/m/dsv3-proxy", "tp": 16, "ep": 16},
                                           [c1024], hier), date="2026-11-30")
    got = ch07_serving.serving_recordings(13, root=root)
    assert got is not None and set(got.policy) == {"tempo_hier"}
    assert f"{folder.parent.name}/{folder.name}" in got.who.iloc[0]
    thr = got[got.metric == got.metric.iloc[0]]
    assert thr.value.iloc[0] == pytest.approx(4.1)             # the median of the kept windows
    assert ch07_serving.serving_recordings(8, root=root) is None    # an EP16 proxy run is not Fig. 8's
