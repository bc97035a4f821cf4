"""Turn a measurement into a ledger entry: ``python -m tempo ingest PATH [PATH ...]``.

Stores a recording under ``data/measured/<machine>/<date>-<kind>[-<label>]/`` with a
``manifest.json`` (kind, machine, date, command when known, sha256 of every file, tempo
version, the source's basename), through :func:`tempo.measured.store.write` (atomic, deduplicated
by ``source_sha256``, files over 5 MiB refused), then prints the claims it now decides.  Kinds,
recognised from the path (formats read, producers never imported):

* ``epbench``: ``python -m tempo epbench --csv`` output; ``--command`` gives the run's
  arguments (a CSV with layer time = expert time on every row is an ``--emulate`` run);
* ``serve-bench``: a ``python -m tempo serve-bench`` folder (``pairs.csv``, ``runs.csv``,
  ``records.jsonl``, ``manifest.json``);
* ``calibration``: a ``python -m tempo calibrate --out`` folder (validated, copied);
* ``trace``: a routing trace ``.npz`` (:func:`tempo.world.traces.read_trace`).

Files are gzip-compressed deterministically (no name, mtime 0) except ``fit.json`` and
``.npz``; absolute paths in stored text are cut to their basename.  Read back by
:mod:`tempo.measured.catalog`.
"""
from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import math
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.io import UnsafeFile, gunzip_limited, loads_json, read_regular
from ..measured import catalog, store
from ..measured.catalog import check_fits, check_manifest, check_samples
from .claims.ledger import claims_reading, evaluate
from .claims.registry import REGISTRY, format_value, printed
from ..paper.claims_file import claim_rows

MAX_BYTES = 5 * 2**20
#: the most bytes read from one source file, and the most a gzip file may inflate to
MAX_READ = 64 * 2**20
#: the most columns a CSV may have (the widest producer writes 7)
MAX_COLUMNS = 64
#: how deep a manifest.json may nest (the producers write 3 levels)
MAX_JSON_DEPTH = 32
#: the longest name (machine, date, backend, shape, label) that becomes a folder name
MAX_NAME = store.MAX_NAME
EPBENCH_COLUMNS = ("step", "policy", "layer_us", "expert_us", "model_us")
SERVE_PAIRS_COLUMNS = ("window", "workload", "policy", "kept")
CALIB_COLUMNS = ("G", "n", "N", "T", "kind", "t_us")
#: epbench's command-line defaults (``tempo/benchmarks/epbench.py`` main), for flags a command omits
EPBENCH_DEFAULTS = {"device": "cpu", "world_size": 4, "shape": "tiny", "tokens": 32, "params": "dsv3-offline",
                    "emulate": False}


class IngestError(ValueError):
    """A recording that cannot be ingested; ``arg`` names the argument at fault."""

    def __init__(self, arg: str, msg: str):
        self.arg = arg
        super().__init__(f"{arg}: {msg}")


def safe_name(value, arg: str) -> str:
    """``value`` when it can be one folder name under the recordings root
    (:func:`tempo.measured.store.safe_name`); :class:`IngestError` naming ``arg`` otherwise."""
    try:
        return store.safe_name(value, arg)
    except ValueError as exc:
        raise IngestError(arg, str(exc).split(": ", 1)[1]) from None


def _json(data: bytes, what: str, arg: str = "PATH"):
    """``json.loads`` of untrusted bytes: a usage error naming ``what`` for anything that is not
    JSON or nests deeper than :data:`MAX_JSON_DEPTH` (checked before parsing:
    :func:`tempo.core.io.loads_json`)."""
    try:
        return loads_json(data, what, MAX_JSON_DEPTH)
    except ValueError as exc:
        raise IngestError(arg, str(exc)) from None


def _typed(obj: dict, field: str, types, what: str, arg: str = "PATH"):
    """``obj[field]`` when it is absent/None or has one of ``types`` (a bool is no int); else a
    usage error naming the field."""
    types = types if isinstance(types, tuple) else (types,)
    v = obj.get(field)
    if v is None:
        return None
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        names = " or ".join(t.__name__ for t in types)
        raise IngestError(arg, f"{what} field {field!r} must be {names}, got {type(v).__name__} {v!r:.60}")
    return v


_ABS_PATH = re.compile(r"(?<![\w.:/~-])/[^\s\"',;:=]+")


def strip_paths(obj):
    """``obj`` with every absolute path inside its strings cut to its basename
    (``--model /models/Qwen3`` -> ``--model Qwen3``; URLs and ``Qwen/Qwen3`` are left alone)."""
    if isinstance(obj, str):
        return _ABS_PATH.sub(lambda m: Path(m.group(0)).name or "/", obj)
    if isinstance(obj, dict):
        return {k: strip_paths(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strip_paths(v) for v in obj]
    return obj


_sha = store.sha256


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _read(path: Path, arg: str) -> bytes:
    """The bytes of a regular file (no link followed, no FIFO or device read, at most
    :data:`MAX_READ` bytes: :func:`tempo.core.io.read_regular`)."""
    try:
        return read_regular(path, MAX_READ, path.name)
    except (OSError, UnsafeFile) as exc:
        raise IngestError(arg, f"cannot read {path.name}: {getattr(exc, 'strerror', None) or exc}") from None


def _gunzip(data: bytes, name: str, arg: str) -> bytes:
    try:
        return gunzip_limited(data, MAX_READ, name)
    except ValueError as exc:
        raise IngestError(arg, str(exc)) from None


def _csv(data: bytes, name: str, arg: str, columns) -> pd.DataFrame:
    if name.endswith(".gz"):
        data, name = _gunzip(data, name, arg), name.removesuffix(".gz")
    header = data.split(b"\n", 1)[0]
    if header.count(b",") >= MAX_COLUMNS:
        raise IngestError(arg, f"{name} has {header.count(b',') + 1} columns, over the limit of {MAX_COLUMNS}")
    try:
        df = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 -- any parse failure is a bad input
        raise IngestError(arg, f"{name} is not a readable CSV ({type(exc).__name__}: {exc})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise IngestError(arg, f"{name} lacks the columns {missing} (has {list(df.columns)})")
    if df.empty:
        raise IngestError(arg, f"{name} has no rows")
    return df


@dataclass
class Plan:
    """What ingesting one path would store."""

    kind: str
    source: Path
    machine: str | None
    date: str | None
    label: str
    files: dict = field(default_factory=dict)      # stored name -> bytes
    manifest: dict = field(default_factory=dict)   # kind-specific fields
    source_sha256: str = ""
    folder_name: str = ""


def detect(path: Path) -> str:
    """The kind of recording at ``path`` (raises :class:`IngestError` naming PATH)."""
    if path.is_dir():
        if (path / "pairs.csv").is_file():
            return "serve-bench"
        if (path / "samples.csv.gz").is_file() and (path / "manifest.json").is_file():
            return "calibration"
        raise IngestError("PATH", f"{path.name}/ is neither a serve-bench output folder (pairs.csv) nor a "
                                  "calibration recording (samples.csv.gz, fit.json, manifest.json)")
    if not path.exists():
        raise IngestError("PATH", f"{path} does not exist")
    if path.suffix == ".npz":
        return "trace"
    if path.name.endswith((".csv", ".csv.gz")):
        return "epbench"
    raise IngestError("PATH", f"{path.name}: expected an epbench .csv, a trace .npz, a serve-bench output folder "
                              "or a calibration folder")


# ---------------------------------------------------------------------------- the four kinds
def parse_epbench_command(command: str) -> dict:
    """The configuration an ``epbench`` command line ran with (epbench's defaults for flags it
    omits).  Raises ``ValueError`` when ``command`` is not an epbench command."""
    import argparse

    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"cannot split {command!r}: {exc}") from None
    if "epbench" not in words:
        raise ValueError(f"not an epbench command: {command!r}")
    ap = argparse.ArgumentParser(add_help=False)
    for flag, typ in [("--device", str), ("--world-size", int), ("--shape", str), ("--tokens", int),
                      ("--params", str), ("--expert-kernel", str), ("--steps", int), ("--skew", float),
                      ("--replication", float), ("--policies", str), ("--seed", int), ("--experts", int),
                      ("--top-k", int)]:
        ap.add_argument(flag, type=typ)
    ap.add_argument("--emulate", action="store_true")
    try:
        a, _ = ap.parse_known_args(words[words.index("epbench") + 1:])
    except SystemExit:
        raise ValueError(f"cannot read the flags of {command!r}") from None
    cfg = {k: v for k, v in vars(a).items() if v is not None}
    for k in ("world_size", "tokens", "steps", "experts", "top_k"):
        if k in cfg and not 1 <= cfg[k] <= 2**31:
            raise ValueError(f"--{k.replace('_', '-')} must be an integer in [1, 2^31], got {cfg[k]}")
    if "seed" in cfg and cfg["seed"] < 0:
        raise ValueError(f"--seed must be >= 0, got {cfg['seed']}")
    for k in ("skew", "replication"):
        if k in cfg and not (math.isfinite(cfg[k]) and cfg[k] >= 0):
            raise ValueError(f"--{k} must be a finite number >= 0, got {cfg[k]}")
    return {**EPBENCH_DEFAULTS, **cfg}


def _integers(df: pd.DataFrame, cols, name: str, lo: int = 0):
    for c in cols:
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        if not (np.isfinite(v).all() and (v == np.round(v)).all() and (v >= lo).all() and (v < 2**53).all()):
            raise IngestError("PATH", f"{name}: column {c} must hold integers >= {lo}")


def _words(df: pd.DataFrame, cols, name: str):
    for c in cols:
        if df[c].isna().any():
            raise IngestError("PATH", f"{name}: column {c} has empty cells")


def _prepare_epbench(path: Path, command: str | None) -> Plan:
    raw = _read(path, "PATH")
    data = _gunzip(raw, path.name, "PATH") if path.name.endswith(".gz") else raw
    df = _csv(data, path.name.removesuffix(".gz"), "PATH", EPBENCH_COLUMNS)
    times = df[["layer_us", "expert_us", "model_us"]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    if not (np.isfinite(times).all() and (times > 0).all()):
        raise IngestError("PATH", f"{path.name}: layer_us, expert_us and model_us must be finite and > 0 "
                                  "(a measured time of zero or less is no measurement)")
    _integers(df, ["step"], path.name)
    _words(df, ["policy"], path.name)
    # epbench times every policy once per step, in a shuffled order: the claims compare policies
    # step by step, so a table whose steps do not each hold every policy once is not an epbench run
    per = df.groupby([df.step.astype("int64"), df.policy.astype(str)]).size()
    pols = sorted(df.policy.astype(str).unique())
    if (per != 1).any() or len(per) != df.step.nunique() * len(pols):
        raise IngestError("PATH", f"{path.name}: every step must hold each of the policies {pols} exactly once "
                                  "(as epbench writes it)")
    cfg: dict = {}
    if command:
        try:
            cfg = parse_epbench_command(command)
        except ValueError as exc:
            raise IngestError("--command", str(exc)) from None
        named = sorted({p for p in str(cfg.get("policies") or "").split(",") if p})
        if named and named != pols:
            raise IngestError("--command", f"names the policies {named}, the table holds {pols}: the command did "
                                           f"not write {path.name}")
    kernel = sorted(df["kernel"].astype(str).unique()) if "kernel" in df else []
    emulated_by_data = bool(np.allclose(df.layer_us, df.expert_us, rtol=0, atol=1e-9))
    device = cfg.get("device") or ("cuda" if any(k.startswith("deep_gemm") for k in kernel) else None)
    man = {"device": device, "emulate": (cfg["emulate"] or emulated_by_data) if cfg else (True if emulated_by_data else None),
           "world_size": cfg.get("world_size"), "tokens": cfg.get("tokens"), "shape": cfg.get("shape"),
           "params": cfg.get("params"), "expert_kernel": kernel[0] if len(kernel) == 1 else (kernel or None),
           "steps": int(df.step.nunique()), "policies": sorted(df.policy.astype(str).unique())}
    if emulated_by_data and cfg and not cfg["emulate"]:
        man["emulate_note"] = ("layer time equals expert time on every row (no all-to-all was timed): an --emulate "
                               "run, whatever the command says")
    if not cfg:
        man["config_note"] = ("ingested without --command: device, world size and tokens per GPU are unknown, "
                              "so this recording decides no claim")
    if cfg:
        label = f"{store.slug(cfg['shape'])}-ep{cfg['world_size']}-b{cfg['tokens']}" + ("-emulated" if man["emulate"] else "")
    else:
        label = store.slug(path.name.removesuffix(".gz").removesuffix(".csv")) or "epbench"
    return Plan("epbench", path, None, None, label, {"epbench.csv.gz": _gz(data)}, man, _sha(data))


def _workload_info(w: dict) -> dict:
    out = {k: w.get(k) for k in ("name", "dataset", "num_prompts", "input_len", "output_len", "request_rate",
                                 "max_concurrency")}
    out["dataset_file"] = Path(w["dataset_path"]).name if w.get("dataset_path") else None
    return out


def _agree_serve(sm: dict, pairs: pd.DataFrame, runs: pd.DataFrame | None, what: str) -> None:
    """A usage error unless a serve-bench manifest agrees with its tables: every policy it lists
    (but its baseline) was run (pairs.csv or runs.csv), every policy and workload of pairs.csv is
    one it lists (when it lists them)."""
    ran = set(pairs.policy.astype(str)) | (set(runs.policy.astype(str)) if runs is not None else set())
    listed = [str(p) for p in sm.get("policies") or []]
    names = [str(w.get("name")) for w in sm.get("workloads") or [] if w.get("name") is not None]
    problems = []
    if listed:
        missing = sorted(set(listed) - ran - {str(sm.get("baseline") or "static")})
        extra = sorted(set(pairs.policy.astype(str)) - set(listed))
        problems += [f"it lists policies {missing} that no run holds"] if missing else []
        problems += [f"pairs.csv holds policies {extra} it does not list"] if extra else []
    if names:
        extra = sorted(set(pairs.workload.astype(str)) - set(names))
        problems += [f"pairs.csv holds workloads {extra} it does not list"] if extra else []
    if problems:
        raise IngestError("PATH", f"{what} disagrees with its tables: {'; '.join(problems)}")


def _prepare_serve(path: Path) -> Plan:
    names = [n for n in ("pairs.csv", "runs.csv", "records.jsonl", "manifest.json")
             if (path / n).is_file() or (path / n).is_symlink()]  # a link is refused by _read, never skipped
    raw = {n: _read(path / n, "PATH") for n in names}
    pairs = _csv(raw["pairs.csv"], "pairs.csv", "PATH", SERVE_PAIRS_COLUMNS)
    _words(pairs, ["workload", "policy"], "pairs.csv")
    if not pairs.kept.astype(str).str.lower().isin(["true", "false", "1", "0", "1.0", "0.0"]).all():
        raise IngestError("PATH", "pairs.csv: column kept must hold True/False")
    pairs["kept"] = pairs.kept.astype(str).str.lower().isin(["true", "1", "1.0"])
    runs = _csv(raw["runs.csv"], "runs.csv", "PATH", ("window", "workload", "policy", "status")) \
        if "runs.csv" in raw else None
    sm = {}
    if "manifest.json" in raw:
        sm = _json(raw["manifest.json"], f"{path.name}/manifest.json")
        what = f"{path.name}/manifest.json"
        if not isinstance(sm, dict):
            raise IngestError("PATH", f"{what} must be a JSON object, got {type(sm).__name__}")
        _typed(sm, "server", dict, what)
        for k in ("gpus", "workloads", "argv", "policies"):
            _typed(sm, k, list, what)
        if not all(isinstance(x, str) for x in sm.get("gpus") or []):
            raise IngestError("PATH", f"{what} field 'gpus' must be a list of GPU names")
        if not all(isinstance(x, dict) for x in sm.get("workloads") or []):
            raise IngestError("PATH", f"{what} field 'workloads' must be a list of objects")
        for w in sm.get("workloads") or []:
            _typed(w, "dataset_path", str, f"{what} workload")
        server = sm.get("server") or {}
        for k in ("tp", "ep", "redundant"):
            _typed(server, k, int, f"{what} server")
        for k in ("model", "init_expert_location", "a2a"):
            _typed(server, k, str, f"{what} server")
        _typed(server, "env", dict, f"{what} server")
        if sm.get("gpus") and not store.slug(sm["gpus"][0]):
            raise IngestError("PATH", f"{what} field 'gpus' names no machine ({sm['gpus'][0]!r:.60})")
        _agree_serve(sm, pairs, runs, what)
    files = {"pairs.csv.gz": _gz(raw["pairs.csv"])}
    if "runs.csv" in raw:
        files["runs.csv.gz"] = _gz(raw["runs.csv"])
    if "records.jsonl" in raw:
        lines = []
        for i, line in enumerate(raw["records.jsonl"].decode("utf-8", "replace").splitlines()):
            if line.strip():
                rec = _json(line.encode(), f"{path.name}/records.jsonl line {i + 1}")
                lines.append(json.dumps(strip_paths(rec), default=str))
        files["records.jsonl.gz"] = _gz(("\n".join(lines) + "\n").encode())
    if sm:
        files["serve-bench.json.gz"] = _gz(json.dumps(strip_paths(sm), indent=1, default=str).encode())
    server = sm.get("server") or {}
    gpus = sm.get("gpus") or []
    model = Path(str(server["model"])).name if server.get("model") else None
    man = {"device": "cuda" if gpus else None, "gpus": len(gpus) or None, "gpu_name": gpus[0] if gpus else None,
           "model": model, "tp": server.get("tp"), "ep": server.get("ep"), "a2a": server.get("a2a"),
           "redundant": server.get("redundant"), "dummy_weights": server.get("dummy_weights"),
           "drift_placement": bool(server.get("init_expert_location")),
           "init_expert_location": Path(str(server["init_expert_location"])).name
           if server.get("init_expert_location") else None,
           "server_env": strip_paths(server.get("env") or {}),
           "baseline": sm.get("baseline"), "windows": sm.get("windows"),
           "policies": sm.get("policies") or sorted(pairs.policy.astype(str).unique()),
           "workloads": [_workload_info(w) for w in sm.get("workloads") or []],
           "pairs_kept": int(pairs.kept.astype(bool).sum()), "pairs": int(len(pairs)),
           "sglang": sm.get("sglang"), "torch": sm.get("torch")}
    if not sm:
        man["config_note"] = "no serve-bench manifest.json: model, EP size and device are unknown"
    argv = [str(a) for a in (sm.get("argv") or [])[1:]]  # sys.argv of `python -m tempo serve-bench ...`
    argv = argv[1:] if argv[:1] == ["serve-bench"] else argv
    cmd = strip_paths(shlex.join(["python", "-m", "tempo", "serve-bench", *argv])) if sm.get("argv") else None
    man["command"] = cmd
    src = _sha(b"".join(n.encode() + b"\0" + _sha(raw[n]).encode() for n in sorted(raw)))
    label = "-".join(x for x in (store.slug(model or "") or None, f"ep{server['ep']}" if server.get("ep") else None) if x) \
        or store.slug(path.name) or "serve"
    machine = store.slug(gpus[0]) if gpus else None
    return Plan("serve-bench", path, machine, None, label, files, man, src)


def _prepare_calibration(path: Path) -> Plan:
    raw = {n: _read(path / n, "PATH") for n in ("samples.csv.gz", "fit.json", "manifest.json")
           if (path / n).is_file() or (path / n).is_symlink()}
    for n in ("fit.json", "manifest.json"):
        if n not in raw:
            raise IngestError("PATH", f"{path.name}/ has no {n}: not a complete calibration recording")
    cm = _json(raw["manifest.json"], f"{path.name}/manifest.json")
    fits = _json(raw["fit.json"], f"{path.name}/fit.json")
    if isinstance(cm, dict):
        missing = [k for k in ("backend", "shape") if not cm.get(k)]
        if missing:
            raise IngestError("PATH", f"{path.name}/manifest.json lacks {missing}: not a calibration recording")
    s = _csv(raw["samples.csv.gz"], "samples.csv.gz", "PATH", CALIB_COLUMNS)
    if len(s) < 6:
        raise IngestError("PATH", f"{path.name}/samples.csv.gz has {len(s)} cells; a fit needs at least 6")
    try:  # the checks the ledger's reader makes (tempo.measured.catalog.load_recording): stored only if it loads
        check_manifest(cm, f"{path.name}/manifest.json")
        check_fits(fits, f"{path.name}/fit.json")
        check_samples(s, f"{path.name}/samples.csv.gz")
    except ValueError as exc:
        raise IngestError("PATH", str(exc)) from None
    if cm.get("cells") is not None and cm["cells"] != len(s):
        raise IngestError("PATH", f"{path.name}/manifest.json says {cm['cells']} cells, samples.csv.gz holds {len(s)}")
    for k in ("backend", "shape"):
        safe_name(cm[k], f"PATH {path.name}/manifest.json field {k!r}")
    machine = cm.get("machine")
    if machine is not None:
        safe_name(machine, f"PATH {path.name}/manifest.json field 'machine'")
    elif cm.get("device"):
        machine = store.slug(cm["device"]) or None
    man = {k: v for k, v in strip_paths(cm).items() if k not in ("machine", "date")}
    src = _sha(b"".join(n.encode() + b"\0" + _sha(raw[n]).encode() for n in sorted(raw)))
    plan = Plan("calibration", path, machine, cm.get("date"), "",
                {"samples.csv.gz": raw["samples.csv.gz"], "fit.json": raw["fit.json"]}, man, src)
    plan.folder_name = f"{cm['backend']}-{cm['shape']}"
    return plan


def _prepare_trace(path: Path) -> Plan:
    from ..world.traces import read_trace

    import zipfile

    raw = _read(path, "PATH")
    try:
        inflated = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(raw)).infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise IngestError("PATH", f"{path.name} is not a routing trace ({exc})") from None
    if inflated > MAX_READ:
        raise IngestError("PATH", f"{path.name} inflates to {inflated} bytes, over the {MAX_READ}-byte limit")
    try:
        counts, meta = read_trace(io.BytesIO(raw))
    except (ValueError, OSError) as exc:
        raise IngestError("PATH", f"{path.name} is not a routing trace ({exc})") from None
    if meta.get("machine") is not None and not isinstance(meta["machine"], str):
        raise IngestError("PATH", f"{path.name}: metadata field 'machine' must be a string")
    meta = strip_paths(meta)
    buf = io.BytesIO()
    np.savez_compressed(buf, counts=counts, metadata=np.array(json.dumps(meta, default=str)))
    man = {"steps": int(counts.shape[0]), "layers": int(counts.shape[1]), "experts": int(counts.shape[2]),
           "trace_metadata": meta, "device": None}
    label = store.slug(path.stem) or "trace"
    return Plan("trace", path, store.slug(meta["machine"]) if meta.get("machine") else None, None, label,
                {"trace.npz": buf.getvalue()}, man, _sha(raw))


def local_gpu_name() -> str | None:
    """The first GPU's name on this host (``nvidia-smi``; no torch import), or None."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = [l.strip() for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []
    return names[0] if names else None


def prepare(path, machine: str | None = None, date: str | None = None, label: str | None = None,
            command: str | None = None) -> Plan:
    """Read and validate ``path``; what :func:`ingest` would store (nothing is written)."""
    path = Path(path)
    kind = detect(path)
    if command and kind != "epbench":
        raise IngestError("--command", f"only an epbench CSV takes --command ({path.name} is a {kind} recording)")
    plan = {"epbench": lambda: _prepare_epbench(path, command), "serve-bench": lambda: _prepare_serve(path),
            "calibration": lambda: _prepare_calibration(path), "trace": lambda: _prepare_trace(path)}[kind]()
    if machine is not None:
        if not isinstance(machine, str) or not store.slug(machine):
            raise IngestError("--machine", f"must contain letters or digits, got {machine!r}")
        plan.machine = store.slug(machine)
    if plan.machine is None and plan.kind == "epbench" and plan.manifest.get("device") == "cuda":
        gpu = local_gpu_name()  # ingested on the node that ran it (the needs notes' commands)
        if gpu:
            plan.machine = store.slug(gpu)
            plan.manifest["machine_from"] = "the GPU of the host that ingested it (nvidia-smi)"
    if plan.machine is None:
        raise IngestError("--machine", f"{path.name} does not say which machine recorded it: pass --machine NAME "
                                       "(e.g. nvidia-h200)")
    for arg, value in (("--date", date), (f"PATH {path.name}: the recording's date", plan.date)):
        if value is not None:
            try:
                if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                    raise ValueError
                dt.date.fromisoformat(value)
            except ValueError:
                raise IngestError(arg, f"must be YYYY-MM-DD, got {value!r:.60}") from None
            plan.date = value
            break
    plan.date = plan.date or dt.datetime.now(dt.timezone.utc).date().isoformat()
    if label is not None:
        if not isinstance(label, str) or not store.slug(label):
            raise IngestError("--label", f"must contain letters or digits, got {label!r}")
        plan.label = store.slug(label)
    # every part of the folder is one safe name: the path stays under the recordings root
    safe_name(plan.machine, "--machine")
    if plan.label:
        safe_name(plan.label, "--label")
    base = plan.folder_name or plan.kind
    plan.folder_name = safe_name(f"{plan.date}-{base}" + (f"-{plan.label}" if plan.label else ""), "PATH")
    for name, data in plan.files.items():
        if len(data) > MAX_BYTES:
            raise IngestError("PATH", f"{path.name}: {name} would be {len(data) / 2**20:.1f} MiB compressed, over the "
                                      f"{MAX_BYTES // 2**20} MiB limit on a file in the repository; store a shorter run")
    from ..core.version import __version__

    plan.manifest = {"kind": plan.kind, "machine": plan.machine, "date": plan.date, "label": plan.label or None,
                     "command": strip_paths(command) if command else plan.manifest.pop("command", None),
                     **plan.manifest, "source": path.name, "source_sha256": plan.source_sha256,
                     "files": store.files_field(plan.files),
                     "tempo_version": __version__}
    return plan


# ---------------------------------------------------------------------------- storing
def find_duplicate(source_sha256: str, root: Path | None = None) -> Path | None:
    """The recording already stored from the same content, if any."""
    for folder, man in catalog.manifests(root):
        if man.get("source_sha256") == source_sha256:
            return folder
    return None


def write(plan: Plan, root: Path | None = None) -> tuple[Path, bool]:
    """Store ``plan`` under ``root`` (default data/measured) through
    :func:`tempo.measured.store.write`; ``(folder, created)``.  The same content stored before
    (its ``source_sha256``) returns that folder and ``created`` False."""
    base = store.root(root)
    if plan.kind == "calibration" and plan.source.resolve().is_relative_to(base.resolve()):
        return plan.source, False  # calibrate wrote it under data/measured already: the GPU claims read it there
    safe_name(plan.machine, "--machine")
    safe_name(plan.folder_name, "PATH")
    man = {**plan.manifest, "ingested_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        w = store.write(plan.machine, plan.folder_name, plan.files, man, base, same=("source_sha256",))
    except ValueError as exc:  # the machine folder is a link, or lies outside the root
        raise IngestError("--machine", str(exc).split(": ", 1)[-1]) from None
    return w.path, w.created


def ingest(path, machine=None, date=None, label=None, command=None, root=None) -> tuple[Path, bool]:
    """Validate and store one recording; ``(folder, created)``."""
    return write(prepare(path, machine, date, label, command), root)


# ---------------------------------------------------------------------------- what it decides
def decided(folder, profile: str = "full") -> pd.DataFrame:
    """The ledger rows (id, status, ours, note) of the claims whose value now comes from the
    recording in ``folder`` (a verdict, or a stand-in shown in the note)."""
    folder = Path(folder)
    tag = f"{folder.parent.name}/{folder.name}"
    rows = {r["id"]: r for r in claim_rows()}
    man = catalog.read_manifest(folder)
    ids = claims_reading(man.get("kind", "")) if man.get("kind") != "calibration" else \
        [c for c in rows if rows[c]["needs"] == "gpu" and c in REGISTRY and not REGISTRY[c].inputs]
    out = []
    for cid in ids:
        e = evaluate(rows[cid], profile)
        if tag in (e.get("provenance") or "") + (e.get("note") or ""):
            out.append({"id": cid, "status": e["status"], "ours": format_value(e["ours"]),
                        "paper": printed(rows[cid]["paper_text"]), "unit": rows[cid]["unit"], "note": e["note"]})
    return pd.DataFrame(out, columns=["id", "status", "ours", "paper", "unit", "note"])


def main(argv=None) -> int:
    from ..core.argtypes import ArgumentParser

    ap = ArgumentParser(prog="python -m tempo ingest",
                        description="store GPU / cluster recordings under data/measured/ as ledger evidence")
    ap.add_argument("paths", nargs="+", metavar="PATH",
                    help="an epbench CSV, a serve-bench output folder, a calibration folder or a trace .npz")
    ap.add_argument("--machine", help="machine folder name (default: from the recording, e.g. nvidia-h200)")
    ap.add_argument("--date", help="YYYY-MM-DD of the measurement (default: from the recording, else today UTC)")
    ap.add_argument("--label", help="suffix of the folder name (default: shape, EP size and tokens, or the model)")
    ap.add_argument("--command", help="the epbench command line that wrote the CSV (its device, world size, tokens, "
                                      "--emulate decide which claims it can decide)")
    ap.add_argument("--dry-run", action="store_true", help="validate and show what would be stored; write nothing")
    ap.add_argument("--root", help="recordings root (default data/measured)")
    ap.add_argument("--profile", default="full", choices=["smoke", "full", "gpu"], help="ledger profile for the verdicts")
    a = ap.parse_args(argv)
    if a.command is not None and len(a.paths) > 1:
        ap.fail("--command", "describes one epbench CSV; ingest one PATH at a time with it")
    root = Path(a.root) if a.root else None
    if root is not None and root.exists() and not root.is_dir():
        ap.fail("--root", f"{a.root!r} is a file, expected a folder")
    plans = []
    for p in a.paths:  # validate everything before storing anything
        try:
            plans.append(prepare(p, a.machine, a.date, a.label, a.command))
        except IngestError as exc:
            ap.fail(exc.arg if exc.arg != "PATH" else f"PATH {p!r}", str(exc).split(": ", 1)[1])
    for plan in plans:
        sizes = ", ".join(f"{n} ({len(d) / 1024:.1f} KiB)" for n, d in sorted(plan.files.items()))
        if a.dry_run:
            dup = find_duplicate(plan.source_sha256, root)
            print(f"{plan.source.name}: {plan.kind} recording -> "
                  + (f"already stored as {dup}" if dup else f"{plan.machine}/{plan.folder_name}/: {sizes}"))
            print(json.dumps(plan.manifest, indent=1, default=str))
            print(f"claims that read {plan.kind} recordings: {', '.join(claims_reading(plan.kind)) or 'none'}")
            continue
        folder, created = write(plan, root)
        print(f"{plan.source.name}: " + (f"stored {plan.kind} recording in {folder}: {sizes}" if created else
                                          f"already stored as {folder} (same content); nothing written"))
        if root is None or Path(root).resolve() == store.root().resolve():
            d = decided(folder, a.profile)
            if d.empty:
                print("  it decides no ledger claim" + (": " + plan.manifest["config_note"]
                                                        if plan.manifest.get("config_note") else ""))
            for r in d.itertuples():
                print(f"  {r.id}: {r.status}, ours {r.ours} {r.unit} (paper {r.paper}) {r.note}".rstrip())
        else:
            print("  (--root is not data/measured: the ledger does not read it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
