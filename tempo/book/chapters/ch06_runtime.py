"""Chapter 06, *The runtime* (``notebooks/06_runtime.md``): the run lengths per profile, the
one-batch walk through the dispatch kernel, and the Markdown the chapter writes from the live
refresher demo and the refresh-latency benchmark.  The runtime itself is :mod:`tempo.serving`."""
from __future__ import annotations

import pandas as pd

from .common import sizes as _sizes

#: per profile: seconds of the live demo, and the layers and refreshes of the latency benchmark
SIZES = {"smoke": dict(seconds=2.0, latency_layers=8, latency_refreshes=2),
         "full": dict(seconds=8.0, latency_layers=94, latency_refreshes=5)}


def sizes(profile: str) -> dict:
    """The chapter's run lengths for a book profile (:data:`SIZES`)."""
    return _sizes(SIZES, profile)


def demo_tables(phy2log, hot_row=(0.1, 0.8, 0.1)):
    """The kernel walk's inputs for one layer whose physical slots hold the logical experts
    ``phy2log``: the replica map (logical expert -> its physical slots, ``torch.int64``) and
    the uniform dispatch table with expert 0's row replaced by ``hot_row``."""
    import torch

    from ...serving import DispatchTable, replica_map

    phys = torch.tensor(replica_map(phy2log)[0])
    prob = torch.tensor(DispatchTable.uniform(replica_map(phy2log)).prob[0, 0])
    if len(hot_row) != prob.shape[1]:
        raise ValueError(f"hot_row must give one share per replica slot ({prob.shape[1]}), got {len(hot_row)}")
    prob[0] = torch.tensor(list(hot_row))
    return phys, prob


def routed_pairs(ids, out, slots_per_gpu: int, real_rows: int) -> pd.DataFrame:
    """Where the kernel sent each token-expert pair: the logical expert (``ids``), the physical
    slot it chose (``out``), that slot's GPU, and whether the pair's row is CUDA-graph padding
    (rows from ``real_rows`` on); one column per pair."""
    n_rows, k = ids.shape
    return pd.DataFrame({"logical": ids.flatten().tolist(), "physical": out.flatten().tolist(),
                         "GPU": (out.flatten() // slots_per_gpu).tolist(),
                         "padding row": [t >= real_rows for t in range(n_rows) for _ in range(k)]}).T


def live_glue(live_df: pd.DataFrame, stats: dict, seconds: float) -> tuple[dict, dict]:
    """What the prose under the live demo (:func:`tempo.benchmarks.live.live_run`) glues, from
    its rows: ``(numbers, words)``.  numbers: batches, seconds, tables published, the first
    table's arrival (s), invalid routes, and the median (min, max) modeled cost against the
    uniform policy of the batches before the first table (under the kernel's uniform table)
    and after it, and the second median over the first (NaN where a side has no batch);
    words: ``lv_outcomes``, the refresher's outcome counts, ``lv_arrival``, when the first
    table arrived, ``lv_lead``, the opening of the before-sentence, and ``lv_after``, the sentence
    on the batches under solved tables (or that there were none)."""
    nan = float("nan")
    before = live_df[live_df.tables_published == 0].table_vs_uniform
    after_rows = live_df[live_df.tables_published > 0]
    after = after_rows.table_vs_uniform
    numbers = {"lv_batches": len(live_df), "lv_seconds": seconds, "lv_published": stats.get("published", 0),
               "lv_invalid": int(live_df.invalid_routes.sum()), "lv_first": after_rows.t_s.min() if len(after_rows) else nan,
               "lv_before_n": len(before), "lv_before_med": before.median() if len(before) else nan,
               "lv_before_lo": before.min() if len(before) else nan, "lv_before_hi": before.max() if len(before) else nan,
               "lv_after_med": after.median() if len(after) else nan,
               "lv_rel": after.median() / before.median() if len(after) and len(before) else nan}
    if len(after_rows):
        arrival, lead = f"arrived {numbers['lv_first']:.2f} s after the start", "Before it, the"
        after_text = (f"Once tables arrive the batches run at a median {numbers['lv_after_med']:.3f} of the uniform "
                      f"policy's modeled time, {numbers['lv_rel']:.3f} of the uniform table's own median.")
    else:
        arrival, lead = "did not arrive within the run", "All"
        after_text = "No table arrived within the run, so there is no batch under a solved table to compare."
    return numbers, {"lv_outcomes": str(stats), "lv_arrival": arrival, "lv_lead": lead, "lv_after": after_text}


def latency_markdown(report: str) -> str:
    """The refresh-latency benchmark's report (:func:`tempo.benchmarks.bench.serving`) as a
    Markdown list, one line per item, without the ``serving:`` prefix."""
    return "\n".join(f"- {line.removeprefix('serving: ')}" for line in report.splitlines())


# ---------------------------------------------------------------------------- the running example
def toy_table() -> tuple[pd.DataFrame, dict, dict]:
    """Chapter 01's toy (:func:`.common.toy`) as the runtime would publish it: the placement as a
    ``physical_to_logical_map`` (GPU-major, every expert on both GPUs: slot s on GPU s // E holds
    expert s % E), tempo's dispatch of the batch turned into the table by
    :func:`tempo.serving.solver.solve_tables` (one probability per replica), and the tokens each
    GPU receives in expectation.  Returns ``(table, numbers, words)``: one row per logical expert (its
    tokens, and per GPU the physical slot and the probability), and ``toy6_*`` for the page's
    glue (the hot expert's two probabilities, the slots, each GPU's expected tokens and
    activated experts, the makespan of the expected split under the toy's model, and the mean and
    standard deviation of the hot expert's tokens on GPU 0 when the kernel samples per token);
    ``words["toy6_tokens"]`` says the expected tokens per GPU in a phrase."""
    import numpy as np

    from ...serving import replica_map
    from ...serving.solver import solve_tables
    from .common import toy

    inst, model = toy()
    E, P = inst.n_experts, inst.n_gpus
    p2l = np.tile(np.arange(E), P)[None]                     # [1 layer, P*E slots], GPU-major
    phys = replica_map(p2l)[0]                               # [E, R]: expert e's physical slots
    prob = solve_tables(inst.counts[None], p2l, P, model)[0, 0]   # [E, R]: the flat table's layer 0
    counts = np.asarray(inst.counts, float)
    rows = []
    for e in range(E):
        row = {"expert": e, "tokens": int(counts[e])}
        for r in range(phys.shape[1]):
            row[f"GPU {phys[e, r] // E}: slot"] = int(phys[e, r])
            row[f"GPU {phys[e, r] // E}: probability"] = float(prob[e, r])
        rows.append(row)
    table = pd.DataFrame(rows).set_index("expert")
    gpu_of = phys // E                                       # every replica's GPU
    expected = np.zeros((E, P))
    np.add.at(expected, (np.arange(E)[:, None].repeat(phys.shape[1], 1), gpu_of), prob * counts[:, None])
    G, N = (expected > 0).sum(0), expected.sum(0)
    hot = int(np.argmax(counts))
    n = {"toy6_slots": float(P * E), "toy6_hot_p0": float(prob[hot, 0]), "toy6_hot_p1": float(prob[hot, 1]),
         "toy6_hot_slot0": float(phys[hot, 0]), "toy6_hot_slot1": float(phys[hot, 1]),
         "toy6_tokens_max": float(N.max()), "toy6_tokens_min": float(N.min()), "toy6_G_max": float(G.max()),
         "toy6_makespan": float(np.maximum(model.a + model.b * G, model.c + model.beta * N).max())}
    # each of the hot expert's tokens picks GPU 0 with probability p: a binomial share
    p0 = n["toy6_hot_p0"]
    n["toy6_hot_mean"] = counts[hot] * p0
    n["toy6_hot_sd"] = float(np.sqrt(counts[hot] * p0 * (1 - p0)))
    n["toy6_hot_sd_pct"] = 100 * n["toy6_hot_sd"] / n["toy6_hot_mean"] if n["toy6_hot_mean"] > 0 else 0.0
    lo, hi = round(n["toy6_tokens_min"]), round(n["toy6_tokens_max"])
    words = {"toy6_tokens": f"each GPU receives {lo} tokens" if lo == hi else f"a GPU receives between {lo} and {hi} tokens"}
    return table, n, words
