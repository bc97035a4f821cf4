"""Claims of chapter 05 (calibration, Section 2.2, Table 6): fit errors and tile steps of a
deep_gemm recording on a GPU, and the predicted-vs-measured policy ranking of epbench (Section 5.2)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..registry import Value, claim, once
from .measured import ep_pick, measured_claim, measured_value


# ------------------------------------------------------------------ calibration on a GPU (Section 2.2, Table 6)
def _gpu_recordings(shape=None):
    """deep_gemm recordings under data/measured/ (the paper's kernel on a GPU), best first as
    the chapters pick them (:func:`tempo.measured.catalog.rank`)."""
    from ....measured import catalog

    return once(("gpu_recordings", shape),
                lambda: catalog.rank(catalog.recordings("calibration"), shape, backend="deep_gemm"))


def _measured_recording(path):
    from ....measured.catalog import load_recording

    s, _, man = once(("recording", str(path)), lambda: load_recording(path))
    path = Path(path)  # named as data/measured/<machine>/<folder>, never by this machine's absolute path
    return s, man, f"measurement: {man.get('device', '?')}, {man.get('date', '?')}, data/measured/{path.parent.name}/{path.name}"


def appendix_b_coverage(samples: pd.DataFrame, manifest: dict | None = None) -> tuple[bool, str]:
    """Whether a recording holds every cell of Appendix B's grid
    (:func:`tempo.calib.preset.coverage`, the ``appendix-b`` preset: G 1..40 x tokens per expert
    1..4096), and what it holds, for a claim's note."""
    from ....calib.preset import coverage

    c = coverage(samples, manifest)
    what = (f"{c['grid_cells']} of Appendix B's {c['grid_planned']} grid cells, G in {{{', '.join(map(str, c['G']))}}}, "
            f"tokens per expert {c['n_min']}-{c['n_max']}")
    return bool(c["covers_grid"]), what


def stand_in_reason(manifest: dict, samples: pd.DataFrame, testbed: str = "A") -> str:
    """Why a GPU recording cannot decide a claim the paper measured on its Testbed ``testbed``
    on Appendix B's grid (the ``hardware_grid`` reading), or "" when it can: the calibration
    package's classifier (:func:`tempo.calib.preset.stand_in_reasons` of
    :func:`tempo.calib.preset.coverage`): a partial grid, or another GPU generation than the
    testbed's (a manifest's ``testbed`` marker overrides the device name)."""
    from ....calib.preset import coverage, stand_in_reasons

    return "; ".join(stand_in_reasons(coverage(samples, manifest), testbed))


def _hardware_value(ours, samples, man, prov, reading, testbed="A"):
    """The Value of a calibration claim: a stand-in (no verdict) under the ``hardware_grid``
    reading's ``appendix_b_grid`` (the paper's) unless the recording is the paper's testbed on
    Appendix B's grid (:func:`stand_in_reason`); a verdict under ``short_grid``.  ``testbed``: the
    paper's testbed of the number (A, the older generation, for Table 6; B, the newer, for the
    tile staircase), named in the note since the paper anonymises both GPUs."""
    _, what = appendix_b_coverage(samples, man)
    device = man.get("device", "?")
    strict = reading is None or reading["hardware_grid"] == "appendix_b_grid"
    stand_in = stand_in_reason(man, samples, testbed) if strict else ""
    paper = (f"the paper's number is from its Testbed {testbed} ({'the older' if testbed == 'A' else 'the newer'} "
             f"of two anonymised GPU generations) on Appendix B's grid")
    # a stand-in's reason already names the grid when it is partial
    note = f"measured on {device}; {paper}" if stand_in else f"measured on {device} ({what}); {paper}"
    return Value(ours, evidence="gpu", provenance=prov, note=note, stand_in=stand_in)


_HG = ("hardware_grid",)


def _fit_err(shape):
    def fn(f, reading=None):
        from ....calib import fit_cost_model, fit_error

        r = _gpu_recordings(shape)
        if r.empty:
            return None
        s, man, prov = _measured_recording(r.iloc[0].path)
        err = once(("fit_err", str(r.iloc[0].path)),
                   lambda: 100 * fit_error(fit_cost_model(s, "max_affine", intercept=False).model, s))
        return _hardware_value(err, s, man, prov, reading, "A")
    return fn


claim("fit_err_dsv3", [], "gpu", "a deep_gemm recording under data/measured/", uses=_HG)(_fit_err("dsv3"))
claim("fit_err_qwen3", [], "gpu", "a deep_gemm recording under data/measured/", uses=_HG)(_fit_err("qwen3-30b"))


def _tile_fit(f):
    return once(("tile_fit",), _tile_fit_now)


def _tile_fit_now():
    from ....calib import fit_cost_model, fit_error
    from ....calib.fit import tile_steps

    for path in _gpu_recordings().path:  # the newest recording that has a tile sweep
        s, man, prov = _measured_recording(path)
        fine = s[s.G.isin(s[s.kind == "tile"].G.unique()) & s.n.between(100, 400)]
        if not fine.empty:
            break
    else:
        return None
    mt = fit_cost_model(s, "tile").model
    return s, fine, mt, prov, fit_error, tile_steps, man


@claim("tile_err", [], "gpu", "a deep_gemm recording with a tile sweep", uses=_HG)
def tile_err(f, reading=None):
    x = _tile_fit(f)
    if x is None:
        return None
    s, fine, mt, prov, fit_error, _, man = x
    return _hardware_value(100 * fit_error(mt, fine), s, man, prov, reading, "B")


@claim("b2_over_b", [], "gpu", "a deep_gemm recording with a tile sweep", uses=_HG)
def b2_over_b(f, reading=None):
    x = _tile_fit(f)
    if x is None:
        return None
    s, fine, mt, prov, _, _, man = x
    return _hardware_value(mt.b2 / mt.b, s, man, prov, reading, "B")


@claim("tile_step", [], "gpu", "a deep_gemm recording with a tile sweep", uses=_HG)
def tile_step(f, reading=None):
    x = _tile_fit(f)
    if x is None:
        return None
    s, fine, mt, prov, _, tile_steps, man = x
    later = tile_steps(fine)
    later = later[later.boundary > 128]
    if later.empty:
        return None
    return _hardware_value((float(later.step_pct.min()), float(later.step_pct.max())), s, man, prov, reading, "B")


# ------------------------------------------------------------------ the model's ranking against epbench (Section 5.2)
def rank_agreement(df: pd.DataFrame, noise: float = 0.03) -> tuple[int, int]:
    """(agreeing pairs, pairs): policy pairs whose median measured expert time differs by more than
    ``noise`` (relative), and how many of them the model's median makespan orders the same way
    (Section 5.2; the rule of ``epbench.transfer``, on its CSV columns)."""
    med = df.groupby("policy")[["expert_us", "model_us"]].median()
    pairs = agree = 0
    pols = list(med.index)
    for i, a in enumerate(pols):
        for b in pols[i + 1:]:
            ma, mb = med.loc[a, "expert_us"], med.loc[b, "expert_us"]
            if abs(ma - mb) / max(ma, mb) <= noise:
                continue
            pairs += 1
            agree += bool((ma < mb) == (med.loc[a, "model_us"] < med.loc[b, "model_us"]))
    return agree, pairs


@measured_claim("calib_rank_agreement", "epbench", "epbench: predicted (model) vs measured policy ranking over the B ladder")
def calib_rank_agreement(f):
    got = ep_pick(lambda m: m.get("tokens") is not None and len(m.get("policies") or []) >= 2,
                  lambda row, df: rank_agreement(df), per_tokens=True, what="calib_rank_agreement")
    if not got:
        return None
    counts = [c for _, c, _ in got]
    agree, pairs = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if pairs == 0:
        return None
    note = (f"{agree} of {pairs} policy pairs outside a 3% noise band (paper: 14/15), over B = "
            + ", ".join(str(g[0].manifest["tokens"]) for g in got) + "; the fixed offline model, no refit")
    return measured_value(100 * agree / pairs, [g[0] for g in got], [r for g in got for r in g[2]], note=note)
