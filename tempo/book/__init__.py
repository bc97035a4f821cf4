"""The book's machinery, on top of the library: the paper's numbers (:mod:`.paper`), claims and
their functions (:mod:`.claims`, :mod:`.claim_functions`), charts (:mod:`.figures`), what each
chapter computes for its page (:mod:`.chapters`, one module per notebook), the reproduction map
(:mod:`.repro`), the notebook runner (:mod:`.runbook`), ingest of recordings (:mod:`.ingest`) and
the Sphinx extension (:mod:`.sphinx_ext`)."""
