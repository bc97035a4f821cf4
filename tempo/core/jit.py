"""numba's compiles, told: one line on stderr the first time this process compiles tempo code.

numba compiles a function on its first call and keeps the machine code on disk (``cache=True``),
so a compile happens once per install (or per edit of the solver), and ``python -m tempo warmup``
does it ahead of time.  When one happens anyway, :func:`announce_compiles` prints one line on
stderr saying so and about how long it takes, once per process.
"""
from __future__ import annotations

import sys
import time

__all__ = ["COMPILE_NOTICE", "announce_compiles", "compile_counter"]

#: the line printed on the first compile of a process (measured: 100 s of CPU for the default solve
#: and the paper preset together, single-threaded, so about 2 minutes idle and 10 at a load of 15)
COMPILE_NOTICE = ("tempo: numba is compiling the solver, once per install or solver edit: about 2 minutes on an idle "
                  "machine, longer under load (the machine code is cached; `python -m tempo warmup` does this ahead)")

_state = {"registered": False, "announced": False, "stream": None}


def _ours(data) -> bool:
    """Whether a ``numba:compile`` event is for a function of this package."""
    try:
        return data["dispatcher"].py_func.__module__.split(".")[0] == __name__.split(".")[0]
    except (KeyError, AttributeError, TypeError):
        return False


class _Counter:
    """Counts the ``numba:compile`` events of tempo functions (outermost and nested alike) and the
    seconds spent in the outermost ones."""

    def __init__(self):
        self.compiles = 0
        self.seconds = 0.0
        self._depth = 0
        self._t0 = 0.0

    def on_start(self, data) -> None:
        if not _ours(data):
            return
        self.compiles += 1
        if self._depth == 0:
            self._t0 = time.perf_counter()
        self._depth += 1

    def on_end(self, data) -> None:
        if not _ours(data) or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._t0


class _Notice:
    def on_start(self, data) -> None:
        if _state["announced"] or not _ours(data):
            return
        _state["announced"] = True
        stream = _state["stream"] or sys.stderr
        print(COMPILE_NOTICE, file=stream, flush=True)

    def on_end(self, data) -> None:
        pass


def _listener(kind):
    from numba.core import event

    class Listener(event.Listener):
        def __init__(self):
            self.impl = kind()

        def on_start(self, ev):
            self.impl.on_start(ev.data)

        def on_end(self, ev):
            self.impl.on_end(ev.data)

    return Listener()


def announce_compiles(stream=None) -> None:
    """Print :data:`COMPILE_NOTICE` on ``stream`` (default: ``sys.stderr`` at the time) at the first
    numba compile of a tempo function in this process; later compiles print nothing.  Idempotent.
    A load of cached machine code is not a compile and prints nothing."""
    _state["stream"] = stream
    if _state["registered"]:
        return
    from numba.core import event

    event.register("numba:compile", _listener(_Notice))
    _state["registered"] = True


class compile_counter:
    """``with compile_counter() as c: ...``: ``c.compiles`` numba compiles of tempo functions
    (nested ones included) and ``c.seconds`` spent in them while the block ran."""

    def __enter__(self):
        from numba.core import event

        self._listener = _listener(_Counter)
        event.register("numba:compile", self._listener)
        return self._listener.impl

    def __exit__(self, *exc):
        from numba.core import event

        event.unregister("numba:compile", self._listener)
        return False
