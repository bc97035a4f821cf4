"""Count tempo-internal imports at a module's head and inside function bodies.

Usage: python scripts/lazy_imports.py [FOLDER] [N]   (default tempo/, the 15 files with most)
"""
import ast
import collections
import pathlib
import sys


def count(root: pathlib.Path):
    """``(internal imports, inside functions, Counter {file: inside functions})``."""
    total = lazy = 0
    per = collections.Counter()

    def visit(node, path, in_function):
        nonlocal total, lazy
        for child in ast.iter_child_nodes(node):
            internal = (isinstance(child, ast.ImportFrom) and (child.level > 0 or (child.module or "").startswith("tempo"))
                        or isinstance(child, ast.Import) and any(a.name.startswith("tempo") for a in child.names))
            if internal:
                total += 1
                if in_function:
                    lazy += 1
                    per[str(path)] += 1
            visit(child, path, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text()), path, False)
    return total, lazy, per


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tempo")
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    total, lazy, per = count(root)
    print(f"internal imports {total}, inside functions {lazy} ({100 * lazy / total:.0f}%)")
    for f, n in per.most_common(top):
        print(n, f)
