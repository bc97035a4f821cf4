"""Run one book notebook: ``python -m tempo.book.runbook NN_slug PROFILE``.

Converts ``notebooks/NN_slug.md`` (MyST, jupytext) and executes it with papermill, passing
``profile`` (and ``trace_path``, ``python -m tempo.book.runbook NN_slug PROFILE TRACE``), into ``build/executed/<profile>/NN_slug.ipynb``.  Execution writes to a
``.partial.ipynb`` first and renames on success, so make never mistakes a failed run for a
built one; on failure the partial notebook is kept for inspection and the failing cell's
error is printed with the notebook's name.

On the terminal: a line naming the notebook and its chapter when it starts, papermill's bar of
cells, the kernel's stderr (the studies' progress bars: cells done and the time left), and the
time it took.  The kernel talks over local sockets (IPC), not TCP.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

from ..core import paths


def executed_path(name: str, profile: str):
    d = paths.BUILD / "executed" / profile
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{name}.ipynb"


def _hide_parameters(path) -> None:
    """Tag papermill's injected parameters cell ``remove-cell``: the page shows the chapter,
    not the build's settings (``profile = "full"``)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, str(path))


def chapter_title(src) -> str:
    """The notebook's title: its first level-1 heading (``# Title``), or "" when it has none."""
    for line in open(src, encoding="utf-8"):
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def _kernel_manager(folder: str):
    """A python3 kernel that talks over local sockets in ``folder`` (no TCP ports, nothing to encrypt)."""
    from jupyter_client.manager import KernelManager

    return KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(folder, "kernel"))


def run(name: str, profile: str, progress: bool = True, trace: str | None = None) -> int:
    """Execute notebook ``name`` under ``profile``.  ``trace`` (the build's ``TRACE``, a routing
    trace from ``python -m tempo import-trace``) is passed as the papermill parameter
    ``trace_path`` to a notebook whose parameters cell declares it; without it nothing is
    passed, so the notebook runs its synthetic default."""
    import jupytext
    import papermill as pm

    src = paths.NOTEBOOKS / f"{name}.md"
    if not src.exists():
        avail = sorted(p.stem for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.md"))
        print(f"no notebook {src}; available: {', '.join(avail)}", file=sys.stderr)
        return 2
    if profile not in ("smoke", "full", "gpu"):
        print(f"PROFILE must be smoke, full or gpu, got {profile!r}", file=sys.stderr)
        return 2
    out = executed_path(name, profile)
    partial = out.with_suffix(".partial.ipynb")
    nb = jupytext.read(src)
    params = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not params:
        print(f"{name}: the first code cell must be tagged 'parameters'", file=sys.stderr)
        return 2
    parameters = {"profile": profile}
    if trace:
        from ..world.traces import read_trace

        try:
            read_trace(trace)
        except (ValueError, FileNotFoundError) as exc:
            print(f"TRACE={trace}: {exc}", file=sys.stderr)
            return 2
        if "trace_path" in params[0].source:
            parameters["trace_path"] = trace
    books = sorted(p.stem for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.md"))
    place = f"{books.index(name) + 1}/{len(books)}" if name in books else "-"
    print(f"notebook {place} {name}: chapter {name[:2]}, \"{chapter_title(src)}\" (profile {profile})", flush=True)
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="tempo-kernel-") as folder:
            km = _kernel_manager(folder)
            try:
                pm.execute_notebook(nb, str(partial), parameters=parameters, cwd=str(paths.ROOT),
                                    progress_bar=progress, kernel_name="python3", log_output=False,
                                    stderr_file=sys.stderr if progress else None, km=km)
            finally:
                if km.has_kernel:  # a kernel manager passed in is ours to shut down
                    km.shutdown_kernel(now=True)
    except pm.PapermillExecutionError as err:
        print(f"\nnotebook {name} failed (profile {profile}) in cell {err.exec_count}: "
              f"{err.ename}: {err.evalue}\npartial output kept at {partial}", file=sys.stderr)
        return 1
    _hide_parameters(partial)
    os.replace(partial, out)
    print(f"{name}: executed in {_duration(time.monotonic() - t0)} -> {out.relative_to(paths.ROOT)}")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        print("usage: python -m tempo.book.runbook NN_slug PROFILE [TRACE]", file=sys.stderr)
        return 2
    return run(argv[0], argv[1], trace=argv[2] if len(argv) == 3 else None)


if __name__ == "__main__":
    sys.exit(main())
