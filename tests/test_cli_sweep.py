"""Every ``python -m tempo`` command against bad arguments and bad files (reliability review
D3, D6, D7, D15): a usage error exits 2 with a message naming the argument, failed work exits 1,
nothing ends in a traceback, nothing invalid exits 0, and no input file is executed.

The sweep runs in-process through :func:`tempo.cli.main` with ``TEMPO_DEBUG=1``, so any
exception that escapes a command (what a user would see as a traceback) is counted, not
swallowed by the catch-all."""
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tempo import cli
from tempo.world.traces import write_trace

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch")


class _Evil:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bad_files(d):
    """name -> path of malformed inputs."""
    f = {}
    f["missing"] = d / "missing.pt"
    (d / "empty").write_bytes(b"")
    f["empty"] = d / "empty"
    (d / "garbage").write_bytes(os.urandom(64) + b"\x00garbage")
    f["garbage"] = d / "garbage"
    (d / "adir").mkdir()
    f["directory"] = d / "adir"
    (d / "evil.pt").write_bytes(pickle.dumps(_Evil(d / "PWNED")))
    f["evil_pickle"] = d / "evil.pt"
    good = d / "good.npz"
    write_trace(good, np.ones((2, 2, 8), np.int64), model="m")
    f["good_trace"] = good
    (d / "truncated.npz").write_bytes(good.read_bytes()[:40])
    f["truncated_zip"] = d / "truncated.npz"
    np.savez(d / "nokeys.npz", x=np.zeros(3))
    f["npz_without_keys"] = d / "nokeys.npz"
    np.savez(d / "badjson.npz", counts=np.ones((1, 1, 4), np.int64), metadata=np.array("{not json"))
    f["npz_bad_json"] = d / "badjson.npz"
    np.savez(d / "neg.npz", counts=-np.ones((1, 2, 8), np.int64), metadata=np.array("{}"))
    f["npz_negative_counts"] = d / "neg.npz"
    np.savez(d / "zero.npz", counts=np.zeros((1, 2, 0), np.int64), metadata=np.array("{}"))
    f["npz_zero_experts"] = d / "zero.npz"
    np.savez(d / "nosteps.npz", counts=np.zeros((0, 2, 8), np.int64), metadata=np.array("{}"))
    f["npz_zero_steps"] = d / "nosteps.npz"
    np.savez(d / "flat.npz", counts=np.ones(8, np.int64), metadata=np.array("{}"))
    f["npz_1d_counts"] = d / "flat.npz"
    np.savez(d / "float.npz", counts=np.full((1, 2, 8), 0.5), metadata=np.array("{}"))
    f["npz_fractional_counts"] = d / "float.npz"
    with zipfile.ZipFile(d / "objarr.npz", "w") as z:  # an object array needs pickle: refused
        import io

        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        z.writestr("counts.npy", buf.getvalue())
        z.writestr("metadata.npy", buf.getvalue())
    f["npz_object_array"] = d / "objarr.npz"
    (d / "afile").write_text("x")
    f["a_file"] = d / "afile"
    if HAS_TORCH:
        import torch

        def save(name, obj):
            torch.save(obj, d / name)
            f[name] = d / name

        p2l = [[0, 1, 2, 0]]
        save("list_dump", [1, 2, 3])
        save("empty_dict", {})
        save("counts_1d", {"logical_count": torch.ones(3, dtype=torch.int64)})
        save("counts_2d", {"logical_count": torch.ones(2, 3, dtype=torch.int64)})  # an older SGLang's whole-run sum
        save("counts_negative", {"logical_count": -torch.ones(1, 2, 3, dtype=torch.int64)})
        save("counts_float", {"logical_count": torch.rand(1, 2, 3)})
        save("counts_string", {"logical_count": "many"})
        save("counts_zero_experts", {"logical_count": torch.zeros(1, 2, 0, dtype=torch.int64)})
        rec = {"forward_pass_id": 0, "rank": 0, "global_physical_count": [[1, 2, 3, 4]]}
        save("pp_wrong_shape", {"records": [{**rec, "global_physical_count": [[1, 2, 3]]}],
                                "last_physical_to_logical_map": p2l})
        save("pp_string_id", {"records": [{**rec, "forward_pass_id": "zero"}], "last_physical_to_logical_map": p2l})
        save("pp_missing_key", {"records": [{"rank": 0}], "last_physical_to_logical_map": p2l})
        save("pp_1d_map", {"records": [rec], "last_physical_to_logical_map": [0, 1, 2, 0]})
        save("pp_all_empty_map", {"records": [rec], "last_physical_to_logical_map": [[-1, -1, -1, -1]]})
        save("pp_negative", {"records": [{**rec, "global_physical_count": [[1, -2, 3, 4]]}],
                             "last_physical_to_logical_map": p2l})
        save("pp_records_not_list", {"records": 5, "last_physical_to_logical_map": p2l})
        save("good_stat", {"logical_count": torch.randint(0, 50, (3, 2, 16))})
    return f


def _cases(f, d):
    """(argv, expected exit code)."""
    out = str(d / "out.npz")
    nodir = str(d / "no" / "such" / "x.csv")
    c = []
    # the command table
    c += [([], 0), (["frobnicate"], 2), (["policies", "--bogus"], 2), (["params", "extra", "args"], 2),
          (["policies", "--help"], 0), (["params", "--help"], 0)]
    # solve
    base = ["solve", "--counts", "600", "30", "30"]
    c += [(["solve"], 2), (["solve", "--counts", "-1", "3", "--gpus", "2"], 2), (base + ["--gpus", "0"], 2),
          (base + ["--gpus", "-2"], 2), (base + ["--gpus", "2", "--policy", "nope"], 2),
          (base + ["--gpus", "2", "--params", "nope"], 2), (["solve", "--counts", str(2**64), "--gpus", "2"], 2),
          (["solve", "--counts", str(2**62), str(2**62), "--gpus", "2"], 2),
          (["solve", "--counts", "1.5", "--gpus", "2"], 2), (base + ["--gpus", "two"], 2), (base, 2),
          (["solve", "--counts", "--gpus", "2"], 2), (base + ["--gpus", "2", "--params", ""], 2),
          (["solve", "--counts", "nan", "--gpus", "2"], 2), (["solve", "--counts", "inf", "--gpus", "2"], 2)]
    # bench (all rejected before any solve)
    c += [(["bench", "--eps", "0"], 2), (["bench", "--experts", "0"], 2), (["bench", "--tokens", "-8"], 2),
          (["bench", "--reps", "0"], 2), (["bench", "--params", "nope"], 2), (["bench", "--csv", nodir], 2),
          (["bench", "--csv", str(f["directory"])], 2), (["bench", "--milp-limit", "nan"], 2),
          (["bench", "--milp-limit", "-1"], 2), (["bench", "--eps", "abc"], 2), (["bench", "--tokens", "0"], 2),
          (["bench", "--experts", "1e3"], 2), (["bench", "--bogus"], 2)]
    # calibrate
    cal = ["calibrate", "--backend", "cpu", "--shape", "tiny"]
    c += [(["calibrate", "--backend", "nope"], 2), (cal + ["--n-max", "0"], 2), (cal + ["--n-max", "-4"], 2),
          (cal + ["--G", "0"], 2), (cal + ["--G", "-1"], 2), (cal + ["--per-octave", "0"], 2),
          (cal + ["--per-octave", "-1"], 2), (cal + ["--max-tokens", "0"], 2),
          (cal + ["--G", "4", "--max-tokens", "1"], 2), (cal + ["--out", str(f["a_file"])], 2),
          (["calibrate", "--shape", "nope"], 2), (cal + ["--max-seconds", "-1"], 2), (cal + ["--max-seconds", "nan"], 2)]
    if HAS_TORCH:
        from tempo.calib.backends import available_backends

        if "deep_gemm" not in available_backends():
            c.append((["calibrate", "--backend", "deep_gemm"], 2))
    # epbench
    ep = ["epbench", "--emulate"]
    c += [(ep + ["--experts", "-3"], 2), (ep + ["--experts", "0"], 2), (ep + ["--top-k", "-1"], 2),
          (ep + ["--top-k", "999"], 2), (ep + ["--warmup", "-5"], 2), (ep + ["--skew", "-1"], 2),
          (ep + ["--skew", "nan"], 2), (ep + ["--replication", "0"], 2), (ep + ["--params", "nope"], 2),
          (["epbench", "--params", "nope"], 2), (ep + ["--threads", "0"], 2), (ep + ["--world-size", "1"], 2),
          (ep + ["--shape", "nope"], 2), (ep + ["--policies", "nope"], 2), (ep + ["--csv", nodir], 2),
          (ep + ["--steps", "0"], 2), (ep + ["--tokens", "0"], 2), (ep + ["--replication", "nan"], 2),
          (ep + ["--seed", "-1"], 2), (ep + ["--device", "tpu"], 2), (ep + ["--expert-kernel", "nope"], 2)]
    if HAS_TORCH:
        import torch

        if not torch.cuda.is_available():
            c.append((["epbench", "--device", "cuda"], 2))
    # serve-bench (the dry run prints commands; no server is started)
    sb = ["serve-bench", "--dry-run"]
    c += [(sb + ["--policies", "nope"], 2), (sb + ["--policies", ","], 2), (sb + ["--concurrency", "abc"], 2),
          (sb + ["--concurrency", "0"], 2), (sb + ["--request-rates", "abc"], 2),
          (sb + ["--request-rates", "-1"], 2), (sb + ["--tp", "0"], 2), (sb + ["--ep", "-1"], 2),
          (sb + ["--windows", "0"], 2), (sb + ["--num-prompts", "-1"], 2), (sb + ["--dataset", "sharegpt"], 2),
          (sb + ["--dataset", "sharegpt", "--dataset-path", str(f["missing"])], 2),
          (sb + ["--model", str(d / "no-model")], 2), (sb + ["--port", "0"], 2),
          (sb + ["--out", str(f["a_file"])], 2), (sb + ["--init-expert-location", str(f["missing"])], 2),
          (sb + ["--input-len", "0"], 2)]
    # import-trace: every bad file, and bad outputs
    for name in ["missing", "empty", "garbage", "directory", "evil_pickle", "truncated_zip", "list_dump",
                 "empty_dict", "counts_1d", "counts_negative", "counts_float", "counts_string",
                 "counts_zero_experts", "pp_wrong_shape", "pp_string_id", "pp_missing_key", "pp_1d_map",
                 "pp_all_empty_map", "pp_negative", "pp_records_not_list"]:
        if name in f:  # without torch an existing dump cannot be read at all: failed work, 1
            c.append((["import-trace", str(f[name]), "-o", out], 2 if HAS_TORCH or name in ("missing", "directory")
                      else 1))
    if "good_stat" in f:
        c += [(["import-trace", str(f["good_stat"]), "-o", str(f["directory"])], 2),
              (["import-trace", str(f["good_stat"]), "-o", nodir], 2),
              (["import-trace", str(f["good_stat"]), str(f["evil_pickle"]), "-o", out], 2),
              (["import-trace", "-o", out], 2)]
    # make-traces: a missing or unusable source
    c += [(["make-traces"], 2), (["make-traces", "--source", str(f["missing"]), "--out", str(d / "traces")], 2),
          (["make-traces", "--source", str(f["a_file"]), "--out", str(d / "traces")], 2)]
    # drift-location: every bad trace, bad k / seed / output
    dl = str(d / "drift.json")
    for name in ["missing", "empty", "garbage", "directory", "truncated_zip", "npz_without_keys", "npz_bad_json",
                 "npz_negative_counts", "npz_zero_experts", "npz_zero_steps", "npz_1d_counts",
                 "npz_fractional_counts", "npz_object_array", "evil_pickle"]:
        c.append((["drift-location", str(f[name]), "-o", dl], 2))
    g = str(f["good_trace"])
    c += [(["drift-location", g, "-o", dl], 2),  # default --k 16 > E/2 = 4 for this 8-expert trace
          (["drift-location", g, "--k", "5", "-o", dl], 2), (["drift-location", g, "--k", "-1", "-o", dl], 2),
          (["drift-location", g, "--k", "2", "--seed", "-1", "-o", dl], 2),
          (["drift-location", g, "--k", "2", "-o", nodir], 2),
          (["drift-location", g, "--k", "2", "-o", str(f["directory"])], 2), (["drift-location", g], 2),
          (["drift-location", g, "--k", "abc", "-o", dl], 2)]
    return c


def _untrusted_cases(d):
    """Issue 27 (re-audit D1, D4, D5, D8, D9, D13-D15): recordings, outputs and sizes from
    untrusted hands.  Each is a usage error (2) naming the argument; nothing hangs, nothing is
    written outside --root, no device node or FIFO is replaced."""
    import gzip
    import stat

    import pandas as pd

    u = d / "untrusted"
    u.mkdir()
    root = str(u / "root")
    c = []

    def calib(name, **man):
        folder = u / name
        folder.mkdir()
        s = pd.DataFrame({"G": [1] * 4 + [8] * 4, "n": [1, 64, 256, 1024] * 2})
        s = s.assign(N=s.G * s.n, T=s.G, kind="grid", t_us=10 + s.G * 8.0 + 0.1 * s.G * s.n)
        s.to_csv(folder / "samples.csv.gz", index=False, compression="gzip")
        (folder / "fit.json").write_text(json.dumps({"max_affine": {"params": {"b": 1.0, "beta": 0.1}, "error": 0.1}}))
        (folder / "manifest.json").write_text(json.dumps({"backend": "deep_gemm", "shape": "dsv3",
                                                          "date": "2026-11-30", **man}))
        return str(folder)
    c += [(["ingest", calib("up", machine="../../../escaped"), "--root", root], 2),
          (["ingest", calib("abs", machine=str(d / "abs-escaped")), "--root", root], 2),
          (["ingest", calib("intdate", machine="m", date=20260102), "--root", root], 2)]
    ep = u / "ep.csv"
    ep.write_text("step,policy,layer_us,expert_us,model_us\n0,tempo,1,1,1\n")
    cmd = "python -m tempo epbench --device cuda --world-size 8 --tokens 32"
    c += [(["ingest", str(ep), "--machine", "m", "--root", root, "--command", cmd + " --tokens -5"], 2),
          (["ingest", str(ep), "--machine", "m", "--root", root, "--command", cmd + " --world-size 0"], 2),
          (["ingest", str(ep), "--machine", "m", "--root", root, "--command", cmd + " --skew nan"], 2)]
    for name, text in (("list", b"[1]"), ("server", b'{"server": "x"}'), ("gpus", b'{"gpus": 5}'),
                       ("deep", b"[" * 100000 + b"]" * 100000)):
        sb = u / f"serve-{name}"
        sb.mkdir()
        (sb / "pairs.csv").write_text("window,workload,policy,kept\n0,w,tempo,True\n")
        (sb / "manifest.json").write_bytes(text)
        c.append((["ingest", str(sb), "--machine", "m", "--root", root], 2))
    fifo = u / "fifo.csv"
    os.mkfifo(fifo)
    c.append((["ingest", str(fifo), "--machine", "m", "--root", root], 2))
    (u / "zero.csv").symlink_to("/dev/zero")
    c.append((["ingest", str(u / "zero.csv"), "--machine", "m", "--root", root], 2))
    (u / "bomb.csv.gz").write_bytes(gzip.compress(b"step,policy,layer_us,expert_us,model_us\n" + b"0" * (80 << 20)))
    c.append((["ingest", str(u / "bomb.csv.gz"), "--machine", "m", "--root", root], 2))
    (u / "wide.csv").write_text(",".join(f"c{i}" for i in range(10**5)) + "\n")
    c.append((["ingest", str(u / "wide.csv"), "--machine", "m", "--root", root], 2))
    link = u / "linked"
    link.mkdir()
    (u / "secret.csv").write_text("window,workload,policy,kept,TOPSECRET\n0,w,tempo,True,1\n")
    (link / "pairs.csv").symlink_to(u / "secret.csv")
    c.append((["ingest", str(link), "--machine", "m", "--root", root], 2))
    # outputs: never a FIFO (a hang) or a device node (replaced by a regular file)
    trace = u / "t.npz"
    write_trace(trace, np.ones((2, 2, 8), np.int64), model="m")
    targets = [str(fifo)]
    try:
        os.mknod(u / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        targets.append(str(u / "dev"))
    except OSError:
        pass  # not root: the FIFO stands for it
    for t in targets:
        c += [(["drift-location", str(trace), "--k", "2", "-o", t], 2),
              (["import-trace", str(u / "ep.csv"), "-o", t], 2)]
    c.append((["import-trace", str(u / "ep.csv"), "-o", str(u / "x.npz"), "--top-k", "1000000"], 2))
    # git options, sizes, counts
    c += [(["bench", f"--compare=--output={u / 'GIT-X'}"], 2), (["bench", "--eps", "100000"], 2),
          (["bench", "--compare-serving", "-x"], 2),
          (["epbench", "--emulate", "--world-size", "100000"], 2), (["epbench", "--tokens", "1000000000"], 2),
          (["calibrate", "--per-octave", "100000000"], 2),
          (["serve-bench", "--dry-run", "--tp", "8", "--ep", "3"], 2),
          (["serve-bench", "--dry-run", "--ep", "8", "--gpus-per-node", "3"], 2),
          (["serve-bench", "--dry-run", "--dist-init-addr", "127.0.0.1:99999"], 2),
          (["solve", "--counts", str(2**60), "--gpus", "20"], 2),
          (["solve", "--counts", str(2**52), str(2**52 + 1), "--gpus", "2"], 2)]
    return c


def _good_cases(f, d):
    """Valid calls that must still succeed (validation must not reject good input)."""
    c = [["policies"], ["params"], ["solve", "--counts", "600", "30", "30", "--gpus", "2"],
         ["drift-location", str(f["good_trace"]), "--k", "2", "-o", str(d / "ok.json")],
         ["serve-bench", "--dry-run", "--policies", "tempo", "--request-rates", "inf,4", "--concurrency", "8,16"],
         ["ingest", str(d / "untrusted" / "ep.csv"), "--machine", "機械", "--label", "ß", "--root", str(d / "good-root"),
          "--command", "python -m tempo epbench --device cuda --world-size 8 --tokens 32"]]
    if "good_stat" in f:
        c.append(["import-trace", str(f["good_stat"]), "-o", str(d / "ok.npz"), "--model", "m"])
        c.append(["import-trace", str(f["counts_2d"]), "-o", str(d / "ok2.npz")])
    return c


def test_cli_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEMPO_DEBUG", "1")  # an escaping exception is a traceback, not a caught rc 1
    f = _bad_files(tmp_path)
    tried, tracebacks, wrong, report = 0, 0, 0, []
    bad, good = _cases(f, tmp_path) + _untrusted_cases(tmp_path), [(g, 0) for g in _good_cases(f, tmp_path)]
    hangs = 0

    def alarm(signum, frame):
        raise TimeoutError("hung for 120 s")
    old_handler = signal.signal(signal.SIGALRM, alarm)
    for argv, want in bad + good:
        tried += 1
        signal.alarm(120)  # a hang (a FIFO read, a huge size) is counted, not waited out
        try:
            rc = cli.main(argv)
        except TimeoutError as exc:
            hangs += 1
            report.append(f"HANG {argv}: {exc}")
            continue
        except BaseException as exc:  # noqa: BLE001 -- counted
            tracebacks += 1
            report.append(f"TRACEBACK {argv}: {type(exc).__name__}: {exc}")
            continue
        finally:
            signal.alarm(0)
        err = capsys.readouterr().err
        if rc != want:
            wrong += 1
            report.append(f"rc {rc} (want {want}) {argv}: {err.strip()[-300:]}")
        elif want == 2 and argv and argv[0] in cli.COMMANDS and not any(
                s in err for s in ("error: argument ", "error: --", "unrecognized arguments", "are required")):
            wrong += 1  # a usage error must name the argument
            report.append(f"unnamed usage error {argv}: {err.strip()[-300:]}")
    signal.signal(signal.SIGALRM, old_handler)
    assert not (tmp_path / "PWNED").exists(), "a dump was executed"
    u = tmp_path / "untrusted"
    assert not (u / "GIT-X").exists(), "a --compare value reached git as an option"
    assert not list(tmp_path.parent.glob("**/escaped")) and not (tmp_path / "abs-escaped").exists()
    assert (u / "fifo.csv").exists() and not (u / "fifo.csv").is_file()
    assert not (u / "dev").exists() or not (u / "dev").is_file()
    assert not (u / "root").exists() or not any(p.is_file() and p.name != ".ingest.lock" for p in (u / "root").rglob("*"))
    with capsys.disabled():
        print(f"\nCLI sweep: {tried} calls tried ({len(bad)} bad or edge, {len(good)} valid), {tracebacks} tracebacks, "
              f"{wrong} wrong exit codes, {hangs} hangs")
    assert tracebacks == 0 and wrong == 0 and hangs == 0, "\n".join(report)
    assert tried >= (120 if HAS_TORCH else 90)  # the sweep is not silently emptied


def test_import_trace_refuses_code_end_to_end(tmp_path):
    """The real entry point (a subprocess): the crafted pickle is refused, nothing runs, no traceback."""
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(_Evil(tmp_path / "PWNED")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    env.pop("TEMPO_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "tempo", "import-trace", str(tmp_path / "evil.pt"), "-o",
                        str(tmp_path / "t.npz")], capture_output=True, text=True, env=env, timeout=120)
    assert not (tmp_path / "PWNED").exists()
    assert "Traceback" not in r.stderr
    assert r.returncode == (2 if HAS_TORCH else 1), r.stderr
    if HAS_TORCH:
        assert "refused" in r.stderr and "dumps" in r.stderr
    assert not (tmp_path / "t.npz").exists()


@needs_torch
def test_load_dump_refuses_code(tmp_path):
    from tempo.world.traces import load_dump

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(_Evil(tmp_path / "PWNED")))
    with pytest.raises(ValueError, match="refused"):
        load_dump(tmp_path / "evil.pt")
    assert not (tmp_path / "PWNED").exists()


def test_serve_bench_exits_1_when_every_run_failed(tmp_path, monkeypatch, capsys):
    """D7: all runs fail (an injected runner: the server never becomes healthy) -> exit 1."""
    from tempo.benchmarks import servebench

    def fail(spec, policy, workload, out_dir, port, tag):
        return {"policy": policy, "server_healthy": False, "num_prompts": workload.num_prompts}

    real = servebench.drive
    monkeypatch.setattr(servebench, "drive", lambda *a, **k: real(*a, **{**k, "runner": fail, "progress": False}))
    data = tmp_path / "prompts.json"  # serve-bench needs a local dataset (no hub download)
    data.write_text("[]")
    rc = cli.main(["serve-bench", "--policies", "static,tempo", "--windows", "1", "--num-prompts", "1",
                   "--dataset-path", str(data), "--out", str(tmp_path / "sb")])
    assert rc == 1
    assert "no run succeeded" in capsys.readouterr().err
    assert json.loads((tmp_path / "sb" / "manifest.json").read_text())["windows"] == 1
