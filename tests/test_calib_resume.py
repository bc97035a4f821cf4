"""Calibration resume after each kind of damage to ``samples.partial.csv``: an interruption in the first cell (header-only file), an empty file, a
line torn mid-write at several cut points, a NUL-byte tail, duplicate rows, garbage in the
middle, repeated headers; and ``--fresh``.  A fake backend counts which cells it measures:
a resumed run must measure exactly the missing cells and write a correct final recording."""
import logging

import pandas as pd
import pytest

from tempo.calib import command, record
from tempo.calib.record import calibrate, cell_line, read_partial
from tempo.measured.catalog import load_recording

DATE = "2026-01-01"
HEADER = record._HEADER + "\n"
LEGACY_HEADER = "G,n,kind,t_us\n"  # a partial file written before the per-line checksum
CELLS = [(G, n) for G in (1, 2, 3) for n in (1, 2, 4)]


def true_t(G, n):
    """The fake backend's answer: affine in G*n, distinct for every cell."""
    return 10.0 + 0.5 * G * n + 0.01 * G


def line(G, n, t=None):
    return cell_line(G, n, "grid", true_t(G, n) if t is None else t) + "\n"


class FakeBackend:
    """Counts the cells it measures; optionally checks the partial file before the first one
    or raises after ``fail_after`` cells (an interrupted run)."""

    def __init__(self, log, partial=None, expect_before=None, fail_after=None):
        self.log, self.partial, self.expect_before, self.fail_after = log, partial, expect_before, fail_after

    def info(self):
        return {"device": "fake device", "timing": "none"}

    def measure(self, G, n):
        if not self.log and self.expect_before is not None:
            # the partial file was rewritten cleanly before measuring resumed
            assert self.partial.read_text() == self.expect_before
        if self.fail_after is not None and len(self.log) == self.fail_after:
            raise KeyboardInterrupt
        self.log.append((G, n))
        return true_t(G, n)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Patch make_backend; returns (calls, run(**kw)) where run() calibrates the 9-cell grid."""
    import tempo.calib.backends as backends

    calls, opts = [], {}
    monkeypatch.setattr(backends, "make_backend", lambda name, sh, G, n, **kw: FakeBackend(calls, **opts))
    monkeypatch.setattr(backends, "available_backends", lambda: ["fake"])  # the CLI checks --backend against it
    grid = pd.DataFrame(CELLS, columns=["G", "n"])

    def run(resume=True, **kw):
        calls.clear()
        opts.clear()
        opts.update(kw)
        return calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE, resume=resume)

    return calls, run


def partial_path(tmp_path):
    folder = tmp_path / "fake-device" / f"{DATE}-fake-tiny"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "samples.partial.csv"


def check_final(folder, overrides=None):
    """The recording has every cell once, with the fake's value unless overridden (kept from the partial)."""
    s, fits, man = load_recording(folder)
    assert man["cells"] == len(CELLS) == len(s)
    assert sorted(zip(s.G, s.n)) == sorted(CELLS)
    assert s.G.dtype.kind == "i" and s.n.dtype.kind == "i" and s.t_us.dtype.kind == "f"
    assert list(s.columns) == ["G", "n", "N", "T", "kind", "t_us"]
    assert (s.N == s.G * s.n).all() and (s.kind == "grid").all()
    want = {c: true_t(*c) for c in CELLS} | (overrides or {})
    for G, n, t in zip(s.G, s.n, s.t_us):
        assert t == pytest.approx(want[(G, n)], abs=1e-4)
    assert not (folder / "samples.partial.csv").exists()
    assert fits["max_affine"]["error"] < 0.5


# three complete cells measured before the damage, in calibrate's cheapest-first order
GOOD = [(1, 1), (1, 2), (2, 1)]
GOOD_TEXT = "".join(line(*c) for c in GOOD)
TORN = line(1, 4)  # "1,4,grid,12.0100\n", the line being written when the run died

DAMAGE = {
    "header-only": (HEADER, []),
    "empty": ("", []),
    "torn inside t_us": (HEADER + GOOD_TEXT + TORN[:12], GOOD),
    "torn after t_us digits, no newline": (HEADER + GOOD_TEXT + TORN[:-1], GOOD),
    "torn after G,n,": (HEADER + GOOD_TEXT + "1,4,", GOOD),
    "torn inside kind": (HEADER + GOOD_TEXT + "1,4,gr", GOOD),
    "torn after G,": (HEADER + GOOD_TEXT + "1,", GOOD),
    "torn header": ("G,n,ki", []),
    "NUL tail": (HEADER + GOOD_TEXT + "\0" * 64, GOOD),
    "NUL line then newline": (HEADER + GOOD_TEXT + "\0" * 8 + "\n" + line(2, 2), GOOD + [(2, 2)]),
    "garbage in the middle": (HEADER + line(1, 1) + "garbage,,\n1,2,grid,not-a-number\n-1,2,grid,3.0\n"
                              + "1,2,grid,nan\n" + line(1, 2) + line(2, 1), GOOD),
    "repeated headers": (HEADER + HEADER + line(1, 1) + HEADER + line(1, 2), [(1, 1), (1, 2)]),
    "no header": (GOOD_TEXT, GOOD),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_resume_after_damage(fake, tmp_path, name):
    calls, run = fake
    text, kept = DAMAGE[name]
    p = partial_path(tmp_path)
    p.write_text(text)
    expect_before = HEADER + "".join(line(*c) for c in kept)
    folder = run(partial=p, expect_before=expect_before)
    assert sorted(calls) == sorted(set(CELLS) - set(kept)), "exactly the missing cells are measured"
    check_final(folder)


def test_duplicates_keep_the_first(fake, tmp_path, caplog):
    calls, run = fake
    p = partial_path(tmp_path)
    p.write_text(HEADER + line(1, 1, 111.0) + line(1, 2) + line(1, 1, 999.0) + line(1, 2, 888.0) + "3,4,gr")
    with caplog.at_level(logging.WARNING, logger=record.__name__):
        folder = run(partial=p, expect_before=HEADER + line(1, 1, 111.0) + line(1, 2))
    assert sorted(calls) == sorted(set(CELLS) - {(1, 1), (1, 2)})
    check_final(folder, overrides={(1, 1): 111.0})
    msg = caplog.text
    assert "kept 2 cells" in msg and "1 torn" in msg and "2 duplicate" in msg and "malformed" not in msg


def test_interrupted_run_resumes(fake, tmp_path):
    """A run killed after 4 cells leaves a clean partial file; the next run measures the other 5."""
    calls, run = fake
    with pytest.raises(KeyboardInterrupt):
        run(fail_after=4)
    p = partial_path(tmp_path)
    cells, lines, dropped = read_partial(p)
    assert len(cells) == 4 and dropped == {"torn": 0, "malformed": 0, "duplicate": 0}
    first = set(calls)
    assert p.read_text().count("G,n,kind") == 1
    folder = run()
    assert len(calls) == 5 and not first & set(calls)
    check_final(folder)


def test_interrupted_in_first_cell_then_resumed_twice(fake, tmp_path):
    """An interruption in the first cell; then resume, again after damage."""
    calls, run = fake
    with pytest.raises(KeyboardInterrupt):
        run(fail_after=0)
    p = partial_path(tmp_path)
    assert p.read_text() == HEADER
    with pytest.raises(KeyboardInterrupt):
        run(fail_after=2)
    assert p.read_text().count("\n") == 3
    with open(p, "a") as fh:
        fh.write("2,2,gri")  # torn third cell
    folder = run()
    assert len(calls) == len(CELLS) - 2
    check_final(folder)


def test_fresh_starts_over(fake, tmp_path):
    calls, run = fake
    p = partial_path(tmp_path)
    p.write_text(HEADER + line(1, 1, 111.0) + line(1, 2, 222.0))
    folder = run(resume=False, partial=p, expect_before=HEADER)
    assert sorted(calls) == sorted(CELLS)
    check_final(folder)  # the stale 111 / 222 are gone


def test_fresh_through_the_cli(fake, tmp_path, capsys):
    calls, _ = fake
    out = tmp_path / "cli"
    args = ["--backend", "fake", "--shape", "tiny", "--G", "1", "2", "3", "--n-max", "2", "--no-tile-sweep", "--out", str(out)]
    assert command.main(args) == 0 and len(calls) == 6
    folder = next(out.glob("fake-device/*-fake-tiny"))
    stale = LEGACY_HEADER + LEGACY_HEADER + "1,1,grid,5.0\n" + LEGACY_HEADER  # a doubly-headed partial from the old code
    for fresh, measured, t11 in (([], 5, 5.0), (["--fresh"], 6, true_t(1, 1))):
        (folder / "samples.partial.csv").write_text(stale)
        calls.clear()
        assert command.main(args + fresh) == 0
        assert "wrote" in capsys.readouterr().out
        assert len(calls) == measured
        s, _, _ = load_recording(folder)
        assert len(s) == 6 and s[(s.G == 1) & (s.n == 1)].t_us.iloc[0] == pytest.approx(t11)


def test_read_partial_dtypes_and_counts(tmp_path):
    p = tmp_path / "p.csv"
    cells, lines, dropped = read_partial(p)  # missing file
    assert len(cells) == 0 and lines == [] and not any(dropped.values())
    assert [str(t) for t in cells.dtypes[["G", "n", "t_us"]]] == ["int64", "int64", "float64"]
    p.write_bytes(LEGACY_HEADER.encode() + b"1,2,grid,3.5\n1,2,grid,4.5\r\n\xff,1,grid,1.0\n2,1,tile,7\n"
                  b"2,1,grid,1e400\n2,3,grid,-1\n2,3,gr\xc3\xa9d,1\n2,3,grid,1,9\n\n7,7,grid,1")
    cells, lines, dropped = read_partial(p)
    assert dropped == {"torn": 1, "malformed": 5, "duplicate": 1}
    import zlib

    assert lines == [f"{x},{zlib.crc32(x.encode()):08x}" for x in ("1,2,grid,3.5", "2,1,tile,7")]  # legacy lines gain a CRC
    assert cells.G.tolist() == [1, 2] and cells.n.tolist() == [2, 1] and cells.kind.tolist() == ["grid", "tile"]
    assert cells.t_us.tolist() == [3.5, 7.0] and str(cells.G.dtype) == "int64" and str(cells.t_us.dtype) == "float64"


def test_bad_measurement_and_bad_kind_rejected(fake, tmp_path, monkeypatch):
    calls, run = fake
    monkeypatch.setattr(FakeBackend, "measure", lambda self, G, n: float("nan"))
    with pytest.raises(RuntimeError, match="t_us=nan"):
        run()
    grid = pd.DataFrame({"G": [1], "n": [1], "kind": ["a,b"]})
    with pytest.raises(ValueError, match="kind"):
        calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE)


def test_max_seconds_stops_fits_and_resumes(monkeypatch, tmp_path):
    """A budget that runs out: the recording is written from the cells measured (manifest says
    incomplete), the partial is kept, and the same command completes it later."""
    import tempo.calib.backends as backends

    calls = []
    monkeypatch.setattr(backends, "make_backend", lambda name, sh, G, n, **kw: FakeBackend(calls))
    clock = {"t": 0.0}
    monkeypatch.setattr(record.time, "time", lambda: clock.__setitem__("t", clock["t"] + 1.0) or clock["t"])
    grid = pd.DataFrame(CELLS, columns=["G", "n"])
    folder = calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE, max_seconds=7.5)
    samples, _, man = load_recording(folder)
    assert 6 <= len(calls) < len(CELLS) and len(samples) == len(calls)
    assert man["complete"] is False and man["cells_planned"] == len(CELLS)
    assert (folder / "samples.partial.csv").exists()
    first = list(calls)
    calls.clear()
    folder = calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE)
    samples, _, man = load_recording(folder)
    assert sorted(first + calls) == sorted(CELLS) and not set(first) & set(calls)
    assert man["complete"] is True and len(samples) == len(CELLS)
    assert not (folder / "samples.partial.csv").exists()
    with pytest.raises(ValueError, match="max_seconds"):
        calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE, max_seconds=-1)


def test_max_seconds_with_too_few_cells_keeps_the_partial(monkeypatch, tmp_path):
    import tempo.calib.backends as backends

    calls = []
    monkeypatch.setattr(backends, "make_backend", lambda name, sh, G, n, **kw: FakeBackend(calls))
    clock = {"t": 0.0}
    monkeypatch.setattr(record.time, "time", lambda: clock.__setitem__("t", clock["t"] + 10.0) or clock["t"])
    grid = pd.DataFrame(CELLS, columns=["G", "n"])
    with pytest.raises(RuntimeError, match="too few to fit"):
        calibrate("fake", "tiny", grid, out_root=tmp_path, progress=False, date=DATE, max_seconds=1)
    assert len(calls) == 1 and partial_path(tmp_path).exists()


def test_a_damaged_byte_that_leaves_a_well_formed_line_is_detected_and_re_measured(fake, tmp_path):
    """Random byte damage can leave "1,4,grid,1212.01" for "1,4,grid,12.02" -- well formed,
    wrong.  Every line carries the CRC-32 of its fields:
    each such damage is dropped and that cell measured again."""
    import random

    calls, run = fake
    rnd = random.Random(17)
    good = "".join(line(*c) for c in CELLS)
    damaged_cells, trials = 0, 0
    while trials < 60:
        text = HEADER + good
        i = rnd.randrange(len(HEADER), len(text))
        if text[i] == "\n":
            continue
        new = rnd.choice("0123456789.,-eabcdf")
        if new == text[i]:
            continue
        trials += 1
        damaged = text[:i] + new + text[i + 1:]
        cells, _, dropped = read_partial_text(tmp_path, damaged)
        kept = {(int(g), int(n)): t for g, n, t in zip(cells.G, cells.n, cells.t_us)}
        for (g, n), t in kept.items():  # nothing kept carries a wrong value
            assert t == pytest.approx(true_t(g, n), abs=1e-4), (damaged, g, n, t)
        damaged_cells += len(CELLS) - len(kept)
    assert damaged_cells >= 55  # (nearly) every damage cost exactly the damaged cell
    # end to end: the damaged cell is measured again and the recording holds the true value
    text = HEADER + good.replace(f"{true_t(1, 4):.4f}", f"{100 * true_t(1, 4):.4f}", 1)
    partial_path(tmp_path).write_text(text)
    folder = run()
    assert calls == [(1, 4)]
    check_final(folder)


def read_partial_text(tmp_path, text):
    p = tmp_path / "damaged.partial.csv"
    p.write_text(text)
    return read_partial(p)
