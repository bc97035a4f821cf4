"""Calibration killed (SIGKILL) at random points, its final phase included, then loaded: every
recording under the root must agree with itself after every kill (the samples, the fit of
those samples and a manifest that counts them and gives their sha256), and the same command
must finish the run.  A toy backend (no torch: each run is a second or two) measures a
16-cell grid.  ``TEMPO_CALIB_KILLS=24`` runs the long version; the default is 6 kills."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from tempo.calib.record import PARTIAL, fit_all, read_partial
from tempo.measured import catalog, store

KILLS = int(os.environ.get("TEMPO_CALIB_KILLS", "6"))
DATE = "2026-12-01"
NAME = f"{DATE}-toy-tiny"
ARGS = ["--backend", "toy", "--shape", "tiny", "--G", "1", "2", "4", "8", "--n-max", "8", "--no-tile-sweep",
        "--date", DATE]
CELLS = [(G, n) for G in (1, 2, 4, 8) for n in (1, 2, 4, 8)]

# the child: `python -m tempo calibrate` with a toy backend (time affine in G*n, 20 ms a cell); it
# touches $MARKER when the final phase (fit, then write) begins
DRIVER = textwrap.dedent("""
    import os, sys, time
    from tempo.calib import backends, command, record

    class Toy:
        def __init__(self, *a, **kw): pass
        def info(self): return {"device": "toy device", "timing": "none"}
        def measure(self, G, n):
            time.sleep(0.02)
            return 10.0 + 0.5 * G * n + 0.01 * G

    def fit_all(*a, _fit=record.fit_all, **kw):
        open(os.environ["MARKER"], "w").close()
        return _fit(*a, **kw)

    backends.make_backend = lambda name, sh, G, n, **kw: Toy()
    backends.available_backends = lambda: ["toy"]
    record.fit_all = fit_all
    sys.exit(command.main(sys.argv[1:]))
""")


def consistent(folder: Path) -> str | None:
    """Why the recording in ``folder`` disagrees with itself, or None."""
    man = json.loads((folder / "manifest.json").read_text())
    for name, want in man["files"].items():
        if store.sha256((folder / name).read_bytes()) != want["sha256"]:
            return f"{name} is not the file the manifest names"
    s = pd.read_csv(folder / "samples.csv.gz")
    if man["cells"] != len(s):
        return f"manifest says {man['cells']} cells, samples hold {len(s)}"
    if json.loads((folder / "fit.json").read_text()) != json.loads(json.dumps(fit_all(s, name="toy-tiny"))):
        return "fit.json is not the fit of the samples"
    if man["complete"] != (set(CELLS) <= set(zip(s.G, s.n))):
        return f"manifest says complete={man['complete']} for {len(s)} of {len(CELLS)} cells"
    return None


def cells_in(path: Path) -> int:
    try:
        return len(read_partial(path)[0])
    except (OSError, ValueError):
        return 0


def test_kills_at_random_points_never_leave_an_inconsistent_recording(tmp_path):
    rng = random.Random(int(os.environ.get("TEMPO_CALIB_KILL_SEED", "41")))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    root = tmp_path / "root"
    folder = root / "toy-device" / NAME
    marker = tmp_path / "final-phase"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "MARKER": str(marker)}

    def start(*extra, out=root):
        marker.unlink(missing_ok=True)
        return subprocess.Popen([sys.executable, str(driver), *ARGS, "--out", str(out), *extra], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(proc, cond, timeout=120):
        t0 = time.monotonic()
        while proc.poll() is None and not cond():
            assert time.monotonic() - t0 < timeout, "the run made no progress"
            time.sleep(0.002)
        return proc.poll() is None

    def finish(proc, budget=False):
        out, err = proc.communicate(timeout=300)
        # a --max-seconds run that measured fewer than 6 cells keeps them for the next run
        assert proc.returncode == 0 or (budget and "too few to fit" in err), err[-2000:]
        return out + err

    # a reference run: how long the final phase (fit and write -> exit) takes here, now
    ref = start(out=tmp_path / "ref")
    wait_for(ref, marker.exists)
    t_final = time.monotonic()
    finish(ref)
    final_s = time.monotonic() - t_final

    kills = final_kills = rounds = 0
    states = set()
    while kills < KILLS:
        rounds += 1
        assert rounds < 20 * KILLS, "too few runs were still alive when the kill came"
        complete = (folder / "manifest.json").exists() and json.loads((folder / "manifest.json").read_text())["complete"]
        # a complete recording is measured again (a rerun alone does nothing); some runs stop early
        # on a budget and write an incomplete recording, which the next run resumes
        extra = (["--fresh"] if complete and cells_in(folder / PARTIAL) == 0 else []) + \
            (["--max-seconds", "0.2"] if rng.random() < 0.3 else [])
        proc = start(*extra)
        mode = "final" if kills % 2 == 0 else "cells"  # every other kill lands in the final phase
        if mode == "cells":
            k = rng.randrange(len(CELLS))
            alive = wait_for(proc, lambda: cells_in(folder / PARTIAL) > k)
        else:
            alive = wait_for(proc, marker.exists)
            if alive:
                time.sleep(rng.uniform(0, 1.2 * final_s))
                alive = proc.poll() is None
        if alive:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            kills += 1
            final_kills += mode == "final"
        else:
            finish(proc, budget="--max-seconds" in extra)
        if (folder / "manifest.json").exists():
            why = consistent(folder)
            assert why is None, f"after kill {kills} ({mode}): {why}"
            man = json.loads((folder / "manifest.json").read_text())
            states.add((man["complete"], man["cells"]))
        listed = catalog.recordings("calibration", root=root)
        assert not listed.attrs["skipped"], listed.attrs["skipped"]
    assert final_kills >= KILLS // 3, (kills, final_kills)
    # the same command finishes the run; a second run says so and writes nothing
    done = finish(start())
    assert consistent(folder) is None and json.loads((folder / "manifest.json").read_text())["complete"]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    again = finish(start())
    assert "already holds every cell" in again, again
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in folder.parent.iterdir()] == [NAME], "a temporary folder was left behind"
    print(f"{kills} kills ({final_kills} in the final phase, final phase {final_s:.2f} s), {rounds} runs; "
          f"recording states seen: {sorted(states)}; last run: {done.strip().splitlines()[0]}")
