"""Recordings and cache entries are untrusted input: ingest never writes outside its root, one bad recording never breaks the
ledger, no read hangs on a FIFO or runs through /dev/zero or a gzip bomb, no link is followed,
an output never replaces a device node, a planted cache entry runs nothing."""
import gzip
import json
import os
import threading

import numpy as np
import pandas as pd
import pytest

from tempo.book import ingest
from tempo.core import paths
from tempo.core.io import UnsafeFile, atomic_write_bytes, gunzip_limited, read_regular

EP8 = "python -m tempo epbench --device cuda --world-size 8 --shape dsv3 --tokens 32 --steps 10"


@pytest.fixture
def root(tmp_path, monkeypatch):
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    return tmp_path / "measured"


def calib_folder(path, manifest=None, samples=None, fits=None):
    from tempo.calib import record

    path.mkdir(parents=True)
    s = pd.DataFrame({"G": [1] * 4 + [8] * 4, "n": [1, 64, 256, 1024] * 2})
    s = s.assign(N=s.G * s.n, T=s.G * np.ceil(s.n / 128).astype(int), kind="grid", t_us=10 + s.G * 8.0 + 0.1 * s.G * s.n)
    fit = record.fit_all(s) if fits is None else fits
    if samples is not None:
        s = samples(s)
    s.to_csv(path / "samples.csv.gz", index=False, compression="gzip")
    (path / "fit.json").write_text(json.dumps(fit))
    man = {"machine": "nvidia-h200", "device": "NVIDIA H200", "backend": "deep_gemm", "shape": "dsv3",
           "date": "2026-11-30", "cells": int(len(s))}
    man.update(manifest or {})
    (path / "manifest.json").write_text(json.dumps({k: v for k, v in man.items() if v is not ...}))
    return path


def epbench_csv(path, extra_cols=0):
    rows = [{"step": s, "policy": p, "order": i, "layer_us": 100.0 + i, "expert_us": 80.0 + i, "model_us": 90.0 + i,
             "kernel": "deep_gemm_fp8_masked"} for s in range(4) for i, p in enumerate(("static", "tempo"))]
    df = pd.DataFrame(rows)
    for k in range(extra_cols):
        df[f"x{k}"] = 0
    df.to_csv(path, index=False)
    return path


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# ------------------------------------------------------------------ names and the root
@pytest.mark.parametrize("field,value", [("machine", "../../../escaped"), ("machine", "/abs/escaped"),
                                         ("machine", "a/b"), ("machine", ".."), ("machine", "x\x00y"),
                                         ("machine", 5), ("backend", "../../up"), ("shape", "a/../../b"),
                                         ("date", "../../2026-01-01"), ("date", 20260102), ("date", "2026-13-45")])
def test_a_manifest_cannot_steer_ingest_outside_its_root(root, tmp_path, field, value):
    src = calib_folder(tmp_path / "in" / "cal", {field: value})
    before = files_under(tmp_path)
    with pytest.raises(ingest.IngestError) as e:
        ingest.ingest(src)
    assert field in str(e.value)
    assert files_under(tmp_path) == before          # nothing written anywhere
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "escaped").exists()


def test_cli_reports_a_bad_manifest_field_as_a_usage_error(root, tmp_path, capsys):
    src = calib_folder(tmp_path / "in" / "cal", {"machine": "../../../X"})
    with pytest.raises(SystemExit) as e:
        ingest.main([str(src), "--root", str(root)])
    assert e.value.code == 2 and "machine" in capsys.readouterr().err


def test_unicode_machine_and_label_names_are_accepted(root, tmp_path):
    folder, created = ingest.ingest(epbench_csv(tmp_path / "r.csv"), machine="機械", label="ß", date="2026-11-30",
                                    command=EP8)
    assert created and folder.parent == root / "機械" and folder.name.endswith("-ß")


def test_the_final_folder_is_checked_to_lie_inside_the_root(root, tmp_path):
    plan = ingest.prepare(epbench_csv(tmp_path / "r.csv"), machine="m", date="2026-11-30", command=EP8)
    root.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "m").symlink_to(outside)                  # a planted link under the root
    with pytest.raises(ingest.IngestError, match="outside the recordings root|symbolic link"):
        ingest.write(plan, root)
    assert list(outside.iterdir()) == []
    plan.machine = "../x"                             # a plan altered after prepare
    with pytest.raises(ingest.IngestError, match="--machine"):
        ingest.write(plan, root)


# ------------------------------------------------------------------ every field typed before writing
@pytest.mark.parametrize("case", ["G_text", "n_text", "fit_list", "fit_params_text", "kind_bad", "cells_text"])
def test_a_calibration_with_bad_fields_is_refused_before_anything_is_written(root, tmp_path, case):
    kw = {"G_text": dict(samples=lambda s: s.assign(G="x")), "n_text": dict(samples=lambda s: s.assign(n="x")),
          "fit_list": dict(fits=[]), "fit_params_text": dict(fits={"max_affine": {"params": {"b": "x"}, "error": 0}}),
          "kind_bad": dict(samples=lambda s: s.assign(kind="a b;c")),
          "cells_text": dict(manifest={"cells": "many"})}[case]
    src = calib_folder(tmp_path / "in" / "cal", **kw)
    with pytest.raises(ingest.IngestError):
        ingest.ingest(src)
    assert not root.exists() or files_under(root) == []


@pytest.mark.parametrize("manifest,field", [(b"[1, 2]", "JSON object"), (b'{"server": "x"}', "server"),
                                            (b'{"gpus": 5}', "gpus"), (b"[" * 100000 + b"]" * 100000, "nests"),
                                            (b'{"workloads": [{"dataset_path": 3}]}', "dataset_path")])
def test_a_malformed_serve_manifest_is_a_usage_error_naming_the_field(root, tmp_path, capsys, manifest, field):
    d = tmp_path / "serve"
    d.mkdir()
    pd.DataFrame({"window": [0, 0], "workload": ["w", "w"], "policy": ["static", "tempo"], "kept": [True, True]}) \
        .to_csv(d / "pairs.csv", index=False)
    (d / "manifest.json").write_bytes(manifest)
    with pytest.raises(SystemExit) as e:
        ingest.main([str(d), "--machine", "m", "--root", str(root)])
    assert e.value.code == 2 and field in capsys.readouterr().err


@pytest.mark.parametrize("flags", ["--tokens -5", "--world-size 0", "--skew nan", "--skew inf", "--steps 0"])
def test_epbench_command_values_are_checked(root, tmp_path, flags):
    with pytest.raises(ingest.IngestError) as e:
        ingest.prepare(epbench_csv(tmp_path / "r.csv"), machine="m", command=f"{EP8} {flags}")
    assert e.value.arg == "--command" and flags.split()[0] in str(e.value)


# ------------------------------------------------------------------ what is read
def test_a_fifo_is_refused_without_hanging(root, tmp_path):
    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    err = []

    def go():
        try:
            ingest.prepare(fifo, machine="m", command=EP8)
        except ingest.IngestError as exc:
            err.append(str(exc))
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "ingest blocked on a FIFO"
    assert err and "FIFO" in err[0]


def test_a_link_to_dev_zero_is_not_read(root, tmp_path):
    link = tmp_path / "x.csv"
    link.symlink_to("/dev/zero")
    with pytest.raises(ingest.IngestError, match="symbolic link"):
        ingest.prepare(link, machine="m", command=EP8)
    with pytest.raises(UnsafeFile, match="device node"):
        read_regular("/dev/zero", 1 << 20)


def test_a_gzip_bomb_stops_at_the_cap(root, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_READ", 4 << 20)
    bomb = gzip.compress(b"step,policy,layer_us,expert_us,model_us\n" + b"0" * (64 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    (tmp_path / "x.csv.gz").write_bytes(bomb)
    with pytest.raises(ingest.IngestError, match="inflates past"):
        ingest.prepare(tmp_path / "x.csv.gz", machine="m", command=EP8)
    with pytest.raises(UnsafeFile):
        gunzip_limited(bomb, 1 << 20)


def test_a_csv_with_a_million_columns_is_refused_at_its_header(root, tmp_path):
    (tmp_path / "x.csv").write_text("step,policy,layer_us,expert_us,model_us," + ",".join(f"c{i}" for i in range(10**6))
                                    + "\n")
    with pytest.raises(ingest.IngestError, match="columns, over the limit"):
        ingest.prepare(tmp_path / "x.csv", machine="m", command=EP8)


@pytest.mark.parametrize("name", ["pairs.csv", "manifest.json", "runs.csv"])
def test_symlinked_files_in_a_folder_are_not_followed(root, tmp_path, name):
    secret = tmp_path / "secret.txt"
    secret.write_text("window,workload,policy,kept,TOPSECRET\n0,w,tempo,True,1234\n")
    d = tmp_path / "serve"
    d.mkdir()
    pd.DataFrame({"window": [0], "workload": ["w"], "policy": ["tempo"], "kept": [True]}).to_csv(d / "pairs.csv", index=False)
    (d / name).unlink(missing_ok=True)
    (d / name).symlink_to(secret)
    with pytest.raises(ingest.IngestError, match="symbolic link"):
        ingest.ingest(d, machine="m")
    assert not root.exists() or "TOPSECRET" not in "".join(
        gzip.decompress(p.read_bytes()).decode() for p in root.rglob("*.gz"))


# ------------------------------------------------------------------ concurrent ingests
def test_concurrent_ingests_of_one_file_store_one_recording(root, tmp_path):
    src = epbench_csv(tmp_path / "r.csv")
    plans = [ingest.prepare(src, machine="m", date="2026-11-30", command=EP8) for _ in range(8)]
    barrier = threading.Barrier(len(plans))
    got = []

    def go(p):
        barrier.wait()
        got.append(ingest.write(p, root))
    ts = [threading.Thread(target=go, args=(p,)) for p in plans]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert len(got) == 8 and sum(created for _, created in got) == 1
    assert len({folder for folder, _ in got}) == 1 and len(list((root / "m").iterdir())) == 1


# ------------------------------------------------------------------ the ledger survives a bad recording
def test_one_poisoned_recording_is_skipped_with_a_warning_and_the_ledger_still_runs(root, tmp_path, monkeypatch):
    from tempo.book import claims
    from tempo.measured import catalog

    good = calib_folder(root / "nvidia-h200" / "2026-11-30-deep_gemm-dsv3")
    bad = calib_folder(root / "nvidia-h200" / "2026-12-01-deep_gemm-dsv3", samples=lambda s: s.assign(G="x"), fits=[])
    link = root / "nvidia-h200" / "2026-12-02-deep_gemm-dsv3"
    link.mkdir()
    (link / "manifest.json").symlink_to(good / "manifest.json")
    ep = root / "m" / "2026-12-01-epbench-x"
    ep.mkdir(parents=True)
    (ep / "manifest.json").write_text(json.dumps({"kind": "epbench", "machine": "m", "date": "2026-12-01"}))
    (ep / "epbench.csv.gz").write_bytes(gzip.compress(b"step,policy\nx,y\n"))
    with pytest.warns(RuntimeWarning, match="2026-12-01-deep_gemm-dsv3"):
        rec = catalog.recordings("calibration")
    assert list(rec.path) == [good] and len(rec.attrs["skipped"]) == 2   # the bad one and the linked manifest
    with pytest.warns(RuntimeWarning, match="2026-12-01-epbench-x"):
        assert catalog.recordings("epbench").empty
    row = {r["id"]: r for r in claims.claim_rows()}["fit_err_dsv3"]
    with pytest.warns(RuntimeWarning):
        e = claims.evaluate(row, "smoke")
    assert "2026-11-30-deep_gemm-dsv3" in e["provenance"]
    with pytest.warns(RuntimeWarning):
        df = claims.build_ledger("smoke", write=False)
    assert len(df) > 0


# ------------------------------------------------------------------ outputs
def test_an_output_never_replaces_a_device_node_or_a_fifo(tmp_path):
    import argparse

    from tempo.core.argtypes import output_file

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    targets = [fifo]
    try:
        os.mknod(tmp_path / "dev", 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))
        targets.append(tmp_path / "dev")
    except (PermissionError, OSError):
        pass  # not root: the FIFO stands for the device node (both are "not a regular file")
    for t in targets:
        with pytest.raises(argparse.ArgumentTypeError, match="not a regular file"):
            output_file(str(t))
        with pytest.raises(UnsafeFile):
            atomic_write_bytes(t, b"x")
        assert not t.is_file() and t.exists()


def test_import_trace_and_drift_location_refuse_a_fifo_output(tmp_path, capsys):
    from tempo import cli

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    dump = tmp_path / "d.pt"
    dump.write_bytes(b"x")
    for argv in (["import-trace", str(dump), "-o", str(fifo), "--top-k", "2"],
                 ["drift-location", str(dump), "-o", str(fifo)]):
        assert cli.main(argv) == 2
        assert "not a regular file" in capsys.readouterr().err
        assert fifo.exists() and not fifo.is_file()
