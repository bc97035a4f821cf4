"""Packaging hook: the wheel carries the data tempo reads at run time.

``data/params`` (cost parameters, paper Tables 6, 7), ``data/paper`` (the paper's tables and
``claims.yaml``) and ``data/traces`` (the shipped routing traces and profiles) live at the top of
the repository, where the book and the reviewers read them; ``build_py`` copies them into the
package as ``tempo/_data/{params,paper,traces}``, which
``tempo.core.paths`` finds with ``importlib.resources`` when there is no checkout.  Everything else
is declared in pyproject.toml.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE_DATA = {"params": ["*.csv", "*.md"], "paper": ["*.csv", "*.yaml"], "traces": ["*.npz", "*.json", "*.md"]}


class build_py_with_data(build_py):
    def run(self):
        super().run()
        for sub, patterns in PACKAGE_DATA.items():
            src = ROOT / "data" / sub
            files = sorted({f for pat in patterns for f in src.glob(pat) if f.is_file()})
            if not files:
                raise FileNotFoundError(f"no package data under {src}: build from a source checkout")
            dest = Path(self.build_lib) / "tempo" / "_data" / sub
            dest.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, dest / f.name)


setup(cmdclass={"build_py": build_py_with_data})
