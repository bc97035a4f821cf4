import numpy as np
import pytest

from tempo.world.traces import read_trace, write_trace
from tempo.world.workloads import sample_counts, zipf_popularity


def test_zipf_and_counts_are_seeded_and_conserve_pairs():
    p = zipf_popularity(64, 1.2, seed=3)
    assert p.sum() == pytest.approx(1.0) and p.max() == pytest.approx(1 / np.sum(np.arange(1, 65) ** -1.2))
    a = sample_counts(p, 32, 8, 4, n_batches=3, seed=5)
    b = sample_counts(p, 32, 8, 4, n_batches=3, seed=5)
    assert (a == b).all() and (a.sum(axis=1) == 32 * 8 * 4).all()
    assert np.allclose(zipf_popularity(10, 0.0), 0.1)
    with pytest.raises(ValueError):
        sample_counts(p, 0, 8, 4)
    with pytest.raises(ValueError):
        zipf_popularity(10, -1.0)


def test_trace_roundtrip(tmp_path):
    counts = np.arange(2 * 3 * 5).reshape(2, 3, 5)
    write_trace(tmp_path / "t.npz", counts, model="synthetic", top_k=4)
    with pytest.raises(ValueError, match="top_k must be an integer in"):
        write_trace(tmp_path / "k.npz", counts, top_k=8)  # a top-8 router over 5 experts
    c, meta = read_trace(tmp_path / "t.npz")
    assert (c == counts).all() and meta["model"] == "synthetic" and meta["version"] == 1
    with pytest.raises(ValueError):
        write_trace(tmp_path / "bad.npz", counts[0])
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not a tempo routing trace"):
        read_trace(tmp_path / "other.npz")
