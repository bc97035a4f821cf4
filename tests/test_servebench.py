"""Serving benchmark driver: result parsing, the pre-declared window rule, the schedule,
resume, and the commands it would run (no server is launched here)."""
import json
from pathlib import Path

import pytest

from tempo.benchmarks import servebench as sb

DATA = Path(__file__).parent / "data" / "servebench"


def test_parse_result_and_errors(tmp_path):
    r = sb.parse_result(DATA / "tempo.jsonl")
    assert r["output_throughput"] == 5490.0 and r["p99_tpot_ms"] == 80.0
    with pytest.raises(ValueError, match="no result"):
        sb.parse_result(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        sb.parse_result(tmp_path / "empty.jsonl")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"output_throughput": 1}) + "\n")
    with pytest.raises(ValueError, match="lacks"):
        sb.parse_result(tmp_path / "bad.jsonl")


def test_classify():
    ok = {"server_healthy": True, "bench_rc": 0, "result": sb.parse_result(DATA / "static.jsonl"), "num_prompts": 512}
    assert sb.classify(ok) == "ok"
    assert sb.classify({**ok, "server_healthy": False}) == "server_failed"
    assert sb.classify({**ok, "server_died": True}) == "server_failed"
    assert sb.classify({**ok, "bench_rc": 1}) == "bench_failed"
    assert sb.classify({**ok, "result": None}) == "bench_failed"
    assert sb.classify({**ok, "result": sb.parse_result(DATA / "incomplete.jsonl")}) == "incomplete"


def test_schedule_pairs_and_alternates():
    s = sb.schedule(["static", "tempo", "tempo_noop"], 2)
    assert [(p, o) for w, p, o in s if w == 0] == [("static", 0), ("tempo", 1), ("static", 2), ("tempo_noop", 3)]
    assert [(p, o) for w, p, o in s if w == 1] == [("tempo", 0), ("static", 1), ("tempo_noop", 2), ("static", 3)]


def _fake_runner(failures):
    def run(spec, policy, wl, out_dir, port, tag):
        w = int(tag.split("-")[0][1:])
        rec = {"server_healthy": True, "bench_rc": 0, "num_prompts": wl.num_prompts,
               "server_cmd": " ".join(spec.args(sb.POLICIES[policy][0], port))}
        if (w, policy) in failures:
            rec["server_healthy"] = False
            return rec
        src = "static" if policy == "static" else "tempo"
        rec["result"] = sb.parse_result(DATA / f"{src}.jsonl")
        return rec
    return run


def test_drive_window_rule_and_resume(tmp_path):
    spec = sb.ServerSpec(dummy_weights=True)
    wl = [sb.Workload(num_prompts=512)]
    # window 1's static run fails to start: its pair is excluded, whatever tempo measured
    runs, pairs = sb.drive(spec, ["static", "tempo"], wl, 3, tmp_path, runner=_fake_runner({(1, "static")}),
                           progress=False)
    assert len(runs) == 6
    assert pairs.kept.tolist() == [True, False, True]
    assert pairs.excluded_because.iloc[1] == "tempo:ok, static:server_failed"
    kept = pairs[pairs.kept]
    assert kept.throughput_delta_pct.round(3).tolist() == [round(100 * (5490 / 5210 - 1), 3)] * 2
    assert (kept.p99_tpot_ms_delta_pct < 0).all()
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["windows"] == 3 and "window_rule" in man
    # resume: every run is on record, so nothing runs again
    runs2, _ = sb.drive(spec, ["static", "tempo"], wl, 3, tmp_path,
                        runner=lambda *a: pytest.fail("a recorded run was repeated"), progress=False)
    assert len(runs2) == 6
    with pytest.raises(ValueError, match="unknown policies"):
        sb.drive(spec, ["static", "magic"], wl, 1, tmp_path / "x", runner=_fake_runner(set()), progress=False)


def test_commands(capsys):
    spec = sb.ServerSpec(model="/models/q", tp=8, ep=8, dummy_weights=True, init_expert_location="/tmp/drift16.json")
    a = spec.args("tempo", 30001)
    assert a[1:3] == ["-m", "sglang.launch_server"]
    assert a[a.index("--ep-dispatch-algorithm") + 1] == "tempo" and "--load-format" in a
    assert a[a.index("--init-expert-location") + 1] == "/tmp/drift16.json"
    w = sb.Workload(dataset="sharegpt", dataset_path="/data/sg.json", request_rate="8", max_concurrency=None)
    b = w.args("http://127.0.0.1:30001", "/tmp/o.jsonl")
    assert b[1:3] == ["-m", "sglang.benchmark.serving"] and "--random-input-len" not in b
    assert b[b.index("--request-rate") + 1] == "8" and "--max-concurrency" not in b
    assert sb.main(["--dry-run", "--policies", "tempo_hier", "--dummy-weights", "--gpus-per-node", "4"]) == 0
    out = capsys.readouterr().out
    assert "TEMPO_TOPOLOGY=hier" in out and "TEMPO_GPUS_PER_NODE=4" in out and "sglang.launch_server" in out
    assert "--random-range-ratio 1.0" in out and (sb.TINY_MODEL / "config.json").exists()


def test_configurations_sglang_refuses(capsys, monkeypatch, tmp_path):
    """Issue 15 item 7: with --a2a none the baseline is dynamic (SGLang 0.5.23 rejects static and
    lp there), lp is not run on a model LPLB refuses (the tiny Qwen3-MoE), tempo_hier needs
    --gpus-per-node, the dataset must be a local file, and no successful run exits non-zero."""
    assert sb.baseline_for("none") == "dynamic" and sb.baseline_for("deepep") == "static"
    assert sb.model_architecture(str(sb.TINY_MODEL)) == "Qwen3MoeForCausalLM"
    no = sb.refused(["static", "lp", "tempo", "tempo_hier"], "none", "Qwen3MoeForCausalLM", None)
    assert set(no) == {"static", "lp", "tempo_hier"} and "dynamic" in no["static"]
    assert "lp" in sb.refused(["lp"], "deepep", "Qwen3MoeForCausalLM", None)
    assert sb.refused(["lp"], "deepep", "DeepseekV3ForCausalLM", None) == {}
    assert sb.main(["--dry-run", "--a2a", "none", "--tp", "1", "--ep", "1", "--policies", "static,lp,tempo"]) == 0
    cap = capsys.readouterr()
    assert "not running static" in cap.err and "not running lp" in cap.err
    algos = [line.split("--ep-dispatch-algorithm ")[1].split()[0] for line in cap.out.splitlines()
             if "--ep-dispatch-algorithm" in line]
    assert algos == ["dynamic", "tempo"]
    s = sb.schedule(["dynamic", "tempo"], 2, baseline="dynamic")
    assert [p for w, p, o in s] == ["dynamic", "tempo", "tempo", "dynamic"]
    with pytest.raises(SystemExit) as exc:
        sb.main(["--policies", "tempo"])  # no local dataset: the client would download ShareGPT
    assert exc.value.code == 2 and "--dataset-path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sb.main(["--dry-run", "--policies", "nope"])
    import pandas as pd

    failed = pd.DataFrame({"status": ["server_failed", "server_failed"]})
    monkeypatch.setattr(sb, "drive", lambda *a, **k: (failed, pd.DataFrame()))
    (tmp_path / "sg.json").write_text("[]")  # --dataset-path must exist (checked before any server starts)
    assert sb.main(["--policies", "tempo", "--dataset-path", str(tmp_path / "sg.json"), "--out", str(tmp_path)]) == 1
    from tempo.measured import store

    monkeypatch.setattr(store, "ROOT", tmp_path)  # the recordings root: only ingest writes there
    with pytest.raises(SystemExit) as exc:
        sb.main(["--dry-run", "--out", str(tmp_path / "m" / "serve-bench-x")])
    assert exc.value.code == 2 and "python -m tempo ingest" in capsys.readouterr().err


def test_drift_location_file(tmp_path):
    import numpy as np

    counts = np.arange(2 * 3 * 40).reshape(2, 3, 40)  # [steps, L, E]
    data = sb.drift_location(counts, 4, tmp_path / "d.json", seed=1)
    lc = np.array(json.loads((tmp_path / "d.json").read_text())["logical_count"])
    assert lc.shape == (3, 40) and np.array_equal(np.sort(lc, axis=1), np.sort(counts.sum(0), axis=1))
    assert not np.array_equal(lc, counts.sum(0))  # the hot experts' statistics moved
    assert data["logical_count"] == lc.tolist()
    with pytest.raises(ValueError):
        sb.drift_location(np.zeros(5), 1, tmp_path / "x.json")


def test_two_node_commands(capsys):
    """Section 5.15's EP16 over two nodes: SGLang 0.5.23's --nnodes / --node-rank /
    --dist-init-addr on every server command, node 0's server reachable from node 1, the exact
    command for node 1 printed, and the checks SGLang would make at start-up made first."""
    spec = sb.ServerSpec(model="/models/q", tp=16, ep=16, nnodes=2, dist_init_addr="10.0.0.1:5000")
    a = spec.args("tempo", 30001)
    assert a[a.index("--nnodes") + 1] == "2" and a[a.index("--node-rank") + 1] == "0"
    assert a[a.index("--dist-init-addr") + 1] == "10.0.0.1:5000" and a[a.index("--host") + 1] == "0.0.0.0"
    b = spec.for_node(1).args("tempo", 30001)
    assert b[b.index("--node-rank") + 1] == "1" and [x for x in a if x not in ("0", "1")] == \
        [x for x in b if x not in ("0", "1")]  # otherwise identical
    one = sb.ServerSpec(model="/models/q").args("tempo", 30001)
    assert "--nnodes" not in one and one[one.index("--host") + 1] == "127.0.0.1"
    with pytest.raises(ValueError, match="dist_init_addr"):
        sb.ServerSpec(tp=16, nnodes=2)
    with pytest.raises(ValueError, match="multiple of nnodes"):
        sb.ServerSpec(tp=9, nnodes=2, dist_init_addr="h:1")
    with pytest.raises(ValueError, match="node_rank"):
        sb.ServerSpec(tp=16, nnodes=2, node_rank=2, dist_init_addr="h:1")
    assert sb.node0_health_url("10.0.0.1:5000", 30001) == "http://10.0.0.1:30001/health"
    argv = ["--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000", "--node-rank=0", "--tp", "16", "--", "--x", "1"]
    cmd = sb.other_node_command(argv, 1)
    assert cmd[1:4] == ["-m", "tempo", "serve-bench"]
    assert cmd[4:] == ["--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000", "--tp", "16", "--node-rank", "1", "--",
                       "--x", "1"]
    base = ["--dry-run", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000", "--tp", "16", "--ep", "16",
            "--policies", "tempo_hier", "--gpus-per-node", "8", "--dummy-weights"]
    assert sb.main(base) == 0
    cap = capsys.readouterr()
    assert "on node 1 run" in cap.err and "--node-rank 1" in cap.err
    node1 = [l for l in cap.out.splitlines() if l.strip().startswith("node 1:")]
    assert len(node1) == 2 and all("--node-rank 1" in l and "--dist-init-addr 10.0.0.1:5000" in l for l in node1)
    assert "TEMPO_TOPOLOGY=hier TEMPO_GPUS_PER_NODE=8" in node1[1] or "TEMPO_GPUS_PER_NODE=8 TEMPO_TOPOLOGY=hier" in node1[1]
    assert sb.main(base + ["--node-rank", "1"]) == 0  # node 1: servers only, no benchmark client
    out = capsys.readouterr().out
    assert "sglang.benchmark.serving" not in out and out.count("--node-rank 1") == 2
    for bad, arg in ((["--nnodes", "2", "--tp", "16"], "--dist-init-addr"),
                     (["--nnodes", "2", "--dist-init-addr", "h:1", "--tp", "9"], "--tp"),
                     (["--node-rank", "1"], "--node-rank"),
                     (["--nnodes", "2", "--dist-init-addr", "nohostport", "--tp", "16"], "--dist-init-addr")):
        with pytest.raises(SystemExit):
            sb.main(["--dry-run"] + bad)
        assert arg in capsys.readouterr().err


def test_node1_follows_node0_run_by_run():
    """Node 1 launches its half of each run's server and stops it once node 0's server has been
    up and is down again (node 0 finished the run); a run whose node 0 never comes up ends at
    the start-up timeout; a server that exits by itself ends its run."""
    spec = sb.ServerSpec(model="/models/q", tp=16, ep=16, nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:5000",
                         env={"TEMPO_GPUS_PER_NODE": "8"})

    class Proc:
        def __init__(self, exits):
            self.exits, self.pid, self.rc = exits, -1, None

        def poll(self):
            if self.exits is not None:
                self.exits -= 1
                if self.exits <= 0:
                    self.rc = 0
            return self.rc

        def wait(self, timeout=None):
            self.rc = 0

    launched = []
    health_seq = iter([False, True, True, False,    # run 0: up, then down -> stop
                       True, False,                 # run 1
                       False, False, False, False])  # run 2: node 0 never healthy (timeout)

    def launch(cmd, env):
        launched.append((cmd, env))
        return Proc(exits=None if len(launched) != 4 else 1)

    import tempo.benchmarks.servebench as mod

    killed = []
    orig = mod.os.killpg
    mod.os.killpg = lambda pid, sig: killed.append(sig)
    try:
        ticks = iter(range(10**6))  # a fake clock: one tick per reading, so no timing dependence
        ended = sb.follow(spec, ["static", "tempo"], [sb.Workload()], 2, 30001, health=lambda: next(health_seq, False),
                          launch=launch, poll_s=0, startup_timeout=3.5, log=lambda *a: None,
                          clock=lambda: next(ticks))
    finally:
        mod.os.killpg = orig
    assert [e["policy"] for e in ended] == ["static", "tempo", "tempo", "static"]  # drive's plan, same order
    assert [e["ended"] for e in ended] == ["node 0 finished the run"] * 2 + ["node 0 never became healthy",
                                                                           "server exited"]
    assert all("--node-rank" in c and c[c.index("--node-rank") + 1] == "1" for c, _ in launched)
    import os

    assert launched[1][1]["TEMPO_GPUS_PER_NODE"] == "8"  # tempo env only on tempo servers
    assert launched[0][1].get("TEMPO_GPUS_PER_NODE") == os.environ.get("TEMPO_GPUS_PER_NODE")
    assert len(killed) == 3  # the three servers still running at their run's end
    assert len(sb.follow(spec, ["static", "tempo"], [sb.Workload()], 2, 30001, skip_runs=4, launch=launch,
                         health=lambda: False, log=lambda *a: None)) == 0


def test_dsv3_proxy_config_matches_the_dsv3_shape():
    """Sections 5.11-5.13's DSv3-shape proxy: DSv3's expert geometry (tempo.core.models 'dsv3':
    hidden 7168, expert FFN 2048, 256 experts, top-8) at reduced depth (1 dense + 4 MoE layers),
    block fp8, an architecture SGLang serves (and LPLB accepts)."""
    import json

    from tempo.core.models import model_shape

    cfg = json.loads((sb.DSV3_PROXY_MODEL / "config.json").read_text())
    m = model_shape("dsv3")
    assert (cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"], cfg["num_experts_per_tok"]) \
        == (m.d_model, m.d_ff, m.n_experts, m.top_k) == (7168, 2048, 256, 8)
    assert cfg["first_k_dense_replace"] == 1 and cfg["num_hidden_layers"] - cfg["first_k_dense_replace"] == 4
    assert cfg["moe_layer_freq"] == 1 and cfg["num_nextn_predict_layers"] == 0
    assert cfg["quantization_config"]["quant_method"] == "fp8"
    assert sb.model_architecture(str(sb.DSV3_PROXY_MODEL)) in sb.LPLB_ARCHS
    assert (sb.DSV3_PROXY_MODEL / "README.md").exists()


def test_expected_window_estimate():
    # static,tempo,tempo_noop: two pairs -> 4 runs per workload; 3 workloads -> 12 runs
    e = sb.expected_window_s(["static", "tempo", "tempo_noop"], 3, startup_s=240, bench_s=90, stop_s=30)
    assert e == {"runs": 12, "seconds": 12 * 360}
    assert sb.expected_window_s(["dynamic", "tempo"], 1, 60, 60, 0, baseline="dynamic")["runs"] == 2
    with pytest.raises(ValueError):
        sb.expected_window_s(["static", "tempo"], 0, 1, 1)


def test_window_estimates_count_runs_per_recipe():
    from tempo.benchmarks.servebench import expected_window_s, window_estimates

    df = window_estimates([("r", ["static", "tempo", "dynamic"], 2, 100, 50, 10)])
    e = expected_window_s(["static", "tempo", "dynamic"], 2, 100, 50, 10)
    assert df["runs per window"].iloc[0] == e["runs"] == 8           # (tempo, static) + (dynamic, static), 2 workloads
    assert df["minutes per window (estimate)"].iloc[0] == round(8 * 160 / 60)
    assert len(window_estimates()) >= 4
