"""The installed distribution's version (``tempo-book``); a source tree that was never installed
reports ``0.0.0+unknown``."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _dist_version

try:
    __version__ = _dist_version("tempo-book")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"


def git_commit(root=None) -> str | None:
    """The git commit the source tree at ``root`` (default: the folder holding the ``tempo``
    package) was built from, as 12 hex digits, with ``-dirty`` appended when tracked files differ
    from that commit (the source hash of ``code_version`` then tells the trees apart); None outside
    a git checkout or without git.  Provenance for a reviewer, who wants the commit, not a hash."""
    import subprocess
    from pathlib import Path

    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head.returncode != 0 or git("rev-parse", "--show-toplevel").stdout.strip() != str(root):
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def machine_name() -> str:
    """This machine as a result's provenance names it: ``"<CPU model>, <n> CPUs, Python x.y.z"``
    (a time measured here is a figure of this machine)."""
    import os
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
