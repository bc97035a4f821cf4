"""The paper's own data (``data/paper/``), read in one place: its tables, figures and numbers
quoted in the text (:mod:`.tables`), its quantitative claims (:mod:`.claims_file`,
``claims.yaml``) and the readings of its text (:mod:`.readings`, ``readings.yaml``).  These are
facts this artifact compares against, never results.  Imports only :mod:`tempo.core`."""
