"""The import graph of a package, read with ``ast``, held against the layering rule
(ARCHITECTURE.md, "The rule").

Every ``import`` and ``from ... import`` in every module counts: at the top of the file or inside
a function (lazy imports are imports), relative or absolute, plus ``importlib.import_module`` of a
literal name.  Each is resolved to the module actually imported: ``import tempo.x.y`` is
``tempo.x.y``; ``from tempo.x import y`` is ``tempo.x.y`` when ``y`` is a submodule, else the
package ``tempo.x`` (its ``__init__``); ``from . import y`` likewise, relative to the importing
module's package.

The rule: a module may import modules of its own folder (the first folder under the package,
with no cycle) or of a folder of a strictly lower layer; no module but the command line imports
the package face (``tempo/__init__.py``).  ``python tests/layers.py`` prints the report.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: folder under the package -> layer (the top-level files, cli.py, __main__.py and the face
#: __init__.py, form the folder "" at the top)
LAYERS = {"core": 0, "paper": 1, "policies": 1, "theory": 1, "world": 1, "measured": 1, "studies": 2,
          "calib": 2, "serving": 2, "benchmarks": 3, "book": 3, "": 4}
#: the modules allowed to import the face
FACE_USERS = ("cli", "__main__")


@dataclass(frozen=True)
class Edge:
    """``src`` (a module) imports ``dst`` at ``src_file:line``."""

    src: str
    dst: str
    src_file: str
    line: int
    dst_file: str

    def __str__(self):
        return f"{self.src_file}:{self.line} imports {self.dst} ({self.dst_file})"


@dataclass
class Report:
    """What :func:`check` found; ``ok`` when there is no cycle, upward import or face import."""

    package: str
    modules: dict = field(default_factory=dict)          # module name -> file (relative)
    folders: dict = field(default_factory=dict)          # module name -> its folder ("" at the top)
    edges: list = field(default_factory=list)            # every resolved Edge inside the package
    cycles: list = field(default_factory=list)           # [[Edge, ...] per strongly connected component]
    upward: list = field(default_factory=list)           # Edges breaking the layer rule
    face: list = field(default_factory=list)             # Edges to the face from below the top
    unknown_folders: list = field(default_factory=list)  # modules in a folder LAYERS does not name
    unresolved: list = field(default_factory=list)       # (file, line, name): no such module
    allowed: list = field(default_factory=list)          # upward Edges excused by an allowlist
    allowed_cycles: list = field(default_factory=list)   # cycles excused by an allowlist

    @property
    def ok(self) -> bool:
        return not (self.cycles or self.upward or self.face or self.unknown_folders or self.unresolved)

    def per_layer(self) -> dict:
        out: dict = {}
        for m in self.modules:
            layer = LAYERS.get(self.folders[m])
            out[layer] = out.get(layer, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0)))

    def counts(self) -> dict:
        return {"modules": len(self.modules), "modules_per_layer": self.per_layer(), "edges": len(self.edges),
                "cycles": len(self.cycles), "upward_imports": len(self.upward), "face_imports": len(self.face),
                "unresolved_imports": len(self.unresolved), "pending_upward_imports": len(self.allowed),
                "pending_cycles": len(self.allowed_cycles)}

    def layer_of(self, module: str) -> str:
        f = self.folders[module]
        return f"{f or 'top'} (layer {LAYERS.get(f)})"

    def __str__(self):
        lines = [f"{self.package}: {self.counts()}"]
        for i, cyc in enumerate(self.cycles, 1):
            mods = sorted({e.src for e in cyc})
            lines.append(f"cycle {i} ({len(mods)} modules: {', '.join(mods)}):")
            lines += [f"    {e}" for e in cyc]
        lines += [f"upward: {e}  [{self.layer_of(e.src)} -> {self.layer_of(e.dst)}]" for e in self.upward]
        lines += [f"face import: {e}" for e in self.face]
        lines += [f"module in a folder with no layer: {m}" for m in self.unknown_folders]
        lines += [f"{f}:{ln} imports {name}, which is no module of {self.package}" for f, ln, name in self.unresolved]
        lines += [f"pending (allowlisted) upward: {e}" for e in self.allowed]
        lines += [f"pending (allowlisted) cycle: {', '.join(sorted({e.src for e in c}))}" for c in self.allowed_cycles]
        return "\n".join(lines)


def folder(module: str, package: str, packages=()) -> str:
    """The first folder under ``package`` holding ``module`` ("" for the top-level files);
    ``packages``: the package names (a folder's ``__init__`` is in that folder)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and module in packages) else ""


def modules_of(root: Path, package: str) -> dict:
    """module name -> path for every ``.py`` file under ``root`` (the package's folder)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).with_suffix("")
        parts = [package, *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _resolve_from(node: ast.ImportFrom, importer: str, is_pkg: bool) -> str | None:
    """The absolute module named by ``from <level dots><module> import ...``."""
    if not node.level:
        return node.module
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    up = node.level - 1
    if up > len(base) - 1:
        return None  # beyond the top of the package: not ours to judge
    base = base[:len(base) - up] if up else base
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, module: str, modules: dict, package: str, unresolved: list | None = None):
    """(line, imported module) for every import in ``path`` that lands inside ``package``;
    ``unresolved`` (a list) gains (line, name) for each import of a name under ``package`` that
    is no module of it (a path an earlier move left behind)."""
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    out = []  # (line, module imported or None, the name as written, resolved)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == package:
                    out.append((node.lineno, a.name if a.name in modules else None, a.name))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(node, module, is_pkg)
            if base is None or base.split(".")[0] != package:
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                # ``from pkg import sub`` imports the submodule; ``from pkg import name`` the package
                out.append((node.lineno, sub if sub in modules else (base if base in modules else None), base))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.split(".")[0] == package):
            name = node.args[0].value
            out.append((node.lineno, name if name in modules else None, name))
    if unresolved is not None:  # a name under the package that is no module of it (a stale path)
        unresolved += sorted((ln, name) for ln, m, name in out if m is None)
    return sorted(((ln, m) for ln, m, _ in out if m is not None and m != module), key=lambda x: x[0])


def strongly_connected(nodes, succ) -> list:
    """Tarjan's algorithm (iterative): the strongly connected components with more than one node."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, ()))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return comps


def check(root, package: str = "tempo", allow=(), allow_cycles=()) -> Report:
    """Read every import under ``root`` (the folder of ``package``) and hold it against the rule.

    ``allow``: (importer, imported) module pairs excused from the upward rule (never from the
    face rule), reported under ``allowed``.  ``allow_cycles``: sets of modules; a cycle whose
    modules all lie in one of them is reported under ``allowed_cycles`` instead of ``cycles``.
    """
    root = Path(root)
    modules = modules_of(root, package)
    rel = {m: str(Path(package, p.relative_to(root))) for m, p in modules.items()}
    pkgs = {m for m, p in modules.items() if p.name == "__init__.py"}
    rep = Report(package, modules=rel, folders={m: folder(m, package, pkgs) for m in modules})
    for m, p in modules.items():
        seen, bad = set(), []
        for line, dst in imports_of(p, m, modules, package, bad):
            if (line, dst) not in seen:  # ``from x import a, b`` is one import of x
                seen.add((line, dst))
                rep.edges.append(Edge(m, dst, rel[m], line, rel[dst]))
        rep.unresolved += [(rel[m], ln, name) for ln, name in bad]
    rep.unknown_folders = sorted(m for m in modules if rep.folders[m] not in LAYERS)
    allow = set(allow)
    for e in rep.edges:
        if e.dst == package:
            if e.src not in {f"{package}.{u}" for u in FACE_USERS}:
                rep.face.append(e)
            continue
        fs, fd = rep.folders[e.src], rep.folders[e.dst]
        if fs == fd or fs not in LAYERS or fd not in LAYERS:
            continue
        if LAYERS[fd] >= LAYERS[fs]:
            (rep.allowed if (e.src, e.dst) in allow else rep.upward).append(e)
    succ: dict = {}
    for e in rep.edges:
        succ.setdefault(e.src, set()).add(e.dst)
    for comp in strongly_connected(sorted(modules), {k: sorted(v) for k, v in succ.items()}):
        members = set(comp)
        cyc = [e for e in rep.edges if e.src in members and e.dst in members]
        excused = any(members <= set(a) for a in allow_cycles)
        (rep.allowed_cycles if excused else rep.cycles).append(cyc)
    return rep


if __name__ == "__main__":  # python tests/layers.py [ROOT]
    here = Path(__file__).resolve().parent.parent / "tempo"
    r = check(Path(sys.argv[1]) if len(sys.argv) > 1 else here)
    print(r)
    sys.exit(0 if r.ok else 1)
