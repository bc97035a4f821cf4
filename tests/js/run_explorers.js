// Runs the book's in-page routines under node for tests/test_explorers.py.
//   node run_explorers.js policies CASES.json   -> per case, each policy's {makespan, shares, G, N} (null: n/a)
//   node run_explorers.js bstar CASES.json      -> per case, flipBoundary(zipfByRank(E, s), unrle(rle), n*, K, g)
//   node run_explorers.js times CASES.json      -> per case, columnTimes(data, column, model)
//   node run_explorers.js tempo_paper CASES.json -> per case, tempo_fast.js's {makespan, shares, chosen, stages, steps}
//   node run_explorers.js info                  -> {order, tolerance, notes, labels, library}
// Paths are relative to the repository root (the script's ../..).
"use strict";
const path = require("path");
const fs = require("fs");
const root = path.resolve(__dirname, "..", "..");
const P = require(path.join(root, "_static", "explorers", "policies.js"));
const Ph = require(path.join(root, "_static", "explorers", "phase.js"));
const TF = require(path.join(root, "_static", "explorers", "tempo_fast.js"));
const [mode, file] = process.argv.slice(2);
const cases = file ? JSON.parse(fs.readFileSync(file, "utf8")) : [];
let out;
if (mode === "info") {
  out = {order: P.ORDER, tolerance: P.TEMPO_FAST_TOLERANCE,
         notes: Object.fromEntries(P.ORDER.map(n => [n, P.POLICIES[n].note || null])),
         labels: Object.fromEntries(P.ORDER.map(n => [n, P.POLICIES[n].label])),
         library: Object.fromEntries(P.ORDER.map(n => [n, P.POLICIES[n].library || {policy: n, options: {}}]))};
} else if (mode === "policies") {
  out = cases.map(c => Object.fromEntries(P.ORDER.map(name => {
    const r = P.solve(c.inst, c.model, name);
    return [name, r && {makespan: r.makespan, shares: r.shares, G: r.G, N: r.N}];
  })));
} else if (mode === "tempo_paper") {
  out = cases.map(c => {
    const r = TF.solve(c.inst, c.model);
    return {makespan: r.makespan, shares: r.shares, chosen: r.chosen, stages: r.stages,
            steps: r.steps.map(s => ({stage: s.stage, kind: s.kind, makespan: s.makespan}))};
  });
} else if (mode === "bstar") {
  out = cases.map(c => Ph.flipBoundary(Ph.zipfByRank(c.E, c.skew), Ph.unrle(c.rle), c.n_star, c.K, c.ep));
} else if (mode === "times") {
  out = cases.map(c => Ph.columnTimes(c.data, c.column, c.model));
} else {
  throw new Error("mode must be info, policies, tempo_paper, bstar or times");
}
process.stdout.write(JSON.stringify(out));
