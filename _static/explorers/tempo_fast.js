// tempo_fast's "paper" preset in the browser: tempo.solve(inst, model, "tempo", options="paper"),
// Section 4.2 as the paper writes it, step for step as tempo/policies/tempo_fast/ runs it:
//
//   stage 1  the whole-expert greedy seed (seed.py, split=False);
//   stage 2  whole-expert single moves off the bottleneck and 2-step chains (local_search.py,
//            moves.py, chains.py; chain_depth 2: no longer augmenting paths);
//   (the compute-regime shortcut: a token-bound bottleneck and a token-LP vertex at the lower
//            bound end the solve there, heuristic.py)
//   stage 3  the same search with partial moves (an exact line search for the share moved);
//   stage 4  the ensemble (ensemble.py, Proposition 1): the max-flow token-LP vertex
//            (maxflow.py, Lemma 1) and, under full replication, the even split and round robin
//            A3, taken only when more than tau = 1% better.
//
// The preset runs no restarts, no activation balancer, no compound moves, no exchange pass and
// no paper candidate (its own output is the paper candidate of the default preset), and with
// lp_variants="auto" no HiGHS call: nothing is left out.  Every loop, tie-break and tolerance
// is the library's, in the same order, and the prices are Eq. 1/2/4 written as
// tempo/core/pricing.py writes them, so the makespans agree with the library's to rounding
// (tests/test_explorers.py checks dispatches and makespans on thousands of random instances).
//
// Besides the dispatch, solve() records every step: each expert the seed places, each move and
// chain the search accepts (the makespan after it), and what the ensemble did.
//
// An instance is {counts: [n_e], replicas: [[gpu, ...] per expert, slot order], nGpus: g} (as
// policies.js); a model {a, b, c, beta, b2?, tile?, c2?, gamma?} (b2: Eq. 2's tile term, 0 when
// absent; c2 and gamma: Eq. 4's traffic piece when both are numbers).
(function (root) {
  "use strict";

  var EPS = 1e-9;        // records.EPS: a share at or below it is empty
  var REL = 1e-9;        // records.REL: a move must beat the bottleneck by this relative margin
  // the "paper" preset's Options (options.py: PRESETS["paper"], solver_options, lp "auto")
  var PAPER = {chainDepth: 2, tau: 0.01, maxIter: 300, fanout: 4, chainCap: 64, work: 2000000};
  // records.CHOSEN, the candidates this preset can return
  var LOCAL_SEARCH = "local_search", VERTEX = "token_lp_vertex", EVEN = "token_lp_even", RR = "round_robin";

  // ------------------------------------------------------------------ pricing (core/pricing.py, tempo_fast/pricing.py)
  function pricer(model) {
    var traffic = typeof model.c2 === "number" && typeof model.gamma === "number";
    return {a: +model.a, b: +model.b, c: +model.c, beta: +model.beta, b2: +(model.b2 || 0),
            tile: +(model.tile || 128), c2: traffic ? +model.c2 : 0, gamma: traffic ? +model.gamma : 0,
            traffic: traffic};
  }
  function activationTime(p, G, T) {
    var t = p.a + p.b * G;
    if (p.b2 !== 0) t = t + p.b2 * (T - G);
    return t;
  }
  function tokenTime(p, N) {
    var t = p.c + p.beta * N;
    if (p.traffic) t = Math.max(t, p.c2 + p.gamma * N);
    return t;
  }
  function gpuTime(p, G, N, T) { return Math.max(activationTime(p, G, T), tokenTime(p, N)); }
  function pieceTiles(p, v) { return p.b2 !== 0 ? Math.max(1, Math.ceil(v / p.tile - 1e-9)) : 1; }
  function tiles(p, v) { return v <= EPS ? 0 : pieceTiles(p, v); }
  function newLoads(g) { return {G: zerosF(g), N: zerosF(g), T: zerosF(g)}; }
  function zerosF(n) { var a = new Array(n); for (var i = 0; i < n; i++) a[i] = 0; return a; }
  function features(p, x, pgpu, L) {
    var h, q;
    for (h = 0; h < L.G.length; h++) { L.G[h] = 0; L.N[h] = 0; L.T[h] = 0; }
    for (q = 0; q < x.length; q++) {
      var v = x[q];
      if (v > EPS) { h = pgpu[q]; L.G[h] += 1; L.N[h] += v; L.T[h] += tiles(p, v); }
    }
  }
  function gpuTimes(p, L, t) {   // each GPU's time into t; the first GPU of largest time
    var bottleneck = 0;
    for (var h = 0; h < t.length; h++) {
      t[h] = gpuTime(p, L.G[h], L.N[h], L.T[h]);
      if (t[h] > t[bottleneck]) bottleneck = h;
    }
    return bottleneck;
  }
  function makespan(p, x, pgpu, g) {
    var L = newLoads(g), best = 0;
    features(p, x, pgpu, L);
    for (var h = 0; h < g; h++) {
      var t = gpuTime(p, L.G[h], L.N[h], L.T[h]);
      if (h === 0 || t > best) best = t;
    }
    return best;
  }

  // stable argsort by a numeric key (numpy's kind="mergesort")
  function argsort(keys) {
    var idx = keys.map(function (_, i) { return i; });
    return idx.sort(function (i, j) { return keys[i] < keys[j] ? -1 : keys[i] > keys[j] ? 1 : i - j; });
  }
  function take(a, idx) { return idx.map(function (i) { return a[i]; }); }

  // ------------------------------------------------------------------ the pair layout (layout.py)
  function pairsOf(counts, replicas, g) {
    var E = counts.length, pe = [], pr = [], pgpu = [], ptr = [], first = [], stamp = [], e, r, h, q;
    for (h = 0; h < g; h++) stamp.push(-1);
    for (e = 0; e < E; e++) {
      ptr.push(pe.length);
      if (counts[e] > 0) {
        for (r = 0; r < replicas[e].length; r++) {
          h = replicas[e][r];
          if (h < 0) continue;
          pe.push(e); pr.push(r); pgpu.push(h);
          if (stamp[h] !== e) { stamp[h] = e; first.push(true); } else first.push(false);
        }
      }
    }
    ptr.push(pe.length);
    var P = pe.length, gptr = zerosF(g + 1);
    for (q = 0; q < P; q++) gptr[pgpu[q] + 1] += 1;
    for (h = 0; h < g; h++) gptr[h + 1] += gptr[h];
    var fill = gptr.slice(0, g), gpairs = zerosF(P);
    for (q = 0; q < P; q++) { gpairs[fill[pgpu[q]]] = q; fill[pgpu[q]] += 1; }
    return {pe: pe, pr: pr, pgpu: pgpu, ptr: ptr, gptr: gptr, gpairs: gpairs, first: first};
  }
  function scatter(x, pairs, replicas) {
    var out = replicas.map(function (r) { return r.map(function () { return 0; }); });
    for (var q = 0; q < x.length; q++) out[pairs.pe[q]][pairs.pr[q]] = x[q];
    return out;
  }
  function isFullReplication(pairs, E, g) {
    for (var e = 0; e < E; e++) {
      if (pairs.ptr[e + 1] > pairs.ptr[e]) {
        var d = 0;
        for (var q = pairs.ptr[e]; q < pairs.ptr[e + 1]; q++) if (pairs.first[q]) d += 1;
        if (d < g) return false;
      }
    }
    return true;
  }

  // ------------------------------------------------------------------ the lower bound (bounds.py)
  function lowerBound(p, counts, pairs, g) {
    var L = 0, tot = 0, zmax = 0;
    for (var e = 0; e < counts.length; e++) {
      if (counts[e] > 0) {
        L += 1;
        tot += counts[e];
        var d = 0;
        for (var q = pairs.ptr[e]; q < pairs.ptr[e + 1]; q++) if (pairs.first[q]) d += 1;
        zmax = Math.max(zmax, counts[e] / d);
      }
    }
    if (L === 0) return gpuTime(p, 0, 0, 0);
    var z = Math.max(tot / g, zmax), m = Math.ceil(L / g);
    return gpuTime(p, m, z, m);
  }

  // ------------------------------------------------------------------ stage 1 (seed.py, whole experts)
  // Experts with one replica GPU first, then the others by descending tokens (ties: lower id),
  // each whole on the replica GPU of least resulting time (ties: smaller increase, lower GPU id).
  function seedWhole(p, counts, pairs, x, L, rec) {
    var pgpu = pairs.pgpu, ptr = pairs.ptr, E = counts.length, e, q, forced = [], choice = [];
    for (q = 0; q < x.length; q++) x[q] = 0;
    for (e = 0; e < E; e++) {
      forced.push(false);
      if (ptr[e + 1] > ptr[e]) {
        var lo = pgpu[ptr[e]], hi = lo;
        for (q = ptr[e]; q < ptr[e + 1]; q++) { lo = Math.min(lo, pgpu[q]); hi = Math.max(hi, pgpu[q]); }
        if (lo === hi) { forced[e] = true; x[ptr[e]] = counts[e]; } else choice.push(e);
      }
    }
    features(p, x, pgpu, L);
    if (rec) {
      var fixed = [];
      for (e = 0; e < E; e++) if (forced[e]) fixed.push(e);
      if (fixed.length) rec("seed", {experts: fixed, forced: true}, x);
    }
    choice = take(choice, argsort(choice.map(function (e) { return -counts[e]; })));
    choice.forEach(function (e) {
      var n = counts[e], nt = pieceTiles(p, n), bnew = Infinity, binc = Infinity, bh = -1, bp = -1;
      for (var q = ptr[e]; q < ptr[e + 1]; q++) {
        var h = pgpu[q];
        var old = gpuTime(p, L.G[h], L.N[h], L.T[h]);
        var nw = gpuTime(p, L.G[h] + 1, L.N[h] + n, L.T[h] + nt);
        var inc = nw - old;
        if (nw < bnew || (nw === bnew && (inc < binc || (inc === binc && h < bh)))) {
          bnew = nw; binc = inc; bh = h; bp = q;
        }
      }
      x[bp] = n;
      L.G[bh] += 1; L.N[bh] += n; L.T[bh] += nt;
      if (rec) rec("seed", {expert: e, tokens: n, to: bh}, x);
    });
  }

  // ------------------------------------------------------------------ moves (moves.py)
  // The best share delta of pair i (on the bottleneck) to move to pair j, then with i2 >= 0 all
  // of pair i2 (on j's GPU) to pair j2: [largest time among the GPUs touched, delta].
  function evaluateMove(p, x, L, pgpu, bottleneck, i, j, wholeOnly, i2, j2) {
    var G = L.G, N = L.N, T = L.T, beta = p.beta, gamma = p.gamma, c = p.c, c2 = p.c2, tile = p.tile;
    var h = pgpu[j], x1 = x[i], xj = x[j];
    var Gg0 = G[bottleneck], Ng0 = N[bottleneck], Tg0 = T[bottleneck] - tiles(p, x1);
    var Gh0 = G[h], Nh0 = N[h], Th0 = T[h] - tiles(p, xj);
    if (xj <= EPS) Gh0 += 1;
    var third = 0;
    if (i2 >= 0) {
      var x2 = x[i2], xk = x[j2], k = pgpu[j2];
      Gh0 -= 1; Nh0 -= x2; Th0 -= tiles(p, x2);
      var addk = xk <= EPS ? 1 : 0, dT = tiles(p, xk + x2) - tiles(p, xk);
      if (k === bottleneck) { Gg0 += addk; Ng0 += x2; Tg0 += dT; }
      else third = gpuTime(p, G[k] + addk, N[k] + x2, T[k] + dT);
    }
    // the objective in delta is a max of affine pieces: its minimum is at a crossing (snapped
    // to tile boundaries under Eq. 2), half the token gap or the whole share
    var cand = [], q;
    if (wholeOnly) cand.push(x1);
    else {
      var Kflat = Math.max(Math.max(activationTime(p, Gg0, Tg0 + 1), activationTime(p, Gh0, Th0 + 1)), third);
      cand.push((Ng0 - Nh0) / 2.0, x1);
      if (beta > 0) cand.push((c + beta * Ng0 - Kflat) / beta, (Kflat - c - beta * Nh0) / beta);
      if (p.traffic && gamma > 0) {
        cand.push((c2 + gamma * Ng0 - Kflat) / gamma, (Kflat - c2 - gamma * Nh0) / gamma);
        if (beta + gamma > 0) {
          cand.push((c + beta * Ng0 - c2 - gamma * Nh0) / (beta + gamma),
                    (c2 + gamma * Ng0 - c - beta * Nh0) / (beta + gamma));
        }
      }
      for (q = 0; q < cand.length; q++) cand[q] = pyMin(pyMax(cand[q], 0), x1);
      if (p.b2 > 0) {
        var base = cand.length;
        for (var blk = 0; blk < 4; blk++) {
          for (q = 0; q < base; q++) {
            var v = cand[q], w;
            if (blk === 0) w = x1 - tile * Math.floor((x1 - v) / tile);
            else if (blk === 1) w = x1 - tile * Math.ceil((x1 - v) / tile);
            else if (blk === 2) w = tile * Math.ceil((xj + v) / tile) - xj;
            else w = tile * Math.floor((xj + v) / tile) - xj;
            cand.push(w);
          }
        }
        for (q = 0; q < cand.length; q++) cand[q] = pyMin(pyMax(cand[q], 0), x1);
      }
    }
    var bval = Infinity, bdel = cand[0], tolw = EPS * Math.max(1, x1);
    for (q = 0; q < cand.length; q++) {
      var d = cand[q];
      if (!(d > EPS)) continue;
      var rem = x1 - d, whole = rem <= tolw;
      var tg = gpuTime(p, Gg0 - (whole ? 1 : 0), Ng0 - d, Tg0 + tiles(p, whole ? 0 : rem));
      var th = gpuTime(p, Gh0, Nh0 + d, Th0 + tiles(p, xj + d));
      var val = Math.max(Math.max(tg, th), third);
      if (val < bval) { bval = val; bdel = d; }
    }
    return [bval, bdel];
  }
  // Python's max(a, b) / min(a, b) on floats: the first argument unless the second is larger / smaller
  function pyMax(a, b) { return b > a ? b : a; }
  function pyMin(a, b) { return b < a ? b : a; }

  // Move delta of pair i to pair j (the whole share when within EPS of it), then with i2 >= 0
  // all of pair i2 to pair j2; returns what moved: [[pair, pair, tokens], ...]
  function applyMove(p, x, pgpu, L, i, j, delta, i2, j2) {
    if (delta >= x[i] - EPS * Math.max(1, x[i])) delta = x[i];
    var moved = [[i, j, delta]];
    x[i] -= delta;
    x[j] += delta;
    if (x[i] < EPS) x[i] = 0;
    if (i2 >= 0) {
      moved.push([i2, j2, x[i2]]);
      x[j2] += x[i2];
      x[i2] = 0;
    }
    features(p, x, pgpu, L);
    return moved;
  }

  // ------------------------------------------------------------------ 2-step chains (chains.py)
  function twoStepChain(p, x, pairs, L, bottleneck, thresh, t, si, sj, sv, M, wholeOnly, o) {
    var pe = pairs.pe, pgpu = pairs.pgpu, ptr = pairs.ptr, fanout = o.fanout, cap = o.chainCap, g = t.length;
    var fi, fj, q, m, h, run, k;
    if (M > cap) {
      var keep = argsort(sv.slice(0, M)).slice(0, cap);
      fi = take(si, keep); fj = take(sj, keep);
    } else {
      fi = si.slice(0, M); fj = sj.slice(0, M);
    }
    m = fi.length;
    if (fanout > 0 && m > fanout) {
      // by (i, t[h]) stably; the first `fanout` per i
      var o1 = argsort(fj.map(function (j) { return t[pgpu[j]]; }));
      fi = take(fi, o1); fj = take(fj, o1);
      var o2 = argsort(fi);
      fi = take(fi, o2); fj = take(fj, o2);
      var keepm = [];
      run = 0;
      for (q = 0; q < m; q++) {
        if (q > 0 && fi[q] === fi[q - 1]) run += 1; else run = 0;
        keepm.push(run < fanout);
      }
      fi = fi.filter(function (_, q) { return keepm[q]; });
      fj = fj.filter(function (_, q) { return keepm[q]; });
      m = fi.length;
    }
    var inh = [], nh = 0;
    for (h = 0; h < g; h++) inh.push(false);
    for (q = 0; q < m; q++) { h = pgpu[fj[q]]; if (!inh[h]) { inh[h] = true; nh += 1; } }
    var B = [];
    for (q = 0; q < x.length; q++) if (inh[pgpu[q]] && x[q] > EPS) B.push(q);
    if (B.length === 0) return [false, 0];
    if (B.length > cap * nh) {   // per GPU the `cap` smallest active shares
      B = take(B, argsort(B.map(function (b) { return x[b]; })));
      B = take(B, argsort(B.map(function (b) { return pgpu[b]; })));
      var keepb = [];
      run = 0;
      for (q = 0; q < B.length; q++) {
        if (q > 0 && pgpu[B[q]] === pgpu[B[q - 1]]) run += 1; else run = 0;
        keepb.push(run < cap);
      }
      B = B.filter(function (_, q) { return keepb[q]; });
    }
    // second moves: to the bottleneck (all), and per source pair its cheapest other GPU
    var n2 = 0;
    B.forEach(function (b) {
      for (var q = ptr[pe[b]]; q < ptr[pe[b] + 1]; q++) if (pgpu[q] !== pgpu[b]) n2 += 1;
    });
    if (n2 === 0) return [false, 0];
    var sI2 = [], sJ2 = [];
    B.forEach(function (b) {
      var e = pe[b];
      for (var q = ptr[e]; q < ptr[e + 1]; q++) {
        if (pgpu[q] !== pgpu[b] && pgpu[q] === bottleneck) { sI2.push(b); sJ2.push(q); }
      }
    });
    B.slice().sort(function (u, v) { return u - v; }).forEach(function (b) {
      var e = pe[b], bq = -1;
      for (var q = ptr[e]; q < ptr[e + 1]; q++) {
        if (pgpu[q] !== pgpu[b] && (bq < 0 || t[pgpu[q]] < t[pgpu[bq]])) bq = q;
      }
      if (bq >= 0) { sI2.push(b); sJ2.push(bq); }
    });
    var src = sI2.map(function (b) { return pgpu[b]; }), os = argsort(src);
    sI2 = take(sI2, os); sJ2 = take(sJ2, os); src = take(src, os);
    var sptr = zerosF(g + 1);
    for (q = 0; q < sI2.length; q++) sptr[src[q] + 1] += 1;
    for (h = 0; h < g; h++) sptr[h + 1] += sptr[h];
    var bval = Infinity, bI = -1, bJ = -1, bI2 = -1, bJ2 = -1, bdel = 0, evals = 0;
    for (q = 0; q < m; q++) {
      var i = fi[q], j = fj[q];
      h = pgpu[j];
      for (var r = sptr[h]; r < sptr[h + 1]; r++) {
        var i2 = sI2[r], j2 = sJ2[r];
        if (pe[i2] === pe[i] || j2 === i) continue;
        var vd = evaluateMove(p, x, L, pgpu, bottleneck, i, j, wholeOnly, i2, j2);
        evals += 1;
        if (vd[0] < bval) { bval = vd[0]; bdel = vd[1]; bI = i; bJ = j; bI2 = i2; bJ2 = j2; }
      }
    }
    if (!(bval < thresh)) return [false, evals];
    k = applyMove(p, x, pgpu, L, bI, bJ, bdel, bI2, bJ2);
    return [true, evals, k];
  }

  // ------------------------------------------------------------------ stages 2 and 3 (local_search.py)
  // The best single move off the bottleneck; when none improves, a 2-step chain.  Every accepted
  // move leaves each GPU it touches below the bottleneck's time.
  function improve(p, x, pairs, L, lb, wholeOnly, chains, o, budget, rec, stage) {
    var pe = pairs.pe, pgpu = pairs.pgpu, ptr = pairs.ptr, gptr = pairs.gptr, gpairs = pairs.gpairs;
    var t = zerosF(L.G.length), moves = 0, atBound = false;
    for (var it = 0; it < o.maxIter; it++) {
      if (budget[0] <= 0) break;
      var bottleneck = gpuTimes(p, L, t), tb = t[bottleneck];
      if (tb <= lb * (1 + 1e-12)) { atBound = true; break; }   // provably optimal
      var thresh = tb - REL * Math.max(1, tb);
      var si = [], sj = [], sv = [], M = 0, bval = Infinity, bm = -1, bdel = 0, anyA = false;
      for (var r = gptr[bottleneck]; r < gptr[bottleneck + 1]; r++) {
        var i = gpairs[r];
        if (!(x[i] > EPS)) continue;
        anyA = true;
        var e = pe[i];
        for (var j = ptr[e]; j < ptr[e + 1]; j++) {
          if (pgpu[j] === bottleneck) continue;
          var vd = evaluateMove(p, x, L, pgpu, bottleneck, i, j, wholeOnly, -1, -1);
          si.push(i); sj.push(j); sv.push(vd[0]);
          if (vd[0] < bval) { bval = vd[0]; bm = M; bdel = vd[1]; }
          M += 1;
        }
      }
      budget[0] -= M;
      if (!anyA || M === 0) break;
      if (bval < thresh) {
        var mv = applyMove(p, x, pgpu, L, si[bm], sj[bm], bdel, -1, -1);
        if (rec) rec(stage, {kind: "move", moved: mv, from: bottleneck}, x);
        moves += 1;
        continue;
      }
      if (!chains) break;
      var ch = twoStepChain(p, x, pairs, L, bottleneck, thresh, t, si, sj, sv, M, wholeOnly, o);
      budget[0] -= ch[1];
      // chain_depth 2: no longer augmenting paths; no compound moves in this preset
      if (!ch[0]) break;
      if (rec) rec(stage, {kind: "chain", moved: ch[2], from: bottleneck}, x);
      moves += 1;
    }
    if (rec && moves === 0) rec(stage, {kind: "none", atBound: atBound}, x);
    return moves;
  }

  // ------------------------------------------------------------------ the token LP (maxflow.py, Lemma 1)
  // Dinic max-flow on a residual graph of n nodes, edges paired (e, e ^ 1)
  function maxflow(n, head, nxtStart, to, cap, s, t, flow, level, it, stackV, stackE) {
    var total = 0, qu = zerosF(n), v, e, w, ed, d;
    for (;;) {
      for (v = 0; v < n; v++) level[v] = -1;
      level[s] = 0;
      var qh = 0, qt = 1;
      qu[0] = s;
      while (qh < qt) {
        v = qu[qh]; qh += 1;
        for (e = nxtStart[v]; e < nxtStart[v + 1]; e++) {
          ed = head[e]; w = to[ed];
          if (level[w] < 0 && cap[ed] - flow[ed] > 0) { level[w] = level[v] + 1; qu[qt] = w; qt += 1; }
        }
      }
      if (level[t] < 0) return total;
      for (v = 0; v < n; v++) it[v] = nxtStart[v];
      for (;;) {
        var depth = 0, found = false;
        stackV[0] = s;
        for (;;) {
          v = stackV[depth];
          if (v === t) { found = true; break; }
          var advanced = false;
          while (it[v] < nxtStart[v + 1]) {
            ed = head[it[v]]; w = to[ed];
            if (level[w] === level[v] + 1 && cap[ed] - flow[ed] > 0) {
              stackE[depth] = ed; depth += 1; stackV[depth] = w; advanced = true;
              break;
            }
            it[v] += 1;
          }
          if (!advanced) {
            if (depth === 0) break;
            level[v] = -1;   // dead end
            depth -= 1;
            it[stackV[depth]] += 1;
          }
        }
        if (!found) break;
        var push = cap[stackE[0]] - flow[stackE[0]];
        for (d = 1; d < depth; d++) push = Math.min(push, cap[stackE[d]] - flow[stackE[d]]);
        for (d = 0; d < depth; d++) { ed = stackE[d]; flow[ed] += push; flow[ed ^ 1] -= push; }
        total += push;
      }
    }
  }
  // Exact min-max tokens per GPU and a max-flow vertex into x (on each expert-GPU edge's first
  // pair): [W, k], the optimum W / k; [-1, 0] when the iteration made no progress
  function tokenLp(counts, pairs, g, x) {
    var pe = pairs.pe, pgpu = pairs.pgpu, ptr = pairs.ptr, first = pairs.first, E = counts.length;
    var live = [], L = 0, e, q, r, h, l, v;
    for (e = 0; e < E; e++) { live.push(-1); if (ptr[e + 1] > ptr[e]) { live[e] = L; L += 1; } }
    for (q = 0; q < x.length; q++) x[q] = 0;
    if (L === 0) return [0, 1];
    var pq = [];
    for (q = 0; q < first.length; q++) if (first[q]) pq.push(q);
    var npair = pq.length, n = L + g + 2, s = 0, t = L + g + 1, m = L + npair + g;
    var to = zerosF(2 * m), frm = zerosF(2 * m), ed = 0;
    for (e = 0; e < E; e++) {
      if (live[e] >= 0) { frm[ed] = s; to[ed] = 1 + live[e]; frm[ed + 1] = 1 + live[e]; to[ed + 1] = s; ed += 2; }
    }
    for (r = 0; r < npair; r++) {
      q = pq[r];
      frm[ed] = 1 + live[pe[q]]; to[ed] = 1 + L + pgpu[q];
      frm[ed + 1] = 1 + L + pgpu[q]; to[ed + 1] = 1 + live[pe[q]];
      ed += 2;
    }
    for (h = 0; h < g; h++) { frm[ed] = 1 + L + h; to[ed] = t; frm[ed + 1] = t; to[ed + 1] = 1 + L + h; ed += 2; }
    var nxtStart = zerosF(n + 1), e2;
    for (e2 = 0; e2 < 2 * m; e2++) nxtStart[frm[e2] + 1] += 1;
    for (v = 0; v < n; v++) nxtStart[v + 1] += nxtStart[v];
    var fill = nxtStart.slice(0, n), head = zerosF(2 * m);
    for (e2 = 0; e2 < 2 * m; e2++) { head[fill[frm[e2]]] = e2; fill[frm[e2]] += 1; }
    var nl = zerosF(L), deg = zerosF(L), W = 0;
    for (e = 0; e < E; e++) if (live[e] >= 0) { nl[live[e]] = counts[e]; W += counts[e]; }
    for (r = 0; r < npair; r++) deg[live[pe[pq[r]]]] += 1;
    var total = W, k = g, be = 0;
    for (l = 0; l < L; l++) if (nl[l] * deg[be] > nl[be] * deg[l]) be = l;
    if (nl[be] * k > W * deg[be]) { W = nl[be]; k = deg[be]; }
    var cap = zerosF(2 * m), flow = zerosF(2 * m), level = zerosF(n), it = zerosF(n);
    var stackV = zerosF(n + 1), stackE = zerosF(n + 1);
    for (var iter = 0; iter < g + 2; iter++) {
      ed = 0;
      for (l = 0; l < L; l++) { cap[ed] = nl[l] * k; ed += 2; }
      for (r = 0; r < npair; r++) { cap[ed] = nl[live[pe[pq[r]]]] * k; ed += 2; }
      for (h = 0; h < g; h++) { cap[ed] = W; ed += 2; }
      for (e2 = 0; e2 < 2 * m; e2++) flow[e2] = 0;
      var val = maxflow(n, head, nxtStart, to, cap, s, t, flow, level, it, stackV, stackE);
      if (val >= total * k) {
        for (r = 0; r < npair; r++) x[pq[r]] = flow[2 * (L + r)] / k;
        return [W, k];
      }
      var Wn = 0, kn = 0;   // the min cut: the nodes the last search reached
      for (l = 0; l < L; l++) if (level[1 + l] >= 0) Wn += nl[l];
      for (h = 0; h < g; h++) if (level[1 + L + h] >= 0) kn += 1;
      if (kn === 0 || Wn * k <= W * kn) return [-1, 0];
      W = Wn; k = kn;
    }
    return [-1, 0];
  }

  // ------------------------------------------------------------------ stage 4 (ensemble.py, structured.py)
  function byTokens(counts, ptr) {   // live experts by descending tokens (ties: lower id)
    var live = [];
    for (var e = 0; e < counts.length; e++) if (ptr[e + 1] > ptr[e]) live.push(e);
    return take(live, argsort(live.map(function (e) { return -counts[e]; })));
  }
  function roundRobin(counts, pairs, g) {   // A3 of Theorem 2: the r-th expert whole on GPU r mod g
    var order = byTokens(counts, pairs.ptr), xr = zerosF(pairs.pgpu.length);
    order.forEach(function (e, r) {
      var h = r % g;
      for (var q = pairs.ptr[e]; q < pairs.ptr[e + 1]; q++) if (pairs.pgpu[q] === h) { xr[q] = counts[e]; break; }
    });
    return xr;
  }
  function buildVertex(p, counts, pairs, problem, vertex) {
    if (!vertex.ready) {
      var Wk = tokenLp(counts, pairs, problem.g, vertex.shares);
      if (Wk[0] >= 0) { vertex.ready = true; vertex.makespan = makespan(p, vertex.shares, pairs.pgpu, problem.g); }
    }
    return vertex.ready;
  }
  // Proposition 1: the best token-LP candidate or round robin replaces the heuristic's dispatch
  // only when more than tau better.  Returns {best, pruned, scored: [[name, makespan], ...]}.
  function ensemble(p, counts, pairs, problem, o, heur, vertex, checked) {
    var g = problem.g, pgpu = pairs.pgpu, P = pgpu.length, best = heur.makespan, scored = [], q;
    if (problem.lb >= (1 - o.tau) * best && !checked) return {best: heur, pruned: true, scored: scored};
    var cbest = Infinity, cwho = LOCAL_SEARCH, xc = zerosF(P), ms;
    if (buildVertex(p, counts, pairs, problem, vertex)) {
      scored.push([VERTEX, vertex.makespan]);
      if (vertex.makespan < cbest) { cbest = vertex.makespan; cwho = VERTEX; }
    }
    if (problem.full) {   // the even split in closed form: total / g per GPU
      var xe = zerosF(P);
      for (q = 0; q < P; q++) if (pairs.first[q]) xe[q] = counts[pairs.pe[q]] / g;
      ms = makespan(p, xe, pgpu, g);
      scored.push([EVEN, ms]);
      if (ms < cbest) { cbest = ms; cwho = EVEN; xc = xe.slice(); }
      var xr = roundRobin(counts, pairs, g);
      ms = makespan(p, xr, pgpu, g);
      scored.push([RR, ms]);
      if (ms < cbest) { cbest = ms; cwho = RR; xc = xr.slice(); }
    }
    if (cwho === VERTEX) xc = vertex.shares.slice();
    if (cwho !== LOCAL_SEARCH && cbest < (1 - o.tau) * best) {
      return {best: {x: xc, makespan: cbest, chosen: cwho}, pruned: false, scored: scored};
    }
    return {best: heur, pruned: false, scored: scored};
  }

  // ------------------------------------------------------------------ the whole (solver.py, heuristic.py)
  // tempo.solve(inst, model, "tempo", options="paper"): {shares, makespan, chosen, stages, steps,
  // lowerBound}.  stages: the makespan after each stage that ran (meta["stages"]); steps: each
  // recorded step {stage, kind, ..., shares, G, N, times, makespan, bottleneck}.
  function solve(inst, model) {
    var p = pricer(model), counts = inst.counts, g = inst.nGpus, o = PAPER, E = counts.length;
    var pairs = pairsOf(counts, inst.replicas, g), pgpu = pairs.pgpu, P = pgpu.length;
    var lb = lowerBound(p, counts, pairs, g), steps = [];
    function snapshot(x) {
      var L = newLoads(g), t = zerosF(g);
      features(p, x, pgpu, L);
      var b = gpuTimes(p, L, t);
      return {shares: scatter(x, pairs, inst.replicas), G: L.G.slice(), N: L.N.slice(), times: t,
              makespan: t[b], bottleneck: b};
    }
    function rec(stage, what, x) {
      var s = snapshot(x);
      s.stage = stage;
      Object.keys(what).forEach(function (key) { s[key] = what[key]; });
      if (what.moved) {   // pairs as (expert, from GPU, to GPU, tokens)
        s.moved = what.moved.map(function (m) {
          return {expert: pairs.pe[m[0]], from: pgpu[m[0]], to: pgpu[m[1]], tokens: m[2], whole: x[m[0]] === 0};
        });
      }
      if (stage === "seed" && what.expert === undefined) s.kind = "forced";
      else if (stage === "seed") s.kind = "place";
      steps.push(s);
    }
    function result(x, ms, chosen, stages) {
      return {shares: scatter(x, pairs, inst.replicas), makespan: ms, chosen: chosen, stages: stages, steps: steps,
              lowerBound: lb};
    }
    if (P === 0) return result([], lb, LOCAL_SEARCH, {seed: lb});
    var problem = {g: g, lb: lb, full: isFullReplication(pairs, E, g)};
    var vertex = {shares: zerosF(P), ready: false, makespan: Infinity};
    var x = zerosF(P), L = newLoads(g), t = zerosF(g), budget = [o.work];
    // stage 1
    seedWhole(p, counts, pairs, x, L, rec);
    var b = gpuTimes(p, L, t), stages = {seed: t[b]};
    // stage 2: whole-expert moves and 2-step chains
    improve(p, x, pairs, L, lb, true, true, o, budget, rec, "chains");
    b = gpuTimes(p, L, t);
    stages.chains = t[b];
    // the compute-regime shortcut: a token-bound bottleneck and the token-LP vertex at the bound
    var checked = false;
    b = gpuTimes(p, L, t);
    if (tokenTime(p, L.N[b]) >= activationTime(p, L.G[b], L.T[b])) {
      checked = true;
      if (buildVertex(p, counts, pairs, problem, vertex) && vertex.makespan <= lb * (1 + 1e-9)) {
        stages.shortcut = vertex.makespan;
        rec("shortcut", {kind: "shortcut", candidate: VERTEX}, vertex.shares);
        return result(vertex.shares.slice(), vertex.makespan, VERTEX, stages);
      }
    }
    // stage 3: the same search with partial moves
    improve(p, x, pairs, L, lb, false, true, o, budget, rec, "partial");
    b = gpuTimes(p, L, t);
    stages.local_search = t[b];
    var heur = {x: x, makespan: makespan(p, x, pgpu, g), chosen: LOCAL_SEARCH};
    // stage 4
    var ens = ensemble(p, counts, pairs, problem, o, heur, vertex, checked);
    stages.ensemble = ens.best.makespan;
    if (ens.pruned) stages.ensemble_pruned = true;
    rec("ensemble", {kind: ens.best.chosen === LOCAL_SEARCH ? "kept" : "switched", chosen: ens.best.chosen,
                     heuristic: heur.makespan, scored: ens.scored, pruned: ens.pruned, tau: o.tau}, ens.best.x);
    return result(ens.best.x, ens.best.makespan, ens.best.chosen, stages);
  }

  var api = {solve: solve, PRESET: "paper", EPS: EPS, options: PAPER,
             gpuTime: function (model, G, N, T) { return gpuTime(pricer(model), G, N, T === undefined ? G : T); }};
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.TempoFast = api;
})(this);
