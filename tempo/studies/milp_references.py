"""The MILP references of Section 4.2 ("against a 10 s HiGHS MILP") that do not depend on the clock.

A time-limited MILP's answer depends on how fast and how busy the machine is: with HiGHS's 10 s
limit the same 120 batches came out 108 or 112 proven optimal on two loads of one machine, and the
ledger's ``solver_phase_grid_max`` moved with it.  So the references are fixed once:

* :func:`generate` (``python -m tempo milp-references``, :mod:`tempo.book.milp_store`) solves
  every batch of the ``solver_vs_milp`` grids (the smoke and full profiles, the paper's reading
  and the alternatives the ledger runs) single-threaded with a generous wall-clock limit, and
  stores each answer in ``data/milp/references.npz`` (compressed): the dispatch, its makespan, the
  proven lower bound, whether HiGHS proved it optimal, the limit it ran under and its solve time.
  ``data/milp/manifest.json`` holds the command, the machine, HiGHS's version and the file's
  sha256.
* :func:`reference` looks a batch up at build time and re-verifies the stored answer by
  re-pricing it (cheap): the dispatch must be a valid dispatch of the batch and its makespan
  under the model must equal the stored objective; a store whose sha256 disagrees with its
  manifest, or an answer that does not re-price, is refused (``ValueError`` naming it).
* :func:`solve_fixed` solves a batch that has no stored reference at build time: HiGHS
  single-threaded under :data:`BUILD_NODE_LIMIT` branch-and-bound nodes and no wall-clock limit,
  which gives the same answer on every machine under any load.

A batch whose optimum is not proven (within the generous limit, or the node limit) keeps the
MILP's answer at its limit, as the paper scored it; ``meta["optimal"]`` says which.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..core import paths
from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance

#: where the references live
STORE = paths.DATA / "milp" / "references.npz"
MANIFEST = STORE.with_name("manifest.json")
#: the node limit of a MILP solved at build time (single-threaded, no wall-clock limit)
BUILD_NODE_LIMIT = 2000
#: the wall-clock limit per batch when the references are generated (seconds)
GENERATE_TIME_LIMIT = 600.0
#: the relative tolerance of a stored answer's re-pricing
REPRICE_RTOL = 1e-9
_MAX_BYTES = 5 * 2**20


def key(inst: Instance, model: CostModel) -> str:
    """The hex sha256 of a batch (counts, placement, group sizes) and the cost model: the key of
    its reference."""
    from .readings import batch_hash

    return batch_hash(inst, repr(model)).hex()


# ------------------------------------------------------------------ the store
_CACHE: dict = {}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(store: Path | None = None) -> dict:
    """``{key: record}`` of the stored references (read once per process and store): each record
    a dict with ``objective``, ``lower_bound``, ``optimal``, ``limit``, ``solve_s`` and the
    dispatch's nonzero shares (``shape``, ``index`` into the flattened shares, ``value``).  An
    absent store is empty; one whose sha256 differs from its manifest's raises ``ValueError``."""
    store = STORE if store is None else Path(store)
    mtime = store.stat().st_mtime_ns if store.is_file() else None
    hit = _CACHE.get(store)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    refs: dict = {}
    if mtime is not None:
        if store.stat().st_size > _MAX_BYTES:
            raise ValueError(f"{store} holds {store.stat().st_size} bytes, more than the {_MAX_BYTES} a store may")
        man = json.loads(store.with_name("manifest.json").read_text())
        want = man.get("files", {}).get(store.name)
        if want != _sha256(store):
            raise ValueError(f"{store}: sha256 differs from {store.with_name('manifest.json')} ({want}); "
                             "regenerate it with python -m tempo milp-references")
        with np.load(store, allow_pickle=False) as z:
            keys, ptr = z["keys"], z["ptr"]
            for i, k in enumerate(keys.tolist()):
                refs[k] = {"objective": float(z["objective"][i]), "lower_bound": float(z["lower_bound"][i]),
                           "optimal": bool(z["optimal"][i]), "limit": str(z["limit"][i]),
                           "solve_s": float(z["solve_s"][i]), "shape": tuple(int(x) for x in z["shape"][i]),
                           "index": z["index"][ptr[i]:ptr[i + 1]], "value": z["value"][ptr[i]:ptr[i + 1]]}
    _CACHE[store] = (mtime, refs)
    return refs


def save(refs: dict, command: str, store: Path | None = None) -> Path:
    """Write ``refs`` (``{key: record}`` as :func:`load` gives them) to ``store`` (default
    :data:`STORE`), compressed, and its manifest beside it (command, machine, HiGHS version,
    counts, sha256)."""
    import highspy

    from ..core.io import atomic_write_text
    from ..core.version import machine_name

    store = STORE if store is None else Path(store)
    store.parent.mkdir(parents=True, exist_ok=True)
    ks = sorted(refs)
    lens = [len(refs[k]["index"]) for k in ks]
    arrays = dict(keys=np.array(ks, dtype="U64"),
                  objective=np.array([refs[k]["objective"] for k in ks]),
                  lower_bound=np.array([refs[k]["lower_bound"] for k in ks]),
                  optimal=np.array([refs[k]["optimal"] for k in ks], dtype=bool),
                  limit=np.array([refs[k]["limit"] for k in ks], dtype="U32"),
                  solve_s=np.array([refs[k]["solve_s"] for k in ks]),
                  shape=np.array([refs[k]["shape"] for k in ks], dtype=np.int64).reshape(len(ks), 2),
                  ptr=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                  index=np.concatenate([np.asarray(refs[k]["index"], np.int64) for k in ks] or [np.zeros(0, np.int64)]),
                  value=np.concatenate([np.asarray(refs[k]["value"], np.float64) for k in ks] or [np.zeros(0)]))
    tmp = store.with_name(store.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(store)
    ver = getattr(highspy.Highs(), "version", lambda: "")()
    man = {"what": "proven MILP optima (Eq. 3, HiGHS) of the batches of solver_vs_milp's grids: the references of "
                   "Section 4.2's comparison, re-verified at build time by re-pricing (tempo.studies.milp_references)",
           "command": command, "machine": machine_name(), "highs": ver,
           "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "batches": len(ks), "proven_optimal": int(arrays["optimal"].sum()),
           "files": {store.name: _sha256(store)}}
    atomic_write_text(store.with_name("manifest.json"), json.dumps(man, indent=1) + "\n")
    _CACHE.pop(store, None)
    return store


def record_of(d: Dispatch, limit: str) -> dict:
    """A MILP answer ``d`` (:func:`tempo.policies.milp.milp`) as a store record."""
    s = np.asarray(d.shares, dtype=np.float64)
    idx = np.flatnonzero(s)
    return {"objective": float(d.meta["objective"]), "lower_bound": float(d.meta["lower_bound"]),
            "optimal": bool(d.meta["optimal"]), "limit": limit, "solve_s": float(d.meta.get("solve_s", float("nan"))),
            "shape": s.shape, "index": idx.astype(np.int64), "value": s.ravel()[idx]}


# ------------------------------------------------------------------ at build time
def reference(inst: Instance, model: CostModel, store: Path | None = None) -> Dispatch | None:
    """The stored answer for this batch, re-verified by re-pricing, as a Dispatch whose
    ``meta`` reads like :func:`tempo.policies.milp.milp`'s (``objective``, ``lower_bound``,
    ``gap``, ``optimal``, ``solve_s``) plus ``source="stored"`` and ``limit``; None when the
    store has none.  ``ValueError`` naming the batch when the stored dispatch is not a dispatch
    of the batch or does not re-price to its stored makespan."""
    k = key(inst, model)
    rec = load(store).get(k)
    if rec is None:
        return None
    if rec["shape"] != tuple(inst.replica_gpu.shape):
        raise ValueError(f"MILP reference {k[:12]}: shares of shape {rec['shape']} for a batch of shape "
                         f"{tuple(inst.replica_gpu.shape)}")
    shares = np.zeros(rec["shape"])
    shares.ravel()[rec["index"]] = rec["value"]
    try:
        d = Dispatch(shares).validate(inst)
    except ValueError as exc:
        raise ValueError(f"MILP reference {k[:12]} is not a dispatch of its batch: {exc}") from None
    ms = model.makespan(inst, d)
    if not np.isclose(ms, rec["objective"], rtol=REPRICE_RTOL, atol=0):
        raise ValueError(f"MILP reference {k[:12]}: its dispatch re-prices to {ms!r}, the store says "
                         f"{rec['objective']!r}; regenerate the store (python -m tempo milp-references)")
    lb = min(rec["lower_bound"], ms)
    d.meta.update(policy="milp", objective=ms, lower_bound=lb, optimal=rec["optimal"],
                  gap=(ms - lb) / ms if ms > 0 and np.isfinite(lb) else float("inf"),
                  solve_s=rec["solve_s"], source="stored", limit=rec["limit"])
    return d


def solve_fixed(inst: Instance, model: CostModel, node_limit: int = BUILD_NODE_LIMIT) -> Dispatch:
    """The MILP under a limit in work, not seconds: HiGHS single-threaded, ``node_limit``
    branch-and-bound nodes, no wall-clock limit: the same answer on any machine under any load
    (``meta["source"] = "computed"``, ``meta["limit"]``)."""
    from ..policies import solve

    d = solve(inst, model, "milp", time_limit=None, node_limit=int(node_limit), threads=1)
    d.meta.update(source="computed", limit=f"{int(node_limit)} nodes")
    return d


def exact(inst: Instance, model: CostModel) -> Dispatch:
    """The MILP's answer for a batch as the ledger compares against it: the stored reference
    (:func:`reference`), else :func:`solve_fixed`."""
    d = reference(inst, model)
    return d if d is not None else solve_fixed(inst, model)


# ------------------------------------------------------------------ generating the store
def generate(batches, time_limit: float = GENERATE_TIME_LIMIT, store: Path | None = None, command: str = "",
             progress=True) -> dict:
    """Solve each of ``batches`` (``[(label, Instance, CostModel)]``) single-threaded under
    ``time_limit`` seconds and store the answers (those already stored under the same or a
    longer limit are kept; the store is written after each batch, so an interruption loses at
    most one).  Returns the records."""
    from ..policies import solve

    refs = dict(load(store))
    for i, (label, inst, model) in enumerate(batches):
        k = key(inst, model)
        old = refs.get(k)
        if old is not None and (old["optimal"] or old["limit"] == f"{time_limit:g} s"):
            continue
        t0 = time.perf_counter()
        d = solve(inst, model, "milp", time_limit=float(time_limit), threads=1)
        refs[k] = record_of(d, f"{time_limit:g} s")
        save(refs, command, store)
        if progress:
            print(f"[{i + 1}/{len(batches)}] {label}: {'optimal' if d.meta['optimal'] else 'NOT proven'} "
                  f"{d.meta['objective']:.4f} (bound {d.meta['lower_bound']:.4f}) in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr, flush=True)
    return refs
