"""The layering rule (DESIGN.md, "Conventions"), held on tempo/'s import graph.

Folders are layers: core 0; policies, theory, world 1; studies, calib, serving 2; benchmarks,
book 3; cli.py, __main__.py and the face tempo/__init__.py 4.  A module imports (at the top of
the file or inside a function, relative or absolute) only modules of its own folder, with no
cycle, or of a folder of a strictly lower layer; only the command line imports the face.  The
checker is tests/layers.py (``python tests/layers.py`` prints the whole report).
"""
import sys
import textwrap
from pathlib import Path

import pytest

import tempo

sys.path.insert(0, str(Path(__file__).parent))
from layers import LAYERS, check, imports_of, modules_of  # noqa: E402

ROOT = Path(tempo.__file__).parent


@pytest.fixture(scope="module")
def report():
    rep = check(ROOT, "tempo")
    c = rep.counts()
    # modules per layer, edges, cycles (pytest -s shows them)
    print(f"\nlayers: modules per layer {c['modules_per_layer']} ({c['modules']} modules, {c['edges']} imports); "
          f"cycles {c['cycles']}; upward imports {c['upward_imports']}; face imports {c['face_imports']}")
    return rep


def test_no_cycle(report):
    assert not report.cycles, "import cycles (each import named file:line):\n" + str(report)


def test_imports_only_go_down(report):
    assert not report.upward, (f"imports to a folder of a higher or the same layer ({len(report.upward)}):\n"
                               + "\n".join(f"  {e}  [{report.layer_of(e.src)} -> {report.layer_of(e.dst)}]"
                                           for e in report.upward))


def test_only_the_command_line_imports_the_face(report):
    assert not report.face, f"imports of the package face tempo/__init__.py ({len(report.face)}):\n" + \
        "\n".join(f"  {e}" for e in report.face)


def test_every_import_names_a_module(report):
    assert not report.unresolved, "imports of names under tempo/ that are no module (a stale path?):\n" + \
        "\n".join(f"  {f}:{ln} imports {name}" for f, ln, name in report.unresolved)


def test_every_folder_is_a_layer(report):
    assert not report.unknown_folders, f"modules in a folder with no layer (add it to LAYERS): {report.unknown_folders}"
    assert {f for f in report.folders.values()} == set(LAYERS), "a layer of LAYERS has no folder"


def test_serving_holds_only_what_runs_inside_a_server():
    """tempo/serving/ has no benchmark driver (they live in tempo/benchmarks/, a higher layer)."""
    serving = {p.stem for p in (ROOT / "serving").glob("*.py")}
    assert not serving & {"epbench", "servebench", "live", "bench", "gpucheck"}
    from tempo.benchmarks import epbench, live, servebench  # noqa: F401  (the drivers' home imports)


# ------------------------------------------------------------------ the checker itself, on planted packages


def _package(tmp_path, files: dict) -> Path:
    """A fake package ``fake`` under ``tmp_path`` with the given ``{relative path: source}`` (every
    folder gets an ``__init__.py``)."""
    root = tmp_path / "fake"
    for rel, src in {"__init__.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for d in [p.parent, *p.parent.parents]:
            if d == root.parent:
                break
            (d / "__init__.py").touch()
        p.write_text(textwrap.dedent(src))
    return root


CLEAN = {"core/a.py": "X = 1\n",
         "core/b.py": "from .a import X\nimport fake.core.a\n",
         "policies/p.py": "from ..core import a\nfrom fake.core.b import X\n",
         "book/bk.py": "def f():\n    from ..policies import p\n    from ..studies.s import Y\n",
         "studies/s.py": "Y = 2\nfrom ..world import w\n",
         "world/w.py": "import fake.core.a as A\n",
         "cli.py": "from . import thing\nfrom .book import bk\n",
         "__main__.py": "from .cli import main\n"}


def test_the_checker_passes_a_clean_package(tmp_path):
    rep = check(_package(tmp_path, CLEAN), "fake")
    assert rep.cycles == [] and rep.upward == [] and rep.face == []
    assert rep.counts()["modules_per_layer"][0] == 3  # core/__init__, a, b


def test_the_checker_catches_a_planted_upward_import_and_names_both_files(tmp_path):
    files = {**CLEAN, "core/b.py": "from .a import X\n\n\ndef lazy():\n    from ..book.bk import f\n",
             "world/w.py": "from ..policies.p import X\n",      # same layer, another folder
             "policies/q.py": "import fake.studies.s\n"}        # absolute, upward
    rep = check(_package(tmp_path, files), "fake")
    got = {(e.src_file, e.line, e.dst_file) for e in rep.upward}
    assert got == {("fake/core/b.py", 5, "fake/book/bk.py"), ("fake/world/w.py", 1, "fake/policies/p.py"),
                   ("fake/policies/q.py", 1, "fake/studies/s.py")}
    assert "fake/core/b.py:5 imports fake.book.bk (fake/book/bk.py)" in str(rep)
    # an allowlisted pair is reported apart, and only that pair
    rep = check(_package(tmp_path, files), "fake", allow={("fake.core.b", "fake.book.bk")})
    assert len(rep.upward) == 2 and [(e.src, e.dst) for e in rep.allowed] == [("fake.core.b", "fake.book.bk")]


def test_the_checker_catches_a_planted_cycle_and_names_both_files(tmp_path):
    files = {**CLEAN, "policies/x.py": "from .y import Y\nX = 1\n",
             "policies/y.py": "Y = 2\n\n\ndef lazy():\n    from . import x\n    return x.X\n"}
    rep = check(_package(tmp_path, files), "fake")
    assert len(rep.cycles) == 1 and rep.upward == []
    edges = {(e.src_file, e.line, e.dst_file) for e in rep.cycles[0]}
    assert edges == {("fake/policies/x.py", 1, "fake/policies/y.py"), ("fake/policies/y.py", 5, "fake/policies/x.py")}
    text = str(rep)
    assert "fake/policies/x.py:1 imports fake.policies.y (fake/policies/y.py)" in text
    assert "fake/policies/y.py:5 imports fake.policies.x (fake/policies/x.py)" in text
    # a package __init__ that imports its modules, which import a name back from it, is a cycle too
    files = {**CLEAN, "policies/__init__.py": "def register(f):\n    return f\n\n\nfrom . import r\n",
             "policies/r.py": "from . import register\n"}
    root = _package(tmp_path / "registry", files)
    rep = check(root, "fake")
    assert [sorted({e.src for e in c}) for c in rep.cycles] == [["fake.policies", "fake.policies.r"]]
    rep = check(root, "fake", allow_cycles=[{"fake.policies", "fake.policies.r"}])
    assert rep.cycles == [] and len(rep.allowed_cycles) == 1


def test_the_checker_catches_a_face_import_below_the_top(tmp_path):
    files = {**CLEAN, "studies/s.py": "from .. import thing\n", "book/bk.py": "import fake\n"}
    rep = check(_package(tmp_path, files), "fake")
    assert {(e.src_file, e.line) for e in rep.face} == {("fake/studies/s.py", 1), ("fake/book/bk.py", 1)}
    assert "fake/studies/s.py:1 imports fake (fake/__init__.py)" in str(rep)


def test_imports_resolve_to_the_module_actually_imported(tmp_path):
    root = _package(tmp_path, {**CLEAN, "book/sub/deep.py": textwrap.dedent("""\
        import fake.core.a
        import fake.core
        from fake.core import a, b
        from fake.core import missing_name
        from ... import cli
        from ...core.a import X
        from .. import bk
        from . import nothing_here
        import numpy
        from os import path
        import importlib
        importlib.import_module("fake.world.w")
        """)})
    mods = modules_of(root, "fake")
    got = imports_of(root / "book/sub/deep.py", "fake.book.sub.deep", mods, "fake")
    assert got == [(1, "fake.core.a"), (2, "fake.core"), (3, "fake.core.a"), (3, "fake.core.b"), (4, "fake.core"),
                   (5, "fake.cli"), (6, "fake.core.a"), (7, "fake.book.bk"), (8, "fake.book.sub"),
                   (12, "fake.world.w")]
    bad = []
    (root / "core/stale.py").write_text("def f():\n    from ..book.moved import x\n    import fake.nowhere\n")
    imports_of(root / "core/stale.py", "fake.core.stale", mods, "fake", bad)
    assert bad == [(2, "fake.book.moved"), (3, "fake.nowhere")]
    assert check(root, "fake").unresolved == [("fake/core/stale.py", 2, "fake.book.moved"),
                                                ("fake/core/stale.py", 3, "fake.nowhere")]
    # a package __init__ resolves ``from . import`` against itself
    assert imports_of(root / "cli.py", "fake.cli", mods, "fake")[0] == (1, "fake")
    pkg_init = root / "book/__init__.py"
    pkg_init.write_text("from . import bk\nfrom .sub import deep\n")
    assert imports_of(pkg_init, "fake.book", mods, "fake") == [(1, "fake.book.bk"), (2, "fake.book.sub.deep")]
