"""Altair chart builders (DataFrame in, ``alt.Chart`` out) and the offline renderer.

Charts render in the book with no network: vega, vega-lite and vega-embed are bundled into
``_static/vega-bundle.js`` (:func:`write_vega_bundle`) and loaded by Sphinx; the renderer
(:func:`enable_offline`) emits a ``<div>`` plus a ``vegaEmbed`` call, and a static SVG copy
that is shown when printing.
"""
from __future__ import annotations

import html
import json
import uuid
from pathlib import Path

import pandas as pd

from ..core import paths
from ..paper.tables import FIGURE_COLUMNS


def policy_colors() -> dict[str, str]:
    """Each registered policy's chart colour (``PolicySpec.color``), in the registry's order
    (:func:`tempo.policies.select`): a colour scale's domain and range."""
    from ..policies import select, spec

    return {p: spec(p).color for p in select()}


def _alt():
    import altair as alt

    return alt


def write_vega_bundle(path: Path | None = None) -> Path:
    """Write vega + vega-lite + vega-embed as one script exposing ``window.vegaEmbed``,
    wrapped in a function scope so it cannot clash with Sphinx's globals."""
    import vl_convert as vlc

    path = Path(path) if path else paths.ROOT / "_static" / "vega-bundle.js"
    path.parent.mkdir(parents=True, exist_ok=True)
    js = vlc.javascript_bundle()
    from ..core.io import atomic_write_text

    atomic_write_text(path, "(function(){\n" + js + "\n})();\n")
    return path


def chart_html(chart, static: bool = True) -> str:
    """HTML for one chart: an interactive vegaEmbed target and a print-only static SVG."""
    return spec_html(chart.to_dict(), static)


def spec_html(spec: dict, static: bool = True) -> str:
    """:func:`chart_html` for a Vega-Lite spec given as a dict (what altair renderers receive)."""
    uid = "tc-" + uuid.uuid4().hex[:10]
    svg = ""
    if static:
        try:
            import vl_convert as vlc

            svg = vlc.vegalite_to_svg(spec)
        except Exception as exc:  # the interactive chart still renders
            svg = f"<p>(static copy unavailable: {html.escape(str(exc))})</p>"
    payload = json.dumps(spec).replace("</", "<\\/")
    return f"""<div class="tempo-chart" id="{uid}"></div>
<div class="tempo-chart-static">{svg}</div>
<script type="text/javascript">
(function() {{
  var spec = {payload};
  var tries = 0;
  function draw() {{
    if (typeof window.vegaEmbed === "undefined") {{
      if (++tries > 200) {{ console.error("vegaEmbed is not loaded: chart {uid} cannot render"); return; }}
      return setTimeout(draw, 25);
    }}
    window.vegaEmbed("#{uid}", spec, {{actions: false, renderer: "svg"}})
      .then(function() {{ document.getElementById("{uid}").setAttribute("data-rendered", "1"); }})
      .catch(function(err) {{ console.error("chart {uid}: " + err); }});
  }}
  draw();
}})();
</script>"""


def enable_offline(static: bool = True) -> None:
    """Make altair charts display through :func:`chart_html`, and tables show every cell whole
    (no cut text, up to 200 rows): call once per notebook."""
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.max_rows", 200)
    alt = _alt()
    alt.renderers.register("tempo_offline", lambda spec, **kw: {"text/html": spec_html(spec, static)})
    alt.renderers.enable("tempo_offline")


# ---------------------------------------------------------------------------- chart builders
def cost_curve(df: pd.DataFrame, roofline: dict | None = None):
    """Fig. 1a: one expert's time against its tokens (log x), flat then linear."""
    alt = _alt()
    base = alt.Chart(df).encode(
        x=alt.X("tokens:Q", scale=alt.Scale(type="log"), title="tokens routed to the expert"),
        y=alt.Y("time_us:Q", title="modeled expert time (us)", scale=alt.Scale(type="log")),
        color=alt.Color("params:N", title="parameter set", legend=alt.Legend(orient="bottom", labelLimit=300)),
        tooltip=["params", alt.Tooltip("tokens:Q", format=".0f"), alt.Tooltip("time_us:Q", format=".2f"), "regime"],
    )
    chart = base.mark_line() + base.mark_point(size=12, filled=True)
    rules = alt.Chart(df.drop_duplicates("params")).mark_rule(strokeDash=[4, 3]).encode(
        x="n_star:Q", color="params:N", tooltip=[alt.Tooltip("n_star:Q", title="n* (tokens)", format=".0f")])
    return (chart + rules).properties(width=560, height=300, title="One expert: flat below n*, linear above")


def toy_bars(df: pd.DataFrame):
    """Fig. 1b: per-GPU floor (b*G) and compute (beta*N) for each policy; GPU time is the max."""
    alt = _alt()
    long = df.melt(id_vars=["label", "gpu", "time_us", "makespan_us", "activated", "tokens"],
                   value_vars=["floor_us", "compute_us"], var_name="term", value_name="us")
    long["term"] = long.term.map({"floor_us": "activation floor a + b*G", "compute_us": "compute c + beta*N"})
    long["GPU"] = "GPU " + long.gpu.astype(str)
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("GPU:N", title=None),
        xOffset="term:N",
        y=alt.Y("us:Q", title="microseconds"),
        color=alt.Color("term:N", title="cost piece", legend=alt.Legend(orient="bottom")),   # fits the column
        column=alt.Column("label:N", title=None),
        tooltip=["label", "GPU", "term", alt.Tooltip("us:Q", format=".1f"), "activated",
                 alt.Tooltip("tokens:Q", format=".0f"), alt.Tooltip("time_us:Q", title="GPU time", format=".1f"),
                 alt.Tooltip("makespan_us:Q", title="makespan", format=".1f")],
    ).properties(width=150, height=260)


def toy_explorer(df: pd.DataFrame):
    """Interactive: sliders for b and beta; bars show each policy's makespan on the toy."""
    alt = _alt()
    bs = sorted(df.b.unique())
    betas = sorted(float(v) for v in df.beta.unique())
    b_step = bs[1] - bs[0] if len(bs) > 1 else 1.0
    beta_step = round(betas[1] - betas[0], 6) if len(betas) > 1 else 0.01
    b0 = min(bs, key=lambda v: abs(v - 15.0))
    beta0 = min(betas, key=lambda v: abs(v - 0.1))
    colors = policy_colors()
    # both sliders in the units the chapter uses everywhere: us per activated expert, us per token
    pb = alt.param("b_us", value=b0, bind=alt.binding_range(min=bs[0], max=bs[-1], step=b_step, name="b (us per activated expert) "))
    pbeta = alt.param("beta_us", value=beta0, bind=alt.binding_range(min=betas[0], max=betas[-1], step=beta_step,
                                                                    name="beta (us per token) "))
    return alt.Chart(df).mark_bar().encode(
        y=alt.Y("label:N", title=None, sort=["token balancing (token-LP)", "activation balancing (METRO)", "time model (TEMPO)"]),
        x=alt.X("makespan_us:Q", title="makespan of the toy batch (us)"),
        color=alt.Color("policy:N", scale=alt.Scale(domain=list(colors), range=list(colors.values())), legend=None),
        tooltip=["label", alt.Tooltip("makespan_us:Q", format=".1f"), alt.Tooltip("vs_best:Q", title="x best", format=".3f"),
                 alt.Tooltip("b:Q", format=".2f"), alt.Tooltip("beta:Q", format=".3f")],
    ).add_params(pb, pbeta).transform_filter(
        f"abs(datum.b - b_us) < {b_step / 2} && abs(datum.beta - beta_us) < {beta_step / 2}"
    ).properties(width=460, height=140, title="Move the sliders: which proxy pays, and how much?")


def toy_winner_map(df: pd.DataFrame):
    """Heat map over (b, beta): how much worse the best proxy is than the time model."""
    alt = _alt()
    prox = df[df.policy != "tempo"].groupby(["b", "beta"]).makespan_us.min().rename("best_proxy")
    tm = df[df.policy == "tempo"].set_index(["b", "beta"]).makespan_us.rename("tempo")
    winner = df[df.policy != "tempo"].loc[lambda d: d.groupby(["b", "beta"]).makespan_us.idxmin()].set_index(["b", "beta"]).label
    m = pd.concat([prox, tm, winner.rename("best_proxy_policy")], axis=1).reset_index()
    m["proxy_over_tempo"] = m.best_proxy / m.tempo
    return alt.Chart(m).mark_rect().encode(
        x=alt.X("b:O", title="b (us per activated expert)", axis=alt.Axis(format=".1f")),
        y=alt.Y("beta:O", title="beta (us per token)", sort="descending", axis=alt.Axis(format=".3f")),
        color=alt.Color("proxy_over_tempo:Q", title="best proxy / TEMPO", scale=alt.Scale(scheme="oranges")),
        tooltip=[alt.Tooltip("b:Q", format=".2f"), alt.Tooltip("beta:Q", format=".3f"), "best_proxy_policy",
                 alt.Tooltip("proxy_over_tempo:Q", format=".3f")],
    ).properties(width=420, height=260, title="Price of the best proxy on the toy batch")


# ---------------------------------------------------------------------------- paper data that needs hardware
def table5_attribution(df: pd.DataFrame):
    """Table 5 (Section 5.15, two-node EP16, Qwen3-235B): throughput change over static per
    workload for SGLang's dynamic split, TEMPO without the solver (noop), flat TEMPO and
    topology-aware (hier) TEMPO.  ``df`` is ``tempo.paper.tables.table(5)`` (wide, one row per workload)."""
    alt = _alt()
    cols = [c for c in df.columns if c.endswith("_pct")]
    if "workload" not in df or not cols:
        raise ValueError("df must have a 'workload' column and *_pct columns (tempo.paper.tables.table(5))")
    long = df.melt("workload", cols, var_name="variant", value_name="pct")
    long["variant"] = long.variant.str.replace("_pct", "", regex=False)
    return alt.Chart(long).mark_bar().encode(
        y=alt.Y("workload:N", title=None), yOffset="variant:N",
        x=alt.X("pct:Q", title="throughput change over static (%)"),
        color=alt.Color("variant:N", title="dispatch", legend=alt.Legend(orient="bottom")),
        tooltip=["workload", "variant", alt.Tooltip("pct:Q", format="+.1f")],
    ).properties(width=480, height=320, title="Table 5 (paper): EP16 attribution, two nodes")


def table11_topology(df: pd.DataFrame):
    """Table 11 (Section 5.15): change over static at 128/512/1024 requests for flat and
    hierarchical uniform splits and hierarchical TEMPO, two rounds each.  ``df`` is
    ``tempo.paper.tables.table(11)`` (columns ``<variant>_r<round>``)."""
    alt = _alt()
    cols = [c for c in df.columns if c != "requests"]
    if "requests" not in df or not cols:
        raise ValueError("df must have a 'requests' column and <variant>_r<round> columns (tempo.paper.tables.table(11))")
    long = df.melt("requests", cols, var_name="run", value_name="pct")
    long["variant"] = long.run.str.rsplit("_r", n=1).str[0].str.replace("_", " ", regex=False)
    long["round"] = "round " + long.run.str.rsplit("_r", n=1).str[1]
    return alt.Chart(long).mark_point(filled=True, size=70).encode(
        x=alt.X("requests:O", title="requests"), xOffset="variant:N",
        y=alt.Y("pct:Q", title="change over static (%)"),
        color=alt.Color("variant:N", title=None, legend=alt.Legend(orient="bottom")),
        shape=alt.Shape("round:N", title=None),
        tooltip=["requests", "variant", "round", alt.Tooltip("pct:Q", format="+.1f")],
    ).properties(width=420, height=260, title="Table 11 (paper): topology control, two nodes")


def table3_measured(df: pd.DataFrame):
    """Table 3's measured columns (Section 5.13): wall-clock change of the two TEMPO windows
    against static per concurrency B, coloured by the modeled regime.  ``df`` is
    ``tempo.paper.tables.table(3)``."""
    alt = _alt()
    need = {"B", "regime", "delta_w1_pct", "delta_w2_pct"}
    if not need <= set(df.columns):
        raise ValueError(f"df must have columns {sorted(need)} (tempo.paper.tables.table(3))")
    long = df.melt(["B", "regime"], ["delta_w1_pct", "delta_w2_pct"], var_name="window", value_name="pct")
    long["window"] = long.window.map({"delta_w1_pct": "window 1", "delta_w2_pct": "window 2"})
    base = alt.Chart(long).encode(
        x=alt.X("B:Q", scale=alt.Scale(type="log", nice=False), title="concurrency B"),
        y=alt.Y("pct:Q", title="measured throughput change over static (%)"),
        color=alt.Color("regime:N", title="modeled regime", legend=alt.Legend(orient="bottom")),
        detail="window:N", tooltip=["B", "regime", "window", alt.Tooltip("pct:Q", format="+.1f")])
    # the points are a layer of their own, so the window legend draws each window's dash
    return alt.layer(
        base.mark_line().encode(strokeDash=alt.StrokeDash("window:N", title=None,
                                                          legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#444"))),
        base.mark_point(filled=True),
    ).properties(width=420, height=240, title="Table 3 (paper, measured): where adaptive dispatch stops paying")


# ---------------------------------------------------------------------------- simulator figures (Figs. 5, 6, 12)
def fig5_mixed(mixed: pd.DataFrame):
    """Fig. 5: per batch size, the share of mixed batches, of flat-region experts and of tokens
    in linear-region experts (means over batches).  ``mixed`` is the ``mixed_regime`` result."""
    alt = _alt()
    need = {"tokens_per_gpu", "mixed", "flat_expert_share", "linear_token_share"}
    if not need <= set(mixed.columns):
        raise ValueError(f"mixed must have columns {sorted(need)} (the mixed_regime experiment)")
    agg = mixed.groupby("tokens_per_gpu").agg(**{"mixed batches": ("mixed", "mean"),
                                                 "flat-region experts": ("flat_expert_share", "mean"),
                                                 "tokens in linear-region experts": ("linear_token_share", "mean")})
    long = (100 * agg).reset_index().melt("tokens_per_gpu", var_name="quantity", value_name="percent")
    return alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("tokens_per_gpu:Q", scale=alt.Scale(type="log", nice=False), title="tokens per GPU (B)"),
        y=alt.Y("percent:Q", title="% (mean over batches)"),
        color=alt.Color("quantity:N", legend=alt.Legend(orient="bottom", labelLimit=300)),
        tooltip=["tokens_per_gpu", "quantity", alt.Tooltip("percent:Q", format=".1f")],
    ).properties(width=520, height=260, title="Flat experts and linear tokens in the same batches")


def fig6_phase(phase: pd.DataFrame, shape: str = "DSv3", replication: float | None = None):
    """Fig. 6: the phase diagram of one shape and replication: the winning fixed policy
    (M / L / E) per (skew, B) cell and TEMPO's gain over it.  ``phase`` is the
    ``phase_diagram`` result; ``replication`` defaults to the smallest in it."""
    alt = _alt()
    need = {"shape", "replication", "skew", "B", "winner", "gain_pct"}
    if not need <= set(phase.columns):
        raise ValueError(f"phase must have columns {sorted(need)} (the phase_diagram experiment)")
    rep = phase.replication.min() if replication is None else replication
    heat = phase[(phase["shape"] == shape) & (phase.replication == rep)]
    if heat.empty:
        raise ValueError(f"no cells for shape {shape!r} at replication {rep} in phase")
    base = alt.Chart(heat).encode(x=alt.X("B:O", title="tokens per GPU (B)"),
                                  y=alt.Y("skew:O", sort="descending", title="Zipf skew s"))
    rect = base.mark_rect().encode(color=alt.Color("gain_pct:Q", title="TEMPO gain %", scale=alt.Scale(scheme="greens")),
                                   tooltip=["B", "skew", "winner", alt.Tooltip("gain_pct:Q", format=".2f")])
    # the letters stay readable on every shade: white on the darker half of the scale, near-black on the lighter
    mid = (float(heat.gain_pct.min()) + float(heat.gain_pct.max())) / 2
    letters = base.mark_text(fontSize=12, fontWeight="bold").encode(
        text="winner:N", color=alt.condition(f"datum.gain_pct > {mid!r}", alt.value("#ffffff"), alt.value("#111111")))
    return (rect + letters).properties(
        width=480, height=260, title=f"{shape}, {rep}x replication: winning fixed policy and TEMPO's gain")


def fig12_scale(scale: pd.DataFrame):
    """Fig. 12: TEMPO's gain over the best fixed policy against B, one line per (EP, skew).
    ``scale`` is the ``phase_diagram-scale`` result."""
    alt = _alt()
    need = {"ep", "skew", "B", "gain_pct"}
    if not need <= set(scale.columns):
        raise ValueError(f"scale must have columns {sorted(need)} (the phase_diagram experiment, tag scale)")
    tips = ["ep", "skew", "B", alt.Tooltip("gain_pct:Q", format=".2f")]
    if "gain_comm_pct" in scale:
        tips.append(alt.Tooltip("gain_comm_pct:Q", format=".2f"))
    base = alt.Chart(scale).encode(
        x=alt.X("B:Q", scale=alt.Scale(type="log", nice=False), title="tokens per GPU (B)"),
        y=alt.Y("gain_pct:Q", title="TEMPO gain over best fixed %"),
        # EP sizes in distinct hues
        color=alt.Color("ep:O", title="EP", scale=alt.Scale(scheme="category10")), detail="skew:N", tooltip=tips)
    # the points are a layer of their own, so the skew legend draws each skew's dash
    return alt.layer(
        base.mark_line().encode(strokeDash=alt.StrokeDash("skew:N", title="Zipf s",
                                                          legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#444"))),
        base.mark_point(filled=True),
    ).properties(width=520, height=280, title="Scale extrapolation (compute only)")


# ---------------------------------------------------------------------------- calibration figures (Figs. 2, 3, 4, 9)
def _need(df: pd.DataFrame, cols, what: str) -> None:
    missing = set(cols) - set(df.columns)
    if missing:
        raise ValueError(f"{what} lacks columns {sorted(missing)}")


def fig2_regimes(samples: pd.DataFrame, models: dict, label: str = ""):
    """Fig. 2a: one expert alone (G = 1): measured time against tokens (log-log) with each
    fitted model of ``models`` (``{legend: CostModel}``) drawn as a line.  ``samples`` is a
    calibration recording (:func:`tempo.measured.catalog.load_recording`); grid cells only."""
    import numpy as np

    alt = _alt()
    _need(samples, {"G", "n", "kind", "t_us"}, "samples (a calibration recording)")
    one = samples[(samples.G == 1) & (samples.kind == "grid")].sort_values("n")
    if one.empty:
        raise ValueError("samples has no G = 1 grid cells")
    n = np.unique(np.geomspace(1, one.n.max(), 200).round())
    curve = pd.concat([pd.DataFrame({"n": n, "t": m.time(1, n), "fit": name}) for name, m in models.items()])
    base = alt.Chart(one).mark_point(filled=True, size=50).encode(
        x=alt.X("n:Q", scale=alt.Scale(type="log"), title="tokens on the expert (n)"),
        y=alt.Y("t_us:Q", scale=alt.Scale(type="log"), title="time (us)"),
        tooltip=["n", alt.Tooltip("t_us:Q", format=".1f")])
    lines = alt.Chart(curve).mark_line().encode(
        x="n:Q", y="t:Q", color=alt.Color("fit:N", legend=alt.Legend(orient="bottom", labelLimit=300)),
        strokeDash="fit:N")
    return (base + lines).properties(width=520, height=300, title=f"One expert: measured ({label})" if label else "One expert")


def fig3_g_driven(samples: pd.DataFrame, label: str = "", Gs=(1, 2, 4, 8, 13, 20, 40), ns=(1, 4, 16, 64)):
    """Fig. 3: (a) time against tokens per expert, one line per activation count G; (b) time
    against G at fixed tokens per expert (the paper: the n = 1 and n = 64 curves coincide).
    Grid cells of a calibration recording; G and n values the grid lacks are skipped (all
    G values when none of ``Gs`` is in the grid: its first five)."""
    alt = _alt()
    _need(samples, {"G", "n", "kind", "t_us"}, "samples (a calibration recording)")
    grid = samples[samples.kind == "grid"]
    if grid.empty:
        raise ValueError("samples has no grid cells")
    have = sorted(grid.G.unique())
    sel = [g for g in have if g in set(Gs)] or have[:5]
    tips = ["G", "n", alt.Tooltip("t_us:Q", format=".1f")]
    a = alt.Chart(grid[grid.G.isin(sel)]).mark_line(point=True).encode(
        x=alt.X("n:Q", scale=alt.Scale(type="log"), title="tokens per expert (n)"),
        y=alt.Y("t_us:Q", scale=alt.Scale(type="log"), title="time (us)"), color=alt.Color("G:O", title="G"),
        tooltip=tips).properties(width=480, height=220, title="(a) time vs n, per G")
    b = alt.Chart(grid[grid.n.isin([n for n in ns if n in set(grid.n)])]).mark_line(point=True).encode(
        x=alt.X("G:Q", title="activated experts G"), y=alt.Y("t_us:Q", title="time (us)"),
        color=alt.Color("n:O", title="n", scale=alt.Scale(scheme="oranges")), tooltip=tips).properties(
        width=480, height=220, title="(b) time vs G, per n")
    # one panel above the other fits the page's column; each panel keeps its own colour legend
    return alt.vconcat(a, b, title=label).resolve_scale(color="independent").resolve_legend(color="independent")


def tile_window(samples: pd.DataFrame, lo: int = 100, hi: int = 400) -> pd.DataFrame:
    """The cells of Fig. 4's fine sweep: every sample (sweep or grid) at a G the recording swept
    finely (``kind == "tile"``) with ``lo <= n <= hi`` tokens per expert; empty when the
    recording has no tile sweep."""
    _need(samples, {"G", "n", "kind"}, "samples (a calibration recording)")
    fine_G = samples[samples.kind == "tile"].G.unique()
    return samples[samples.G.isin(fine_G) & samples.n.between(lo, hi)].sort_values(["G", "n"])


def fig4_tile_staircase(fine: pd.DataFrame, blind, tile):
    """Fig. 4: the tile staircase on a fine sweep (:func:`tile_window`): measured time, the
    tile-blind fit (Eq. 1, ``blind``) and the tile-aware fit (Eq. 2, ``tile``) per G, with the
    128-token boundaries as dotted rules."""
    alt = _alt()
    _need(fine, {"G", "n", "N", "T", "t_us"}, "fine (tile_window of a recording)")
    if fine.empty:
        raise ValueError("fine is empty: the recording has no tile sweep")
    pred = fine.assign(**{"tile-blind (Eq. 1)": blind.time(fine.G, fine.N),
                          "tile-aware (Eq. 2)": tile.time(fine.G, fine.N, fine["T"])})
    long = pred.melt(["G", "n"], ["t_us", "tile-blind (Eq. 1)", "tile-aware (Eq. 2)"], var_name="series",
                     value_name="time")
    long["series"] = long.series.replace({"t_us": "measured"})
    bounds = [b for b in (128, 256, 384, 512) if fine.n.min() <= b <= fine.n.max()]
    # the lines take the facet's data (no data of their own), so each panel draws its own G
    lines = alt.Chart().mark_line(point=True).encode(
        x=alt.X("n:Q", title="tokens per expert"), y=alt.Y("time:Q", title="time (us)"),
        color=alt.Color("series:N", legend=alt.Legend(orient="bottom")), strokeDash="series:N",
        tooltip=["G", "n", "series", alt.Tooltip("time:Q", format=".1f")])
    rules = alt.Chart(pd.DataFrame({"n": bounds})).mark_rule(strokeDash=[2, 3], color="gray").encode(x="n:Q")
    return alt.layer(lines, rules).properties(width=260, height=200).facet(
        facet=alt.Facet("G:O", title="G"), columns=2, data=long).resolve_scale(y="independent")


def fig9_proxy_spreads(spreads: pd.DataFrame, paper: pd.DataFrame | None = None, label: str = "this artifact"):
    """Fig. 9: proxy-equivalence sets on a measured grid -- the largest spread (max t / min t)
    of the same-N sets (token balancing's equal cells) and of the same-G sets (activation
    balancing's), this artifact's (``spreads`` from :func:`tempo.calib.proxy_spreads`) beside
    the paper's (``tempo.paper.tables.figure(9)``)."""
    alt = _alt()
    _need(spreads, {"set", "spread"}, "spreads (tempo.calib.proxy_spreads)")
    ours = spreads.groupby("set").spread.max().rename("value").reset_index()
    ours["source"] = label
    frames = [ours]
    if paper is not None:
        _need(paper, {"setting", "model", "value"}, "paper (tempo.paper.tables.figure(9))")
        frames.append(pd.DataFrame({"set": paper.setting, "value": paper.value, "source": "paper: " + paper.model}))
    df = pd.concat(frames, ignore_index=True)
    # a bar on a log axis needs a baseline the axis holds: a spread of 1x (no spread), not 0
    return alt.Chart(df).mark_bar().encode(
        y=alt.Y("set:N", title=None), yOffset="source:N",
        x=alt.X("value:Q", scale=alt.Scale(type="log", domainMin=1), title="largest spread of true time in the set (x)"),
        x2=alt.datum(1),
        color=alt.Color("source:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=480, columns=1)),
        tooltip=["set", "source", alt.Tooltip("value:Q", format=".2f")],
    ).properties(width=460, height=160, title="Cells a proxy treats as equal, by true time")


# ---------------------------------------------------------------------------- hardware-only figures (Figs. 7, 8, 10, 11, 13)
_POINT_COLS = ["model", "setting", "policy", "metric", "value", "lo", "hi", "unit", "source"]


def _points(paper: pd.DataFrame, ours: pd.DataFrame | None, figure: int) -> pd.DataFrame:
    _need(paper, FIGURE_COLUMNS, f"paper (tempo.paper.tables.figure({figure}))")
    if not (paper.figure == figure).all():
        raise ValueError(f"paper holds rows of figures {sorted(paper.figure.unique())}, expected {figure}")
    p = paper[_POINT_COLS].assign(who="paper")
    frames = [p]
    if ours is not None and len(ours):
        _need(ours, _POINT_COLS, "ours (epbench_points / servebench_points)")
        frames.append(ours[_POINT_COLS].assign(who=ours.get("who", "this artifact")))
    df = pd.concat(frames, ignore_index=True)
    df["row"] = df.setting.astype(str) + " | " + df.policy.astype(str)
    df["quantity"] = df.metric + " (" + df.unit + ")"
    return df


def _points_chart(df: pd.DataFrame, title: str):
    """Stated points (filled), ranges (a bar from lo to hi) and one-sided bounds (a tick at hi),
    one panel per quantity, paper and this artifact in two colours."""
    alt = _alt()
    # fits the page's column (676 px at 1280): labels cut at 220 px (whole in the tooltip), one
    # legend entry per line
    color = alt.Color("who:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=480, columns=1))
    y = alt.Y("row:N", title=None, axis=alt.Axis(labelLimit=220))
    tips = ["who", "model", "setting", "policy", "metric", alt.Tooltip("value:Q", format=".1f"),
            alt.Tooltip("lo:Q", format=".1f"), alt.Tooltip("hi:Q", format=".1f"), "unit", "source"]
    pts = alt.Chart().mark_point(filled=True, size=80).encode(
        x=alt.X("value:Q", title=None), y=y, color=color, tooltip=tips).transform_filter("isValid(datum.value)")
    rng = alt.Chart().mark_bar(size=8, opacity=0.6).encode(
        x="lo:Q", x2="hi:Q", y=y, color=color, tooltip=tips).transform_filter("isValid(datum.lo) && isValid(datum.hi)")
    bound = alt.Chart().mark_tick(thickness=3, size=16).encode(
        x="hi:Q", y=y, color=color, tooltip=tips).transform_filter("!isValid(datum.lo) && isValid(datum.hi)")
    zero = alt.Chart().mark_rule(color="gray", strokeDash=[3, 3]).encode(x="z:Q").transform_calculate(z="0")
    return alt.layer(rng, bound, pts, zero, data=df).properties(width=360).facet(
        row=alt.Row("quantity:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                                                 labelLimit=560)),
    ).resolve_scale(x="independent", y="independent").properties(title=title)


def epbench_points(df: pd.DataFrame, setting: str, who: str = "this artifact",
                   fixed=("uniform", "token_lp", "metro"), time: str = "layer_us") -> pd.DataFrame:
    """Fig. 7's quantities from an ``epbench`` run (its per-step CSV, ``--csv``): each policy's
    median ``time`` over the steps, how far it is off the best fixed policy (the best of
    ``fixed`` present), and TEMPO's gain over each other policy, in %.  ``setting`` names the
    run (e.g. ``"B=64"``), ``who`` the recording."""
    _need(df, {"step", "policy", time}, "df (an epbench per-step CSV)")
    med = df.groupby("policy")[time].median()
    present = [p for p in fixed if p in med.index]
    if not present:
        raise ValueError(f"df has none of the fixed policies {list(fixed)}")
    best = med[present].min()
    rows = [{"policy": p, "metric": "off the best fixed policy", "value": 100 * (v / best - 1)}
            for p, v in med.items()]
    if "tempo" in med.index:
        rows += [{"policy": p, "metric": "TEMPO's gain over the policy", "value": 100 * (1 - med["tempo"] / v)}
                 for p, v in med.items() if p != "tempo"]
    out = pd.DataFrame(rows)
    return out.assign(model="", setting=setting, lo=float("nan"), hi=float("nan"), unit="%",
                      source=f"median {time} over {df.step.nunique()} steps", who=who)


_PAIR_METRICS = {"throughput_delta_pct": "throughput change vs same-window static",
                 "p99_tpot_ms_delta_pct": "p99 TPOT change vs same-window static",
                 "median_ttft_ms_delta_pct": "median TTFT change vs same-window static"}


def servebench_points(pairs: pd.DataFrame, who: str = "this artifact") -> pd.DataFrame:
    """The serving figures' quantities from a ``serve-bench`` ``pairs.csv``: per (workload,
    policy) and metric, the median over the kept windows (``value``) and their range (``lo``,
    ``hi``), in % against the same window's static run."""
    _need(pairs, {"workload", "policy", "kept"}, "pairs (a serve-bench pairs.csv)")
    kept = pairs[pairs.kept.astype(bool)]
    rows = []
    for col, metric in _PAIR_METRICS.items():
        if col not in kept:
            continue
        for (wl, pol), s in kept.groupby(["workload", "policy"])[col]:
            s = s.dropna()
            if len(s):
                rows.append({"setting": wl, "policy": pol, "metric": metric, "value": s.median(),
                             "lo": s.min() if len(s) > 1 else float("nan"), "hi": s.max() if len(s) > 1 else float("nan"),
                             "source": f"median of {len(s)} kept window(s)"})
    out = pd.DataFrame(rows, columns=["setting", "policy", "metric", "value", "lo", "hi", "source"])
    return out.assign(model="", unit="%", who=who)


def fig7_wallclock(paper: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 7 (Section 5.1): the EP8 wall-clock microbenchmark -- how far each policy is off
    the best fixed policy of its batch size and TEMPO's gain over each, as the paper states
    them (``tempo.paper.tables.figure(7)``), beside an ``epbench`` run (:func:`epbench_points`)."""
    return _points_chart(_points(paper, ours, 7), "Fig. 7: EP8 wall clock relative to the best fixed policy")


def fig8_serving(paper: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 8 (Section 5.10, EP16 panels 5.15): serving on Testbed B against same-window
    static -- throughput (left) and tail latency under Poisson arrivals (right) -- as the paper
    states them (``tempo.paper.tables.figure(8)``), beside a serve-bench ``pairs.csv``
    (:func:`servebench_points`)."""
    return _points_chart(_points(paper, ours, 8), "Fig. 8: Testbed B serving vs same-window static")


def fig10_stale_placement(paper: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 10 (Section 5.12): stale placement on the DSv3-shape proxy -- (a) TEMPO against
    the token-LP dispatcher, (b) the 1.06x replica budget -- from ``tempo.paper.tables.figure(10)``, beside
    a serve-bench ``pairs.csv`` (:func:`servebench_points`)."""
    return _points_chart(_points(paper, ours, 10), "Fig. 10: stale placement, DSv3-shape proxy")


def fig11_robustness(paper: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 11 (Sections 5.10, 5.12): the Testbed B wins over repeat windows (a, b) and the
    drift-16 corruption on the real model (c), from ``tempo.paper.tables.figure(11)``, beside a serve-bench
    ``pairs.csv`` (:func:`servebench_points`)."""
    return _points_chart(_points(paper, ours, 11), "Fig. 11: robustness of the Testbed B win region")


def fig13_topology(paper: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 13b (Section 5.15): flat vs topology-aware split on two-node EP16 under drift-16,
    from ``tempo.paper.tables.figure(13)``, beside a serve-bench ``pairs.csv`` (:func:`servebench_points`)."""
    return _points_chart(_points(paper, ours, 13), "Fig. 13: topology-aware dispatch, two-node EP16")


# ---------------------------------------------------------------------------- runtime and microbenchmark charts (06, 07)
def live_vs_uniform(live: pd.DataFrame):
    """The refresher at work (chapter 06): per batch, the modeled block time of the table in
    force over EPLB's uniform split of the same batch, against wall-clock seconds.  ``live``
    is the frame of :func:`tempo.benchmarks.live.live_run`."""
    alt = _alt()
    _need(live, {"t_s", "table_vs_uniform", "tables_published"}, "live (tempo.benchmarks.live.live_run)")
    return alt.Chart(live).mark_line().encode(
        x=alt.X("t_s:Q", title="seconds"),
        y=alt.Y("table_vs_uniform:Q", title="modeled block time / uniform split", scale=alt.Scale(zero=False)),
        tooltip=["t_s", "table_vs_uniform", "tables_published"],
    ).properties(width=520, height=240, title="Live table vs EPLB's uniform split")


def epbench_model_vs_measured(summary: pd.DataFrame, where: str = ""):
    """EP microbenchmark (Section 5.2's question): per policy, measured expert time and the
    model's prediction, each relative to static (medians of per-step ratios).  ``summary`` is
    ``epbench.summarize(...)`` (index policy, columns measured_vs_static, model_vs_static)."""
    alt = _alt()
    _need(summary, {"measured_vs_static", "model_vs_static"}, "summary (epbench.summarize)")
    bars = summary[["measured_vs_static", "model_vs_static"]].rename_axis("policy").reset_index().melt(
        "policy", var_name="series", value_name="vs static")
    return alt.Chart(bars).mark_bar().encode(
        x=alt.X("policy:N", title=None), xOffset="series:N", y=alt.Y("vs static:Q", title="relative to static (median)"),
        color=alt.Color("series:N", legend=alt.Legend(orient="bottom")),
        tooltip=["policy", "series", alt.Tooltip("vs static:Q", format=".3f")],
    ).properties(width=420, height=240, title=f"{where}: measured expert time vs the model's prediction" if where
                 else "Measured expert time vs the model's prediction")


def fig2b_shapes(paper_t6: pd.DataFrame, ours: pd.DataFrame | None = None):
    """Fig. 2b: the activation floor b and the inflection n* per expert shape, the paper's
    (``tempo.paper.tables.table(6)``, Testbed A) beside this artifact's recordings
    (:func:`tempo.calib.record.recording_fits`: one point per recording, labelled with its
    device and backend)."""
    alt = _alt()
    _need(paper_t6, {"shape", "b_us", "n_star"}, "paper_t6 (tempo.paper.tables.table(6))")
    frames = [paper_t6[["shape", "b_us", "n_star"]].assign(who="paper (Testbed A)")]
    if ours is not None and len(ours):
        _need(ours, {"shape", "backend", "device", "b_us", "n_star"}, "ours (recording_fits)")
        frames.append(ours[["shape", "b_us", "n_star"]].assign(
            who="this artifact: " + ours.device.astype(str) + " " + ours.backend.astype(str)))
    df = pd.concat(frames, ignore_index=True)
    # one name per shape whichever table it comes from (recordings use lower-case ids)
    df["shape"] = df["shape"].astype(str).str.lower().str.replace(" ", "", regex=False)
    long = df.melt(["shape", "who"], ["b_us", "n_star"], var_name="quantity", value_name="value")
    long["quantity"] = long.quantity.map({"b_us": "floor b (us)", "n_star": "inflection n* (tokens)"})
    return alt.Chart(long).mark_point(filled=True, size=80).encode(
        x=alt.X("value:Q", title=None, scale=alt.Scale(type="log")), y=alt.Y("shape:N", title=None),
        color=alt.Color("who:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=400, columns=2)),
        shape=alt.Shape("who:N", legend=None),
        tooltip=["shape", "who", "quantity", alt.Tooltip("value:Q", format=".3g")],
    ).properties(width=480, height=140).facet(row=alt.Row("quantity:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top"))).resolve_scale(x="independent")


# ---------------------------------------------------------------------------- chapters 02 and 03
def thm2_probe(probe: pd.DataFrame):
    """Theorem 2's probe suite (the thm2_probe result): M(A3)/OPT (best known, log scale)
    against M(A3)/(OPT + additive term), one point per instance, coloured by construction."""
    alt = _alt()
    need = {"kind", "params", "experts", "n_gpus", "tokens", "rr_over_opt_min", "rr_over_bound_lo"}
    if not need <= set(probe.columns):
        raise ValueError(f"probe must have columns {sorted(need)} (the thm2_probe experiment)")
    return alt.Chart(probe[sorted(need)]).mark_circle(size=30, opacity=0.6).encode(
        x=alt.X("rr_over_opt_min:Q", title="M(A3) / OPT (best known)", scale=alt.Scale(type="log")),
        y=alt.Y("rr_over_bound_lo:Q", title="M(A3) / (OPT + additive term)"),
        color=alt.Color("kind:N", title="construction", scale=alt.Scale(scheme="category10")),
        tooltip=["kind", "params", "experts", "n_gpus", "tokens", alt.Tooltip("rr_over_bound_lo:Q", format=".4f"),
                 alt.Tooltip("rr_over_opt_min:Q", format=".3f")],
    ).properties(width=520, height=300, title="Theorem 2 probe suite: never above 1")


def solver_vs_milp(svm: pd.DataFrame):
    """tempo_fast against the time-limited MILP (the solver_vs_milp result): per batch, how far
    tempo lies above what the MILP proved, in % (above its optimum where it proved one, above its
    lower bound where it stopped at its time limit; negative: tempo below the MILP's dispatch),
    against B, one panel per replication factor, colour = Zipf skew, shape = whether the MILP
    reported optimal.  Gaps are rounded to 1e-4 % so float noise reads 0, and the axis spans at
    least 0-0.1 % so an all-zero grid shows whole ticks; legends sit below, unclipped."""
    import numpy as np

    alt = _alt()
    need = {"tokens_per_gpu", "skew", "replication", "ratio", "milp_optimal", "chosen", "tempo_ms"}
    if not need <= set(svm.columns):
        raise ValueError(f"svm must have columns {sorted(need)} (the solver_vs_milp experiment)")
    to_lb = svm.ratio_to_lb if "ratio_to_lb" in svm else svm.ratio
    gap = np.round(100 * (np.where(svm.milp_optimal, svm.ratio, to_lb) - 1), 4) + 0.0   # + 0.0: no -0
    df = svm[sorted(need)].assign(MILP=svm.milp_optimal.map({True: "proved optimal", False: "stopped at its time limit"}),
                                  gap=gap)
    lo, hi = min(0.0, float(df.gap.min())), max(0.1, float(df.gap.max()))
    pad = 0.05 * (hi - lo)
    return alt.Chart(df.drop(columns="milp_optimal")).mark_point(size=70, filled=True, opacity=0.8).encode(
        x=alt.X("tokens_per_gpu:O", title="tokens per GPU (B)"),
        y=alt.Y("gap:Q", title="tempo above the MILP's optimum or bound (%)",
                scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False), axis=alt.Axis(format=".2f", tickCount=5)),
        color=alt.Color("skew:N", title="Zipf s", scale=alt.Scale(scheme="category10"),
                        legend=alt.Legend(orient="bottom", direction="horizontal", labelLimit=0, titleLimit=0)),
        shape=alt.Shape("MILP:N", title="MILP", legend=alt.Legend(orient="bottom", direction="horizontal", labelLimit=0,
                                                                  titleLimit=0)),
        tooltip=["tokens_per_gpu", "skew", "replication", alt.Tooltip("ratio:Q", format=".6f"),
                 alt.Tooltip("gap:Q", title="gap %", format=".4f"), "MILP", "chosen", alt.Tooltip("tempo_ms:Q", format=".2f")],
    ).properties(width=240, height=220).facet(column=alt.Column("replication:N", title="replication")).properties(
        title="tempo_fast against the exact MILP: the gap, per batch")


def fit_vs_measured(samples: pd.DataFrame, model, G=(1, 4, 8, 40), title: str = "fit"):
    """Measured expert time (points) against a fitted cost model (lines: the model's own formula,
    Eq. 1, the tile-aware Eq. 2 or the three-term Eq. 4, at the same G, tokens and M-tiles) for a
    few activation counts ``G``, log-log over tokens per expert: chapter 08's check of your own
    calibration.  ``samples`` is a calibration recording's grid (G, n, N, t_us, kind; T, the
    cell's M-tiles, when recorded, else ``G * ceil(n / model.tile)``)."""
    import numpy as np

    _need(samples, {"G", "n", "N", "t_us", "kind"}, "samples (a calibration recording)")
    alt = _alt()
    show = samples[samples.G.isin(list(G)) & (samples.kind == "grid")].copy()
    if show.empty:
        raise ValueError(f"samples hold no grid cells at G in {list(G)}")
    tiles = (show["T"].to_numpy(float) if "T" in show else
             show.G.to_numpy(float) * np.ceil(show.n.to_numpy(float) / model.tile))
    show["fitted (us)"] = model.time(show.G.to_numpy(float), show.N.to_numpy(float), tiles)
    base = alt.Chart(show).encode(x=alt.X("n:Q", scale=alt.Scale(type="log"), title="tokens per expert n"),
                                  color=alt.Color("G:N", title="activated experts G", scale=alt.Scale(scheme="category10")))
    return (base.mark_point(filled=True).encode(y=alt.Y("t_us:Q", scale=alt.Scale(type="log"), title="time (us)"),
                                                tooltip=["G", "n", alt.Tooltip("t_us:Q", format=".1f")])
            + base.mark_line().encode(y="fitted (us):Q")).properties(width=480, height=280, title=title)


def replica_layout(inst, dispatch=None, title: str = "GPUs and the replicas they hold"):
    """An instance's placement as a picture: one column of boxes per GPU, one box per replica it
    holds (``replica_gpu[e, r] == g``), labelled with the expert and, given a dispatch, the tokens
    ``shares[e, r]`` it receives (an empty replica reads 0).  Chapter 08's restricted example."""
    import numpy as np

    alt = _alt()
    rows = []
    for g in range(inst.n_gpus):
        held = [(int(e), int(r)) for e, r in zip(*np.nonzero(inst.replica_gpu == g))]
        for k, (e, r) in enumerate(sorted(held)):
            tokens = float(dispatch.shares[e, r]) if dispatch is not None else float("nan")
            label = f"expert {e} (r={r})" + (f": {tokens:.0f}" if dispatch is not None else "")
            rows.append({"GPU": f"GPU {g}", "box": k, "expert": f"expert {e}", "label": label, "tokens": tokens})
    if not rows:
        raise ValueError("inst holds no replica")
    df = pd.DataFrame(rows)
    base = alt.Chart(df).encode(x=alt.X("GPU:N", title=None, axis=alt.Axis(orient="top", labelAngle=0)),
                                y=alt.Y("box:O", title=None, axis=None))
    boxes = base.mark_rect(stroke="#333", strokeWidth=1.5, cornerRadius=4).encode(
        color=alt.Color("expert:N", scale=alt.Scale(scheme="pastel1"), legend=None),
        tooltip=["GPU", "label"])
    text = base.mark_text(fontSize=12, color="#111").encode(text="label:N")
    return (boxes + text).properties(width=120 * inst.n_gpus, height=40 * int(df.box.max() + 1), title=title)


def repro_needs(rmap: pd.DataFrame):
    """The reproduction map (``tempo.book.repro.load_map()``) as bars: how many paper items need a CPU,
    one GPU, a cluster or a recorded trace, coloured by kind of item (table, figure, other)."""
    from . import repro

    _need(rmap, {"item", "needs"}, "rmap (the reproduction map)")
    alt = _alt()
    bars = rmap.assign(kind=rmap.item.str.extract(r"^(Table|Figure)", expand=False).fillna("text or abstract"),
                       needs=rmap.needs.map(repro.NEEDS))
    return alt.Chart(bars).mark_bar().encode(
        y=alt.Y("needs:N", title=None, sort=list(repro.NEEDS.values())), x=alt.X("count():Q", title="paper items"),
        color=alt.Color("kind:N", title="item", scale=alt.Scale(scheme="category10")),
        tooltip=["needs", "kind", "count()"]).properties(width=420, height=140, title="What each paper item needs")


def _ledger_colors() -> list:
    from .claims.registry import STATUS_COLORS, STATUSES

    return [STATUS_COLORS[s][0] for s in STATUSES]


#: one colour per ledger status, in :data:`tempo.book.claims.STATUSES` order (its table of colours)
LEDGER_COLORS = _ledger_colors()


def ledger_by_chapter(ledger: pd.DataFrame):
    """The claims ledger (``tempo.book.claims.ledger``) as stacked bars: claims per chapter, coloured by
    verdict, every status with its fixed colour."""
    from .claims.registry import STATUSES

    _need(ledger, {"chapter", "status"}, "ledger (tempo.book.claims.build_ledger())")
    unknown = set(ledger.status) - set(STATUSES)
    if unknown:
        raise ValueError(f"ledger holds unknown statuses {sorted(unknown)}")
    alt = _alt()
    by = ledger.groupby(["chapter", "status"]).size().rename("claims").reset_index()
    return alt.Chart(by).mark_bar().encode(
        y=alt.Y("chapter:N", title=None), x=alt.X("claims:Q", title="claims"),
        color=alt.Color("status:N", scale=alt.Scale(domain=STATUSES, range=LEDGER_COLORS),
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=300)),
        tooltip=["chapter", "status", "claims"]).properties(width=520, height=220, title="Claims by chapter and verdict")


def staleness_regimes(stale: pd.DataFrame):
    """Section 5.5: per information regime (exact, stale-1, frozen, uniform) and scale, the
    median makespan over static of the batches (a point each; the axis spans the data, not 0),
    with static's 1 as a rule.
    ``stale`` is the ``staleness`` result (scale, regime, ratio_to_static per batch)."""
    _need(stale, {"scale", "regime", "ratio_to_static"}, "stale (the staleness experiment)")
    alt = _alt()
    order = ["exact", "stale-1", "frozen", "uniform"]
    med = stale.groupby(["scale", "regime"]).ratio_to_static.median().rename("median / static").reset_index()
    bars = alt.Chart(med).mark_point(filled=True, size=90).encode(
        x=alt.X("regime:N", sort=order, title=None), xOffset=alt.XOffset("scale:N"),
        y=alt.Y("median / static:Q", scale=alt.Scale(zero=False), title="makespan / static (median)"),
        color=alt.Color("scale:N", title="scale", legend=alt.Legend(orient="bottom")),
        tooltip=["regime", "scale", alt.Tooltip("median / static:Q", format=".3f")])
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 3], color="#444").encode(y="y:Q")
    return (bars + one).properties(width=420, height=240, title="What a table solved on other counts costs")
