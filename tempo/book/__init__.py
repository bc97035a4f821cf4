"""The book's machinery, on top of the library: glue for the prose (:mod:`.paper`; the paper's
own data is :mod:`tempo.paper`), the claims package (:mod:`.claims`: its registry, the claim functions per
chapter and the ledger), charts (:mod:`.figures`), what each chapter computes for its page
(:mod:`.chapters`, one module per notebook), the reproduction map (:mod:`.repro`), the notebook
runner (:mod:`.runbook`), ingest of recordings (:mod:`.ingest`, the writer; :mod:`.recordings`,
the reader) and the Sphinx extension (:mod:`.sphinx_ext`).

Inside the book, imports go one way: ``paper`` (glue) and ``recordings`` at the bottom, then
``claims.registry``, ``claims.functions``, ``claims.ledger``, ``ingest``, and the chapters on
top."""
