"""Every file the library opens is untrusted input: no read hangs (a FIFO is refused without
blocking), none allocates past its bound (sizes, declared .npz shapes, inflation, JSON and YAML
depth, YAML aliases are checked first), a malformed or planted file is refused with an error
naming it (exit status 2 on the command line, never a traceback), and values outside their
physical range never reach a model."""
import gzip
import io
import json
import os
import shutil
import threading
import time
import tracemalloc
import zipfile
import zlib

import numpy as np
import pandas as pd
import pytest

from tempo.core import paths
from tempo.core.io import BadInput, UnsafeFile, loads_json, loads_yaml, read_json, read_npz

DEEP = 100_000
EP8 = "python -m tempo epbench --device cuda --world-size 8 --shape dsv3 --tokens 32 --steps 4"


def no_hang(fn, timeout=30.0):
    """Run ``fn`` in a thread; its result, or the exception it raised.  Fails if it blocks."""
    out = {}

    def go():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- handed back to the test
            out["error"] = exc
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn} blocked for {timeout} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def peak_bytes(fn):
    """(exception raised by ``fn`` or None, the peak bytes Python and numpy allocated meanwhile)."""
    tracemalloc.start()
    try:
        fn()
        err = None
    except Exception as exc:  # noqa: BLE001
        err = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return err, peak


def cli(argv, capsys):
    from tempo import cli as tempo_cli

    rc = tempo_cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


def npz_bytes(members: dict, compress=zipfile.ZIP_DEFLATED) -> bytes:
    """An .npz of raw members (name -> .npy bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compress) as z:
        for name, data in members.items():
            z.writestr(f"{name}.npy", data)
    return buf.getvalue()


def npy(arr) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asarray(arr), allow_pickle=False)
    return b.getvalue()


def npy_header(shape, descr="<i8") -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": descr, "fortran_order": False, "shape": shape})
    return b.getvalue()


META = npy(np.array(json.dumps({"source": "test", "top_k": 2})))


def bomb_npz(path):
    """A trace whose counts inflate to 8 MiB of zeros from a few KB on disk (over a 1 MiB limit)."""
    zeros = npy(np.zeros((64, 16, 1024), np.int64))
    path.write_bytes(npz_bytes({"counts": zeros, "metadata": META}))
    assert path.stat().st_size < 64 << 10
    return zeros


def crc_line(body):
    """One calibration partial-file line: ``body`` and its CRC-32 (so that only its values are wrong)."""
    return f"{body},{zlib.crc32(body.encode()):08x}\n"


# ------------------------------------------------------------------ the bounded readers
def test_a_fifo_is_refused_by_every_reader_without_blocking(tmp_path):
    from tempo.serving.settings import cost_model
    from tempo.world import recorded, traces

    fifo = tmp_path / "x.npz"
    os.mkfifo(fifo)
    for read in (lambda: traces.read_trace(fifo), lambda: traces.load_dump(fifo),
                 lambda: recorded.read_esft_layer(fifo), lambda: recorded.read_sglang_stat(fifo),
                 lambda: read_json(fifo, 1 << 20, follow=True), lambda: cost_model(str(fifo) + "#tile"),
                 lambda: traces.file_sha256(fifo)):
        with pytest.raises(ValueError, match="FIFO"):
            no_hang(read)


def test_json_and_yaml_depth_and_aliases_are_bounded_before_parsing():
    with pytest.raises(BadInput, match="nests deeper than 64"):
        loads_json("[" * DEEP + "]" * DEEP, "deep.json")
    assert loads_json('["[[[[", {"a": [1]}]', "ok.json") == ["[[[[", {"a": [1]}]  # brackets in strings do not count
    with pytest.raises(BadInput, match="nests deeper than 64"):
        loads_yaml("[" * DEEP + "]" * DEEP, "deep.yaml")  # PyYAML's C composer would crash the interpreter
    lol = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))
    t0 = time.perf_counter()
    with pytest.raises(BadInput, match="more than 1000000 nodes"):
        loads_yaml(lol, "bomb.yaml")  # 9^10 strings once expanded
    assert time.perf_counter() - t0 < 5
    with pytest.raises(BadInput, match="contains it"):
        loads_yaml("x: &x [*x]", "loop.yaml")
    assert loads_yaml("a: &v [1, 2]\nb: *v", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_a_huge_file_through_a_link_is_refused_by_its_size_unread(tmp_path):
    from tempo.serving.settings import cost_model

    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(3 * 2**30)  # 3 GiB, sparse: nothing to read before the size check
    link = tmp_path / "fit.json"
    link.symlink_to(big)
    err, peak = peak_bytes(lambda: cost_model(str(link)))
    assert isinstance(err, ValueError) and "TEMPO_PARAMS" in str(err) and "limit" in str(err)
    assert peak < 1 << 20


# ------------------------------------------------------------------ L4: TEMPO_PARAMS
@pytest.mark.parametrize("doc,match", [({"three_term": {"params": []}}, "must be an object with 'params'"),
                                       ({"three_term": {"params": "b=1"}}, "must be an object with 'params'"),
                                       (["three_term"], "not a calibration fit.json"),
                                       ("b=1", "not a calibration fit.json"),
                                       ({"tile": {"params": {"b": -5.0, "beta": 0.1}}}, "must be >= 0"),
                                       ({"tile": {"params": {"b": 1.0}}}, "lacks the params"),
                                       ({"tile": {"params": {"b": 1.0, "beta": 0.1}, "error": "x"}}, "error")])
def test_tempo_params_of_the_wrong_shape_is_an_error_naming_the_variable(tmp_path, doc, match):
    from tempo.serving.settings import cost_model

    (tmp_path / "fit.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="TEMPO_PARAMS") as e:
        cost_model(str(tmp_path / "fit.json"))
    assert match in str(e.value)


def test_a_deep_tempo_params_file_is_an_error_not_a_recursion(tmp_path):
    from tempo.serving.settings import cost_model

    (tmp_path / "fit.json").write_text('{"tile": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(ValueError, match="TEMPO_PARAMS.*nests deeper"):
        cost_model(str(tmp_path / "fit.json"))
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "fit.json").write_text(json.dumps({"tile": {"params": {"b": 2.0, "beta": 0.1, "b2": 1.0}}}))
    assert cost_model(str(tmp_path / "ok")).b2 == 1.0


# ------------------------------------------------------------------ L4: traces
def test_a_trace_declaring_2_to_the_40_int64_is_refused_before_allocating(tmp_path, capsys):
    from tempo.world.traces import read_trace

    path = tmp_path / "t.npz"
    path.write_bytes(npz_bytes({"counts": npy_header((2**40,)), "metadata": META}))
    assert path.stat().st_size < 1024
    err, peak = peak_bytes(lambda: read_trace(path))
    assert isinstance(err, BadInput) and "declares shape" in str(err) and str(path) in str(err)
    assert peak < 1 << 20
    rc, msg = cli(["drift-location", str(path), "-o", str(tmp_path / "d.json")], capsys)
    assert rc == 2 and "declares shape" in msg


def test_an_inflation_bomb_is_refused_before_it_inflates(tmp_path, monkeypatch):
    from tempo.world import traces

    monkeypatch.setattr(traces, "MAX_TRACE_INFLATED", 1 << 20)
    path = tmp_path / "bomb.npz"
    zeros = bomb_npz(path)
    err, peak = peak_bytes(lambda: traces.read_trace(path))
    assert isinstance(err, UnsafeFile) and "inflates to" in str(err)
    assert peak < 1 << 20
    # sizes forged small in the zip's headers: never more is inflated than declared
    raw = bytearray(path.read_bytes())
    real = len(zeros).to_bytes(4, "little")
    assert raw.count(real) == 2  # the local header and the central directory
    forged = bytes(raw).replace(real, (1000).to_bytes(4, "little"))
    path.write_bytes(forged)
    err, peak = peak_bytes(lambda: traces.read_trace(path))
    assert isinstance(err, BadInput) and peak < 1 << 20


def test_deep_metadata_booleans_and_empty_traces_are_refused(tmp_path):
    from tempo.world.traces import read_trace, write_trace

    cases = {
        "deep": {"counts": npy(np.ones((2, 1, 4), np.int64)),
                 "metadata": npy(np.array("[" * 50_000 + "]" * 50_000))},
        "bools": {"counts": npy(np.ones((2, 1, 4), bool)), "metadata": META},
        "empty": {"counts": npy(np.ones((0, 1, 4), np.int64)), "metadata": META},
        "pickled": {"counts": npy(np.ones((2, 1, 4), np.int64)),
                    "metadata": npy_header((1,), "|O") + b"\x80\x04N."},
        "disagrees": {"counts": npy(np.ones((2, 1, 4), np.int64)),
                      "metadata": npy(np.array(json.dumps({"top_k": 9, "history_steps": 5})))},
    }
    for name, members in cases.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(npz_bytes(members))
        with pytest.raises(BadInput, match=str(path)):
            read_trace(path)
    with pytest.raises(ValueError, match="booleans"):
        write_trace(tmp_path / "w.npz", np.ones((2, 1, 4), bool))
    with pytest.raises(ValueError, match="at least one step"):
        write_trace(tmp_path / "w.npz", np.ones((0, 1, 4), np.int64))
    write_trace(tmp_path / "ok.npz", np.ones((2, 1, 4), np.int64), top_k=2, step_tokens=[2, 2], history_steps=1)
    counts, meta = read_trace(tmp_path / "ok.npz")
    assert counts.shape == (2, 1, 4) and meta["top_k"] == 2


def hostile_trace(tmp_path, case):
    """A trace file the readers must refuse: a FIFO, 50,000-deep metadata, booleans, or an inflation bomb."""
    path = tmp_path / f"{case}.npz"
    if case == "fifo":
        os.mkfifo(path)
    elif case == "bomb":
        bomb_npz(path)
    else:
        counts = np.ones((2, 1, 4), bool if case == "bools" else np.int64)
        meta = npy(np.array("[" * 50_000 + "]" * 50_000)) if case == "deep" else META
        path.write_bytes(npz_bytes({"counts": npy(counts), "metadata": meta}))
    return path


@pytest.mark.parametrize("case,match", [("fifo", "regular file"), ("deep", "nests deeper than"),
                                        ("bools", "holds booleans"), ("bomb", "inflates to")])
def test_drift_location_refuses_a_hostile_trace_with_a_usage_error_and_writes_nothing(tmp_path, monkeypatch,
                                                                                       capsys, case, match):
    """``python -m tempo drift-location`` refuses a FIFO (without blocking on it), deep metadata, a
    trace of booleans and an inflation bomb: exit status 2, a usage message naming the file and
    why, no traceback, and no output file."""
    from tempo.world import traces

    monkeypatch.setattr(traces, "MAX_TRACE_INFLATED", 1 << 20)
    path, out = hostile_trace(tmp_path, case), tmp_path / "d.json"
    rc, msg = no_hang(lambda: cli(["drift-location", str(path), "--k", "1", "-o", str(out)], capsys),
                      timeout=10)
    assert rc == 2 and msg.startswith("usage: python -m tempo drift-location")
    assert str(path) in msg and match in msg
    assert not out.exists()


def test_recorded_sources_are_read_bounded(tmp_path, monkeypatch):
    from tempo.world import recorded

    (tmp_path / "stat.json").write_text('{"logical_count": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(BadInput, match="nests deeper"):
        recorded.read_sglang_stat(tmp_path / "stat.json")
    monkeypatch.setattr(recorded, "MAX_SOURCE_BYTES", 1 << 20)
    (tmp_path / "expert_weights_1.txt.gz").write_bytes(gzip.compress(b"0\t1\t\t0.5\t0.5\n" * (1 << 18)))
    err, peak = peak_bytes(lambda: recorded.read_esft_layer(tmp_path / "expert_weights_1.txt.gz", top_k=2))
    assert isinstance(err, UnsafeFile) and "inflates past" in str(err)
    assert peak < 4 << 20  # the inflated text stops at the 1 MiB bound (plus gzip's own buffers)


# ------------------------------------------------------------------ ingest
@pytest.fixture
def root(tmp_path, monkeypatch):
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path / "measured")
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    return tmp_path / "measured"


def epbench_csv(path, times=None, policies=("static", "tempo"), steps=4):
    rows = [{"step": s, "policy": p, "order": i, "layer_us": 100.0 + i, "expert_us": 80.0 + i, "model_us": 90.0 + i,
             "kernel": "deep_gemm_fp8_masked"} for s in range(steps) for i, p in enumerate(policies)]
    df = pd.DataFrame(rows)
    for col, v in (times or {}).items():
        df.loc[0, col] = v
    df.to_csv(path, index=False)
    return path


def test_ingest_refuses_non_positive_times_and_policies_that_never_share_a_step(root, tmp_path, capsys):
    from tempo.book import ingest

    for col in ("layer_us", "expert_us", "model_us"):
        with pytest.raises(ingest.IngestError, match="> 0"):
            ingest.prepare(epbench_csv(tmp_path / f"{col}.csv", {col: 0.0}), machine="m", command=EP8)
    df = pd.read_csv(epbench_csv(tmp_path / "x.csv"))
    df.loc[df.policy == "tempo", "step"] += 10  # tempo and static never on one step
    df.to_csv(tmp_path / "apart.csv", index=False)
    with pytest.raises(ingest.IngestError, match="exactly once"):
        ingest.prepare(tmp_path / "apart.csv", machine="m", command=EP8)
    with pytest.raises(ingest.IngestError, match="names the policies"):
        ingest.prepare(tmp_path / "x.csv", machine="m", command=EP8 + " --policies static,uniform,tempo")
    rc, msg = cli(["ingest", str(tmp_path / "layer_us.csv"), "--machine", "m", "--command", EP8], capsys)
    assert rc == 2 and "> 0" in msg
    assert ingest.prepare(tmp_path / "x.csv", machine="m", command=EP8 + " --policies static,tempo").kind == "epbench"


def serve_folder(path, manifest_policies, records=None):
    path.mkdir()
    pd.DataFrame({"window": [0, 1], "workload": ["w", "w"], "policy": ["tempo", "tempo"], "kept": [True, True]}) \
        .to_csv(path / "pairs.csv", index=False)
    (path / "manifest.json").write_text(json.dumps({"policies": manifest_policies, "baseline": "static",
                                                    "workloads": [{"name": "w"}], "gpus": ["NVIDIA H200"]}))
    if records is not None:
        (path / "records.jsonl").write_text(records)
    return path


def test_ingest_refuses_a_manifest_that_disagrees_with_its_table_and_a_deep_record(root, tmp_path, capsys):
    from tempo.book import ingest

    with pytest.raises(ingest.IngestError, match=r"lists policies \['uniform'\]"):
        ingest.prepare(serve_folder(tmp_path / "a", ["static", "tempo", "uniform"]))
    deep = serve_folder(tmp_path / "b", ["static", "tempo"], records='{"a": 1}\n' + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(ingest.IngestError, match="records.jsonl line 2 nests deeper"):
        ingest.prepare(deep)
    rc, msg = cli(["ingest", str(deep)], capsys)
    assert rc == 2 and "nests deeper" in msg
    assert ingest.prepare(serve_folder(tmp_path / "c", ["static", "tempo"], '{"a": 1}\n')).kind == "serve-bench"


def calib_folder(path, fits=None, cells=None):
    from tempo.calib import record

    path.mkdir()
    s = pd.DataFrame({"G": [1] * 4 + [8] * 4, "n": [1, 64, 256, 1024] * 2})
    s = s.assign(N=s.G * s.n, T=s.G * np.ceil(s.n / 128).astype(int), kind="grid",
                 t_us=10 + s.G * 8.0 + 0.1 * s.G * s.n)
    s.to_csv(path / "samples.csv.gz", index=False, compression="gzip")
    (path / "fit.json").write_text(json.dumps(fits or record.fit_all(s)))
    (path / "manifest.json").write_text(json.dumps({"machine": "nvidia-h200", "backend": "deep_gemm", "shape": "dsv3",
                                                    "date": "2026-11-30", "cells": cells or len(s)}))
    return path


def test_ingest_refuses_a_fit_outside_its_physical_range_and_a_cell_count_that_disagrees(root, tmp_path):
    from tempo.book import ingest

    bad = {"max_affine": {"params": {"a": 1.0, "b": -5.0, "c": 1.0, "beta": 0.1}, "error": 0.1}}
    with pytest.raises(ingest.IngestError, match="b = -5.0"):
        ingest.prepare(calib_folder(tmp_path / "a", fits=bad))
    with pytest.raises(ingest.IngestError, match="says 9 cells"):
        ingest.prepare(calib_folder(tmp_path / "b", cells=9))
    assert ingest.prepare(calib_folder(tmp_path / "c")).kind == "calibration"


def test_ingest_refuses_a_boolean_or_empty_trace(root, tmp_path):
    from tempo.book import ingest

    for name, counts in (("bools", np.ones((2, 1, 4), bool)), ("empty", np.ones((0, 1, 4), np.int64))):
        (tmp_path / f"{name}.npz").write_bytes(npz_bytes({"counts": npy(counts), "metadata": META}))
        with pytest.raises(ingest.IngestError, match="booleans|at least one step"):
            ingest.prepare(tmp_path / f"{name}.npz", machine="m")
    (tmp_path / "huge.npz").write_bytes(npz_bytes({"counts": npy_header((2**40,)), "metadata": META}))
    with pytest.raises(ingest.IngestError, match="declares shape"):
        ingest.prepare(tmp_path / "huge.npz", machine="m")


def test_ingest_refuses_an_inflation_bomb_at_the_cli_and_stores_nothing(root, tmp_path, monkeypatch, capsys):
    """``python -m tempo ingest`` checks a trace's inflated size against its own read limit before
    inflating it: exit status 2 naming the file, and nothing under the recordings root."""
    from tempo.book import ingest

    monkeypatch.setattr(ingest, "MAX_READ", 1 << 20)
    path, store_root = tmp_path / "bomb.npz", tmp_path / "store"
    bomb_npz(path)
    store_root.mkdir()
    rc, msg = cli(["ingest", str(path), "--machine", "m", "--root", str(store_root)], capsys)
    assert rc == 2 and msg.startswith("usage: python -m tempo ingest")
    assert str(path) in msg and "bomb.npz inflates to" in msg and "1048576-byte limit" in msg
    assert list(store_root.iterdir()) == [] and not root.exists()


def test_a_stored_recording_whose_manifest_disagrees_with_its_table_is_skipped(root, tmp_path):
    from tempo.book import ingest
    from tempo.measured import catalog

    folder, _ = ingest.ingest(epbench_csv(tmp_path / "x.csv"), machine="m", command=EP8)
    assert len(catalog.recordings("epbench", root)) == 1
    man = json.loads((folder / "manifest.json").read_text())
    man["policies"] = ["static", "tempo", "uniform"]  # a hand edit, or a foreign writer
    (folder / "manifest.json").write_text(json.dumps(man))
    with pytest.warns(RuntimeWarning, match="uniform"):
        recs = catalog.recordings("epbench", root)
    assert recs.empty and len(recs.attrs["skipped"]) == 1


# ------------------------------------------------------------------ L7: planted files
def planted_entry(k, value, rows=1, mac=b""):
    header = {"mark": "tempo-cache-entry/3", "key": k, "experiment": "exp", "rows": rows,
              "columns": [{"name": "v", "dtype": "<f8", "as": "npy"}] if rows == 1 else []}
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), np.uint8)}
    if rows == 1:
        arrays["c0"] = np.array([value])
    arrays["mac"] = np.frombuffer(mac or bytes(64), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue(), arrays


def test_a_planted_cache_entry_with_the_right_key_and_mark_is_recomputed(tmp_path, monkeypatch):
    import hashlib

    from tempo.studies import cache

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    k = cache.key("exp", {"x": 1})
    path = cache.entry_path("exp", {"x": 1})
    fn = lambda cfg: pd.DataFrame({"v": [float(cfg["x"])]})  # noqa: E731
    assert cache.cached("exp", {"x": 1}, fn).v.tolist() == [1.0]  # the real entry
    data, arrays = planted_entry(k, 666.0)
    plain = hashlib.sha256(b"".join(a.tobytes() for n, a in sorted(arrays.items()) if n != "mac")).hexdigest()
    for mac in (b"", plain.encode()):  # no checksum, a checksum anyone can compute
        path.write_bytes(planted_entry(k, 666.0, mac=mac)[0])
        assert cache.cached("exp", {"x": 1}, fn).v.tolist() == [1.0]
    # an entry that declares 10^15 rows is refused even when its checksum is right
    data, arrays = planted_entry(k, 0.0, rows=10**15)
    path.write_bytes(planted_entry(k, 0.0, rows=10**15, mac=cache._mac(arrays).encode())[0])
    assert cache._load(path, k) is None
    assert cache.cached("exp", {"x": 1}, fn).shape == (1, 1)
    # a key file readable by others is replaced (and every entry signed with it recomputed)
    os.chmod(tmp_path / "cache" / ".key", 0o644)
    cache._SECRETS.clear()
    calls = []
    cache.cached("exp", {"x": 1}, lambda cfg: calls.append(1) or fn(cfg))
    assert calls == [1] and (os.stat(tmp_path / "cache" / ".key").st_mode & 0o077) == 0


def test_a_yaml_alias_bomb_in_readings_fails_the_ledger_fast(tmp_path, monkeypatch, capsys):
    from tempo.paper import claims_file, readings

    paper = tmp_path / "paper"
    shutil.copytree(paths.PAPER, paper)
    lol = "\n".join(["bomb:", '  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
                    + [f"  {chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]"
                       for i in range(9)])
    text = (paper / "readings.yaml").read_text()
    (paper / "readings.yaml").write_text(lol + "\n" + text.replace("why: >-", "why: *j\n    why_was: >-", 1))
    monkeypatch.setattr(paths, "PAPER", paper)
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    claims_file._yaml.cache_clear()
    t0 = time.perf_counter()
    with pytest.raises(BadInput, match="readings.yaml expands to more than"):
        readings.specs()
    rc, msg = cli(["ledger", "--profile", "smoke"], capsys)
    assert rc == 2 and "readings.yaml" in msg
    assert time.perf_counter() - t0 < 60
    (paper / "readings.yaml").write_text("readings:\n  - just a string\n")
    with pytest.raises(BadInput, match=r"readings.yaml\['readings'\]\[0\].*not of type 'object'"):
        readings._load(str(paper / "readings.yaml"))
    (paper / "claims.yaml").write_text("claims: {id: x}\n")
    claims_file._yaml.cache_clear()
    with pytest.raises(BadInput, match=r"claims.yaml\['claims'\]"):
        claims_file.claim_rows()
    claims_file._yaml.cache_clear()


def test_partial_calibration_lines_outside_physical_ranges_are_dropped_naming_the_line(tmp_path, caplog):
    from tempo.calib.record import _HEADER, read_partial

    p = tmp_path / "samples.partial.csv"
    p.write_text(_HEADER + "\n" + crc_line("1,1,grid,10.0") + crc_line(f"{10**30},1,grid,10.0")
                 + crc_line("2,1,grid,1e308") + crc_line("3,1,grid,0.0") + crc_line(f"4,{2**40},grid,5.0")
                 + crc_line("5,5,grid,12.5"))
    with caplog.at_level("WARNING"):
        cells, lines, dropped = read_partial(p)
    assert cells.G.tolist() == [1, 5] and dropped["malformed"] == 4
    for no in (3, 4, 5, 6):
        assert f"line {no} dropped" in caplog.text
    assert "t_us = 1e+308 outside" in caplog.text and "n = 1099511627776 outside" in caplog.text


def test_resuming_a_calibration_drops_out_of_range_lines_and_keeps_the_valid_cells(tmp_path, caplog):
    """Resuming a run whose partial file holds lines with a valid CRC-32 but G = 10^30 or
    t_us = 1e308 raises nothing: those lines are dropped (and logged), the valid cells are
    returned, and the file is rewritten with only them."""
    from tempo.calib.record import _HEADER, PARTIAL, resume_partial
    from tempo.measured import store

    journal = store.Journal("m", "run", PARTIAL, tmp_path)
    keep = crc_line("1,1,grid,10.0") + crc_line("5,5,grid,12.5")
    journal.reset(_HEADER + "\n" + crc_line("1,1,grid,10.0") + crc_line(f"{10**30},1,grid,10.0")
                  + crc_line("2,1,grid,1e308") + crc_line("5,5,grid,12.5"))
    with caplog.at_level("WARNING"):
        cells = resume_partial(journal)
    assert cells.G.tolist() == [1, 5] and cells.n.tolist() == [1, 5] and cells.t_us.tolist() == [10.0, 12.5]
    assert journal.path.read_text() == _HEADER + "\n" + keep
    assert "line 3 dropped" in caplog.text and "line 4 dropped" in caplog.text
    assert "t_us = 1e+308 outside" in caplog.text
    assert "kept 2 cells; dropped 2 malformed" in caplog.text


def test_cost_model_time_refuses_missing_arguments():
    from tempo.core.cost import CostModel

    m = CostModel(a=1.0, b=2.0, c=0.0, beta=0.1)
    with pytest.raises(ValueError, match="G is missing"):
        m.time(None, [1.0])
    with pytest.raises(ValueError, match="N is missing"):
        m.time([1.0], None)
    with pytest.raises(ValueError, match="T holds NaN"):
        m.time([1.0], [1.0], [float("nan")])
    with pytest.raises(ValueError, match="N must be numbers"):
        m.time([1.0], ["x"])
    assert m.time([1.0], [10.0]).tolist() == [3.0]


def test_a_result_meta_and_a_cache_header_are_read_bounded(tmp_path, monkeypatch):
    from tempo.studies.results import Results

    monkeypatch.setattr(paths, "BUILD", tmp_path)
    r = Results("smoke")
    r.dir.mkdir(parents=True, exist_ok=True)
    (r.dir / "x.csv").write_text("a\n1\n")
    (r.dir / "x.meta.json").write_text("[" * DEEP + "]" * DEEP)
    assert r.meta("x") is None and not r.exists("x")
    os.mkfifo(r.dir / "y.meta.json")
    assert no_hang(lambda: Results("smoke").meta("y")) is None


def test_read_npz_reads_what_numpy_writes():
    arrays = {"a": np.arange(6, dtype=np.int16).reshape(2, 3), "f": np.asfortranarray(np.ones((3, 2))),
              "s": np.array("text"), "e": np.zeros((0, 4))}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    back = read_npz(buf.getvalue(), "t.npz", 1 << 20, 1 << 20)
    assert sorted(back) == sorted(arrays)
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)
    back["a"][0, 0] = 9  # writable
