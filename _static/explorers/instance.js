// The instance explorer of chapter 01: the reader types or drags per-expert token counts (up to
// 8 experts on up to 4 GPUs), picks full or restricted replication and a cost model, and sees
// every policy of policies.js dispatch the batch: GPUs drawn as boxes with their replicas and
// loads, the makespans side by side; a step control replays TEMPO's paper preset
// (tempo_fast.js) on the GPU boxes, one seed placement, move or chain at a time.  Everything runs in the page (no kernel, no network); the
// data the build embeds (the named parameter sets, presets, colours) is the JSON in the
// explorer's <script type="application/json">.
(function () {
  "use strict";
  var MAX_E = 8, MAX_G = 4, NS = "http://www.w3.org/2000/svg";
  var EXPERT_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d"];

  function el(tag, attrs, kids) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") n.textContent = attrs[k];
      else if (k === "html") n.innerHTML = attrs[k];
      else n.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { if (c) n.appendChild(c); });
    return n;
  }
  function svg(tag, attrs) {
    var n = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    return n;
  }
  function fmt(v, d) { return v === null || v === undefined || !isFinite(v) ? "-" : v.toFixed(d === undefined ? 1 : d); }
  function fmtTok(v) { return Math.abs(v - Math.round(v)) < 1e-6 ? String(Math.round(v)) : v.toFixed(1); }
  function niceMax(v) {
    var p = Math.pow(10, Math.floor(Math.log10(Math.max(v, 1)))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function Explorer(root, data) {
    var P = window.TempoPolicies;
    var self = this;
    var st = {};
    var ui = {};

    function loadPreset(name) {
      var p = data.presets[name];
      st.preset = name;
      st.counts = p.counts.slice();
      st.g = p.n_gpus;
      st.mode = p.replicas ? "restricted" : "full";
      st.reps = p.replicas ? p.replicas.map(function (r) { return r.slice(); }) : defaultReps(st.counts, st.g);
      st.params = p.params || "own";
      st.model = Object.assign({a: 0, b: 0, c: 0, beta: 0, c2: null, gamma: null}, p.model || paramModel(st.params));
    }
    // the reader changed the batch, the placement or the model: the preset menu says so
    function edited() { st.preset = ""; if (ui.preset) ui.preset.value = ""; }
    function paramModel(name) {
      var s = data.params.filter(function (q) { return q.name === name; })[0];
      return {a: s.a, b: s.b, c: s.c, beta: s.beta, c2: s.c2, gamma: s.gamma};
    }
    // a restricted placement to start from: expert e at home on GPU e mod g, the hottest also on
    // the next GPU
    function defaultReps(counts, g) {
      var hot = counts.indexOf(Math.max.apply(null, counts));
      return counts.map(function (n, e) {
        var s = [e % g];
        if (e === hot && g > 1) s.push((e + 1) % g);
        return s.sort(function (x, y) { return x - y; });
      });
    }
    function instance() {
      var reps = st.counts.map(function (n, e) {
        if (st.mode === "full") { var all = []; for (var h = 0; h < st.g; h++) all.push(h); return all; }
        return st.reps[e].slice().sort(function (x, y) { return x - y; });
      });
      return {counts: st.counts.slice(), replicas: reps, nGpus: st.g};
    }
    function model() {
      var m = {a: st.model.a, b: st.model.b, c: st.model.c, beta: st.model.beta};
      if (typeof st.model.c2 === "number" && typeof st.model.gamma === "number") { m.c2 = st.model.c2; m.gamma = st.model.gamma; }
      return m;
    }

    // ---------------------------------------------------------------- controls
    function numberInput(role, value, attrs) {
      var inp = el("input", Object.assign({type: "number", "data-role": role, value: String(value)}, attrs || {}));
      return inp;
    }
    function field(label, input, extra) {
      return el("label", {"class": "te-field" + (extra ? " " + extra : "")}, [el("span", {text: label}), input]);
    }
    function buildStatic() {
      root.innerHTML = "";
      root.classList.add("te-root");
      var presetSel = el("select", {"data-role": "preset"});
      Object.keys(data.presets).forEach(function (k) {
        presetSel.appendChild(el("option", {value: k, text: data.presets[k].label}));
      });
      // shown once the reader edits the batch, the placement or the model
      presetSel.appendChild(el("option", {value: "", text: "your own batch (edited)", disabled: "disabled"}));
      presetSel.addEventListener("change", function () { loadPreset(presetSel.value); rebuild(); });
      ui.preset = presetSel;
      ui.nE = numberInput("n-experts", st.counts.length, {min: 1, max: MAX_E, step: 1});
      ui.nG = numberInput("n-gpus", st.g, {min: 1, max: MAX_G, step: 1});
      ui.nE.addEventListener("input", function () { resize(parseInt(ui.nE.value, 10), st.g); });
      ui.nG.addEventListener("input", function () { resize(st.counts.length, parseInt(ui.nG.value, 10)); });
      ui.mode = el("select", {"data-role": "replication"}, [
        el("option", {value: "full", text: "full: every GPU holds every expert"}),
        el("option", {value: "restricted", text: "restricted: you say which GPU holds which replica"})]);
      ui.mode.addEventListener("change", function () { st.mode = ui.mode.value; st.preset = ""; rebuild(); });
      var batch = el("fieldset", {"class": "te-box"}, [el("legend", {text: "Batch and placement"}),
        el("div", {"class": "te-row"}, [field("start from", presetSel, "te-wide"), field("experts (1-8)", ui.nE),
                                         field("GPUs (1-4)", ui.nG), field("replication", ui.mode, "te-wide")])]);
      ui.counts = el("div", {"class": "te-counts"});
      ui.chart = svg("svg", {"class": "te-count-chart", "data-role": "count-chart", viewBox: "0 0 400 150",
                             role: "img", "aria-label": "token counts per expert: drag a bar to change it"});
      ui.reps = el("div", {"class": "te-reps"});
      batch.appendChild(el("p", {"class": "te-hint", text: "Tokens per expert: type them, or drag a bar up or down."}));
      batch.appendChild(ui.chart);
      batch.appendChild(ui.counts);
      batch.appendChild(ui.reps);

      ui.params = el("select", {"data-role": "params"});
      ui.params.appendChild(el("option", {value: "own", text: "your own a, b, c, beta"}));
      data.params.forEach(function (q) { ui.params.appendChild(el("option", {value: q.name, text: q.name + " (" + q.source + ")"})); });
      ui.params.addEventListener("change", function () {
        st.params = ui.params.value;
        if (st.params !== "own") st.model = paramModel(st.params);
        else { st.model.c2 = null; st.model.gamma = null; }
        edited(); syncModel(); update();
      });
      ui.m = {};
      var row = el("div", {"class": "te-row"}, [field("parameter set", ui.params, "te-wide")]);
      [["a", "a (us)"], ["b", "b (us per activated expert)"], ["c", "c (us)"], ["beta", "beta (us per token)"]].forEach(function (kv) {
        var inp = numberInput(kv[0], st.model[kv[0]], {min: 0, step: "any"});
        inp.addEventListener("input", function () {
          var v = parseFloat(inp.value);
          if (!(v >= 0) || !isFinite(v)) { inp.classList.add("te-bad"); return; }
          inp.classList.remove("te-bad");
          st.model[kv[0]] = v;
          if (st.params !== "own") { st.params = "own"; st.model.c2 = null; st.model.gamma = null; ui.params.value = "own"; }
          edited(); syncModelNote(); update();
        });
        ui.m[kv[0]] = inp;
        row.appendChild(field(kv[1], inp));
      });
      ui.modelNote = el("p", {"class": "te-hint"});
      var cost = el("fieldset", {"class": "te-box"}, [el("legend", {text: "Cost model (Eq. 1): t = max(a + b G, c + beta N)"}), row, ui.modelNote]);

      ui.table = el("div", {"class": "te-table", "data-role": "makespans"});
      ui.dispatch = el("div", {"class": "te-dispatch", "data-role": "dispatch"});
      ui.status = el("p", {"class": "te-hint", "data-role": "status"});
      root.appendChild(el("div", {"class": "te-controls"}, [batch, cost]));
      root.appendChild(el("h4", {"class": "te-h", text: "Makespan of each policy (us): the slowest GPU"}));
      root.appendChild(ui.table);
      root.appendChild(ui.status);
      buildSteps();
      root.appendChild(el("h4", {"class": "te-h", text: "Each policy's dispatch: GPUs, the replicas they hold, and their loads"}));
      root.appendChild(ui.dispatch);
    }
    function syncModelNote() {
      var s = data.params.filter(function (q) { return q.name === st.params; })[0];
      var txt = "n* = b / beta = " + (st.model.beta > 0 ? fmt((st.model.a - st.model.c + st.model.b) / st.model.beta, 0) : "inf") +
                " tokens: one expert is flat below it and linear above.";
      if (s && typeof s.c2 === "number") txt += " This set adds Eq. 4's traffic piece c2 + gamma N (c2 = " + s.c2 + ", gamma = " + s.gamma + ").";
      if (s && s.b2) txt += " Its tile term b2 = " + s.b2 + " (Eq. 2) is not modelled here: the page prices it with b2 = 0.";
      ui.modelNote.textContent = txt;
    }
    function syncModel() {
      ui.params.value = st.params;
      ["a", "b", "c", "beta"].forEach(function (k) { ui.m[k].value = String(st.model[k]); ui.m[k].classList.remove("te-bad"); });
      syncModelNote();
    }
    function resize(E, g) {
      if (!(E >= 1 && E <= MAX_E) || !(g >= 1 && g <= MAX_G)) return;
      while (st.counts.length < E) st.counts.push(30);
      st.counts.length = E;
      st.g = g;
      st.preset = "";
      st.reps = st.counts.map(function (n, e) {
        var r = (st.reps[e] || []).filter(function (h) { return h < g; });
        return r.length ? r : [e % g];
      });
      rebuild();
    }
    function buildCounts() {
      ui.counts.innerHTML = "";
      ui.countInputs = st.counts.map(function (n, e) {
        var inp = numberInput("count", n, {min: 0, step: 1, "data-expert": e, "aria-label": "tokens of expert " + e});
        inp.addEventListener("input", function () {
          var v = Number(inp.value);
          if (!(v >= 0) || Math.floor(v) !== v || v > 1e7) { inp.classList.add("te-bad"); return; }
          inp.classList.remove("te-bad");
          st.counts[e] = v;
          edited(); drawCounts(); update();
        });
        var chip = el("span", {"class": "te-chip", style: "background:" + EXPERT_COLORS[e], text: "e" + e});
        return ui.counts.appendChild(el("label", {"class": "te-count"}, [chip, inp])).querySelector("input");
      });
    }
    function buildReps() {
      ui.reps.innerHTML = "";
      if (st.mode !== "restricted") return;
      var tbl = el("table", {"class": "te-rep-grid"});
      var head = el("tr", {}, [el("th", {text: "expert"})]);
      for (var h = 0; h < st.g; h++) head.appendChild(el("th", {text: "GPU " + h}));
      tbl.appendChild(head);
      st.counts.forEach(function (n, e) {
        var tr = el("tr", {}, [el("td", {}, [el("span", {"class": "te-chip", style: "background:" + EXPERT_COLORS[e], text: "e" + e})])]);
        for (var h = 0; h < st.g; h++) {
          (function (h) {
            var cb = el("input", {type: "checkbox", "data-role": "replica", "data-expert": e, "data-gpu": h,
                                  "aria-label": "GPU " + h + " holds a replica of expert " + e});
            cb.checked = st.reps[e].indexOf(h) >= 0;
            cb.addEventListener("change", function () {
              var s = st.reps[e].filter(function (q) { return q !== h; });
              if (cb.checked) s.push(h);
              if (!s.length) { cb.checked = true; return; }   // every expert keeps one replica
              st.reps[e] = s.sort(function (x, y) { return x - y; });
              edited(); update();
            });
            tr.appendChild(el("td", {}, [cb]));
          })(h);
        }
        tbl.appendChild(tr);
      });
      ui.reps.appendChild(el("p", {"class": "te-hint",
        text: "Tick the GPUs that hold a replica of each expert; an expert's lowest ticked GPU is its home (static and LLEP-R use it)."}));
      ui.reps.appendChild(tbl);
    }

    // ---------------------------------------------------------------- the draggable count chart
    var drag = null;
    function drawCounts() {
      var c = ui.chart, W = 400, H = 150, top = 18, bottom = 18, E = st.counts.length;
      while (c.firstChild) c.removeChild(c.firstChild);
      var ymax = drag ? drag.ymax : niceMax(Math.max.apply(null, st.counts.concat([10])) * 1.25);
      ui.ymax = ymax;
      var bw = W / E;
      st.counts.forEach(function (n, e) {
        var hgt = (H - top - bottom) * Math.min(n, ymax) / ymax, x = e * bw;
        c.appendChild(svg("rect", {x: x + bw * 0.15, y: H - bottom - hgt, width: bw * 0.7, height: Math.max(hgt, 0.5),
                                   fill: EXPERT_COLORS[e], "data-expert": e}));
        var t = svg("text", {x: x + bw / 2, y: H - bottom - hgt - 4, "text-anchor": "middle", "class": "te-svg-num"});
        t.textContent = String(n);
        c.appendChild(t);
        var l = svg("text", {x: x + bw / 2, y: H - 4, "text-anchor": "middle", "class": "te-svg-lab"});
        l.textContent = "e" + e;
        c.appendChild(l);
      });
    }
    function dragAt(ev) {
      var r = ui.chart.getBoundingClientRect(), E = st.counts.length;
      var fx = (ev.clientX - r.left) / r.width, fy = (ev.clientY - r.top) / r.height;
      var e = drag.expert;
      var v = Math.round(drag.ymax * (1 - (fy * 150 - 18) / (150 - 36)));
      v = Math.max(0, Math.min(Math.round(drag.ymax), v));
      if (v !== st.counts[e]) {
        st.counts[e] = v;
        ui.countInputs[e].value = String(v);
        ui.countInputs[e].classList.remove("te-bad");
        edited(); drawCounts(); update();
      }
      return fx;
    }
    function bindDrag() {
      ui.chart.addEventListener("pointerdown", function (ev) {
        var r = ui.chart.getBoundingClientRect();
        var e = Math.floor((ev.clientX - r.left) / r.width * st.counts.length);
        if (e < 0 || e >= st.counts.length) return;
        drag = {expert: e, ymax: ui.ymax};
        if (ui.chart.setPointerCapture) ui.chart.setPointerCapture(ev.pointerId);
        dragAt(ev);
        ev.preventDefault();
      });
      ui.chart.addEventListener("pointermove", function (ev) { if (drag) dragAt(ev); });
      function end() { if (drag) { drag = null; drawCounts(); } }
      ui.chart.addEventListener("pointerup", end);
      ui.chart.addEventListener("pointercancel", end);
    }

    // ---------------------------------------------------------------- TEMPO step by step
    // tempo_fast.js records each step of the paper preset: every expert the seed places, every
    // move and chain the search accepts, what the ensemble did.  The panel replays them on
    // persistent GPU boxes (the bars slide from one step to the next).
    function buildSteps() {
      ui.steps = el("div", {"class": "te-steps", "data-role": "steps"});
      function button(role, text, label) {
        var b = el("button", {type: "button", "class": "te-step-btn", "data-role": role, "aria-label": label, text: text});
        ui.steps.appendChild(b);
        return b;
      }
      var bar = el("div", {"class": "te-step-bar"});
      ui.steps.appendChild(bar);
      ui.stepFirst = button("step-first", "\u00ab start", "first step");
      ui.stepPrev = button("step-prev", "\u25c0 previous", "previous step");
      ui.stepCount = el("span", {"class": "te-step-count", "data-role": "step-count"});
      ui.stepNext = button("step-next", "next move \u25b6", "next step");
      ui.stepLast = button("step-last", "end \u00bb", "last step");
      [ui.stepFirst, ui.stepPrev, ui.stepCount, ui.stepNext, ui.stepLast].forEach(function (n) { bar.appendChild(n); });
      ui.stepFirst.addEventListener("click", function () { showStep(0); });
      ui.stepPrev.addEventListener("click", function () { showStep(st.step - 1); });
      ui.stepNext.addEventListener("click", function () { showStep(st.step + 1); });
      ui.stepLast.addEventListener("click", function () { showStep(st.steps.length - 1); });
      ui.stepText = el("p", {"class": "te-step-text", "data-role": "step-text"});
      ui.stepMs = el("p", {"class": "te-step-ms", "data-role": "step-makespan"});
      ui.stepGpus = el("div", {"class": "te-gpus te-step-gpus", "data-role": "step-gpus"});
      ui.stepTrace = svg("svg", {"class": "te-step-trace", "data-role": "step-trace", role: "img",
                                 "aria-label": "the makespan after each step; click a point to go to that step"});
      ui.steps.appendChild(ui.stepText);
      ui.steps.appendChild(ui.stepMs);
      ui.steps.appendChild(ui.stepTrace);
      ui.steps.appendChild(ui.stepGpus);
      root.appendChild(el("h4", {"class": "te-h", text: "TEMPO step by step (paper preset): the seed, each chain move and " +
                                                      "each partial migration on the GPUs"}));
      root.appendChild(ui.steps);
    }
    function tokens(v) { return fmtTok(v) + " token" + (Math.abs(v - 1) < 1e-9 ? "" : "s"); }
    function movedText(m, first) {
      var what = m.whole ? "e" + m.expert + " whole (" + tokens(m.tokens) + ")" : tokens(m.tokens) + " of e" + m.expert;
      return what + " from GPU " + m.from + (first ? " (the slowest)" : "") + " to GPU " + m.to;
    }
    var NAMES = {local_search: "the search's dispatch", token_lp_vertex: "the token-LP vertex (max-flow, Lemma 1)",
                 token_lp_even: "the even token split", round_robin: "round robin A3"};
    function describe(s) {
      if (s.stage === "seed") {
        if (s.kind === "forced") return "Stage 1, the seed: expert" + (s.experts.length > 1 ? "s " : " ") +
          s.experts.map(function (e) { return "e" + e; }).join(", ") + " can go to one GPU only: placed there first.";
        return "Stage 1, the seed (experts by tokens, largest first): e" + s.expert + " (" + tokens(s.tokens) +
          ") whole on GPU " + s.to + ", the replica GPU whose time after it is least.";
      }
      if (s.stage === "chains" || s.stage === "partial") {
        var head = s.stage === "chains" ? "Stage 2, whole-expert moves off the slowest GPU: " :
                                          "Stage 3, moves off the slowest GPU that may split an expert: ";
        if (s.kind === "none") {
          return head + (s.atBound ? "the makespan is at the lower bound (provably optimal): nothing to move." :
            "no " + (s.stage === "chains" ? "whole-expert move or 2-step chain" : "move or chain") + " off GPU " +
            s.bottleneck + " lowers its time without making another GPU as slow: the stage ends with no move.");
        }
        if (s.kind === "chain") {
          return head + "no single move helps, so a 2-step chain: " + movedText(s.moved[0], true) + ", then " +
                 movedText(s.moved[1], false) + ".";
        }
        return head + movedText(s.moved[0], true) + (s.moved[0].whole ? "." : " (a partial migration: the share " +
          "that minimises the larger of the two GPUs' times, found exactly).");
      }
      if (s.stage === "shortcut") {
        return "The slowest GPU is token-bound and the token-LP vertex attains the lower bound: it is optimal, and the solve " +
               "returns it at once.";
      }
      var cands = s.scored.map(function (c) { return NAMES[c[0]] + " " + fmt(c[1], 2) + " us"; }).join(", ");
      if (s.pruned) return "Stage 4, the ensemble (Proposition 1): the lower bound is within " + (100 * s.tau) +
        "% of the search's " + fmt(s.heuristic, 2) + " us, so no candidate can replace it: kept.";
      if (s.kind === "switched") return "Stage 4, the ensemble (Proposition 1): " + cands + " against the search's " +
        fmt(s.heuristic, 2) + " us; " + NAMES[s.chosen] + " is more than " + (100 * s.tau) + "% faster: it replaces the search's dispatch.";
      return "Stage 4, the ensemble (Proposition 1): " + cands + " against the search's " + fmt(s.heuristic, 2) +
        " us; none is more than " + (100 * s.tau) + "% faster: the search's dispatch stays.";
    }
    // the GPU boxes of the step panel, built once per batch; showStep only moves their bars
    function buildStepGpus(inst, m, scale) {
      ui.stepGpus.innerHTML = "";
      ui.stepBoxes = [];
      var maxShare = Math.max.apply(null, inst.counts.concat([1]));
      for (var h = 0; h < inst.nGpus; h++) {
        var box = el("div", {"class": "te-gpu", "data-gpu": h}), rows = {};
        box.appendChild(el("div", {"class": "te-gpu-h"}));
        inst.replicas.forEach(function (reps, e) {
          var rr = reps.indexOf(h);
          if (rr < 0) return;
          var fill = el("span", {style: "width:0%;background:" + EXPERT_COLORS[e]}), n = el("span", {"class": "te-rep-n"});
          var row = el("div", {"class": "te-rep", "data-expert": e}, [
            el("span", {"class": "te-chip", style: "background:" + EXPERT_COLORS[e], text: "e" + e}),
            el("span", {"class": "te-rep-bar"}, [fill]), n]);
          rows[e] = {row: row, fill: fill, n: n, slot: rr};
          box.appendChild(row);
        });
        var f = el("div", {"class": "te-gpu-f"});
        box.appendChild(f);
        var pieces = [["floor a+bG", "#9aa"], ["tokens c+\u03b2N", "#c87"]].concat(
          typeof m.c2 === "number" ? [["traffic c2+\u03b3N", "#a8c"]] : []).map(function (p) {
          var fillp = el("span", {style: "width:0%;background:" + p[1]}), np = el("span", {"class": "te-rep-n"});
          box.appendChild(el("div", {"class": "te-piece"}, [el("span", {"class": "te-piece-l", text: p[0], title: p[0]}),
            el("span", {"class": "te-rep-bar"}, [fillp]), np]));
          return {fill: fillp, n: np};
        });
        var t = el("div", {"class": "te-gpu-t"});
        box.appendChild(t);
        ui.stepGpus.appendChild(box);
        ui.stepBoxes.push({box: box, head: box.firstChild, rows: rows, f: f, pieces: pieces, t: t, maxShare: maxShare, scale: scale});
      }
    }
    // the makespan after each step, one point per step, coloured by stage; the current step ringed
    var STAGE_COLORS = {seed: "#4c78a8", chains: "#f58518", partial: "#54a24b", shortcut: "#b279a2", ensemble: "#b279a2"};
    function drawTrace() {
      var c = ui.stepTrace, steps = st.steps || [], W = 520, H = 92, L = 46, R = 8, T = 8, B = 22;
      c.setAttribute("viewBox", "0 0 " + W + " " + H);
      while (c.firstChild) c.removeChild(c.firstChild);
      if (!steps.length) return;
      var ms = steps.map(function (q) { return q.makespan; });
      var lo = Math.min.apply(null, ms.concat([st.optimum])), hi = Math.max.apply(null, ms);
      if (!(hi > lo)) { lo -= 1; hi += 1; }
      var X = function (k) { return L + (W - L - R) * (steps.length > 1 ? k / (steps.length - 1) : 0.5); };
      var Y = function (v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); };
      c.appendChild(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, "class": "te-axis"}));
      [lo, hi].forEach(function (v) {
        var t = svg("text", {x: L - 4, y: Y(v) + 4, "text-anchor": "end", "class": "te-svg-lab"});
        t.textContent = fmt(v, 1);
        c.appendChild(t);
      });
      if (isFinite(st.optimum)) {
        c.appendChild(svg("line", {x1: L, y1: Y(st.optimum), x2: W - R, y2: Y(st.optimum), stroke: "#999",
                                   "stroke-dasharray": "4 3", "data-role": "optimum-line"}));
      }
      var ax = svg("text", {x: L + (W - L - R) / 2, y: H - 4, "text-anchor": "middle", "class": "te-svg-lab"});
      [["makespan (us) after each step: ", "#333"], ["seed", STAGE_COLORS.seed], [", stage 2", STAGE_COLORS.chains],
       [", stage 3", STAGE_COLORS.partial], [", stage 4", STAGE_COLORS.ensemble], ["; dashed: the exact optimum", "#333"]].forEach(function (p) {
        var ts = svg("tspan", {fill: p[1]});
        ts.textContent = p[0];
        ax.appendChild(ts);
      });
      c.appendChild(ax);
      c.appendChild(svg("polyline", {points: steps.map(function (q, k) { return X(k).toFixed(1) + "," + Y(q.makespan).toFixed(1); }).join(" "),
                                     fill: "none", stroke: "#888", "stroke-width": 1.2}));
      ui.tracePts = steps.map(function (q, k) {
        var pt = svg("circle", {cx: X(k), cy: Y(q.makespan), r: 3.5, fill: STAGE_COLORS[q.stage] || "#888",
                                "class": "te-trace-pt", "data-step": k});
        var tt = svg("title", {});
        tt.textContent = "step " + (k + 1) + " (" + q.stage + "): " + fmt(q.makespan, 2) + " us";
        pt.appendChild(tt);
        pt.addEventListener("click", function () { showStep(k); });
        c.appendChild(pt);
        return pt;
      });
    }
    function showStep(k) {
      var steps = st.steps || [];
      if (!steps.length) {
        ui.stepText.textContent = "No tokens: nothing to place.";
        ui.stepMs.textContent = "";
        ui.stepCount.textContent = "";
        [ui.stepFirst, ui.stepPrev, ui.stepNext, ui.stepLast].forEach(function (b) { b.disabled = true; });
        return;
      }
      k = Math.max(0, Math.min(steps.length - 1, k));
      st.step = k;
      var s = steps[k], m = model(), inst = instance();
      var touched = {};
      (s.moved || []).forEach(function (mv) { touched[mv.from + ":" + mv.expert] = touched[mv.to + ":" + mv.expert] = true; });
      if (s.stage === "seed" && s.kind === "place") touched[s.to + ":" + s.expert] = true;
      ui.stepBoxes.forEach(function (b, h) {
        var slow = h === s.bottleneck || s.times[h] >= s.makespan - 1e-9 * Math.max(s.makespan, 1);
        b.box.className = "te-gpu" + (slow ? " te-slow" : "");
        b.head.textContent = "GPU " + h + (slow ? " (slowest)" : "");
        Object.keys(b.rows).forEach(function (e) {
          var r = b.rows[e], x = s.shares[e][r.slot], on = x > P.EPS_TOKENS;
          r.fill.style.width = (100 * x / b.maxShare).toFixed(1) + "%";
          r.n.textContent = on ? fmtTok(x) : "-";
          r.row.className = "te-rep" + (on ? "" : " te-idle") + (touched[h + ":" + e] ? " te-moved" : "");
        });
        var vals = [m.a + m.b * s.G[h], m.c + m.beta * s.N[h]];
        if (typeof m.c2 === "number") vals.push(m.c2 + m.gamma * s.N[h]);
        b.pieces.forEach(function (p, i) {
          p.fill.style.width = (b.scale > 0 ? Math.min(100, 100 * vals[i] / b.scale) : 0).toFixed(1) + "%";
          p.n.textContent = fmt(vals[i], 1);
        });
        b.f.textContent = "G = " + s.G[h] + " activated, N = " + fmtTok(s.N[h]) + " tokens";
        b.t.textContent = "time " + fmt(s.times[h], 2) + " us";
      });
      ui.stepText.textContent = describe(s);
      var last = k === steps.length - 1;
      ui.stepMs.textContent = "Makespan after this step: " + fmt(s.makespan, 2) + " us (the slowest GPU: " + s.bottleneck + ")" +
        (last ? "; the paper preset's answer, as in its row above (exact optimum: " + fmt(st.optimum, 2) + " us)." : ".");
      ui.stepMs.setAttribute("data-value", String(s.makespan));
      ui.stepCount.textContent = "step " + (k + 1) + " of " + steps.length;
      (ui.tracePts || []).forEach(function (pt, j) {
        pt.setAttribute("r", j === k ? 6 : 3.5);
        pt.setAttribute("stroke", j === k ? "#000" : "none");
        pt.setAttribute("stroke-width", j === k ? 2 : 0);
      });
      ui.stepFirst.disabled = ui.stepPrev.disabled = k === 0;
      ui.stepNext.disabled = ui.stepLast.disabled = last;
      ui.steps.setAttribute("data-step", String(k));
    }

    // ---------------------------------------------------------------- results
    function update() {
      var inst = instance(), m = model();
      var res = {}, best = Infinity, scale = 0;
      P.ORDER.forEach(function (name) {
        var r = P.solve(inst, m, name);
        res[name] = r;
        if (r) { best = Math.min(best, r.makespan); scale = Math.max(scale, r.makespan); }
      });
      self.results = res;
      drawTable(res, best, scale);
      drawDispatch(inst, m, res, scale);
      st.steps = res.tempo_paper ? res.tempo_paper.run.steps : [];
      st.optimum = res.optimum ? res.optimum.makespan : NaN;
      var stepScale = scale;
      st.steps.forEach(function (q) { stepScale = Math.max(stepScale, q.makespan); });
      buildStepGpus(inst, m, stepScale);
      drawTrace();
      showStep(0);
      var tot = st.counts.reduce(function (a, b) { return a + b; }, 0);
      ui.status.textContent = st.counts.length + " experts, " + tot + " tokens on " + st.g + " GPU" + (st.g > 1 ? "s" : "") +
        ", " + (P.isFull(inst) ? "full replication" : "restricted replication") + ".";
      root.setAttribute("data-rendered", "1");
      root.setAttribute("data-makespans", JSON.stringify(P.ORDER.map(function (n) { return res[n] ? res[n].makespan : null; })));
    }
    function drawTable(res, best, scale) {
      var tbl = el("table", {"class": "te-ms"});
      tbl.appendChild(el("tr", {}, [el("th", {text: "policy"}), el("th", {text: "makespan"}), el("th", {text: "x best"}),
                                    el("th", {"class": "te-barcol", text: ""})]));
      var full = P.isFull(instance());
      P.ORDER.forEach(function (name) {
        var r = res[name], spec = P.POLICIES[name], color = (data.colors || {})[name] || "#888";
        var note = spec.note || (!full && spec.noteRestricted);
        var tr = el("tr", {"data-policy": name});
        tr.appendChild(el("td", {}, [el("code", {text: name}), el("br"), el("span", {"class": "te-small", text: spec.label})]));
        if (!r) {
          tr.appendChild(el("td", {"class": "te-num", text: "-"}));
          tr.appendChild(el("td", {"class": "te-num", text: ""}));
          tr.appendChild(el("td", {"class": "te-small", text: "needs full replication (Theorem 2), as in the library"}));
        } else {
          tr.appendChild(el("td", {"class": "te-num", "data-value": String(r.makespan), text: fmt(r.makespan, 2)}));
          tr.appendChild(el("td", {"class": "te-num", text: best > 0 ? (r.makespan / best).toFixed(3) : "1.000"}));
          var cell = el("td", {"class": "te-barcol"});
          cell.appendChild(el("div", {"class": "te-bar", style: "width:" + (scale > 0 ? 100 * r.makespan / scale : 0).toFixed(1) +
                                     "%;background:" + color}));
          if (note) cell.appendChild(el("div", {"class": "te-note", "data-role": "note", text: note}));
          tr.appendChild(cell);
        }
        tbl.appendChild(tr);
      });
      ui.table.innerHTML = "";
      ui.table.appendChild(tbl);
    }
    function drawDispatch(inst, m, res, scale) {
      ui.dispatch.innerHTML = "";
      P.ORDER.forEach(function (name) {
        var r = res[name];
        var card = el("div", {"class": "te-card", "data-policy": name});
        card.appendChild(el("div", {"class": "te-card-h"}, [el("code", {text: name}),
          el("span", {"class": "te-num", text: r ? fmt(r.makespan, 2) + " us" : "n/a"})]));
        if (!r) {
          card.appendChild(el("p", {"class": "te-small", text: "round robin needs every expert on every GPU."}));
          ui.dispatch.appendChild(card);
          return;
        }
        var gpus = el("div", {"class": "te-gpus"});
        for (var h = 0; h < inst.nGpus; h++) {
          var slow = r.times[h] >= r.makespan - 1e-9 * Math.max(r.makespan, 1);
          var box = el("div", {"class": "te-gpu" + (slow ? " te-slow" : ""), "data-gpu": h});
          box.appendChild(el("div", {"class": "te-gpu-h", text: "GPU " + h + (slow ? " (slowest)" : "")}));
          var maxShare = Math.max.apply(null, inst.counts.concat([1]));
          inst.replicas.forEach(function (reps, e) {
            var rr = reps.indexOf(h);
            if (rr < 0) return;
            var x = r.shares[e][rr], on = x > P.EPS_TOKENS;
            box.appendChild(el("div", {"class": "te-rep" + (on ? "" : " te-idle")}, [
              el("span", {"class": "te-chip", style: "background:" + EXPERT_COLORS[e], text: "e" + e}),
              el("span", {"class": "te-rep-bar"}, [el("span", {style: "width:" + (100 * x / maxShare).toFixed(1) + "%;background:" + EXPERT_COLORS[e]})]),
              el("span", {"class": "te-rep-n", text: on ? fmtTok(x) : "-"})]));
          });
          var floor = m.a + m.b * r.G[h], comp = m.c + m.beta * r.N[h];
          var traffic = typeof m.c2 === "number" ? m.c2 + m.gamma * r.N[h] : -Infinity;
          box.appendChild(el("div", {"class": "te-gpu-f", text: "G = " + r.G[h] + " activated, N = " + fmtTok(r.N[h]) + " tokens"}));
          [["floor a+bG", floor, "#9aa"], ["tokens c+\u03b2N", comp, "#c87"]].concat(
            isFinite(traffic) ? [["traffic c2+\u03b3N", traffic, "#a8c"]] : []).forEach(function (p) {
            box.appendChild(el("div", {"class": "te-piece"}, [el("span", {"class": "te-piece-l", text: p[0]}),
              el("span", {"class": "te-rep-bar"}, [el("span", {style: "width:" + (scale > 0 ? 100 * p[1] / scale : 0).toFixed(1) + "%;background:" + p[2]})]),
              el("span", {"class": "te-rep-n", text: fmt(p[1], 1)})]));
          });
          box.appendChild(el("div", {"class": "te-gpu-t", text: "time " + fmt(r.times[h], 2) + " us"}));
          gpus.appendChild(box);
        }
        card.appendChild(gpus);
        ui.dispatch.appendChild(card);
      });
    }

    function rebuild() {
      ui.preset.value = st.preset;
      ui.nE.value = String(st.counts.length);
      ui.nG.value = String(st.g);
      ui.mode.value = st.mode;
      buildCounts(); buildReps(); drawCounts(); syncModel(); update();
    }

    loadPreset(data.default_preset);
    buildStatic();
    bindDrag();
    rebuild();
    self.state = st;
  }

  function init() {
    var nodes = document.querySelectorAll('.tempo-explorer[data-explorer="instance"]');
    Array.prototype.forEach.call(nodes, function (root) {
      if (root.getAttribute("data-started")) return;
      root.setAttribute("data-started", "1");
      try {
        var data = JSON.parse(root.querySelector("script.tempo-explorer-data").textContent);
        var host = root.querySelector(".tempo-explorer-ui");
        root.explorer = new Explorer(host, data);
        root.setAttribute("data-rendered", "1");
      } catch (err) {
        console.error("instance explorer: " + (err && err.stack ? err.stack : err));
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
