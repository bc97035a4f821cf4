"""The GPU and cluster recordings under ``data/measured/``: :mod:`.store` writes them (one
rename per recording), :mod:`.catalog` lists, loads and checks them and picks the one a page
reads.  Reads and writes ``data/measured/`` only; imports nothing above ``tempo.core``."""
