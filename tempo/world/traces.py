"""Routing traces on disk: tempo's own ``.npz`` format and SGLang expert-distribution recorder
dumps (paper Section 5: the replay studies and the serving runs start from recorded routing).

Every file read here is *parsed*, never executed: traces are loaded with
``np.load(allow_pickle=False)`` and recorder dumps with ``torch.load(weights_only=True)``,
which admits tensors, numbers, strings, lists and dicts only.  A dump that needs arbitrary
code to load (a crafted pickle) is refused with a ``ValueError`` before any of it runs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

TRACE_VERSION = 1
_INT64_MAX = 2**63 - 1
#: the most bytes a trace or recorder dump may hold on disk, and a trace's arrays once inflated
#: (the largest shipped trace is 0.4 MB; a DeepSeek-V3 trace of 8,000 forward passes is 1 GiB)
MAX_TRACE_BYTES = 2**30
MAX_TRACE_INFLATED = 2**30
#: how deep a trace's metadata may nest (write_trace's callers write 3 levels)
MAX_META_DEPTH = 32


def _np(x) -> np.ndarray:
    """A torch tensor, list or array as a numpy array (no torch import needed)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def as_counts(value, name: str, ndim: int | None = None) -> np.ndarray:
    """``value`` as int64 counts: integers (or integral floats), finite, non-negative and inside
    int64.  Raises ``ValueError`` naming ``name`` otherwise (floats are never truncated)."""
    try:
        arr = _np(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} is not a numeric array ({exc})") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold integer counts, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} holds NaN or infinite values")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer counts, got fractional values (dtype {arr.dtype})")
        if arr.size and np.abs(arr).max() > _INT64_MAX:
            raise ValueError(f"{name} holds values past the int64 range")
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise ValueError(f"{name} holds values past the int64 range")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise ValueError(f"{name} holds negative counts (min {out.min()})")
    return out


# ---------------------------------------------------------------------------- tempo traces
#: What one step of a trace is (metadata ``step_kind``): ``"batch"``, the token-expert pairs of
#: a batch of concurrent tokens (``step_tokens`` tokens each); ``"request"``, one request's
#: forward pass; ``"aggregate"``, the pairs summed over a whole run (millions of tokens, not
#: a batch any GPU ever served).
STEP_KINDS = ("batch", "request", "aggregate")


class TraceWarning(UserWarning):
    """A trace is used in a way that changes what it recorded (a rescaled step keeps its empty
    experts, a short trace is reused)."""


def write_npz(path, arrays: dict) -> None:
    """Save ``arrays`` (name -> array, no objects) as a compressed ``.npz``, atomically; the
    bytes depend only on the arrays (fixed zip timestamps), so the same input writes the same
    file."""
    import io
    import zipfile

    from ..core.io import atomic_write_bytes

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, member.getvalue())
    atomic_write_bytes(path, buf.getvalue())


def write_trace(path, counts, **metadata) -> None:
    """Save a routing trace: ``counts`` int[steps, layers, experts] plus JSON-able metadata
    (model, top_k, step_kind, source, ...), as a compressed ``.npz``, written atomically
    (:func:`write_npz`: the same input writes the same bytes)."""
    counts = np.asarray(counts)
    if counts.ndim != 3:
        raise ValueError(f"counts must be [steps, layers, experts], got shape {counts.shape}")
    if counts.dtype.kind == "b":
        raise ValueError("counts must hold integer counts, got booleans")
    if 0 in counts.shape:
        raise ValueError(f"counts has shape {counts.shape}: a trace needs at least one step, layer and expert")
    counts = as_counts(counts, "counts", 3)
    kind = metadata.get("step_kind")
    if kind is not None and kind not in STEP_KINDS:
        raise ValueError(f"step_kind must be one of {', '.join(STEP_KINDS)}, got {kind!r}")
    meta = {"version": TRACE_VERSION, **metadata}
    _check_meta(json.loads(json.dumps(meta, default=str)), counts.shape, str(path))  # what read_trace will check
    write_npz(path, {"counts": counts, "metadata": np.array(json.dumps(meta, default=str))})


def _check_meta(meta: dict, shape: tuple, what: str) -> None:
    """:class:`tempo.core.io.BadInput` unless the metadata fields a reader uses have their types
    and agree with the counts' ``shape`` [steps, layers, experts]: ``top_k`` an integer in
    [1, experts], ``step_kind`` one of :data:`STEP_KINDS`, ``step_tokens`` one integer >= 0 per
    step, ``history_steps`` an integer in [0, steps], ``source`` and ``model`` strings (each may
    be absent or null)."""
    from ..core.io import BadInput

    def integer(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    S, _, E = shape
    bad = []
    k = meta.get("top_k")
    if k is not None and not (integer(k) and 1 <= k <= E):
        bad.append(f"top_k must be an integer in [1, {E}], got {k!r:.40}")
    if meta.get("step_kind") is not None and meta["step_kind"] not in STEP_KINDS:
        bad.append(f"step_kind must be one of {', '.join(STEP_KINDS)}, got {meta['step_kind']!r:.40}")
    st = meta.get("step_tokens")
    if st is not None and not (isinstance(st, list) and len(st) == S and all(integer(x) and x >= 0 for x in st)):
        bad.append(f"step_tokens must list one integer >= 0 per step ({S} steps)")
    h = meta.get("history_steps")
    if h is not None and not (integer(h) and 0 <= h <= S):
        bad.append(f"history_steps must be an integer in [0, {S}], got {h!r:.40}")
    bad += [f"{f} must be a string" for f in ("source", "model") if meta.get(f) is not None
            and not isinstance(meta[f], str)]
    if bad:
        raise BadInput(f"{what}: its metadata disagrees with its counts {tuple(shape)}: {'; '.join(bad)}")


def read_trace(path):
    """Load a routing trace written by :func:`write_trace`: (counts int64[steps, layers,
    experts], metadata dict).  ``path``: a path or a binary file object.

    Read as untrusted input (:func:`tempo.core.io.read_npz`): a regular file of at most
    :data:`MAX_TRACE_BYTES` (a FIFO or a device is refused without blocking), arrays inflating
    to at most :data:`MAX_TRACE_INFLATED` bytes, each array's declared shape checked against
    its bytes before it is allocated, metadata JSON nested at most :data:`MAX_META_DEPTH`
    levels.  ``counts`` must hold integer counts (no booleans) with at least one step, layer
    and expert, and the metadata must agree with them (:func:`_check_meta`).  Anything else raises :class:`tempo.core.io.BadInput` (a ``ValueError``)
    naming the file; ``FileNotFoundError`` when ``path`` does not exist."""
    from ..core.io import BadInput, loads_json, read_npz

    what = str(getattr(path, "name", None) or "the trace") if hasattr(path, "read") else str(path)
    if not hasattr(path, "read"):
        path = Path(path)
    arrays = read_npz(path, what, MAX_TRACE_BYTES, MAX_TRACE_INFLATED)
    if "counts" not in arrays or "metadata" not in arrays:
        raise BadInput(f"{what} is not a tempo routing trace: it needs the arrays 'counts' and 'metadata', "
                       f"it has {sorted(arrays)[:8]}")
    m = arrays["metadata"]
    if m.ndim != 0 or m.dtype.kind != "U":
        raise BadInput(f"{what}: metadata must be one JSON string, got {m.dtype} of shape {m.shape}")
    meta = loads_json(str(m[()]), f"{what}: metadata", MAX_META_DEPTH)
    if not isinstance(meta, dict):
        raise BadInput(f"{what}: metadata must be a JSON object, got {type(meta).__name__}")
    counts = arrays["counts"]
    if counts.ndim == 3:
        _check_meta(meta, counts.shape, what)
    if counts.dtype.kind == "b":
        raise BadInput(f"{what}: counts holds booleans, not integer counts")
    if counts.dtype.kind not in "iuf":
        raise BadInput(f"{what}: counts must hold integer counts, got dtype {counts.dtype}")
    if counts.ndim != 3:
        raise BadInput(f"{what}: counts has shape {counts.shape}, expected [steps, layers, experts]")
    if 0 in counts.shape:
        raise BadInput(f"{what}: counts has shape {counts.shape}: a trace needs at least one step, layer and expert")
    try:
        return as_counts(counts, f"{what}: counts", 3), meta
    except ValueError as exc:
        raise BadInput(str(exc)) from None


# ---------------------------------------------------------------------------- SGLang recorder dumps
def load_dump(path):
    """One SGLang recorder dump file, loaded with ``torch.load(weights_only=True)``: tensors,
    numbers, strings, lists and dicts only -- a pickle that would run code is refused.

    Opened as untrusted input (:func:`tempo.core.io.open_regular`): a regular file of at most
    :data:`MAX_TRACE_BYTES` (no FIFO or device read), whose zip records declare at most
    :data:`MAX_TRACE_INFLATED` bytes in all."""
    import pickle
    import warnings
    import zipfile

    from ..core.io import BadInput, UnsafeFile, open_regular

    path = Path(path)
    with open_regular(path, MAX_TRACE_BYTES, str(path), follow=True) as f:
        try:
            import torch
        except ImportError:
            raise ImportError("reading SGLang recorder dumps (.pt) needs torch (pip install torch)") from None
        if zipfile.is_zipfile(f):
            try:
                inflated = sum(i.file_size for i in zipfile.ZipFile(f).infolist())
            except (zipfile.BadZipFile, OSError, ValueError) as exc:
                raise BadInput(f"{path} is not a loadable SGLang recorder dump ({exc})") from None
            if inflated > MAX_TRACE_INFLATED:
                raise UnsafeFile(f"{path} inflates to {inflated} bytes, over the {MAX_TRACE_INFLATED}-byte limit")
        f.seek(0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return torch.load(f, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            raise BadInput(f"{path} was refused: it holds objects other than tensors, numbers, strings, lists and "
                           "dicts (loading it would run code), so it is not an SGLang recorder dump") from None
        except Exception as exc:  # RuntimeError (bad zip, a storage larger than its record), EOFError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise BadInput(f"{path} is not a loadable SGLang recorder dump ({type(exc).__name__}: "
                           f"{first[:200]})") from None


def sglang_dump_counts(dumps) -> np.ndarray:
    """Routing counts int64[steps, layers, experts] from SGLang expert-distribution recorder
    dumps, already loaded (:func:`load_dump`) into dicts (NOTES-sglang, "Recording routing
    traces").

    * ``per_pass`` mode: one dict per rank, ``{"records": [{"forward_pass_id", "rank",
      "global_physical_count": [L, P]}, ...], "last_physical_to_logical_map": [L, P]}``.
      Counts of the same forward pass are summed over ranks and mapped physical -> logical.
    * ``stat`` mode: one dict with ``"logical_count": [buffer, L, E]`` (rank 0's dump: one row
      per forward pass, in the circular buffer's slot order; unfilled slots are zero), or an
      older SGLang's ``[L, E]``, the sum over the whole run (one step, an aggregate).

    Counts must be non-negative integers (float counts with a fraction are refused, not
    truncated); a ``ValueError`` names what is wrong.
    """
    if isinstance(dumps, dict):
        dumps = [dumps]
    if isinstance(dumps, (str, bytes)) or not hasattr(dumps, "__iter__"):
        raise ValueError(f"dumps must be a dict or a list of dicts, got {type(dumps).__name__}")
    dumps = list(dumps)
    if not dumps:
        raise ValueError("no recorder dumps given")
    for i, d in enumerate(dumps):
        if not isinstance(d, dict):
            raise ValueError(f"dump {i} is a {type(d).__name__}, expected a dict (an SGLang recorder dump)")
    if all("logical_count" in d for d in dumps):
        parts = []
        for i, d in enumerate(dumps):
            c = as_counts(d["logical_count"], f"dump {i}: logical_count")
            if c.ndim not in (2, 3):
                raise ValueError(f"dump {i}: logical_count must be [L, E] (a whole-run sum) or [buffer, L, E] "
                                 f"(one row per forward pass), got shape {c.shape}")
            parts.append(c[None] if c.ndim == 2 else c)
        if len({p.shape[1:] for p in parts}) > 1:
            raise ValueError(f"stat dumps disagree on [L, E]: {[p.shape[1:] for p in parts]}")
        counts = np.concatenate(parts)
        if counts.shape[1] == 0 or counts.shape[2] == 0:
            raise ValueError(f"stat dump logical_count has no layers or experts (shape {counts.shape})")
        return counts
    if not all("records" in d and "last_physical_to_logical_map" in d for d in dumps):
        raise ValueError("expected SGLang per_pass dumps (records + last_physical_to_logical_map) "
                         "or stat dumps (logical_count)")
    try:
        p2l = _np(dumps[0]["last_physical_to_logical_map"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"last_physical_to_logical_map is not an array ({exc})") from None
    if p2l.dtype == object or p2l.dtype.kind not in "biu" or p2l.ndim != 2:
        raise ValueError(f"last_physical_to_logical_map must be an integer [L, P] array, got "
                         f"{p2l.dtype} of shape {p2l.shape}")
    p2l = p2l.astype(np.int64)
    if np.any(p2l < -1):
        raise ValueError("last_physical_to_logical_map entries must be >= -1 (-1: empty slot)")
    for d in dumps[1:]:
        other = _np(d["last_physical_to_logical_map"])
        if other.shape != p2l.shape or not np.array_equal(other, p2l):
            raise ValueError("ranks disagree on last_physical_to_logical_map; dumps are from different placements")
    L, P = p2l.shape
    if L == 0 or P == 0 or p2l.max(initial=-1) < 0:
        raise ValueError(f"last_physical_to_logical_map holds no experts (shape {p2l.shape})")
    E = int(p2l.max()) + 1
    passes: dict[int, np.ndarray] = {}
    for i, d in enumerate(dumps):
        recs = d["records"]
        if not isinstance(recs, (list, tuple)):
            raise ValueError(f"dump {i}: records must be a list, got {type(recs).__name__}")
        for j, rec in enumerate(recs):
            if not isinstance(rec, dict) or "forward_pass_id" not in rec or "global_physical_count" not in rec:
                raise ValueError(f"dump {i}, record {j}: needs forward_pass_id and global_physical_count")
            phys = as_counts(rec["global_physical_count"], f"dump {i}, record {j}: global_physical_count")
            if phys.shape != (L, P):
                raise ValueError(f"global_physical_count has shape {phys.shape}, map has {(L, P)}")
            fid = rec["forward_pass_id"]
            fid = fid.item() if hasattr(fid, "item") else fid
            if isinstance(fid, bool) or not isinstance(fid, (int, np.integer)):
                raise ValueError(f"dump {i}, record {j}: forward_pass_id must be an integer, got {fid!r}")
            key = int(fid)
            passes[key] = passes.get(key, 0) + phys
    if not passes:
        raise ValueError("the per_pass dumps hold no records")
    out = np.zeros((len(passes), L, E), np.int64)
    rows = np.repeat(np.arange(L), P)
    valid = p2l.ravel() >= 0
    for i, key in enumerate(sorted(passes)):
        np.add.at(out[i], (rows[valid], p2l.ravel()[valid]), passes[key].ravel()[valid])
    if np.any(out < 0):
        raise ValueError("per_pass dumps sum past the int64 range")
    return out


def sglang_step_kind(dumps) -> str:
    """What a step of :func:`sglang_dump_counts`'s output is (:data:`STEP_KINDS`): ``"batch"``
    (one forward pass: per_pass records, stat rows of ``[buffer, L, E]``) or ``"aggregate"``
    (an ``[L, E]`` stat sum over a whole run).  A ``ValueError`` when the dumps mix the two."""
    if isinstance(dumps, dict):
        dumps = [dumps]
    kinds = {"aggregate" if "logical_count" in d and np.ndim(_np(d["logical_count"])) == 2 else "batch"
             for d in dumps}
    if len(kinds) > 1:
        raise ValueError("the dumps mix whole-run sums ([L, E] logical_count) with per-pass rows; convert them apart")
    return kinds.pop()


def sglang_metadata(dumps, counts: np.ndarray, top_k: int | None) -> dict:
    """The step metadata of a trace converted from SGLang recorder dumps: ``step_kind``,
    ``step_tokens`` (pairs of each step's first layer over ``top_k``; None without top_k) and
    ``pooling`` (how a step's tokens came together)."""
    kind = sglang_step_kind(dumps)
    pooling = {"aggregate": "the recorder's sum over the whole run (all requests, all forward passes)",
               "batch": "one forward pass of the serving batch, summed over the EP ranks; steps in forward-pass "
                        "order (stat mode: the circular buffer's slot order)"}[kind]
    tokens = None if not top_k else [int(c) for c in counts[:, 0].sum(axis=1) // int(top_k)]
    return {"step_kind": kind, "step_tokens": tokens, "pooling": pooling}


def relative_path(path, root=None) -> str:
    """``path`` relative to ``root`` (default: the working folder), with ``/`` separators: what
    trace metadata stores (never an absolute path)."""
    import os

    rel = os.path.relpath(Path(path).resolve(), Path(root or ".").resolve())
    return Path(rel).as_posix()


def source_files(paths, root=None) -> list[dict]:
    """``[{"path": relative path, "sha256": hex}, ...]`` of the files a trace was made from."""
    return [{"path": relative_path(p, root), "sha256": file_sha256(p)} for p in paths]


def import_sglang_dumps(paths, out, top_k: int | None = None, **metadata) -> np.ndarray:
    """Read SGLang recorder dump files (:func:`load_dump`; torch needed only here), convert
    with :func:`sglang_dump_counts` and write a routing trace to ``out`` (source files as
    paths relative to the working folder, with their sha256)."""
    dumps = [load_dump(p) for p in paths]
    counts = sglang_dump_counts(dumps)
    extra = {"top_k": int(top_k)} if top_k else {}
    write_trace(out, counts, source="sglang-recorder", files=source_files(paths), **extra,
                **sglang_metadata(dumps, counts, top_k), **metadata)
    return counts


def import_main(argv=None) -> int:
    """``python -m tempo import-trace DUMP... -o trace.npz``."""
    from ..core.argtypes import ArgumentParser, input_file, int_range, output_file

    ap = ArgumentParser(prog="python -m tempo import-trace",
                        description="convert SGLang recorder dumps (per_pass: one file per rank; or stat)")
    ap.add_argument("dumps", nargs="+", type=input_file)
    ap.add_argument("-o", "--out", required=True, type=output_file)
    ap.add_argument("--model", default="", help="model name stored in the trace metadata")
    ap.add_argument("--top-k", type=int_range(1, 1024), default=None,
                    help="experts per token of the recorded model (stored as top_k; a trace-backed build routes "
                         "tokens to this many experts, default 8)")
    a = ap.parse_args(argv)
    if a.top_k is not None and a.top_k < 1:
        ap.fail("--top-k", f"must be a positive integer, got {a.top_k}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("python -m tempo import-trace: reading recorder dumps needs torch (pip install torch)", file=sys.stderr)
        return 1
    dumps = []
    for p in a.dumps:
        try:
            dumps.append(load_dump(p))
        except ValueError as exc:
            ap.fail("dumps", str(exc))
    try:
        counts = sglang_dump_counts(dumps)
    except ValueError as exc:
        ap.fail("dumps", str(exc))
    if a.top_k is not None and a.top_k > counts.shape[2]:
        ap.fail("--top-k", f"must be at most the trace's {counts.shape[2]} experts, got {a.top_k}")
    extra = {"top_k": a.top_k} if a.top_k is not None else {}
    try:
        steps = sglang_metadata(dumps, counts, a.top_k)
    except ValueError as exc:
        ap.fail("dumps", str(exc))
    write_trace(a.out, counts, source="sglang-recorder", files=source_files(a.dumps), model=a.model, **extra, **steps)
    print(f"wrote {a.out}: {counts.shape[0]} steps x {counts.shape[1]} layers x {counts.shape[2]} experts")
    return 0



# ---------------------------------------------------------------------------- rescaling recorded steps
def rescale_effect(steps, routed, top_k: int, reference) -> dict:
    """What rescaling recorded steps did to them.  ``steps`` int[n, E]: the recorded steps;
    ``routed`` int[n, E]: the batches routed from their shares; ``reference`` [n, E]: for each
    step, its layer's pairs over the whole recording (the long-run popularity).

    A step routed to more tokens than it recorded keeps its empty experts: an expert the step
    did not route to gets nothing at any batch size, and the step's own sampling noise becomes
    the router weights.  Returns ``upscaled`` (steps with fewer recorded tokens than the
    batch), ``recorded_tokens`` (median over those), ``empty_kept`` (mean experts empty in an
    upscaled step that the layer's recording routes to), ``max_over_mean_reference`` and
    ``max_over_mean_rescaled`` (median over the upscaled steps of the hottest expert's pair
    share times ``E``, in the layer's recording and in the rescaled batch)."""
    steps, routed, ref = (np.asarray(a, dtype=np.float64) for a in (steps, routed, reference))
    if steps.shape != routed.shape or steps.shape != ref.shape or steps.ndim != 2:
        raise ValueError(f"steps, routed and reference must share one [n, E] shape, got {steps.shape}, "
                         f"{routed.shape}, {ref.shape}")
    E = steps.shape[1]
    rec_tok = steps.sum(axis=1) / top_k
    up = rec_tok < routed.sum(axis=1) / top_k
    out = {"upscaled": int(up.sum()), "steps": int(steps.shape[0]), "experts": E}
    if not up.any():
        return {**out, "recorded_tokens": None, "empty_kept": 0.0, "max_over_mean_reference": None,
                "max_over_mean_rescaled": None}
    empty = ((steps[up] == 0) & (ref[up] > 0)).sum(axis=1)

    def mm(x):
        return float(np.median(x.max(axis=1) / x.sum(axis=1) * E))

    return {**out, "recorded_tokens": float(np.median(rec_tok[up])), "empty_kept": float(empty.mean()),
            "max_over_mean_reference": mm(ref[up]), "max_over_mean_rescaled": mm(routed[up])}


def warn_rescale(effect: dict, tokens: int, where: str = "") -> None:
    """A :class:`TraceWarning` when :func:`rescale_effect` found upscaled steps that keep empty
    experts, saying how many and how the skew moved."""
    if not effect["upscaled"] or effect["empty_kept"] <= 0:
        return
    import warnings

    warnings.warn(
        f"{where + ': ' if where else ''}{effect['upscaled']} of {effect['steps']} recorded steps (about "
        f"{effect['recorded_tokens']:.0f} tokens each) were rescaled to {tokens} tokens and keep their empty experts: "
        f"{effect['empty_kept']:.1f} of {effect['experts']} experts empty on average that the layer's recording routes "
        f"to; the hottest expert's pair share is {effect['max_over_mean_rescaled']:.2f}x the mean in the rescaled "
        f"batches against {effect['max_over_mean_reference']:.2f}x in the layer's whole recording (a trace of batches "
        f"near {tokens} tokens avoids this)", TraceWarning, stacklevel=3)


# ---------------------------------------------------------------------------- a trace as a build input
#: metadata ``source`` values that mark a trace as *not* recorded routing: such a trace is a
#: pipeline demonstration and never yields ledger evidence "trace"
SYNTHETIC_SOURCES = ("synthetic",)


def file_sha256(path) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    import hashlib

    from ..core.io import open_regular

    h = hashlib.sha256()
    with open_regular(path, 2**40, str(path), follow=True) as f:  # no FIFO or device: hashed in blocks
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_recorded(source) -> bool:
    """Does a trace whose metadata says ``source`` hold recorded routing?  ``"synthetic"``
    (:func:`tempo.world.workloads.synthetic_trace`) and a missing source do not."""
    return bool(source) and str(source) not in SYNTHETIC_SOURCES


def describe(meta: dict, shape) -> str:
    """The trace's source metadata in one line: source, model, steps x layers x experts."""
    parts = [str(meta.get("source") or "unknown source")]
    if meta.get("model"):
        parts.append(f"model {meta['model']}")
    parts.append(" x ".join(f"{n} {w}" for n, w in zip(shape, ("steps", "layers", "experts"))))
    return ", ".join(parts)


def public_trace(sha256: str) -> str | None:
    """The file name of the shipped public trace (``data/traces/manifest.json``) whose bytes
    have ``sha256``, or None: a trace that is not one of them is a user's own recording."""
    from ..core import paths
    from ..core.io import read_json

    manifest = paths.TRACES / "manifest.json"
    if not manifest.is_file():
        return None
    files = (read_json(manifest, 2**20, "data/traces/manifest.json") or {}).get("files") or {}
    return next((name for name, f in files.items() if isinstance(f, dict) and f.get("sha256") == sha256), None)


def trace_config(path) -> dict:
    """What an experiment's config carries when it runs on the trace at ``path`` (the build's
    ``TRACE``): ``trace`` (the path), ``trace_sha256`` (the file's contents, so the cache key
    and the result's ``.meta.json`` name exactly which recording), ``trace_source`` (its
    metadata's ``source``), ``trace_about`` (:func:`describe`), ``trace_step_kind`` (what a step
    is: batch, request or aggregate; "" when the trace does not say) and ``trace_public`` (the
    shipped public trace it is, :func:`public_trace`, or "").  Reads the file once (a
    ``ValueError`` names it when it is not a tempo trace)."""
    counts, meta = read_trace(path)
    sha = file_sha256(path)
    return {"trace": str(path), "trace_sha256": sha, "trace_source": str(meta.get("source") or ""),
            "trace_about": describe(meta, counts.shape), "trace_step_kind": str(meta.get("step_kind") or ""),
            "trace_public": public_trace(sha) or ""}


def with_trace(config: dict, path) -> dict:
    """``config`` for a run on the trace at ``path``; ``config`` itself, unchanged, when
    ``path`` is None or empty (the synthetic build: same cache key, same results)."""
    return {**config, **trace_config(path)} if path else config


def provenance(config: dict) -> str | None:
    """The ledger's provenance for a result computed with ``config``: ``"recorded routing trace
    (<file name>, sha256 <12 hex>, <source metadata>)"``, or None when the config names no trace."""
    if not config or not config.get("trace") or not config.get("trace_sha256"):
        return None
    return (f"recorded routing trace ({Path(str(config['trace'])).name}, sha256 {str(config['trace_sha256'])[:12]}, "
            f"{config.get('trace_about') or config.get('trace_source') or 'unknown source'})")
