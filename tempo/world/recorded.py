"""Public recordings of trained MoE routing, converted to tempo routing traces
(:func:`tempo.world.traces.write_trace`), and the traces shipped under ``data/traces/``
(``python -m tempo make-traces --source ../shared/data/routing``).

Two sources, read from a source folder that holds them as their repositories published them
(gzip-compressed or not):

* **ESFT expert scores** (github.com/deepseek-ai/ESFT, MIT; ``deepseek-esft/`` under the source
  folder): ``results/expert_scores/<task>/expert_weights_<layer>.txt``, the routing of
  ESFT-vanilla-lite (DeepSeek-V2-Lite architecture: 26 MoE layers, 64 routed experts, top-6) on
  four tasks' training prompts.  A line is the expert ids of its tokens, tab-separated, a double
  tab, then their gate weights, tab-separated (the repository's reader,
  ``scripts/expert/generate_expert_config.py``, splits it the same way); ``top_k`` ids per token,
  tokens in order.  A line is one forward pass of one prompt: every layer file of a task has the
  same lines with the same tokens per line (checked on reading).
* **SGLang expert-distribution statistics of DeepSeek-V3** (the SGLang team's attachment to
  sgl-project/sglang issue 6017; ``sglang-dsv3-ep-statistics/`` under the source folder):
  ``<phase>_in<I>[out<O>].json``, ``{"logical_count": [L][E]}``, the token-expert pairs per
  (layer, expert) an older SGLang's stat-mode recorder summed over a whole benchmark run of one
  workload.  Aggregates, not batches.

What a trace's steps are is in its metadata (``step_kind``, ``step_tokens``, ``pooling``,
``history_steps``), with the source files' paths relative to the source folder and their sha256.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import profiles
from .traces import file_sha256, relative_path, write_trace
from .workloads import router_weights

#: where each source lives under the source folder (``--source``)
ESFT_DIR = "deepseek-esft/results/expert_scores"
SGLANG_DIR = "sglang-dsv3-ep-statistics/attachment_ep_statistics"
#: where each source came from (the source folders' SOURCE.md)
ESFT_ORIGIN = {"repository": "github.com/deepseek-ai/ESFT", "commit": "579a7711e4b332b4c57b47e378a0cf240d85caa6",
               "licence": "MIT (the repository's code licence; the data files are part of the repository)",
               "cite": "Wang et al., Let the Expert Stick to His Last: Expert-Specialized Fine-Tuning for Sparse "
                       "Architectural Large Language Models, arXiv 2407.01906"}
SGLANG_ORIGIN = {"repository": "github.com/GeneratedRandomly/SGLang-reproduce (a public mirror of the attachment to "
                               "github.com/sgl-project/sglang issue 6017)",
                 "commit": "c79682c8cf0f4de9b642dbd99ad12cef60fcfb32",
                 "licence": "no licence file in the mirror; SGLang is Apache-2.0; published measurements, "
                            "cite the issue",
                 "cite": "sgl-project/sglang issue 6017 (large-scale EP serving of DeepSeek-V3)"}
ESFT_MODEL = "ESFT-vanilla-lite (DeepSeek-V2-Lite architecture: 64 routed experts, top-6; shared experts not logged)"
DSV3_MODEL = "DeepSeek-V3 (256 routed experts, top-8; SGLang serving)"


#: the most bytes a source file may hold, on disk and inflated (the largest ESFT layer file is 0.6 MB
#: inflated, the largest statistics file 0.3 MB)
MAX_SOURCE_BYTES = 256 * 2**20


def _read_text(path: Path) -> str:
    """A source file's text (``.gz`` inflated), read as untrusted input: a regular file (no FIFO
    or device; a link is followed, the user named the folder) of at most
    :data:`MAX_SOURCE_BYTES`, on disk and inflated (:func:`tempo.core.io.read_maybe_gz`).
    :class:`tempo.core.io.BadInput` "<path> could not be read (why)" otherwise."""
    from ..core.io import BadInput, read_maybe_gz

    try:
        return read_maybe_gz(path, MAX_SOURCE_BYTES, "it", follow=True).decode("utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} could not be read (it is not UTF-8 text: {exc})") from None
    except BadInput as exc:
        raise type(exc)(f"{path} could not be read ({exc})") from None


# ---------------------------------------------------------------------------- ESFT expert scores
def read_esft_layer(path, top_k: int = 6, n_experts: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """One ESFT ``expert_weights_<layer>.txt[.gz]`` file: (tokens per line int64[lines],
    expert ids int16[tokens, top_k]).  Every line must split at one double tab into as many
    expert ids as gate weights, a positive multiple of ``top_k``; ids in ``[0, n_experts)``,
    distinct within a token; weights finite and non-negative.  A ``ValueError`` names the file
    and the line otherwise."""
    path = Path(path)
    lines, parts = [], []
    rows = _read_text(path).split("\n")
    if rows[-1] == "":  # the newline that ends the last line
        rows.pop()
    for no, line in enumerate(rows, 1):
        line = line.rstrip("\r\n")
        where = f"{path}:{no}"
        halves = line.split("\t\t")
        if len(halves) != 2:
            raise ValueError(f"{where}: expected expert ids and gate weights separated by one double tab, "
                             f"found {len(halves) - 1} double tabs")
        try:
            ids = np.asarray(halves[0].split("\t")).astype(np.int64)
            w = np.asarray(halves[1].split("\t")).astype(np.float64)
        except ValueError as exc:
            raise ValueError(f"{where}: not a number ({exc})") from None
        if ids.size != w.size or ids.size == 0 or ids.size % top_k:
            raise ValueError(f"{where}: {ids.size} expert ids and {w.size} gate weights; expected the same "
                             f"positive multiple of top_k={top_k}")
        if ids.min() < 0 or ids.max() >= n_experts:
            raise ValueError(f"{where}: expert ids must lie in [0, {n_experts}), "
                             f"found {ids.min()}..{ids.max()}")
        if not np.all(np.isfinite(w)) or w.min() < 0:
            raise ValueError(f"{where}: gate weights must be finite and non-negative")
        tok = ids.reshape(-1, top_k)
        srt = np.sort(tok, axis=1)
        if np.any(srt[:, 1:] == srt[:, :-1]):
            raise ValueError(f"{where}: token {int(np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(1))[0])} "
                             f"repeats an expert (a top-{top_k} router picks distinct experts)")
        lines.append(tok.shape[0])
        parts.append(tok.astype(np.int16))
    if not lines:
        raise ValueError(f"{path} holds no lines")
    return np.asarray(lines, np.int64), np.concatenate(parts)


def _layer_files(folder: Path) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for p in sorted(folder.iterdir()):
        name = p.name.removesuffix(".gz")
        if name.startswith("expert_weights_") and name.endswith(".txt"):
            num = name[len("expert_weights_"):-len(".txt")]
            if not num.isdigit():
                raise ValueError(f"{p}: the layer in expert_weights_<layer>.txt must be a number")
            if int(num) in out:
                raise ValueError(f"{folder} holds layer {int(num)} twice ({out[int(num)].name}, {p.name})")
            out[int(num)] = p
    if not out:
        raise ValueError(f"{folder} holds no expert_weights_<layer>.txt[.gz] files")
    return dict(sorted(out.items()))


@dataclass
class EsftRecording:
    """An ESFT recording: ``ids`` int16[tokens, layers, top_k] (tokens of all prompts, prompt
    after prompt), ``prompt_tokens`` int64[prompts], ``prompt_task`` int64[prompts] (index
    into ``tasks``), ``layers`` (the files' layer numbers), ``files`` (every file read)."""

    tasks: tuple
    layers: tuple
    prompt_tokens: np.ndarray
    prompt_task: np.ndarray
    ids: np.ndarray
    top_k: int
    n_experts: int
    files: list = field(default_factory=list)

    def counts(self) -> np.ndarray:
        """int64[layers, experts]: the recording's pairs per (layer, expert)."""
        return _bincount_layers(self.ids, self.n_experts)


def _bincount_layers(ids: np.ndarray, n_experts: int) -> np.ndarray:
    """int64[L, E] pairs of ``ids`` int[tokens, L, K]."""
    L = ids.shape[1]
    flat = ids.transpose(1, 0, 2).reshape(L, -1).astype(np.int64) + (np.arange(L) * n_experts)[:, None]
    return np.bincount(flat.ravel(), minlength=L * n_experts).reshape(L, n_experts).astype(np.int64)


def read_esft(folder, tasks=None, top_k: int = 6, n_experts: int = 64) -> EsftRecording:
    """The ESFT recording under ``folder`` (``results/expert_scores``: one sub-folder per task,
    each with ``expert_weights_<layer>.txt[.gz]`` for the same layers), ``tasks`` (default:
    every sub-folder, sorted).  Checks that each task's layer files hold the same lines with
    the same tokens per line; a ``ValueError`` names the file otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of ESFT expert scores (<task>/expert_weights_<layer>.txt)")
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if tasks is None else list(tasks)
    if not names:
        raise ValueError(f"{folder} holds no task folders")
    layers, per_task, prompt_tokens, prompt_task, files = None, [], [], [], []
    for t, task in enumerate(names):
        lf = _layer_files(folder / task)
        if layers is None:
            layers = tuple(lf)
        elif tuple(lf) != layers:
            raise ValueError(f"{folder / task} has layers {list(lf)}, {folder / names[0]} has {list(layers)}")
        lines0, cols = None, []
        for num, path in lf.items():
            lines, ids = read_esft_layer(path, top_k, n_experts)
            if lines0 is None:
                lines0, first = lines, path
            elif lines.size != lines0.size or np.any(lines != lines0):
                n = min(lines.size, lines0.size)
                diff = np.flatnonzero(lines[:n] != lines0[:n])
                bad = int(diff[0]) if diff.size else n
                raise ValueError(f"{path}: {lines.size} lines, line {bad + 1} differs in tokens from {first} "
                                 f"({lines0.size} lines): the layer files must record the same forward passes")
            cols.append(ids)
            files.append(path)
        per_task.append(np.stack(cols, axis=1))
        prompt_tokens.append(lines0)
        prompt_task.append(np.full(lines0.size, t, np.int64))
    return EsftRecording(tuple(names), layers, np.concatenate(prompt_tokens), np.concatenate(prompt_task),
                         np.concatenate(per_task), top_k, n_experts, files)


#: how :func:`esft_trace` pools the tokens of a half into steps
POOLINGS = ("shuffled", "packed")
_POOLING_TEXT = {
    "shuffled": "the tokens of a half's prompts (all tasks) in a seeded random order, cut into equal steps: a step "
                "holds tokens of many prompts at scattered positions, as a decode batch holds one token of each of "
                "many requests (the recording has too few prompts for one token per prompt per step)",
    "packed": "the half's prompts in a seeded order, tokens of a prompt consecutive, cut into equal steps: chunked "
              "prefill packing, a step holds a few prompts' consecutive tokens",
}


def esft_trace(rec: EsftRecording, tokens_per_step: int = 1024, pooling: str = "shuffled", seed: int = 0,
               root=None) -> tuple[np.ndarray, dict]:
    """(counts int64[steps, layers, experts], metadata) of an ESFT recording batched into steps
    of about ``tokens_per_step`` concurrent tokens.

    Prompts are split into two halves of disjoint prompts: per task, prompts in a seeded order
    each go to the half that so far holds fewer of that task's tokens, so both halves carry every
    task in about equal measure.  The first half's steps come first (the history a placement is
    built from: ``history_steps``), then the second's (the replay).  Each half is cut into the
    same number of steps, ``round(tokens / (2 * tokens_per_step))``, of near-equal size
    (``step_tokens``); ``pooling`` (:data:`POOLINGS`) says which tokens share a step.  Every
    token lands in exactly one step, so the counts sum to the recording's.  ``root``: the folder
    the source paths in the metadata are relative to."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if isinstance(tokens_per_step, bool) or not isinstance(tokens_per_step, (int, np.integer)) or tokens_per_step < 1:
        raise ValueError(f"tokens_per_step must be a positive integer, got {tokens_per_step!r}")
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(rec.prompt_tokens)])
    halves: list[list[int]] = [[], []]
    held = np.zeros((2, len(rec.tasks)), np.int64)
    for t in range(len(rec.tasks)):
        idx = np.flatnonzero(rec.prompt_task == t)
        for p in idx[rng.permutation(idx.size)]:
            h = 0 if held[0, t] <= held[1, t] else 1
            halves[h].append(int(p))
            held[h, t] += rec.prompt_tokens[p]
    n_tok = int(starts[-1])
    S = max(1, int(round(n_tok / (2 * tokens_per_step))))
    if min(held.sum(axis=1)) < S:
        raise ValueError(f"the recording's {n_tok} tokens are too few for steps of {tokens_per_step} tokens")
    steps = []
    for h in (0, 1):
        order = np.asarray(halves[h])[rng.permutation(len(halves[h]))]
        tokens = np.concatenate([np.arange(starts[p], starts[p + 1]) for p in order])
        if pooling == "shuffled":
            tokens = tokens[rng.permutation(tokens.size)]
        steps += np.array_split(tokens, S)
    counts = np.stack([_bincount_layers(rec.ids[tk], rec.n_experts) for tk in steps])
    tasks = list(rec.tasks)
    meta = {
        "source": "ESFT expert scores", "model": ESFT_MODEL, "top_k": rec.top_k, "layers": list(rec.layers),
        "layers_note": "the files' layer numbers (expert_weights_<layer>); the model's layer 0 is dense",
        "tasks": tasks, "step_kind": "batch", "tokens_per_step": int(tokens_per_step),
        "step_tokens": [int(s.size) for s in steps], "ep_size": None,
        "ep_note": "a step is the whole batch over all GPUs: tokens per GPU = step tokens / EP size (1,024 tokens "
                   "are 128 per GPU on EP8); the recording ran outside any EP deployment",
        "pooling": pooling, "pooling_note": _POOLING_TEXT[pooling],
        "history_steps": S,
        "history_note": f"steps 0-{S - 1} are the history half, steps {S}-{2 * S - 1} the replay half; the halves hold "
                        "disjoint prompts, each task's tokens split about evenly between them",
        "history_tokens_by_task": dict(zip(tasks, (int(x) for x in held[0]))),
        "replay_tokens_by_task": dict(zip(tasks, (int(x) for x in held[1]))),
        "seed": int(seed), "origin": ESFT_ORIGIN,
        "files": [{"path": relative_path(p, root), "sha256": file_sha256(p)} for p in rec.files],
    }
    return counts, meta


# ---------------------------------------------------------------------------- SGLang stat-mode files
def read_sglang_stat(path) -> np.ndarray:
    """One SGLang stat-mode statistics file (``.json`` or ``.json.gz``,
    ``{"logical_count": [L][E]}``): int64[L, E].  Counts must be non-negative integers; a
    ``ValueError`` names the file otherwise."""
    from ..core.io import BadInput, loads_json
    from .traces import as_counts

    path = Path(path)
    try:
        data = loads_json(_read_text(path), "its text")
    except BadInput as exc:
        raise type(exc)(f"{path} is not a JSON statistics file ({exc})") from None
    if not isinstance(data, dict) or "logical_count" not in data:
        raise ValueError(f"{path}: expected a JSON object with 'logical_count' [layers][experts]")
    try:
        c = as_counts(data["logical_count"], f"{path}: logical_count", 2)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if c.shape[0] == 0 or c.shape[1] == 0:
        raise ValueError(f"{path}: logical_count has no layers or experts (shape {c.shape})")
    return c


def sglang_stat_trace(paths, top_k: int = 8, model: str = DSV3_MODEL, root=None) -> tuple[np.ndarray, dict]:
    """(counts int64[files, layers, experts], metadata) of SGLang stat-mode statistics files,
    one aggregate step per file in the order given.  Layers that are zero in every file (a
    model's dense layers) are left out (``layers`` names the kept ones, ``dropped_layers`` the
    others); the counts of the kept layers are the files' own.  The first half of the steps
    (rounded) is the history (``history_steps``)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no statistics files given")
    parts = [read_sglang_stat(p) for p in paths]
    if len({c.shape for c in parts}) > 1:
        raise ValueError(f"the statistics files disagree on [layers, experts]: "
                         f"{dict((p.name, c.shape) for p, c in zip(paths, parts))}")
    counts = np.stack(parts)
    keep = np.flatnonzero(counts.sum(axis=(0, 2)) > 0)
    if keep.size == 0:
        raise ValueError("the statistics files hold no routed pairs")
    pairs = counts[:, keep].sum(axis=2)  # [steps, kept layers]
    S = counts.shape[0]
    meta = {
        "source": "SGLang expert-distribution recorder, stat mode", "model": model, "top_k": int(top_k),
        "layers": [int(x) for x in keep],
        "dropped_layers": [int(x) for x in np.setdiff1d(np.arange(counts.shape[1]), keep)],
        "layers_note": "model layer indices; dropped layers are zero in every file (dense layers)",
        "steps": [p.name.split(".")[0] for p in paths],
        "step_kind": "aggregate", "step_tokens": [int(x) for x in pairs.max(axis=1) // top_k],
        "step_tokens_min": [int(x) for x in pairs.min(axis=1) // top_k],
        "step_note": "one step per workload: the pairs the recorder summed over the whole benchmark run (step_tokens: "
                     "its busiest layer's pairs over top_k, step_tokens_min the least busy layer's), not a batch",
        "ep_size": None, "pooling": "whole-run sum (every request and forward pass of the workload)",
        "history_steps": max(1, S // 2) if S > 1 else 0,
        "history_note": "the first history_steps workloads are the history, the rest the replay",
        "origin": SGLANG_ORIGIN,
        "files": [{"path": relative_path(p, root), "sha256": file_sha256(p)} for p in paths],
    }
    return counts[:, keep], meta


# ---------------------------------------------------------------------------- the shipped traces
#: the traces ``make-traces`` writes: file name -> (what, options)
SHIPPED = {
    "esft-dsv2lite-t1024.npz": ("esft", {"tokens_per_step": 1024, "pooling": "shuffled", "seed": 0}),
    "esft-dsv2lite-t4096.npz": ("esft", {"tokens_per_step": 4096, "pooling": "shuffled", "seed": 0}),
    "dsv3-sglang-decode.npz": ("sglang", {"phase": "decode"}),
    "dsv3-sglang-prefill.npz": ("sglang", {"phase": "prefill"}),
}
MANIFEST = "manifest.json"
#: the size limit of a committed data file
MAX_BYTES = 5 * 2**20


def _sglang_files(source: Path, phase: str) -> list[Path]:
    folder = source / SGLANG_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist (the SGLang DeepSeek-V3 statistics)")
    files = sorted(p for p in folder.iterdir() if p.name.startswith(phase + "_") and ".json" in p.name)
    if not files:
        raise ValueError(f"{folder} holds no {phase}_*.json[.gz] statistics files")
    return files


def build_profile(name: str, counts, meta: dict, trace_sha256: str = "") -> dict:
    """A profile from a trace (``counts`` int[steps, layers, experts] and its metadata): the
    pairs summed over the steps per layer and the router weights that reproduce each layer's
    shares (:func:`tempo.world.workloads.router_weights`)."""
    c = np.asarray(counts, dtype=np.int64).sum(axis=0)
    k = int(meta["top_k"])
    weights = np.stack([router_weights(row, k) for row in c])
    spec = profiles.PROFILES[name]
    return {"counts": c, "weights": weights, "layers": list(meta.get("layers") or range(c.shape[0])), "top_k": k,
            "model": str(meta.get("model", "")), "about": spec.about, "trace": spec.trace, "trace_sha256": trace_sha256}


def make_traces(source, out=None, only=None, log=print) -> dict:
    """Convert the public recordings under ``source`` into the :data:`SHIPPED` traces in ``out``
    (default ``data/traces/``), the named profiles (:mod:`tempo.world.profiles`) and the
    manifest (``manifest.json``: per file its sha256, size, shape, step kind, source, commit,
    licence, the source files' sha256 and the command).  ``only``: a subset of the trace file
    names.  Returns the manifest."""
    from ..core import paths

    source = Path(source)
    if not source.is_dir():
        raise FileNotFoundError(f"--source {source} is not a folder")
    if out is None and not paths.IN_CHECKOUT:
        raise ValueError("no source checkout here: pass the output folder (--out)")
    out = Path(out) if out is not None else paths.DATA / "traces"
    names = list(SHIPPED) if only is None else list(only)
    for n in names:
        if n not in SHIPPED:
            raise ValueError(f"unknown trace {n!r}; the shipped traces are {', '.join(SHIPPED)}")
    rec = None
    entries, traces = {}, {}
    for name in names:
        kind, opts = SHIPPED[name]
        t0 = time.perf_counter()
        if kind == "esft":
            if rec is None:
                rec = read_esft(source / ESFT_DIR)
            counts, meta = esft_trace(rec, root=source, **opts)
        else:
            counts, meta = sglang_stat_trace(_sglang_files(source, opts["phase"]), root=source)
        write_trace(out / name, counts, **meta)
        traces[name] = (counts, meta)
        entries[name] = _entry(out / name, counts, meta)
        log(f"wrote {out / name}: {' x '.join(map(str, counts.shape))} ({meta['step_kind']} steps), "
            f"{entries[name]['bytes']:,} bytes, {time.perf_counter() - t0:.1f} s")
    made = {}
    for pname, spec in profiles.PROFILES.items():
        if spec.trace in traces:
            t0 = time.perf_counter()
            made[pname] = build_profile(pname, *traces[spec.trace], trace_sha256=entries[spec.trace]["sha256"])
            log(f"profile {pname}: router weights of {made[pname]['counts'].shape[0]} layers, "
                f"{time.perf_counter() - t0:.1f} s")
    if made:
        profiles.write_profiles(out / profiles.PROFILES_FILE, made)
        entries[profiles.PROFILES_FILE] = {
            "sha256": file_sha256(out / profiles.PROFILES_FILE), "bytes": (out / profiles.PROFILES_FILE).stat().st_size,
            "profiles": {p: {"trace": profiles.PROFILES[p].trace, "layers": int(m["counts"].shape[0]),
                             "experts": int(m["counts"].shape[1]), "top_k": int(m["top_k"])} for p, m in made.items()},
            "about": "per-layer pair counts and router weights of the named routing profiles (tempo.world.profiles)"}
    for name, e in entries.items():
        if e["bytes"] > MAX_BYTES:
            raise ValueError(f"{out / name} is {e['bytes']:,} bytes, over the {MAX_BYTES:,}-byte limit of a data file")
    manifest = {"command": f"python -m tempo make-traces --source {relative_path(source)}", "files": entries}
    from ..core.io import atomic_write_bytes

    atomic_write_bytes(out / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def _entry(path: Path, counts: np.ndarray, meta: dict) -> dict:
    return {"sha256": file_sha256(path), "bytes": path.stat().st_size, "shape": list(counts.shape),
            "step_kind": meta["step_kind"], "tokens_per_step": meta.get("tokens_per_step"),
            "step_tokens": meta["step_tokens"],
            "pooling": meta["pooling"], "model": meta["model"], "source": meta["source"],
            "repository": meta["origin"]["repository"], "commit": meta["origin"]["commit"],
            "licence": meta["origin"]["licence"], "source_files": meta["files"]}


def make_main(argv=None) -> int:
    """``python -m tempo make-traces --source ../shared/data/routing [--out data/traces]``."""
    from ..core.argtypes import ArgumentParser

    ap = ArgumentParser(prog="python -m tempo make-traces",
                        description="convert the public routing recordings (ESFT expert scores, SGLang DeepSeek-V3 "
                                    "statistics) into the shipped traces and profiles under data/traces/")
    ap.add_argument("--source", required=True,
                    help=f"folder holding {ESFT_DIR}/ and {SGLANG_DIR}/ (e.g. ../shared/data/routing)")
    ap.add_argument("--out", default=None, help="output folder (default: data/traces of this checkout)")
    a = ap.parse_args(argv)
    if not Path(a.source).is_dir():
        ap.fail("--source", f"{a.source} is not a folder")
    t0 = time.perf_counter()
    make_traces(a.source, a.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"made {len(SHIPPED)} traces and their profiles in {time.perf_counter() - t0:.1f} s")
    return 0
