"""Words of prose in Python string literals: every str literal (an f-string counted as the
concatenation of its literal parts) longer than 40 characters, docstrings left out; a word is a
whitespace-separated token holding a letter.

Usage: python scripts/prose_words.py tempo/book/chapters/*.py
"""
import ast, re, sys

def docstrings(tree):
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
            b = n.body[0]
            if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                out.add(id(b.value))
    return out

total = 0
for f in sys.argv[1:]:
    tree = ast.parse(open(f).read())
    skip = docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    words = 0
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            text = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and id(n) not in inner:
            text = n.value
        else:
            continue
        if len(text) > 40:
            words += sum(bool(re.search(r"[A-Za-z]", w)) for w in text.split())
    total += words
    print(f"{words:6d} {f}")
print(f"{total:6d} total")
