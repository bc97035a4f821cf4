// The phase explorer of chapter 04: pick a model shape (or your own b and beta), an EP size, a
// replication and a skew, and read the winner map over batch size and each policy's modelled
// time, from the grid this build computed (tempo.studies.phase_grid, embedded as JSON in the
// page), with the analytic flip boundary B* of Section 3.2 drawn over it.  No kernel, no network.
(function (root) {
  "use strict";

  // ---------------------------------------------------------------- B* (tempo.theory.bounds)
  // Router weights by rank: p_i proportional to i^-s over E experts (tempo.world.workloads.
  // zipf_popularity before its shuffle, which E_eff does not see).
  function zipfByRank(E, s) {
    var p = [], tot = 0, i;
    for (i = 1; i <= E; i++) { p.push(Math.pow(i, -s)); tot += p[i - 1]; }
    return p.map(function (v) { return v / tot; });
  }
  // run-length [[replicas, count], ...] -> replicas per rank
  function unrle(rle) {
    var out = [];
    rle.forEach(function (rc) { for (var i = 0; i < rc[1]; i++) out.push(rc[0]); });
    return out;
  }
  // flip_boundary: B* = min(B*_avg, B*_hot), a fixed point in B (E_eff depends on B);
  // E_eff = sum_e (1 - (1 - p_e)^(B K g)) r_e.  Returns [B*, B*_avg, B*_hot].
  function flipBoundary(p, reps, nStar, K, g, iters) {
    iters = iters || 50;
    var p1 = Math.max.apply(null, p), B = 1, avg = 1, hot = 1;
    for (var it = 0; it < iters; it++) {
      var T = B * K * g, Eeff = 0;
      for (var e = 0; e < p.length; e++) Eeff += (1 - Math.pow(1 - p[e], T)) * reps[e];
      avg = nStar * Eeff / (K * g);
      hot = nStar * Eeff / (p1 * K * g * g);
      var nw = Math.min(avg, hot);
      if (Math.abs(nw - B) <= 1e-9 * Math.max(1, B)) { B = nw; break; }
      B = nw;
    }
    return [B, avg, hot];
  }

  // TEMPO's rows in the grid: the reading's preset ("tempo") and, when the build ran it, the
  // library's default ("tempo_default")
  function tempoKeys(data) { return data.presets ? data.presets.map(function (p) { return p.key; }) : ["tempo"]; }
  // Each policy's mean modelled time over the batches, per batch size, in one column of the grid:
  // the build's numbers (model null), or re-priced at model {b, beta} (a = c = 0) from each
  // batch's busiest GPU, max(b G, beta N); each TEMPO preset then takes, per batch, the best of
  // its dispatch solved at the shape's n* and the reading's preset's ("tempo") at the n* ladder.
  function columnTimes(data, c, model) {
    var keys = tempoKeys(data), pols = data.fixed.concat(keys), out = {};
    if (!model) { pols.forEach(function (p) { out[p] = c.ms[p].slice(); }); return out; }
    function t(G, N) { return Math.max(model.b * G, model.beta * N); }
    pols.forEach(function (p) {
      out[p] = data.tokens.map(function (B, i) {
        var tot = 0, nb = c.G[p][i].length;
        for (var b = 0; b < nb; b++) {
          var v = t(c.G[p][i][b], c.N[p][i][b]);
          if (keys.indexOf(p) >= 0) {
            for (var k = 0; k < data.n_stars.length; k++) v = Math.min(v, t(c.G.tempo_nstar[i][k][b], c.N.tempo_nstar[i][k][b]));
          }
          tot += v;
        }
        return tot / nb;
      });
    });
    return out;
  }

  var api = {zipfByRank: zipfByRank, unrle: unrle, flipBoundary: flipBoundary, columnTimes: columnTimes, tempoKeys: tempoKeys};
  if (typeof module !== "undefined" && module.exports) { module.exports = api; return; }
  root.TempoPhase = api;
  if (typeof document === "undefined") return;

  var NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, kids) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") n.textContent = attrs[k]; else n.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { if (c) n.appendChild(c); });
    return n;
  }
  function svg(tag, attrs, text) {
    var n = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function fmt(v, d) { return isFinite(v) ? v.toFixed(d) : "-"; }
  function list(xs) { return xs.join(", "); }

  function PhaseExplorer(host, data) {
    var self = this, st = {}, ui = {};
    var KEYS = tempoKeys(data), POL = data.fixed.concat(KEYS);
    var presetOf = {};
    (data.presets || [{key: "tempo", name: data.tempo_preset, label: data.tempo_preset}]).forEach(function (p) { presetOf[p.key] = p; });
    var profiles = data.profiles || [];
    var shapeOf = {};
    data.shapes.forEach(function (s) { shapeOf[s.label] = s; });

    function column(shape, ep, rep, skew) {
      for (var i = 0; i < data.columns.length; i++) {
        var c = data.columns[i];
        if (c.shape === shape && c.ep === ep && c.replication === rep && c.skew === skew) return c;
      }
      return null;
    }
    // the model the page prices with: the shape's Table 6 fit, or the reader's b and beta (a = c = 0)
    function ownModel() { return st.own ? {b: st.b, beta: st.beta} : null; }
    function times(c) { return columnTimes(data, c, ownModel()); }
    function winner(tm, i) {   // the first of the fixed policies with the least time, as the study
      var best = data.fixed[0];
      data.fixed.forEach(function (p) { if (tm[p][i] < tm[best][i]) best = p; });
      return best;
    }
    // the cell's label as Fig. 6 writes it (tempo.studies.simulator.winner_label): every fixed
    // policy within TIE_REL of the best, joined by "+" ("M+L"), one letter when one wins alone
    function tiedNames(tm, i) {   // the best fixed policy's name, or every tied one's ("metro + token_lp, tied")
      var m = tm[winner(tm, i)][i];
      var names = data.fixed.filter(function (p) { return tm[p][i] <= m + data.tie_rel * Math.abs(m); });
      return names.length > 1 ? names.join(" + ") + ", tied" : names[0];
    }
    function winnerLabel(tm, i) {
      var m = tm[winner(tm, i)][i];
      return data.fixed.filter(function (p) { return tm[p][i] <= m + data.tie_rel * Math.abs(m); })
        .map(function (p) { return data.codes[p]; }).join("+");
    }
    function nStar() { var s = shapeOf[st.shape]; return st.own ? (st.beta > 0 ? st.b / st.beta : Infinity) : s.n_star; }
    function bstar(c) {
      if (!st.own) return c.bstar;
      var s = shapeOf[st.shape];
      return flipBoundary(zipfByRank(s.E, c.skew), unrle(c.rle), nStar(), s.K, c.ep)[0];
    }

    // ---------------------------------------------------------------- controls
    function select(role, values, fmtv) {
      var s = el("select", {"data-role": role});
      values.forEach(function (v, i) { s.appendChild(el("option", {value: String(i), text: fmtv ? fmtv(v) : String(v)})); });
      return s;
    }
    function field(label, input, cls) { return el("label", {"class": "te-field" + (cls ? " " + cls : "")}, [el("span", {text: label}), input]); }
    function build() {
      host.innerHTML = "";
      host.classList.add("te-root");
      ui.shape = select("shape", data.shapes, function (s) { return s.label + " (" + s.E + " experts, top-" + s.K + ")"; });
      ui.ep = select("ep", data.eps);
      ui.rep = select("replication", data.replications, function (r) { return r + "x"; });
      ui.skew = el("input", {type: "range", "data-role": "skew", min: "0", max: String(data.skews.length - 1), step: "1"});
      ui.skewLab = el("span", {"class": "te-num"});
      ui.batch = el("input", {type: "range", "data-role": "batch", min: "0", max: String(data.tokens.length - 1), step: "1"});
      ui.batchLab = el("span", {"class": "te-num"});
      ui.own = el("input", {type: "checkbox", "data-role": "own"});
      ui.b = el("input", {type: "number", "data-role": "own-b", min: "0", step: "any"});
      ui.beta = el("input", {type: "number", "data-role": "own-beta", min: "0", step: "any"});
      var row1 = el("div", {"class": "te-row"}, [field("model shape", ui.shape, "te-wide"), field("EP size (GPUs)", ui.ep),
                                                 field("replication", ui.rep)]);
      var row2 = el("div", {"class": "te-row"}, [
        el("label", {"class": "te-field te-wide"}, [el("span", {}, [document.createTextNode("skew s = "), ui.skewLab]), ui.skew]),
        el("label", {"class": "te-field te-wide"}, [el("span", {}, [document.createTextNode("tokens per GPU B = "), ui.batchLab]), ui.batch])]);
      var row3 = el("div", {"class": "te-row"}, [el("label", {"class": "te-check"}, [ui.own, document.createTextNode(" your own b and beta (a = c = 0):")]),
                                                 field("b (us)", ui.b), field("beta (us per token)", ui.beta)]);
      ui.preset = el("select", {"data-role": "tempo-preset"});
      KEYS.forEach(function (k) {
        ui.preset.appendChild(el("option", {value: k, text: presetOf[k].name === "default" ? "the library's default preset" :
                                                          presetOf[k].name + " preset (the chapter's reading)"}));
      });
      ui.routing = el("select", {"data-role": "routing"});
      ui.routing.appendChild(el("option", {value: "", text: "Zipf skews (the grid's rows)"}));
      profiles.forEach(function (p, i) {
        ui.routing.appendChild(el("option", {value: String(i), text: "recorded profile " + p.name + " (" + p.shape +
                                                                   ", Zipf-equivalent s = " + fmt(p.skew, 2) + ")"}));
      });
      var row0 = el("div", {"class": "te-row"}, [field("TEMPO preset", ui.preset, "te-wide")].concat(
        profiles.length ? [field("routing", ui.routing, "te-wide")] : []));
      ui.routingNote = el("p", {"class": "te-hint", "data-role": "routing-note"});
      ui.modelNote = el("p", {"class": "te-hint", "data-role": "model-note"});
      host.appendChild(el("fieldset", {"class": "te-box"}, [el("legend", {text: "Model, group and routing"}), row0, row1, row2, row3,
                                                           ui.routingNote, ui.modelNote]));
      ui.size = el("p", {"class": "te-hint", "data-role": "grid-size"});
      host.appendChild(ui.size);
      ui.map = svg("svg", {"class": "te-map", "data-role": "winner-map", role: "img"});
      ui.chart = svg("svg", {"class": "te-times", "data-role": "times-chart", role: "img"});
      host.appendChild(el("div", {"class": "te-charts"}, [
        el("div", {"class": "te-chart-box"}, [el("h4", {"class": "te-h", text: "Winner map: the best fixed policy per (skew, B); TEMPO's gain over it in %"}), ui.map, ui.legend = el("div", {"class": "te-legend"})]),
        el("div", {"class": "te-chart-box"}, [el("h4", {"class": "te-h", "data-role": "times-title"}), ui.chart])]));
      ui.values = el("div", {"class": "te-table", "data-role": "cell-values"});
      host.appendChild(ui.values);

      [ui.shape, ui.ep, ui.rep, ui.preset].forEach(function (s) { s.addEventListener("change", read); });
      ui.routing.addEventListener("change", function () {
        var p = profiles[+ui.routing.value];
        if (ui.routing.value !== "" && p) {   // the profile's shape, EP8 when the grid has it, its nearest column
          var si = -1;
          data.shapes.forEach(function (q, i) { if (q.label === p.shape) si = i; });
          ui.shape.value = String(si);
          ui.ep.value = String(Math.max(0, data.eps.indexOf(8)));
          ui.skew.value = String(Math.max(0, data.skews.indexOf(p.column)));
        }
        read();
      });
      [ui.skew, ui.batch].forEach(function (s) { s.addEventListener("input", read); });
      ui.own.addEventListener("change", function () {
        if (ui.own.checked) { var s = shapeOf[data.shapes[+ui.shape.value].label]; if (!ui.b.value) ui.b.value = String(s.b); if (!ui.beta.value) ui.beta.value = String(s.beta); }
        read();
      });
      [ui.b, ui.beta].forEach(function (inp) { inp.addEventListener("input", function () { ui.own.checked = true; read(); }); });
      data.fixed.forEach(function (p) {
        ui.legend.appendChild(el("span", {"class": "te-leg"}, [el("span", {"class": "te-swatch", style: "background:" + data.colors[p]}),
          document.createTextNode(data.codes[p] + ": " + p)]));
      });
      ui.legend.appendChild(el("span", {"class": "te-leg"}, [el("span", {"class": "te-swatch", style: "background:" + data.colors.tempo}),
        document.createTextNode(KEYS.length > 1 ? "tempo (in the chart of times: solid the chosen preset, dashed the other)" : "tempo")]));
      ui.legend.appendChild(el("span", {"class": "te-leg"}, [el("span", {"class": "te-swatch te-bstar-sw"}), document.createTextNode("B*: analytic flip boundary (hollow: beyond the grid)")]));
    }
    function profileLegend() {
      if (!ui.profLeg) {
        ui.profLeg = el("span", {"class": "te-leg", "data-role": "profile-legend"});
        ui.legend.appendChild(ui.profLeg);
      }
      ui.profLeg.textContent = st.profile ? "\u00b7\u00b7\u00b7 " + st.profile.name + ": Zipf-equivalent s = " + fmt(st.profile.skew, 2) : "";
    }
    function read() {
      st.shape = data.shapes[+ui.shape.value].label;
      st.tkey = ui.preset.value || "tempo";
      st.profile = ui.routing.value !== "" ? profiles[+ui.routing.value] : null;
      if (st.profile && st.profile.shape !== st.shape) { ui.routing.value = ""; st.profile = null; }
      st.ep = data.eps[+ui.ep.value];
      st.rep = data.replications[+ui.rep.value];
      st.si = +ui.skew.value;
      st.bi = +ui.batch.value;
      var b = parseFloat(ui.b.value), beta = parseFloat(ui.beta.value);
      var okOwn = b >= 0 && beta > 0 && isFinite(b) && isFinite(beta);
      ui.b.classList.toggle("te-bad", ui.own.checked && !(b >= 0));
      ui.beta.classList.toggle("te-bad", ui.own.checked && !(beta > 0));
      st.own = ui.own.checked && okOwn;
      st.b = b; st.beta = beta;
      profileLegend();
      update();
    }

    // ---------------------------------------------------------------- drawing
    function update() {
      var s = shapeOf[st.shape];
      ui.skewLab.textContent = String(data.skews[st.si]);
      ui.batchLab.textContent = String(data.tokens[st.bi]);
      ui.modelNote.textContent = st.own
        ? "Your model: b = " + st.b + " us, beta = " + st.beta + " us/token, n* = " + fmt(nStar(), 0) + " tokens, with " + st.shape +
          "'s routing. The fixed policies' dispatches do not depend on the model and are re-priced exactly (from each batch's " +
          "busiest GPU: activated replicas and tokens, to 0.1 token); TEMPO's value is the best of the " + presetOf[st.tkey].name +
          " preset's dispatch solved at n* = " + fmt(s.n_star, 0) + " tokens and the " + presetOf.tempo.name + " preset's solved at n* = " + list(data.n_stars) +
          ", priced with your model: an upper bound on the best dispatch, not a TEMPO run at your n*."
        : st.shape + ": the " + s.params + " fit of Table 6, b = " + s.b + " us, beta = " + s.beta + " us/token, n* = " + fmt(s.n_star, 0) +
          " tokens. Values are this build's results (tempo.studies.phase_grid), not re-computed in the page." +
          " TEMPO here is " + presetOf[st.tkey].label + (KEYS.length > 1 ? " (the menu above switches preset)" : "") + "." +
          " A cell whose fixed policies tie is labelled with all of them (M+L), as Fig. 6 labels it.";
      var p = st.profile;
      ui.routingNote.textContent = p
        ? p.name + (p.about ? " (" + p.about + ")" : "") + ": its median layer's max/mean pair share is " + fmt(p.max_mean, 1) +
          ", the same statistic as Zipf(s = " + fmt(p.skew, 2) + ") over " + shapeOf[p.shape].E + " experts, top-" + shapeOf[p.shape].K +
          " (chapter 04's table of real profiles). The grid has no column at that skew: shown is its nearest, s = " + p.column +
          ", and the dotted line marks where the profile sits. Section 3.2's rule puts its flip boundary at B* = " + fmt(p.bstar, 0) +
          " tokens per GPU (median layer): METRO-like dispatch below it, token balancing above, TEMPO's room around it."
        : "";
      var cols = data.skews.map(function (sk) { return column(st.shape, st.ep, st.rep, sk); });
      var tms = cols.map(function (c) { return c ? times(c) : null; });
      var bs = cols.map(function (c) { return c ? bstar(c) : NaN; });
      drawMap(tms, bs);
      drawTimes(tms[st.si], bs[st.si]);
      drawValues(tms[st.si], bs[st.si]);
      host.setAttribute("data-rendered", "1");
    }

    function logx(B, x0, x1) {   // position of B on the grid's batch axis (cell centres, log-interpolated)
      var T = data.tokens, n = T.length, w = (x1 - x0) / n;
      var lb = Math.log(B);
      if (n === 1) return x0 + w / 2;
      if (lb <= Math.log(T[0])) return x0 + w / 2 + (lb - Math.log(T[0])) / (Math.log(T[1]) - Math.log(T[0])) * w;
      for (var i = 0; i < n - 1; i++) {
        if (lb <= Math.log(T[i + 1])) return x0 + w * (i + 0.5 + (lb - Math.log(T[i])) / (Math.log(T[i + 1]) - Math.log(T[i])));
      }
      return x0 + w * (n - 0.5 + (lb - Math.log(T[n - 1])) / (Math.log(T[n - 1]) - Math.log(T[n - 2])));
    }
    function drawMap(tms, bs) {
      var m = ui.map, nB = data.tokens.length, nS = data.skews.length;
      var L = 44, R = 8, Tp = 8, Bt = 34, cw = 30, ch = 24, W = L + R + cw * nB, H = Tp + Bt + ch * nS;
      m.setAttribute("viewBox", "0 0 " + W + " " + H);
      while (m.firstChild) m.removeChild(m.firstChild);
      var y = function (si) { return Tp + ch * (nS - 1 - si); };   // skew grows upward
      for (var si = 0; si < nS; si++) {
        m.appendChild(svg("text", {x: L - 4, y: y(si) + ch / 2 + 4, "text-anchor": "end", "class": "te-svg-lab"}, String(data.skews[si])));
        for (var bi = 0; bi < nB; bi++) {
          var x = L + cw * bi, tm = tms[si];
          if (!tm) { m.appendChild(svg("rect", {x: x, y: y(si), width: cw, height: ch, fill: "#eee"})); continue; }
          var w = winner(tm, bi), best = tm[w][bi], gain = 100 * (1 - tm[st.tkey][bi] / best);
          var r = svg("rect", {x: x + 0.5, y: y(si) + 0.5, width: cw - 1, height: ch - 1, fill: data.colors[w],
                               "fill-opacity": (0.35 + 0.65 * Math.min(Math.max(gain, 0) / 30, 1)).toFixed(3),
                               "data-skew": data.skews[si], "data-b": data.tokens[bi], "data-winner": winnerLabel(tm, bi),
                               "class": "te-cell"});
          r.appendChild(svg("title", {}, "s = " + data.skews[si] + ", B = " + data.tokens[bi] + ": best fixed " + winnerLabel(tm, bi) + ", TEMPO gains " + fmt(gain, 1) + "%"));
          (function (si, bi) { r.addEventListener("click", function () { ui.skew.value = String(si); ui.batch.value = String(bi); read(); }); })(si, bi);
          m.appendChild(r);
          if (Math.abs(gain) >= 0.5) {   // a gain that rounds to 0% is left blank
            m.appendChild(svg("text", {x: x + cw / 2, y: y(si) + ch / 2 + 4, "text-anchor": "middle", "class": "te-svg-cell"}, fmt(gain, 0)));
          }
        }
      }
      // the selected cell
      m.appendChild(svg("rect", {x: L + cw * st.bi + 1, y: y(st.si) + 1, width: cw - 2, height: ch - 2, fill: "none",
                                 stroke: "#000", "stroke-width": 2.5, "data-role": "selected"}));
      // the chosen routing profile's Zipf-equivalent skew, between the rows it falls between
      if (st.profile) {
        var sk = data.skews, yp = NaN, pv = st.profile.skew;
        if (pv <= sk[0]) yp = y(0) + ch / 2;
        else if (pv >= sk[nS - 1]) yp = y(nS - 1) + ch / 2;
        else for (var q = 0; q < nS - 1; q++) {
          if (pv <= sk[q + 1]) { yp = y(q) + ch / 2 - ch * (pv - sk[q]) / (sk[q + 1] - sk[q]); break; }
        }
        m.appendChild(svg("line", {x1: L, y1: yp, x2: L + cw * nB, y2: yp, stroke: "#333", "stroke-width": 1.5,
                                   "stroke-dasharray": "1 3", "data-role": "profile-line"}));
      }
      // B* per skew row, joined across rows
      var pts = [];
      for (si = 0; si < nS; si++) {
        if (!isFinite(bs[si])) continue;
        var xr = logx(bs[si], L, L + cw * nB), xb = Math.max(L + 3, Math.min(L + cw * nB - 3, xr));
        pts.push(xb.toFixed(1) + "," + (y(si) + ch / 2).toFixed(1));
        var c = svg("circle", {cx: xb, cy: y(si) + ch / 2, r: 3, "class": "te-bstar-pt" + (xb !== xr ? " te-out" : "")});
        c.appendChild(svg("title", {}, "B* = " + fmt(bs[si], 0) + " tokens per GPU" + (xb !== xr ? " (beyond the grid)" : "")));
        m.appendChild(c);
      }
      if (pts.length > 1) m.appendChild(svg("polyline", {points: pts.join(" "), "class": "te-bstar", "data-role": "bstar-line"}));
      for (bi = 0; bi < nB; bi++) {
        if (nB > 8 && bi % 2) continue;
        m.appendChild(svg("text", {x: L + cw * bi + cw / 2, y: Tp + ch * nS + 13, "text-anchor": "middle", "class": "te-svg-lab"}, String(data.tokens[bi])));
      }
      m.appendChild(svg("text", {x: L + cw * nB / 2, y: H - 4, "text-anchor": "middle", "class": "te-svg-ax"}, "tokens per GPU B (log scale)"));
      m.appendChild(svg("text", {x: 10, y: Tp + ch * nS / 2, "text-anchor": "middle", "class": "te-svg-ax",
                                 transform: "rotate(-90 10 " + (Tp + ch * nS / 2) + ")"}, "skew s"));
    }
    function drawTimes(tm, b) {
      var c = ui.chart, W = 420, H = 260, L = 58, R = 12, Tp = 10, Bt = 36;
      c.setAttribute("viewBox", "0 0 " + W + " " + H);
      while (c.firstChild) c.removeChild(c.firstChild);
      host.querySelector("[data-role=times-title]").textContent =
        "Each policy's modelled time (us, log-log) at s = " + data.skews[st.si] + ", " + st.ep + " GPUs, " + st.rep + "x";
      if (!tm) return;
      var all = [];
      POL.forEach(function (p) { all = all.concat(tm[p].filter(function (v) { return v > 0; })); });
      var lo = Math.log10(Math.min.apply(null, all)), hi = Math.log10(Math.max.apply(null, all));
      if (hi - lo < 0.3) { lo -= 0.15; hi += 0.15; }
      var T = data.tokens, lx0 = Math.log(T[0]), lx1 = Math.log(T[T.length - 1]);
      var X = function (B) { return L + (W - L - R) * (T.length > 1 ? (Math.log(B) - lx0) / (lx1 - lx0) : 0.5); };
      var Y = function (v) { return Tp + (H - Tp - Bt) * (1 - (Math.log10(v) - lo) / (hi - lo)); };
      c.appendChild(svg("line", {x1: L, y1: H - Bt, x2: W - R, y2: H - Bt, "class": "te-axis"}));
      c.appendChild(svg("line", {x1: L, y1: Tp, x2: L, y2: H - Bt, "class": "te-axis"}));
      var mants = hi - lo < 1.2 ? [1, 1.5, 2, 3, 5, 7] : [1, 2, 5];
      for (var d = Math.floor(lo); d <= Math.ceil(hi); d++) {
        mants.forEach(function (mnt) {
          var v = mnt * Math.pow(10, d), lv = Math.log10(v);
          if (lv < lo || lv > hi) return;
          c.appendChild(svg("line", {x1: L, y1: Y(v), x2: W - R, y2: Y(v), "class": "te-grid"}));
          c.appendChild(svg("text", {x: L - 4, y: Y(v) + 4, "text-anchor": "end", "class": "te-svg-lab"}, String(+v.toPrecision(3))));
        });
      }
      T.forEach(function (B, i) {
        if (Math.abs(Math.log2(B) - Math.round(Math.log2(B))) > 1e-9 && T.length > 8) return;
        c.appendChild(svg("text", {x: X(B), y: H - Bt + 14, "text-anchor": "middle", "class": "te-svg-lab"}, String(B)));
      });
      c.appendChild(svg("text", {x: L + (W - L - R) / 2, y: H - 4, "text-anchor": "middle", "class": "te-svg-ax"}, "tokens per GPU B"));
      c.appendChild(svg("text", {x: 11, y: Tp + (H - Tp - Bt) / 2, "text-anchor": "middle", "class": "te-svg-ax",
                                 transform: "rotate(-90 11 " + (Tp + (H - Tp - Bt) / 2) + ")"}, "modelled time (us)"));
      if (isFinite(b) && b >= T[0] && b <= T[T.length - 1]) {
        c.appendChild(svg("line", {x1: X(b), y1: Tp, x2: X(b), y2: H - Bt, "class": "te-bstar", "data-role": "bstar-rule"}));
        var right = X(b) > L + 0.7 * (W - L - R);
        c.appendChild(svg("text", {x: X(b) + (right ? -3 : 3), y: Tp + 10, "text-anchor": right ? "end" : "start", "class": "te-svg-lab"},
                          "B* = " + fmt(b, 0)));
      }
      c.appendChild(svg("line", {x1: X(T[st.bi]), y1: Tp, x2: X(T[st.bi]), y2: H - Bt, "class": "te-sel"}));
      POL.forEach(function (p) {
        var pts = T.map(function (B, i) { return X(B).toFixed(1) + "," + Y(Math.max(tm[p][i], Math.pow(10, lo))).toFixed(1); });
        var attrs = {points: pts.join(" "), fill: "none", stroke: data.colors[p],
                     "stroke-width": p === st.tkey ? 2.5 : 1.6, "data-policy": p};
        if (KEYS.indexOf(p) >= 0 && p !== st.tkey) attrs["stroke-dasharray"] = "5 3";
        c.appendChild(svg("polyline", attrs));
      });
    }
    function drawValues(tm, b) {
      var s = shapeOf[st.shape];
      ui.values.innerHTML = "";
      if (!tm) { ui.values.appendChild(el("p", {text: "This build has no results for this column."})); return; }
      var i = st.bi, w = winner(tm, i);
      var tbl = el("table", {"class": "te-ms"});
      tbl.appendChild(el("tr", {}, [el("th", {text: "policy"}), el("th", {text: "modelled time (us)"}),
                                    el("th", {text: "/ TEMPO (" + presetOf[st.tkey].name + ")"})]));
      POL.forEach(function (p) {
        tbl.appendChild(el("tr", {"data-policy": p}, [
          el("td", {}, [el("span", {"class": "te-swatch", style: "background:" + data.colors[p]}),
                        el("code", {text: KEYS.indexOf(p) >= 0 ? "tempo (" + presetOf[p].name + ")" : p}),
                        document.createTextNode(data.fixed.indexOf(p) >= 0 && tm[p][i] <= tm[w][i] + data.tie_rel * Math.abs(tm[w][i])
                                                ? " (best fixed, " + winnerLabel(tm, i) + ")" : "")]),
          el("td", {"class": "te-num", "data-value": String(tm[p][i]), text: fmt(tm[p][i], 2)}),
          el("td", {"class": "te-num", text: fmt(tm[p][i] / tm[st.tkey][i], 3)})]));
      });
      ui.values.appendChild(el("p", {"class": "te-cell-h", "data-role": "cell-title",
        text: st.shape + ", EP" + st.ep + ", " + st.rep + "x, s = " + data.skews[st.si] + ", B = " + data.tokens[i] + " tokens per GPU: " +
              "TEMPO (" + presetOf[st.tkey].name + " preset) gains " + fmt(100 * (1 - tm[st.tkey][i] / tm[w][i]), 1) +
              "% over the best fixed policy (" + tiedNames(tm, i) + "); B* = " + fmt(b, 0) +
              " tokens per GPU (" + (data.tokens[i] < b ? "below" : "at or above") + " it the analysis predicts " + (data.tokens[i] < b ? "activation balancing (M)" : "token balancing (L)") + ")."}));
      ui.values.appendChild(tbl);
      var c0 = data.shapes.length, nc = data.columns.length;
      ui.size.textContent = "This build's grid (profile " + data.profile + "): " + c0 + " shape" + (c0 > 1 ? "s" : "") + " x " +
        data.eps.length + " EP size" + (data.eps.length > 1 ? "s" : "") + " (" + list(data.eps) + ") x " + data.replications.length +
        " replication" + (data.replications.length > 1 ? "s" : "") + " (" + list(data.replications) + ") x " + data.skews.length +
        " skews (" + list(data.skews) + ") x " + data.tokens.length + " batch sizes (" + data.tokens[0] + "-" + data.tokens[data.tokens.length - 1] +
        " tokens per GPU) = " + (nc * data.tokens.length) + " cells, " + data.batches + " batch" + (data.batches > 1 ? "es" : "") +
        " each (the phase diagram's Zipf routing and EPLB placement, seed " + data.seed + ").";
    }

    build();
    ui.shape.value = "0"; ui.ep.value = "0"; ui.rep.value = "0";
    ui.skew.value = String(Math.floor((data.skews.length - 1) / 2));
    ui.batch.value = String(Math.floor((data.tokens.length - 1) / 2));
    if (data.initial) {
      Object.keys(data.initial).forEach(function (k) { if (ui[k]) ui[k].value = String(data.initial[k]); });
    }
    read();
    self.state = st;
    self.times = function () { return times(column(st.shape, st.ep, st.rep, data.skews[st.si])); };
  }

  function init() {
    var nodes = document.querySelectorAll('.tempo-explorer[data-explorer="phase"]');
    Array.prototype.forEach.call(nodes, function (root) {
      if (root.getAttribute("data-started")) return;
      root.setAttribute("data-started", "1");
      try {
        var data = JSON.parse(root.querySelector("script.tempo-explorer-data").textContent);
        root.explorer = new PhaseExplorer(root.querySelector(".tempo-explorer-ui"), data);
        root.setAttribute("data-rendered", "1");
      } catch (err) {
        console.error("phase explorer: " + (err && err.stack ? err.stack : err));
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})(this);
