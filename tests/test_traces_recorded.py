"""The readers of public routing recordings (ESFT expert scores, SGLang stat-mode statistics),
the traces made from them, and what a trace says about its steps.  The fixture under
tests/data/routing is a cut of the real files (its SOURCE.md)."""
import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from tempo import cli
from tempo.core import paths
from tempo.studies.scenarios import TraceRouting
from tempo.world import recorded
from tempo.world.traces import (STEP_KINDS, TraceWarning, file_sha256, read_trace, rescale_effect, write_npz,
                                write_trace)

FIXTURE = Path(__file__).parent / "data" / "routing"
ESFT = FIXTURE / recorded.ESFT_DIR
STATS = FIXTURE / recorded.SGLANG_DIR


def _source_counts(folder: Path, tasks, layers, E=64):
    """Pairs per (layer, expert) read the way the ESFT repository's own reader reads a line
    (scripts/expert/generate_expert_config.py: split at the double tab, then at tabs)."""
    out = np.zeros((len(layers), E), np.int64)
    for task in tasks:
        for i, layer in enumerate(layers):
            with gzip.open(folder / task / f"expert_weights_{layer}.txt.gz", "rt") as f:
                for line in f:
                    ids, weights = line.split("\t\t")
                    ids = [int(x) for x in ids.split("\t")]
                    assert len(ids) == len([float(x) for x in weights.split("\t")])
                    np.add.at(out[i], ids, 1)
    return out


# ------------------------------------------------------------------ ESFT
def test_esft_reader_reads_the_line_format_of_the_repository():
    lines, ids = recorded.read_esft_layer(ESFT / "intent" / "expert_weights_1.txt.gz")
    assert lines.tolist() == [64, 63, 63] and ids.shape == (190, 6)
    with gzip.open(ESFT / "intent" / "expert_weights_1.txt.gz", "rt") as f:
        first = f.readline().split("\t\t")[0].split("\t")
    assert ids[:64].ravel().tolist() == [int(x) for x in first]
    rec = recorded.read_esft(ESFT)
    assert rec.tasks == ("intent", "translation") and rec.layers == (1, 2, 3)
    assert rec.prompt_tokens.tolist() == [64, 63, 63, 130, 239] and rec.ids.shape == (559, 3, 6)
    assert np.array_equal(rec.counts(), _source_counts(ESFT, rec.tasks, rec.layers))


@pytest.mark.parametrize("pooling", recorded.POOLINGS)
@pytest.mark.parametrize("tokens", [64, 100, 1024])
def test_esft_trace_sums_back_exactly_and_says_what_a_step_is(pooling, tokens):
    rec = recorded.read_esft(ESFT)
    counts, meta = recorded.esft_trace(rec, tokens, pooling, root=FIXTURE)
    assert np.array_equal(counts.sum(axis=0), _source_counts(ESFT, rec.tasks, rec.layers))
    S = meta["history_steps"]
    assert counts.shape == (2 * S, 3, 64) and S == max(1, round(559 / (2 * tokens)))
    # every step: step_tokens tokens, top_k pairs each, in every layer
    assert np.all(counts.sum(axis=2) == 6 * np.asarray(meta["step_tokens"])[:, None]) and sum(meta["step_tokens"]) == 559
    assert meta["step_kind"] == "batch" and meta["tokens_per_step"] == tokens and meta["top_k"] == 6
    # the halves hold disjoint prompts: whole prompts per task, about half of each task's tokens
    h, r = meta["history_tokens_by_task"], meta["replay_tokens_by_task"]
    assert h["intent"] + r["intent"] == 190 and h["translation"] + r["translation"] == 369
    assert {h["translation"], r["translation"]} == {130, 239} and {h["intent"], r["intent"]} in ({64, 126}, {63, 127})
    assert sum(h.values()) == sum(meta["step_tokens"][:S])
    # sources: relative paths with their sha256, never absolute
    assert len(meta["files"]) == 6
    for f in meta["files"]:
        assert not f["path"].startswith("/") and f["sha256"] == file_sha256(FIXTURE / f["path"])


def test_esft_trace_is_deterministic_and_seeded(tmp_path):
    rec = recorded.read_esft(ESFT)
    a, ma = recorded.esft_trace(rec, 64, root=FIXTURE)
    b, mb = recorded.esft_trace(rec, 64, root=FIXTURE)
    assert np.array_equal(a, b) and ma == mb
    write_trace(tmp_path / "a.npz", a, **ma)
    write_trace(tmp_path / "b.npz", b, **mb)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    c, _ = recorded.esft_trace(rec, 64, seed=1, root=FIXTURE)
    assert not np.array_equal(a, c) and np.array_equal(a.sum(axis=0), c.sum(axis=0))
    # shuffled pooling spreads each step over several prompts; packed keeps a prompt's tokens together
    with pytest.raises(ValueError, match="pooling"):
        recorded.esft_trace(rec, 64, "random")
    with pytest.raises(ValueError, match="tokens_per_step"):
        recorded.esft_trace(rec, 0)


def _write_gz(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)
    return path


GOOD = "\t".join(map(str, range(6))) + "\t\t" + "\t".join(["0.1"] * 6) + "\n"


@pytest.mark.parametrize("line, message", [
    ("1\t2\t3\t4\t5\t6\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\n", "double tab"),
    ("1\t2\t3\t4\t5\t6\t\t0.1\t0.1\n", "6 expert ids and 2 gate weights"),
    ("1\t2\t3\t4\t5\t\t0.1\t0.1\t0.1\t0.1\t0.1\n", "multiple of top_k=6"),
    ("1\t2\t3\t4\t5\t64\t\t" + "\t".join(["0.1"] * 6) + "\n", "expert ids must lie in"),
    ("1\t2\t3\t4\t5\t5\t\t" + "\t".join(["0.1"] * 6) + "\n", "repeats an expert"),
    ("1\t2\tx\t4\t5\t6\t\t" + "\t".join(["0.1"] * 6) + "\n", "not a number"),
    ("1\t2\t3\t4\t5\t6\t\t" + "\t".join(["0.1"] * 5) + "\t-0.1\n", "non-negative"),
    ("1\t2\t3\t4\t5\t6\t\t" + "\t".join(["0.1"] * 5) + "\tnan\n", "finite"),
])
def test_a_malformed_esft_line_names_the_file_and_the_line(tmp_path, line, message):
    path = _write_gz(tmp_path / "t" / "expert_weights_1.txt.gz", GOOD + line)
    with pytest.raises(ValueError, match=message) as exc:
        recorded.read_esft_layer(path)
    assert f"{path}:2" in str(exc.value)


def test_malformed_esft_files_and_folders_are_named(tmp_path):
    empty = _write_gz(tmp_path / "e" / "expert_weights_1.txt.gz", "")
    with pytest.raises(ValueError, match=f"{empty} holds no lines"):
        recorded.read_esft_layer(empty)
    bad_gz = tmp_path / "g" / "expert_weights_1.txt.gz"
    bad_gz.parent.mkdir()
    bad_gz.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match=f"{bad_gz} could not be read"):
        recorded.read_esft_layer(bad_gz)
    # layer files of one task that disagree on the tokens of a line
    _write_gz(tmp_path / "r" / "a" / "expert_weights_1.txt.gz", GOOD + GOOD)
    two = GOOD.split("\t\t")[0] + "\t6\t7\t8\t9\t10\t11\t\t" + "\t".join(["0.1"] * 12) + "\n"
    other = _write_gz(tmp_path / "r" / "a" / "expert_weights_2.txt.gz", GOOD + two)
    with pytest.raises(ValueError, match=f"{other}: 2 lines, line 2 differs"):
        recorded.read_esft(tmp_path / "r")
    # tasks with different layers
    _write_gz(tmp_path / "s" / "a" / "expert_weights_1.txt.gz", GOOD)
    _write_gz(tmp_path / "s" / "b" / "expert_weights_2.txt.gz", GOOD)
    with pytest.raises(ValueError, match="has layers"):
        recorded.read_esft(tmp_path / "s")
    with pytest.raises(FileNotFoundError, match="not a folder of ESFT"):
        recorded.read_esft(tmp_path / "nothing")


# ------------------------------------------------------------------ SGLang stat-mode statistics
def test_sglang_statistics_become_aggregate_steps_that_sum_back():
    files = sorted(STATS.glob("decode_*.json.gz"))
    counts, meta = recorded.sglang_stat_trace(files, root=FIXTURE)
    src = np.stack([np.array(json.load(gzip.open(f))["logical_count"], dtype=np.int64) for f in files])
    assert meta["dropped_layers"] == [0, 1, 2] and meta["layers"] == [3, 4] and np.all(src[:, :3] == 0)
    assert np.array_equal(counts, src[:, 3:]) and counts.shape == (2, 2, 256)
    assert meta["step_kind"] == "aggregate" and meta["steps"] == ["decode_in1000out1000", "decode_in1800out100"]
    assert meta["step_tokens"] == [int(x) for x in src[:, 3:].sum(axis=2).max(axis=1) // 8]
    assert meta["step_tokens"][0] == 18_413_568 and meta["history_steps"] == 1
    assert all(not f["path"].startswith("/") for f in meta["files"])


@pytest.mark.parametrize("content, message", [
    (b"{not json", "is not a JSON statistics file"),
    (json.dumps({"count": [[1]]}).encode(), "expected a JSON object with 'logical_count'"),
    (json.dumps({"logical_count": [[1.5, 2.0]]}).encode(), "fractional"),
    (json.dumps({"logical_count": [[1, -2]]}).encode(), "negative"),
    (json.dumps({"logical_count": [1, 2]}).encode(), "must be 2-d"),
    (json.dumps({"logical_count": [[]]}).encode(), "no layers or experts"),
])
def test_a_malformed_statistics_file_is_named(tmp_path, content, message):
    path = tmp_path / "decode_x.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as exc:
        recorded.read_sglang_stat(path)
    assert str(path) in str(exc.value)


def test_import_trace_stores_relative_paths_and_what_a_step_is(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dumps").mkdir()
    lc = np.random.default_rng(0).integers(0, 50, size=(3, 2, 16))
    torch.save({"logical_count": torch.tensor(lc)}, tmp_path / "dumps" / "stat.pt")
    assert cli.main(["import-trace", str(tmp_path / "dumps" / "stat.pt"), "-o", "t.npz", "--top-k", "2"]) == 0
    _, meta = read_trace(tmp_path / "t.npz")
    assert meta["files"] == [{"path": "dumps/stat.pt", "sha256": file_sha256(tmp_path / "dumps" / "stat.pt")}]
    assert meta["step_kind"] == "batch" and meta["step_tokens"] == [int(x) for x in lc[:, 0].sum(axis=1) // 2]
    # an older SGLang's [L, E] sum over the whole run is one aggregate step
    torch.save({"logical_count": torch.tensor(lc[0])}, tmp_path / "dumps" / "sum.pt")
    assert cli.main(["import-trace", "dumps/sum.pt", "-o", "s.npz"]) == 0
    counts, meta = read_trace(tmp_path / "s.npz")
    assert counts.shape == (1, 2, 16) and meta["step_kind"] == "aggregate" and meta["files"][0]["path"] == "dumps/sum.pt"


# ------------------------------------------------------------------ make-traces
def test_make_traces_is_byte_identical_on_rerun_and_writes_a_manifest(tmp_path):
    only = ["esft-dsv2lite-t1024.npz", "dsv3-sglang-decode.npz"]
    runs = []
    for d in ("a", "b"):
        recorded.make_traces(FIXTURE, tmp_path / d, only=only, log=lambda m: None)
        runs.append({p.name: p.read_bytes() for p in sorted((tmp_path / d).iterdir())})
    assert runs[0] == runs[1]
    assert set(runs[0]) == set(only) | {"manifest.json", "profiles.npz"}
    man = json.loads(runs[0]["manifest.json"])
    for name in only + ["profiles.npz"]:
        assert man["files"][name]["sha256"] == file_sha256(tmp_path / "a" / name)
    e = man["files"]["esft-dsv2lite-t1024.npz"]
    assert e["licence"].startswith("MIT") and e["commit"] == recorded.ESFT_ORIGIN["commit"] and e["step_kind"] == "batch"
    assert man["command"].startswith("python -m tempo make-traces --source ")
    assert all(not f["path"].startswith("/") for f in e["source_files"])
    with pytest.raises(ValueError, match="unknown trace"):
        recorded.make_traces(FIXTURE, tmp_path / "c", only=["x.npz"])


def test_write_npz_bytes_depend_only_on_the_arrays(tmp_path):
    arrays = {"a": np.arange(5), "meta": np.array(json.dumps({"x": 1}))}
    write_npz(tmp_path / "1.npz", arrays)
    write_npz(tmp_path / "2.npz", arrays)
    assert (tmp_path / "1.npz").read_bytes() == (tmp_path / "2.npz").read_bytes()
    with np.load(tmp_path / "1.npz") as z:
        assert z["a"].tolist() == list(range(5)) and json.loads(str(z["meta"])) == {"x": 1}


# ------------------------------------------------------------------ the shipped traces
SHIPPED = paths.DATA / "traces"


def test_the_shipped_traces_match_their_manifest_and_say_what_their_steps_are():
    man = json.loads((SHIPPED / recorded.MANIFEST).read_text())
    assert set(man["files"]) == set(recorded.SHIPPED) | {"profiles.npz"}
    for name, e in man["files"].items():
        path = SHIPPED / name
        assert path.stat().st_size <= recorded.MAX_BYTES and e["sha256"] == file_sha256(path), name
        if name == "profiles.npz":
            continue
        counts, meta = read_trace(path)
        assert list(counts.shape) == e["shape"] and meta["step_kind"] in STEP_KINDS
        assert meta["history_steps"] == round(0.5 * counts.shape[0])  # what TraceRouting's history=0.5 takes
        assert all(not f["path"].startswith("/") and len(f["sha256"]) == 64 for f in meta["files"])
    # ESFT: 33,279 tokens per layer, top-6, every token in one step
    c, meta = read_trace(SHIPPED / "esft-dsv2lite-t1024.npz")
    assert c.shape == (32, 26, 64) and np.all(c.sum(axis=(0, 2)) == 33_279 * 6) and sum(meta["step_tokens"]) == 33_279
    assert len(meta["files"]) == 104 and meta["step_kind"] == "batch"
    c4, _ = read_trace(SHIPPED / "esft-dsv2lite-t4096.npz")
    assert c4.shape == (8, 26, 64) and np.array_equal(c4.sum(axis=0), c.sum(axis=0))
    d, meta = read_trace(SHIPPED / "dsv3-sglang-decode.npz")
    assert d.shape == (4, 58, 256) and meta["step_kind"] == "aggregate" and meta["dropped_layers"] == [0, 1, 2]


# ------------------------------------------------------------------ a trace used in a study
def _small_steps_trace(path, steps=6, layers=2, E=64, tokens=10, seed=0):
    """A trace of single-request-like steps: ``tokens`` tokens each, top-6, so most steps leave
    experts empty."""
    from tempo.world.workloads import route_counts, zipf_popularity

    rng = np.random.default_rng(seed)
    p = zipf_popularity(E, 0.2, seed=seed)
    counts = np.stack([[route_counts(p, tokens, 6, rng) for _ in range(layers)] for _ in range(steps)])
    write_trace(path, counts, source="test recording", top_k=6, step_kind="request", step_tokens=[tokens] * steps)
    return counts


def test_a_timeline_longer_than_the_trace_is_an_error_and_reused_batches_warn(tmp_path):
    _small_steps_trace(tmp_path / "t.npz")
    tr = TraceRouting(tmp_path / "t.npz")
    assert len(tr.windows(6, "time", 6)) == 6  # 3 replay steps x 2 layers
    with pytest.raises(ValueError, match="holds 6 usable .* the study's timeline needs 7"):
        tr.windows(7, "time", 6)
    with pytest.warns(TraceWarning, match="1 of the 7 batches reuse a window"):
        assert tr.windows(7, "layers", 6)[6] == tr.windows(6, "layers", 6)[0]


def test_rescaling_a_step_that_keeps_empty_experts_warns_with_the_skew_change(tmp_path):
    counts = _small_steps_trace(tmp_path / "t.npz", steps=60)
    tr = TraceRouting(tmp_path / "t.npz")
    wins = tr.windows(20, "layers", 6)
    with pytest.warns(TraceWarning, match=r"20 of 20 recorded steps \(about 10 tokens each\) were rescaled to 512 tokens"):
        routed = tr.route(wins, 64, 8, 6)
    eff = rescale_effect(np.stack([counts[s, lay] for lay, s in wins]), routed, 6,
                         counts.sum(axis=0)[[lay for lay, _ in wins]])
    assert eff["upscaled"] == 20 and eff["recorded_tokens"] == 10 and eff["empty_kept"] > 10
    # the step's own sampling noise becomes the router weights: far more skewed than the layer's 600 tokens
    assert eff["max_over_mean_rescaled"] > 1.3 * eff["max_over_mean_reference"]
    # an expert the step did not route to stays empty at any size
    for i, (lay, s) in enumerate(wins):
        assert np.all(routed[i][counts[s, lay] == 0] == 0)
    # scaling down (or a step without empty experts) is silent
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr.route(wins, 1, 8, 6)
        full = TraceRouting(SHIPPED / "esft-dsv2lite-t1024.npz")
        full.route(full.windows(26, "layers", 6), 512, 8, 6)


def test_make_traces_command_names_a_bad_source(tmp_path, capsys):
    assert cli.main(["make-traces"]) == 2
    assert "--source" in capsys.readouterr().err
    assert cli.main(["make-traces", "--source", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "argument --source" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["make-traces", "--source", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 1
    assert "not a folder of ESFT expert scores" in capsys.readouterr().err
    assert not (tmp_path / "o" / recorded.MANIFEST).exists()
