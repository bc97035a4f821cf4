"""The installed distribution's version (``tempo-book``); a source tree that was never installed
reports ``0.0.0+unknown``."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _dist_version

try:
    __version__ = _dist_version("tempo-book")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"
