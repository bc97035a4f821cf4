"""Claims of chapter 02 (theory, Section 3.1): Theorem 1's partition reduction, Lemmas 1 and 2,
Theorem 2's worst ratio and epsilon, and the b_a2a prediction from Table 7's parameters."""
from __future__ import annotations

import numpy as np

from ....paper.claims_file import claim_row, precision
from ..registry import Value, bootstrap_ci, cause_of, claim
from .common import PARAMS, SYN, named_model, routing


# ------------------------------------------------------------------ arithmetic on Table 7's parameters
@claim("ba2a_prediction", [], "paper-parameters", PARAMS + " at the paper's G = 13")
def ba2a_prediction(f):
    m = named_model("proxy-serving")
    return Value((m.a + m.b * 13 - m.c2) / m.gamma, note="Table 7 proxy-serving parameters and the paper's G = 13: "
                 "arithmetic on the paper's inputs; our drift-16 batches have G = 28-29 at B = 384-512")


# ------------------------------------------------------------------ theory (Section 3.1)
@claim("thm1_partition", ["thm1_partition"], "model",
       "exact MILP on random Balanced PARTITION instances, the answer checked by dynamic programming")
def thm1_partition(f):
    t = f["thm1_partition"]
    ok = bool(((t.reaches_T == t.solvable) & t.proven_optimal).all() and (t[t.reaches_T].split_experts == 0).all())
    return Value(float(ok), note=f"{len(t)} instances; the MILP reaches T iff a balanced partition exists, never splitting")


def _lemma(f, k):
    # scored on the instances the MILP proves optimal; elsewhere its incumbent is no optimum
    lem = f["lemmas"]
    r = lem[lem.lemma == k]
    pr = r[r.optimal.astype(bool)]
    ok = bool(len(pr) and (abs(pr.poly_over_milp - 1) < 1e-6).all())
    return Value(float(ok), note=f"{len(pr)} of {len(r)} random instances proven optimal by the MILP; polynomial "
                                 f"algorithm / MILP in [{pr.poly_over_milp.min():.6f}, {pr.poly_over_milp.max():.6f}] "
                                 f"there ({len(r) - len(pr)} hit the time limit)")


claim("lemma1", ["lemmas"], "model", "token LP (max-flow) against the exact MILP with a = b = 0")(lambda f: _lemma(f, 1))
claim("lemma2", ["lemmas"], "model", "semi-matching against the exact MILP with c = beta = 0")(lambda f: _lemma(f, 2))

_PROBE = "Theorem 2 probe suite (Zipf, uniform and single-giant batches, E <= 512, g <= 16; OPT bracketed by the MILP)"


def thm2_ceiling(p) -> tuple[int, float, str]:
    """``(k, k / (k + 1), where)``: the most experts round-robin puts on one GPU over the probe
    suite ``p`` (k = ceil(E / g)) and the ratio M(A3) / (OPT + term) an instance whose experts all
    sit at the floor b reaches there (OPT = b k, term = b), which caps what the suite can show."""
    k = -(-p.experts // p.n_gpus)
    i = k.idxmax()
    kmax = int(k[i])
    return kmax, kmax / (kmax + 1), f"E = {int(p.experts[i])}, g = {int(p.n_gpus[i])}"


def _thm2_cause(p, w, lo: float) -> str:
    k, ceil, where = thm2_ceiling(p)
    row = claim_row("thm2_worst_ratio")
    need = float(row["paper"]) - precision(row["paper_text"])
    k_need = int(np.ceil(need / (1 - need) - 1e-9))  # k / (k + 1) >= need
    return (f"the suite's sizes cap the ratio: k <= {k} experts on a GPU ({where}), ceiling k/(k+1) = {ceil:.5f}; "
            f"worst {lo:.5f} ({w['kind']}, E = {int(w['experts'])}, g = {int(w['n_gpus'])}, {w['params']}), "
            f"{lo / ceil:.5f} of the ceiling; the paper's {row['paper_text']} needs k >= {k_need}")


@claim("thm2_worst_ratio", ["thm2_probe"], "synthetic", _PROBE)
def thm2_worst_ratio(f):
    # both sides: the worst observed M(A3)/(OPT + term) with OPT at its best known value (a lower estimate
    # of the ratio: tightness) and with OPT at its lower bound (an upper estimate: the theorem's <= 1)
    p = f["thm2_probe"]
    lo, hi = float(p.rr_over_bound_lo.max()), float(p.rr_over_bound_hi.max())
    pinned = int((p.opt_from == "milp").sum())
    w = p.loc[p.rr_over_bound_lo.idxmax()]
    cause = cause_of(lambda: _thm2_cause(p, w, lo), p, ("kind", "experts", "n_gpus", "params"))
    return Value((lo, hi), cause=cause, note=f"worst ratio in [{lo:.4f}, {hi:.4f}] over {len(p)} instances "
                                             f"(OPT pinned by the MILP on {pinned})")


@claim("tempo_worst_vs_opt", ["thm2_probe"], "synthetic", _PROBE + "; the instances the MILP pins")
def tempo_worst_vs_opt(f):
    p = f["thm2_probe"]
    pinned = p[p.opt_from == "milp"]
    r = pinned.tempo / pinned.opt_hi
    return Value(float(r.max()), note=f"worst tempo / MILP optimum over the {len(pinned)} instances the MILP pins "
                                      f"(1 s limit, E*g <= 64; mean {r.mean():.4f})")


@claim("thm2_eps_median", ["thm2_epsilon"], "synthetic", SYN + ", DSv3 shape, EP8, Zipf(1.2) decode batches")
def thm2_eps_median(f):
    e = routing(f["thm2_epsilon"], "trace")
    v = e[e.scale == 1].eps * 100
    return Value(float(v.median()), ci=bootstrap_ci(v))


@claim("thm2_eps_max", ["thm2_epsilon"], "synthetic", SYN + ", DSv3 shape, EP8, Zipf(1.2) decode batches")
def thm2_eps_max(f):
    e = routing(f["thm2_epsilon"], "trace")
    return float(100 * e[e.scale == 1].eps.max())


@claim("thm2_eps_max_4x", ["thm2_epsilon"], "synthetic", SYN + ", DSv3 shape, EP8, Zipf(1.2) decode batches at 4x tokens")
def thm2_eps_max_4x(f):
    e = routing(f["thm2_epsilon"], "trace")
    v = e[e.scale == 4].eps
    return float(100 * v.max()) if len(v) else None
