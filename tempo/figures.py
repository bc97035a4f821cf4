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

from . import paths

POLICY_COLORS = {"token_lp": "#4c78a8", "metro": "#f58518", "tempo": "#54a24b", "uniform": "#b279a2",
                 "static": "#9d755d", "llep": "#e45756", "round_robin": "#72b7b2", "milp": "#bab0ac"}


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
    from .cache import atomic_write_text

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
    """Make altair charts display through :func:`chart_html` (call once per notebook)."""
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
        color=alt.Color("term:N", title="cost piece"),
        column=alt.Column("label:N", title=None),
        tooltip=["label", "GPU", "term", alt.Tooltip("us:Q", format=".1f"), "activated",
                 alt.Tooltip("tokens:Q", format=".0f"), alt.Tooltip("time_us:Q", title="GPU time", format=".1f"),
                 alt.Tooltip("makespan_us:Q", title="makespan", format=".1f")],
    ).properties(width=150, height=260)


def toy_explorer(df: pd.DataFrame):
    """Interactive: sliders for b and beta; bars show each policy's makespan on the toy."""
    alt = _alt()
    df = df.assign(beta_ns=(df.beta * 1000).round().astype(int))
    bs = sorted(df.b.unique())
    betas = sorted(df.beta_ns.unique())
    b_step = bs[1] - bs[0] if len(bs) > 1 else 1.0
    beta_step = int(betas[1] - betas[0]) if len(betas) > 1 else 10
    b0 = min(bs, key=lambda v: abs(v - 15.0))
    beta0 = int(min(betas, key=lambda v: abs(v - 100)))
    pb = alt.param("b_us", value=b0, bind=alt.binding_range(min=bs[0], max=bs[-1], step=b_step, name="b (us per activated expert) "))
    pbeta = alt.param("beta_us", value=beta0, bind=alt.binding_range(min=int(betas[0]), max=int(betas[-1]), step=beta_step, name="beta (ns per token) "))
    return alt.Chart(df).mark_bar().encode(
        y=alt.Y("label:N", title=None, sort=["token balancing (token-LP)", "activation balancing (METRO)", "time model (TEMPO)"]),
        x=alt.X("makespan_us:Q", title="makespan of the toy batch (us)"),
        color=alt.Color("policy:N", scale=alt.Scale(domain=list(POLICY_COLORS), range=list(POLICY_COLORS.values())), legend=None),
        tooltip=["label", alt.Tooltip("makespan_us:Q", format=".1f"), alt.Tooltip("vs_best:Q", title="x best", format=".3f"),
                 alt.Tooltip("b:Q", format=".2f"), alt.Tooltip("beta:Q", format=".3f")],
    ).add_params(pb, pbeta).transform_filter(
        f"abs(datum.b - b_us) < {b_step / 2} && abs(datum.beta_ns - beta_us) < {beta_step / 2}"
    ).properties(width=520, height=140, title="Move the sliders: which proxy pays, and how much?")


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
    topology-aware (hier) TEMPO.  ``df`` is ``paper.table(5)`` (wide, one row per workload)."""
    alt = _alt()
    cols = [c for c in df.columns if c.endswith("_pct")]
    if "workload" not in df or not cols:
        raise ValueError("df must have a 'workload' column and *_pct columns (paper.table(5))")
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
    ``paper.table(11)`` (columns ``<variant>_r<round>``)."""
    alt = _alt()
    cols = [c for c in df.columns if c != "requests"]
    if "requests" not in df or not cols:
        raise ValueError("df must have a 'requests' column and <variant>_r<round> columns (paper.table(11))")
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
    ``paper.table(3)``."""
    alt = _alt()
    need = {"B", "regime", "delta_w1_pct", "delta_w2_pct"}
    if not need <= set(df.columns):
        raise ValueError(f"df must have columns {sorted(need)} (paper.table(3))")
    long = df.melt(["B", "regime"], ["delta_w1_pct", "delta_w2_pct"], var_name="window", value_name="pct")
    long["window"] = long.window.map({"delta_w1_pct": "window 1", "delta_w2_pct": "window 2"})
    return alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("B:Q", scale=alt.Scale(type="log"), title="concurrency B"),
        y=alt.Y("pct:Q", title="measured throughput change over static (%)"),
        strokeDash=alt.StrokeDash("window:N", title=None),
        color=alt.Color("regime:N", title="modeled regime", legend=alt.Legend(orient="bottom")),
        detail="window:N",
        tooltip=["B", "regime", "window", alt.Tooltip("pct:Q", format="+.1f")],
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
        x=alt.X("tokens_per_gpu:Q", scale=alt.Scale(type="log"), title="tokens per GPU (B)"),
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
    return (rect + base.mark_text(fontSize=11).encode(text="winner:N")).properties(
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
    return alt.Chart(scale).mark_line(point=True).encode(
        x=alt.X("B:Q", scale=alt.Scale(type="log"), title="tokens per GPU (B)"),
        y=alt.Y("gain_pct:Q", title="TEMPO gain over best fixed %"),
        color=alt.Color("ep:O", title="EP"), strokeDash=alt.StrokeDash("skew:N", title="Zipf s"), tooltip=tips,
    ).properties(width=520, height=280, title="Scale extrapolation (compute only)")


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
    """tempo_fast against the time-limited MILP (the solver_vs_milp result): tempo / MILP per
    batch against B, one panel per replication factor, colour = Zipf skew, shape = whether the
    MILP reported optimal or stopped at its time limit."""
    alt = _alt()
    need = {"tokens_per_gpu", "skew", "replication", "ratio", "milp_optimal", "chosen", "tempo_ms"}
    if not need <= set(svm.columns):
        raise ValueError(f"svm must have columns {sorted(need)} (the solver_vs_milp experiment)")
    df = svm[sorted(need)].assign(MILP=svm.milp_optimal.map({True: "reported optimal", False: "time limit"}))
    return alt.Chart(df.drop(columns="milp_optimal")).mark_point(size=60, filled=True, opacity=0.75).encode(
        x=alt.X("tokens_per_gpu:O", title="tokens per GPU (B)"),
        y=alt.Y("ratio:Q", title="tempo / MILP", scale=alt.Scale(zero=False)),
        color=alt.Color("skew:N", title="Zipf s", scale=alt.Scale(scheme="category10")),
        shape=alt.Shape("MILP:N", title="MILP"),
        tooltip=["tokens_per_gpu", "skew", "replication", alt.Tooltip("ratio:Q", format=".4f"), "MILP", "chosen",
                 alt.Tooltip("tempo_ms:Q", format=".2f")],
    ).properties(width=260, height=240).facet(column=alt.Column("replication:N", title="replication")).properties(
        title="tempo_fast against the exact MILP")
