"""Benchmark drivers that run beside a server, not inside it (DESIGN: beside ``bench.py``):
:mod:`.epbench` (``python -m tempo epbench``, the wall-clock EP microbenchmark of Section 5.2)
and :mod:`.servebench` (``python -m tempo serve-bench``, the SGLang serving driver of
Sections 5.9-5.16).  What runs inside a server is :mod:`tempo.serving`."""
