"""tempo.measured: the store writes a recording whole (temporary folder, manifest with sha256,
dedupe, one rename) and the catalog reads it back, refusing one that disagrees with itself."""
import gzip
import json
import os

import pandas as pd
import pytest

from tempo.calib.record import fit_all
from tempo.measured import catalog, store


def calibration(cells=8, t0=10.0):
    s = pd.DataFrame({"G": [1, 2] * (cells // 2), "n": [1, 1, 64, 64, 256, 256, 1024, 1024][:cells]})
    s = s.assign(N=s.G * s.n, T=s.G * ((s.n + 127) // 128), kind="grid", t_us=t0 + 8.0 * s.G + 0.1 * s.G * s.n)
    files = {"samples.csv.gz": gzip.compress(s.to_csv(index=False).encode(), mtime=0),
             "fit.json": json.dumps(fit_all(s)).encode()}
    man = {"kind": "calibration", "machine": "m", "date": "2026-12-01", "backend": "deep_gemm", "shape": "dsv3",
           "device": "GPU M", "cells": len(s)}
    return files, man


def test_a_write_appears_whole_with_the_sha256_of_each_file(tmp_path):
    files, man = calibration()
    w = store.write("m", "2026-12-01-deep_gemm-dsv3", files, man, tmp_path)
    assert w.created and w.path == tmp_path / "m" / "2026-12-01-deep_gemm-dsv3"
    stored = json.loads((w.path / "manifest.json").read_text())
    assert stored["files"] == {n: {"sha256": store.sha256(d), "bytes": len(d)} for n, d in sorted(files.items())}
    assert sorted(os.listdir(tmp_path / "m")) == ["2026-12-01-deep_gemm-dsv3"]     # no temporary folder left
    s, fits, m = catalog.load_recording(w.path)
    assert len(s) == 8 and m["cells"] == 8 and "max_affine" in fits
    # the same content again: found, nothing written; other content under the same name: -2
    assert store.write("m", "2026-12-01-deep_gemm-dsv3", files, man, tmp_path) == store.Written(w.path, False)
    other, man2 = calibration(t0=11.0)
    assert store.write("m", "2026-12-01-deep_gemm-dsv3", other, man2, tmp_path).path.name == "2026-12-01-deep_gemm-dsv3-2"


def test_replace_swaps_the_folder_and_keeps_or_drops_the_progress_file(tmp_path):
    files, man = calibration()
    j = store.Journal("m", "r", "samples.partial.csv", tmp_path)
    j.reset("G,n,kind,t_us,crc32\n")
    with j:
        j.append("1,1,grid,1.0000,00000000\n")
    w = store.write("m", "r", files, {**man, "complete": False}, tmp_path, exists="replace", keep=(j.path.name,))
    assert (w.path / j.path.name).read_text().count("\n") == 2          # carried into the new folder
    assert store.write("m", "r", files, {**man, "complete": False}, tmp_path, exists="replace",
                       same=("files", "complete"), keep=(j.path.name,)).created is False
    other, _ = calibration(t0=12.0)
    w2 = store.write("m", "r", other, {**man, "complete": True}, tmp_path, exists="replace")
    assert w2.path == w.path and not (w.path / j.path.name).exists()      # gone in the same rename
    assert json.loads((w.path / "manifest.json").read_text())["complete"] is True
    assert sorted(os.listdir(tmp_path / "m")) == ["r"]


def test_without_an_exchange_the_old_folder_comes_back_after_a_crash(tmp_path, monkeypatch):
    files, man = calibration()
    old = store.write("m", "r", files, man, tmp_path, exists="replace").path
    monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    renames = []
    real = os.rename

    def crash_on_second(a, b):
        renames.append((a, b))
        if len(renames) == 3:  # new -> target (refused: not empty), target -> aside, then killed
            raise KeyboardInterrupt
        real(a, b)
    monkeypatch.setattr(store.os, "rename", crash_on_second)
    other, _ = calibration(t0=12.0)
    with pytest.raises(KeyboardInterrupt):
        store.write("m", "r", other, man, tmp_path, exists="replace")
    monkeypatch.setattr(store.os, "rename", real)
    assert not old.exists()
    monkeypatch.setattr(store, "_alive", lambda pid: False)               # the writer is gone
    store.recover("m", "r", tmp_path)
    assert catalog.load_recording(old)[0].t_us.min() == pytest.approx(18.1) and os.listdir(tmp_path / "m") == ["r"]


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    files, man = calibration()

    def boom(*a):
        raise OSError("disk full")
    monkeypatch.setattr(store.os, "rename", boom)
    with pytest.raises(OSError, match="disk full"):
        store.write("m", "r", files, man, tmp_path)
    assert os.listdir(tmp_path / "m") == []


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a/b", "..", "a\0b", "x" * 101, 7])
def test_names_that_cannot_be_one_folder_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match="^machine: "):
        store.write(name, "r", {}, {}, tmp_path)
    with pytest.raises(ValueError, match="^name: "):
        store.write("m", name, {}, {}, tmp_path)


def test_the_catalog_skips_a_recording_that_disagrees_with_itself(tmp_path):
    files, man = calibration()
    good = store.write("m", "2026-12-01-deep_gemm-dsv3", files, man, tmp_path).path
    mixed = store.write("m", "2026-12-02-deep_gemm-dsv3", calibration(t0=11.0)[0], {**man, "date": "2026-12-02"},
                        tmp_path).path
    (mixed / "samples.csv.gz").write_bytes(calibration(6)[0]["samples.csv.gz"])   # new samples beside the old fit
    counted = store.write("m", "2026-12-03-deep_gemm-dsv3", calibration(t0=12.0)[0], {**man, "date": "2026-12-03"},
                          tmp_path).path
    man3 = json.loads((counted / "manifest.json").read_text())
    (counted / "manifest.json").write_text(json.dumps({**man3, "cells": 11, "files": {}}))  # no sha: the count decides
    (tmp_path / "m" / ".2026-12-04-deep_gemm-dsv3.1.tmp").mkdir()          # a write in progress is no recording
    with pytest.warns(RuntimeWarning) as w:
        rec = catalog.recordings("calibration", root=tmp_path)
    assert list(rec.path) == [good]
    why = dict(rec.attrs["skipped"])
    assert "does not match the sha256" in why[mixed] and "says 11 cells, samples.csv.gz holds 8" in why[counted]
    assert len(w) == 2
    # the verdict is remembered while the files are unchanged, and read again when one changes
    (mixed / "samples.csv.gz").write_bytes(calibration(t0=11.0)[0]["samples.csv.gz"])
    with pytest.warns(RuntimeWarning):
        assert len(catalog.recordings("calibration", root=tmp_path)) == 2


def test_one_listing_for_every_kind(tmp_path):
    files, man = calibration()
    store.write("m", "2026-12-01-deep_gemm-dsv3", files, man, tmp_path)
    store.write("m", "2026-12-01-gpu-check", {"results.json": b"{}"}, {"kind": "gpu-check", "machine": "m",
                                                                       "date": "2026-12-01", "sections": ["env"]}, tmp_path)
    store.write("m", "2026-12-01-gpu-check", {"results.json": b'{"a": 1}'}, {"machine": "m", "date": "2026-12-01",
                                                                            "sections": ["env"]}, tmp_path)
    every = catalog.recordings(root=tmp_path)
    assert sorted(every.kind) == ["calibration", "gpu-check", "gpu-check"]
    chk = catalog.recordings("gpu-check", root=tmp_path)
    assert list(chk.columns) == catalog.COLUMNS["gpu-check"]
    assert [p.name for p in chk.path] == ["2026-12-01-gpu-check-2", "2026-12-01-gpu-check"]   # the later write first
    with pytest.raises(ValueError, match="kind must be one of"):
        catalog.recordings("calibrations", root=tmp_path)


def test_the_pick_rule():
    recs = pd.DataFrame({"backend": ["cpu", "deep_gemm", "deep_gemm", "torch_bf16"], "shape": ["q"] * 4,
                         "cells": [192, 36, 58, 58], "date": ["2026-12-03", "2026-12-02", "2026-11-30", "2026-12-01"]})
    assert catalog.rank(recs).backend.tolist() == ["torch_bf16", "deep_gemm", "deep_gemm", "cpu"]
    assert catalog.pick(recs, backend="deep_gemm").cells == 58
    assert catalog.pick(recs[recs.backend == "cpu"]).cells == 192 and catalog.pick(recs, "dsv3") is None
