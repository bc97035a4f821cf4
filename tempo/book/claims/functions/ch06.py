"""Claims of chapter 06 (the runtime): the GIL tax of an in-thread solver, measured by serve-bench."""
from __future__ import annotations

from .measured import measured_claim, same_window, serve_pick, serve_value


@measured_claim("serve_gil_tax", "serve-bench", "serve-bench: in-thread vs out-of-process solver output throughput, same window")
def serve_gil_tax(f):
    def compute(man, pairs, runs):
        names = list((pairs if runs is None else runs).workload.astype(str).unique())
        return -same_window(runs, "tempo_inthread", "tempo", names, "output_throughput"), ""
    got = serve_pick(compute, ep=8)
    return serve_value(got, "1 - in-thread / out-of-process output throughput") if got else None
