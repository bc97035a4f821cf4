// The dispatch policies of tempo/policies/, in the browser: one routine per policy, named as in
// the library (tempo.solve(inst, model, name)), for the book's instance explorer (chapter 01).
// Pure functions, no DOM: tests/test_explorers.py runs them under node and compares every
// makespan with the library's on random instances.
//
// An instance is {counts: [n_e], replicas: [[gpu, ...] per expert, in slot order], nGpus: g}:
// the library's Instance with replica_gpu[e] = replicas[e] padded with -1 (every expert's GPUs
// distinct, as a placement has them).  A dispatch is shares[e][r], the tokens of expert e sent to
// its r-th replica.  A model is {a, b, c, beta, c2?, gamma?}: Eq. 1, and Eq. 4's traffic piece
// when c2 and gamma are numbers (the tile term b2 of Eq. 2 is not modelled here).
//
// Each routine below is the library's algorithm, step for step.  Two rows are TEMPO's:
// `tempo_paper` is tempo_fast.js, the library's tempo_fast under its "paper" preset
// (tempo.solve(inst, model, "tempo", options="paper"), Section 4.2 as written), and `optimum` is
// an exact search for the optimum of Eq. 3 (what the library's `milp` computes), which no
// heuristic beats.  The library's default preset (tempo.solve(inst, model, "tempo")) is never
// worse than the paper preset and never better than the optimum; TEMPO_FAST_TOLERANCE says how
// far above the optimum the parity test lets it land.
(function (root) {
  "use strict";

  var EPS_TOKENS = 1e-9;   // tempo.core.instance.EPS_TOKENS: a smaller share activates nothing
  // tempo_fast.js (loaded before this file in the page; required under node)
  function tempoFast() {
    return typeof module !== "undefined" && module.exports ? require("./tempo_fast.js") : root.TempoFast;
  }

  // How far above the page's exact optimum tempo.solve(inst, model, "tempo") (the default preset) may land, as a
  // fraction: tempo_fast is a local search with no approximation guarantee against the optimum
  // (Proposition 1 bounds it against token-LP only), and on instances of the explorer's size (up
  // to 8 experts on up to 4 GPUs) it usually lands on the optimum but can miss by one activation
  // on a GPU, which at small G is a large factor.  The parity test (tests/test_explorers.py)
  // holds it to this on random instances and records how often and how far it lands above.
  var TEMPO_FAST_TOLERANCE = 0.10;

  // ------------------------------------------------------------------ helpers
  function zeros(inst) {
    return inst.replicas.map(function (r) { return r.map(function () { return 0; }); });
  }
  function live(inst) {
    var out = [];
    inst.counts.forEach(function (n, e) { if (n > 0) out.push(e); });
    return out;
  }
  function total(inst) { return inst.counts.reduce(function (s, n) { return s + n; }, 0); }
  function pmod(a, m) { return ((a % m) + m) % m; }
  // the first slot of expert e on GPU h, or -1 (tempo.policies._util.slot_on_gpu)
  function slotOn(inst, e, h) { return inst.replicas[e].indexOf(h); }
  function isFull(inst) {   // Instance.is_full_replication
    return live(inst).every(function (e) {
      for (var h = 0; h < inst.nGpus; h++) if (slotOn(inst, e, h) < 0) return false;
      return true;
    });
  }
  // _util.even_integer_split for one row: n into `parts` integer pieces differing by at most
  // one, the remainder on pieces offset, offset+1, ... (mod parts); `width` pieces in all
  function evenSplit(n, parts, offset, width) {
    parts = Math.max(parts, 1);
    var base = Math.floor(n / parts), rem = n % parts, out = [];
    for (var j = 0; j < width; j++) out.push(j >= parts ? 0 : base + (pmod(j - offset, parts) < rem ? 1 : 0));
    return out;
  }

  // ------------------------------------------------------------------ pricing (tempo.core.cost)
  // per GPU: activated replicas G, tokens N and time max(a + bG, c + beta N[, c2 + gamma N])
  function gpuFeatures(inst, shares) {
    var g = inst.nGpus, G = [], N = [];
    for (var h = 0; h < g; h++) { G.push(0); N.push(0); }
    shares.forEach(function (row, e) {
      row.forEach(function (x, r) {
        if (x > EPS_TOKENS) { var h = inst.replicas[e][r]; G[h] += 1; N[h] += x; }
      });
    });
    return {G: G, N: N};
  }
  function time(model, G, N) {
    var t = Math.max(model.a + model.b * G, model.c + model.beta * N);
    if (typeof model.c2 === "number" && typeof model.gamma === "number") t = Math.max(t, model.c2 + model.gamma * N);
    return t;
  }
  function price(inst, model, shares) {
    var f = gpuFeatures(inst, shares);
    var times = f.G.map(function (G, h) { return time(model, G, f.N[h]); });
    return {G: f.G, N: f.N, times: times, makespan: Math.max.apply(null, times)};
  }

  // ------------------------------------------------------------------ the proxies (policies/proxies.py)
  // static: every expert whole on its home replica (its first slot)
  function static_(inst) {
    var s = zeros(inst);
    inst.counts.forEach(function (n, e) { if (s[e].length) s[e][0] = n; });
    return s;
  }

  // static_sglang: each expert's tokens evenly from every GPU as a source; a source holding a
  // replica uses it, the j-th other source uses replica j mod R_e
  function static_sglang(inst) {
    var g = inst.nGpus, s = zeros(inst);
    inst.counts.forEach(function (n, e) {
      var R = inst.replicas[e].length;
      if (!R) return;
      var src = evenSplit(n, g, e % g, g), j = -1;
      for (var h = 0; h < g; h++) {
        var loc = slotOn(inst, e, h), slot;
        if (loc < 0) { j += 1; slot = j % R; } else slot = loc;
        s[e][slot] += src[h];
      }
    });
    return s;
  }

  // uniform: each expert's tokens evenly over its replicas (integer split, the remainder rotated
  // by expert id)
  function uniform(inst) {
    return inst.counts.map(function (n, e) {
      var R = inst.replicas[e].length;
      return evenSplit(n, R, e, R);
    });
  }

  // metro: experts in id order, each whole to the replica GPU with the fewest activated experts
  // so far (ties to the lower GPU id); token counts are ignored
  function metro(inst) {
    var act = [], s = zeros(inst);
    for (var h = 0; h < inst.nGpus; h++) act.push(0);
    live(inst).forEach(function (e) {
      var best = -1;
      inst.replicas[e].forEach(function (gpu, r) {
        if (best < 0) { best = r; return; }
        var bg = inst.replicas[e][best];
        if (act[gpu] < act[bg] || (act[gpu] === act[bg] && gpu < bg)) best = r;
      });
      s[e][best] = inst.counts[e];
      act[inst.replicas[e][best]] += 1;
    });
    return s;
  }

  // llep: LLEP-R, the least-loaded spill restricted to existing replicas (Section 5.14),
  // following tempo.policies.proxies.llep line by line (alpha 1.1, min_chunk 32, trigger 1.3)
  function llep(inst, model, opts) {
    opts = opts || {};
    var alpha = opts.alpha === undefined ? 1.1 : opts.alpha;
    var minChunk = opts.min_chunk === undefined ? 32 : opts.min_chunk;
    var trigger = opts.trigger === undefined ? 1.3 : opts.trigger;
    var home = static_(inst), tot = total(inst), g = inst.nGpus, E = inst.counts.length, h;
    if (tot === 0) return home;
    var counts = inst.counts;
    var nativeGpu = inst.replicas.map(function (r) { return r.length ? r[0] : -1; });
    var nat = [];
    for (h = 0; h < g; h++) nat.push(0);
    counts.forEach(function (n, e) { if (n > 0) nat[nativeGpu[e]] += n; });
    if (Math.max.apply(null, nat) / (tot / g) < trigger) return home;
    var cap = Math.max(Math.floor(alpha * Math.floor(tot / g)), 1);
    var pending = nat.slice(), assigned = [];
    for (h = 0; h < g; h++) assigned.push(0);
    var s = zeros(inst);
    function eff(k) { return assigned[k] + pending[k]; }
    function put(e, k, amount) { s[e][slotOn(inst, e, k)] += amount; assigned[k] += amount; }
    function byEff(list) {   // Python's sorted(list, key=eff): stable
      return list.map(function (k, i) { return [eff(k), i, k]; })
        .sort(function (x, y) { return x[0] - y[0] || x[1] - y[1]; }).map(function (x) { return x[2]; });
    }
    var order = [];
    for (var e0 = 0; e0 < E; e0++) order.push(e0);
    order.sort(function (x, y) { return counts[y] - counts[x] || x - y; });
    order.forEach(function (e) {
      var n = counts[e];
      if (n === 0) return;
      var natg = nativeGpu[e];
      pending[natg] -= n;
      var gpus = inst.replicas[e].slice().sort(function (x, y) { return x - y; });
      var helpers = gpus.filter(function (k, i) { return k !== natg && gpus.indexOf(k) === i; });
      var avail = cap - eff(natg);
      if (avail >= n) { put(e, natg, n); return; }
      var remaining = n, ranked, i, k, room, chunk;
      if (avail > 0) {
        put(e, natg, avail);
        remaining -= avail;
        while (remaining > 0) {
          if (!helpers.length) { put(e, natg, remaining); break; }
          ranked = byEff(helpers);
          var placed = false;
          for (i = 0; i < ranked.length; i++) {
            k = ranked[i];
            room = cap - eff(k);
            if (room <= 0) continue;
            chunk = Math.min(remaining, room);
            if (chunk < minChunk && remaining > chunk) continue;
            put(e, k, chunk);
            remaining -= chunk;
            placed = true;
            break;
          }
          if (!placed) { put(e, ranked[0], remaining); remaining = 0; }
        }
      } else {
        if (!helpers.length) { put(e, natg, remaining); return; }
        ranked = byEff(helpers).map(function (k) { return [k, cap - eff(k)]; });   // one snapshot
        for (i = 0; i < ranked.length; i++) {
          if (remaining <= 0) break;
          k = ranked[i][0]; room = ranked[i][1];
          if (room <= 0) continue;
          chunk = Math.min(remaining, room);
          if (chunk < minChunk && remaining > chunk) continue;
          put(e, k, chunk);
          remaining -= chunk;
        }
        if (remaining > 0) put(e, ranked[0][0], remaining);
      }
    });
    return s;
  }

  // round_robin: Theorem 2's A3, live experts by tokens (descending, ties by id), GPU i takes
  // ranks i, i+g, ...; needs full replication (null otherwise, where the library raises)
  function round_robin(inst) {
    if (!isFull(inst)) return null;
    var order = live(inst).sort(function (x, y) { return inst.counts[y] - inst.counts[x] || x - y; });
    var s = zeros(inst);
    order.forEach(function (e, rank) { s[e][slotOn(inst, e, rank % inst.nGpus)] = inst.counts[e]; });
    return s;
  }

  // ------------------------------------------------------------------ token-LP (policies/exact.py)
  // GPU sets as bitmasks; the replica GPUs of each expert as a mask
  function masks(inst) {
    return inst.replicas.map(function (r) { return r.reduce(function (m, h) { return m | (1 << h); }, 0); });
  }
  function popcount(m) { var c = 0; while (m) { c += m & 1; m >>= 1; } return c; }
  // Hall's condition: the least possible largest per-GPU token load is the largest density
  // (tokens of experts whose GPUs all lie in U) / |U| over GPU sets U; returned as [W, k]
  function densest(n, sets, g) {
    var W = 0, k = 1;
    for (var U = 1; U < (1 << g); U++) {
      var w = 0;
      for (var e = 0; e < n.length; e++) if (n[e] > 0 && (sets[e] & ~U) === 0) w += n[e];
      var size = popcount(U);
      if (w * k > W * size) { W = w; k = size; }
    }
    return [W, k];
  }
  // an integral max-flow source -> experts (cap n_e k) -> their GPUs in `sets` -> sink (cap W):
  // the shares (flow / k) of a dispatch whose largest GPU load is W / k (Hall guarantees it fits)
  function flowShares(inst, sets, W, k) {
    var E = inst.counts.length, g = inst.nGpus, V = E + g + 2, S = E + g, T = E + g + 1, i, j;
    var cap = [], flow = [];
    for (i = 0; i < V; i++) { cap.push(new Array(V).fill(0)); flow.push(new Array(V).fill(0)); }
    var big = 0;
    inst.counts.forEach(function (n) { big += n * k; });
    inst.counts.forEach(function (n, e) {
      if (n <= 0) return;
      cap[S][e] = n * k;
      for (var h = 0; h < g; h++) if (sets[e] & (1 << h)) cap[e][E + h] = big;
    });
    for (var h = 0; h < g; h++) cap[E + h][T] = W;
    for (;;) {   // Edmonds-Karp: shortest augmenting paths, integral capacities
      var prev = new Array(V).fill(-1), queue = [S];
      prev[S] = S;
      while (queue.length && prev[T] < 0) {
        var u = queue.shift();
        for (var v = 0; v < V; v++) {
          if (prev[v] < 0 && cap[u][v] - flow[u][v] > 0) { prev[v] = u; queue.push(v); }
        }
      }
      if (prev[T] < 0) break;
      var push = Infinity;
      for (j = T; j !== S; j = prev[j]) push = Math.min(push, cap[prev[j]][j] - flow[prev[j]][j]);
      for (j = T; j !== S; j = prev[j]) { flow[prev[j]][j] += push; flow[j][prev[j]] -= push; }
    }
    var s = zeros(inst);
    inst.counts.forEach(function (n, e) {
      for (var h = 0; h < g; h++) if (flow[e][E + h] > 0) s[e][slotOn(inst, e, h)] = flow[e][E + h] / k;
    });
    return s;
  }

  // Row-wise water-filling: x_r = max(0, v_r - t) summing to n (a projection onto a simplex)
  function waterfill(v, n) {
    var srt = v.slice().sort(function (x, y) { return y - x; }), cs = 0, t = 0;
    for (var i = 0; i < srt.length; i++) {
      cs += srt[i];
      var ti = (cs - n) / (i + 1);
      if (srt[i] - ti > 0) t = ti;
    }
    var out = v.map(function (x) { return Math.max(0, x - t); });
    out.threshold = t;
    return out;
  }

  // Solve the square system A y = r by Gauss-Jordan elimination with partial pivoting; an
  // unknown without a pivot (a consistent singular system) takes its value from `free`.
  // Returns null when the system is inconsistent.
  function solveLinear(A, r, free) {
    var m = r.length, M = A.map(function (row, i) { return row.concat([r[i]]); }), i, j, c;
    var scale = 0, rscale = 0;
    for (i = 0; i < m; i++) {
      rscale = Math.max(rscale, Math.abs(r[i]));
      for (j = 0; j < m; j++) scale = Math.max(scale, Math.abs(A[i][j]));
    }
    var tol = 1e-12 * Math.max(scale, 1) * m, row = 0, pivCol = [];
    for (c = 0; c < m && row < m; c++) {
      var best = row;
      for (i = row + 1; i < m; i++) if (Math.abs(M[i][c]) > Math.abs(M[best][c])) best = i;
      if (Math.abs(M[best][c]) <= tol) continue;
      var tmp = M[row]; M[row] = M[best]; M[best] = tmp;
      for (i = 0; i < m; i++) {
        if (i === row) continue;
        var f = M[i][c] / M[row][c];
        if (f !== 0) for (j = c; j <= m; j++) M[i][j] -= f * M[row][j];
      }
      pivCol.push(c); row += 1;
    }
    for (i = row; i < m; i++) if (Math.abs(M[i][m]) > 1e-9 * Math.max(rscale, 1)) return null;
    var y = free.slice(), isPiv = new Array(m).fill(false);
    pivCol.forEach(function (cc) { isPiv[cc] = true; });
    pivCol.forEach(function (cc, q) {
      var v = M[q][m];
      for (j = 0; j < m; j++) if (!isPiv[j]) v -= M[q][j] * y[j];
      y[cc] = v / M[q][cc];
    });
    return y;
  }

  // The token-LP optimum nearest (Euclidean) to the even split over replicas
  // (tempo.policies.exact._project_even): minimise ||x - u||^2 with u the even split, row sums
  // n_e, x >= 0 and every GPU's load <= z*.  Its KKT conditions read x_eh = max(0, theta_e -
  // nu_h) with nu_h >= 0, positive only on GPUs at z*.  The concave dual in nu (one variable per
  // GPU) is climbed by exact coordinate steps; after each sweep the support and the GPUs at z*
  // it names give a linear system in theta and nu, whose solution is accepted when it passes
  // every KKT condition (it is then the projection, which is unique, up to rounding).
  function projectEven(inst, z) {
    var g = inst.nGpus, L = live(inst), h, e, i;
    var u = inst.replicas.map(function (r, e) { return inst.counts[e] / Math.max(r.length, 1); });
    var zt = Math.max(z, 1), tol = 1e-9 * zt;
    var cut = inst.counts.map(function (n) { return 1e-9 * Math.max(n, 1); });
    function sharesAt(nu) {
      var s = zeros(inst);
      L.forEach(function (e) {
        s[e] = waterfill(inst.replicas[e].map(function (h) { return u[e] - nu[h]; }), inst.counts[e]);
      });
      return s;
    }
    function loads(s) {
      var out = new Array(g).fill(0);
      L.forEach(function (e) { inst.replicas[e].forEach(function (h, r) { out[h] += s[e][r]; }); });
      return out;
    }
    function loadWith(nu, h, v) {   // GPU h's load with nu_h = v
      var old = nu[h];
      nu[h] = v;
      var l = loads(sharesAt(nu))[h];
      nu[h] = old;
      return l;
    }
    // the KKT system on the support of s and its GPUs at z*, with the unknowns it leaves free
    // (a group of rows touching only GPUs at z* can shift theta and nu together; x stays put)
    // taken from the climbed multipliers: the shares, or null unless every KKT condition holds
    function finish(s, nuIt) {
      var supp = s.map(function (row, e) { return row.map(function (x) { return x > cut[e]; }); });
      var ld = loads(s), tight = [];
      for (h = 0; h < g; h++) if (ld[h] >= z * (1 - 1e-7)) tight.push(h);
      var nL = L.length, m = nL + tight.length, A = [], rhs = [], free = [];
      for (i = 0; i < m; i++) { A.push(new Array(m).fill(0)); rhs.push(0); }
      // unknowns theta_e (live rows), then nu_h (GPUs at z*); x_eh = theta_e - nu_h on the support
      L.forEach(function (e, i) {
        inst.replicas[e].forEach(function (hh, r) {
          if (!supp[e][r]) return;
          A[i][i] += 1;
          var tj = tight.indexOf(hh);
          if (tj >= 0) { A[i][nL + tj] -= 1; A[nL + tj][i] += 1; A[nL + tj][nL + tj] -= 1; }
        });
        rhs[i] = inst.counts[e];
        free.push(u[e] - s[e].threshold);
      });
      tight.forEach(function (hh, tj) { rhs[nL + tj] = z; free.push(nuIt[hh]); });
      var y = solveLinear(A, rhs, free);
      if (!y) return null;
      var nu = new Array(g).fill(0), x = zeros(inst), ok = true;
      tight.forEach(function (hh, tj) { nu[hh] = y[nL + tj]; if (nu[hh] < -tol) ok = false; });
      L.forEach(function (e, i) {
        inst.replicas[e].forEach(function (hh, r) {
          var v = y[i] - nu[hh];
          if (supp[e][r]) { x[e][r] = v; if (v < -cut[e]) ok = false; }
          else if (v > tol) ok = false;   // a pair off the support would pay
        });
      });
      if (!ok) return null;
      var lx = loads(x);
      for (h = 0; h < g; h++) if (lx[h] > z + tol) return null;
      return x;
    }
    var nu = new Array(g).fill(0), s = sharesAt(nu), x = null;
    for (var sweep = 0; sweep < 500 && !x; sweep++) {
      for (h = 0; h < g; h++) {   // the exact maximiser in nu_h: load(h) = z, or nu_h = 0
        if (loadWith(nu, h, 0) <= z) { nu[h] = 0; continue; }
        var lo = 0, flo = loadWith(nu, h, 0) - z, hi = Math.max(nu[h], 1e-3 * zt), fhi = loadWith(nu, h, hi) - z;
        while (fhi > 0) { lo = hi; flo = fhi; hi *= 2; fhi = loadWith(nu, h, hi) - z; }
        for (var it = 0, side = 0; it < 100 && hi - lo > 1e-15 * hi; it++) {   // Illinois regula falsi
          var mid = hi - fhi * (hi - lo) / (fhi - flo);
          if (!(mid > lo && mid < hi)) mid = 0.5 * (lo + hi);
          var fm = loadWith(nu, h, mid) - z;
          if (fm === 0) { lo = hi = mid; break; }
          if (fm > 0) { lo = mid; flo = fm; if (side === 1) fhi /= 2; side = 1; }
          else { hi = mid; fhi = fm; if (side === -1) flo /= 2; side = -1; }
        }
        nu[h] = hi;
      }
      s = sharesAt(nu);
      x = finish(s, nu);
    }
    s = x || s;
    // as the library: drop shares below 1e-9 of the expert's tokens and rescale each row
    return s.map(function (row, e) {
      row = row.map(function (v) { return v < cut[e] ? 0 : v; });
      var rs = row.reduce(function (a, b) { return a + b; }, 0);
      return row.map(function (v) { return rs > 0 ? v * (inst.counts[e] / rs) : 0; });
    });
  }

  // token_lp: Lemma 1's min-max token split, the interior optimum LPLB's solve returns: under full
  // replication the even split, otherwise the optimum nearest the even split over replicas
  function token_lp(inst) {
    var g = inst.nGpus, s = zeros(inst);
    if (isFull(inst)) {
      live(inst).forEach(function (e) {
        for (var h = 0; h < g; h++) s[e][slotOn(inst, e, h)] += inst.counts[e] / g;
      });
      return s;
    }
    if (total(inst) === 0) return s;
    var Wk = densest(inst.counts, masks(inst), g);
    return projectEven(inst, Wk[0] / Wk[1]);
  }

  // ------------------------------------------------------------------ optimum: the exact optimum of Eq. 3
  // NOT the library's tempo_fast (that is tempo_fast.js).  For an activation pattern (each live expert's set of GPUs
  // S_e) the best dispatch has makespan max(a + b max_h G_h, c + beta z, c2 + gamma z) with z
  // the Hall density of the pattern (pieces of Eq. 1 are monotone in G and in N, so they
  // separate).  Branch and bound over patterns, experts by tokens descending; bounds: the Hall
  // densities of activations and tokens with the undecided experts on all their replica GPUs.
  // A basic optimal split of a fixed pattern has at most g - 1 extra pieces (L + g constraints),
  // so patterns with more are skipped; under full replication GPUs are interchangeable and new
  // GPUs are taken lowest-first.
  function optimum(inst, model) {
    var g = inst.nGpus, full = g, sets = masks(inst);
    var L = live(inst).sort(function (x, y) { return inst.counts[y] - inst.counts[x] || x - y; });
    if (!L.length) return {shares: zeros(inst), exact: true, nodes: 0};
    var symmetric = isFull(inst);
    var nU = 1 << g, sizes = [];
    for (var U = 0; U < nU; U++) sizes.push(popcount(U));
    var traffic = typeof model.c2 === "number" && typeof model.gamma === "number";
    function msOf(G, z) {
      var t = Math.max(model.a + model.b * G, model.c + model.beta * z);
      return traffic ? Math.max(t, model.c2 + model.gamma * z) : t;
    }
    // per expert: its candidate GPU sets (non-empty subsets of its replica GPUs)
    var cands = L.map(function (e) {
      var out = [];
      for (var S = 1; S < nU; S++) if ((S & ~sets[e]) === 0) out.push(S);
      return out;
    });
    // tok[U]: tokens of decided experts with S_e inside U plus undecided with R_e inside U;
    // act[U]: activations of decided experts on U plus one per undecided expert with R_e in U
    var tok = new Array(nU).fill(0), act = new Array(nU).fill(0);
    L.forEach(function (e) {
      for (var U = 1; U < nU; U++) if ((sets[e] & ~U) === 0) { tok[U] += inst.counts[e]; act[U] += 1; }
    });
    var Gh = new Array(g).fill(0), choice = new Array(L.length).fill(0);
    var best = Infinity, bestChoice = null, nodes = 0;
    function bound() {
      var W = 0, k = 1, Ga = 0;
      for (var U = 1; U < nU; U++) {
        if (tok[U] * k > W * sizes[U]) { W = tok[U]; k = sizes[U]; }
        Ga = Math.max(Ga, Math.ceil(act[U] / sizes[U] - 1e-12));
      }
      return msOf(Ga, W / k);
    }
    function apply(i, S, sign) {   // move expert L[i] between "undecided" and "on S"
      var e = L[i], n = inst.counts[e];
      for (var U = 1; U < nU; U++) {
        if ((sets[e] & ~U) === 0) { tok[U] -= sign * n; act[U] -= sign; }
        if ((S & ~U) === 0) tok[U] += sign * n;
        act[U] += sign * sizes[S & U];
      }
      for (var h = 0; h < g; h++) if (S & (1 << h)) Gh[h] += sign;
    }
    function dfs(i, extra, used) {
      nodes += 1;
      if (i === L.length) {
        var lb = bound();
        if (lb < best) { best = lb; bestChoice = choice.slice(); }
        return;
      }
      var kids = [];
      cands[i].forEach(function (S) {
        var ex = sizes[S] - 1;
        if (extra + ex > g - 1) return;
        if (symmetric) {   // unused GPUs are interchangeable: take the lowest unused ones first
          var fresh = S & ~used, want = 0;
          for (var q = 0; q < sizes[fresh]; q++) {
            var h = 0;
            while (h < g && ((used | want) & (1 << h))) h++;
            want |= 1 << h;
          }
          if (fresh !== want) return;
        }
        apply(i, S, +1);
        kids.push([bound(), S]);
        apply(i, S, -1);
      });
      kids.sort(function (x, y) { return x[0] - y[0] || x[1] - y[1]; });
      for (var k = 0; k < kids.length; k++) {
        if (kids[k][0] >= best) break;
        var S = kids[k][1];
        choice[i] = S;
        apply(i, S, +1);
        dfs(i + 1, extra + sizes[S] - 1, used | S);
        apply(i, S, -1);
      }
    }
    dfs(0, 0, 0);
    var pat = sets.map(function () { return 0; });
    L.forEach(function (e, i) { pat[e] = bestChoice[i]; });
    var Wk = densest(inst.counts, pat, g);
    return {shares: flowShares(inst, pat, Wk[0], Wk[1]), exact: true, nodes: nodes, bound: best};
  }

  // ------------------------------------------------------------------ the registry of the page
  var POLICIES = {
    "static": {fn: static_, label: "static: every expert on its home replica"},
    "static_sglang": {fn: static_sglang, label: "static (SGLang): per-source-rank map"},
    "uniform": {fn: uniform, label: "uniform: even split over replicas (EPLB)"},
    "metro": {fn: metro, label: "METRO: fewest activated experts, greedy"},
    "llep": {fn: llep, label: "LLEP-R: least-loaded spill"},
    "round_robin": {fn: round_robin, label: "round robin A3 (Theorem 2)", fullOnly: true},
    "token_lp": {fn: token_lp, label: "token-LP: even token loads (LPLB)",
                 noteRestricted: "the token-LP optimum nearest the even split, as in the library; found here by exact " +
                                 "dual steps instead of the library's HiGHS QP solve (the same point)"},
    "tempo_paper": {fn: function (inst, model) { return tempoFast().solve(inst, model); }, needsModel: true,
                    library: {policy: "tempo", options: {options: "paper"}},
                    label: "TEMPO, paper preset: tempo.solve(..., \"tempo\", options=\"paper\"), Section 4.2 as written",
                    note: "the library's tempo_fast under its paper preset, run in the page step for step (seed, 1- and " +
                          "2-step chains, partial moves, the token-LP ensemble); step through it below.  The library's " +
                          "default preset adds restarts and an activation balancer: never worse than this row, never " +
                          "better than the exact optimum"},
    "optimum": {fn: function (inst, model) { return optimum(inst, model).shares; }, needsModel: true,
                library: {policy: "milp", options: {}},
                label: "exact optimum (Eq. 3): what tempo.solve(..., \"milp\") computes",
                note: "the optimum of the time model, found by exhaustive search (not a heuristic): no dispatch of " +
                      "this batch is faster under this model; TEMPO's row lands on it or above it"}
  };
  var ORDER = ["static", "static_sglang", "uniform", "metro", "llep", "round_robin", "token_lp", "tempo_paper", "optimum"];

  // Run one policy by name: {shares, G, N, times, makespan}, or null where it does not apply
  // (round_robin without full replication); tempo_paper adds `run`, tempo_fast.js's whole result
  // (its stages and recorded steps).
  function solve(inst, model, name) {
    var p = POLICIES[name];
    if (!p) throw new Error("unknown policy " + name);
    var out = p.fn(inst, model);
    if (!out) return null;
    var shares = Array.isArray(out) ? out : out.shares;
    var priced = price(inst, model, shares);
    priced.shares = shares;
    if (!Array.isArray(out)) priced.run = out;
    return priced;
  }

  var api = {EPS_TOKENS: EPS_TOKENS, TEMPO_FAST_TOLERANCE: TEMPO_FAST_TOLERANCE, POLICIES: POLICIES, ORDER: ORDER,
             solve: solve, price: price, isFull: isFull, optimumSearch: optimum, hall: densest,
             static: static_, static_sglang: static_sglang, uniform: uniform, metro: metro, llep: llep,
             round_robin: round_robin, token_lp: token_lp};
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.TempoPolicies = api;
})(this);
