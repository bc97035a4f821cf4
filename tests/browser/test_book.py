"""Open every page of the built (smoke) book in headless Chromium with the network disabled;
fail on console errors, uncaught exceptions, and charts that did not render.  Screenshots go
to build/screenshots/.  Run by `make test` after `make book PROFILE=smoke`."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = Path(os.environ.get("BOOK_HTML", ROOT / "build" / "smoke-book" / "_build" / "html")).resolve()
SHOTS = ROOT / "build" / "screenshots"

# Jupyter Book 1.x injects the thebe settings script twice on every page, even with thebe
# disabled (NOTES-toolchain.md); tempo.book.sphinx_ext drops the repeat, so no console message is
# tolerated, that one included.
ALLOWED: list[str] = []

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.fail("chromium is missing and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env, stdout=subprocess.DEVNULL)
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def chromium():
    return _chromium()


def pages():
    if not BOOK.exists():
        return []
    return sorted(p for p in BOOK.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)


def _run(chromium, args, timeout=120):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_page_prose_has_no_raw_latex(page):
    """Text a reader sees (outside code, math and charts) holds no ``$`` and no ``\\command``:
    a generated sentence writes its math in plain text, or the page typesets it."""
    from rendered_text import raw_latex

    found = raw_latex(page.read_text())
    assert not found, f"{page.name}: raw LaTeX in the prose: {found[:5]}"


def test_book_was_built():
    assert BOOK.joinpath("index.html").exists(), f"no built book at {BOOK}: run `make book PROFILE=smoke`"
    assert len(pages()) >= 3


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_page_renders_offline(chromium, page):
    url = page.as_uri()
    res = _run(chromium, ["--dump-dom", url])
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    console = re.findall(r'CONSOLE[^\]]*\] "(.*?)", source: (\S+)', res.stderr)
    bad = [f"{msg} ({src})" for msg, src in console
           if re.search(r"Uncaught|Error|error|Failed|ERR_", msg) and not any(a in msg for a in ALLOWED)]
    m = re.search(r'data-tempo-errors="([^"]*)"', dom)
    if m:
        import html

        bad += [e for e in json.loads(html.unescape(m.group(1))) if not any(a in e for a in ALLOWED)]
    assert not bad, f"{page.name}: console errors: {bad}"
    charts = re.findall(r'<div class="tempo-chart[ "][^>]*>', dom)
    unrendered = [c for c in charts if 'data-rendered="1"' not in c]
    assert not unrendered, f"{page.name}: {len(unrendered)} of {len(charts)} charts did not render"
    if "generated" in page.parts and page.stem[:2].isdigit() and page.stem != "99_claims_ledger":
        assert charts, f"{page.name}: a chapter page without any chart"
    if 'class="math notranslate' in page.read_text():
        assert "mjx-container" in dom, f"{page.name}: math did not typeset (is MathJax served from _static?)"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (str(page.relative_to(BOOK)).replace("/", "__").replace(".html", ".png"))
    res = _run(chromium, [f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars", url])
    assert shot.exists(), res.stderr[-2000:]


def test_raw_latex_check_finds_what_it_must():
    from rendered_text import raw_latex

    page = ('<p>all with $b/\\beta$ between</p><span class="math notranslate">\\(b\\)</span>'
            '<pre>echo $HOME</pre><div class="tempo-chart-static"><svg><text>$x</text></svg></div>'
            '<p>fine: <code>$x</code> b/β ≈ 55.7</p>')
    found = raw_latex(page, context=0)
    assert found == ["\\beta", "$", "$"] or sorted(found) == sorted(["$", "\\beta", "$"])
    assert raw_latex('<p>b/β ≈ 55.7 <code>$x \\beta</code></p>') == []
    # a shell variable in a quoted command is not math; a math span is
    assert raw_latex('<td>C="python -m tempo epbench"; $C --csv wc-b$B.csv && ingest "$C"</td>') == []
    assert raw_latex('<p>The split at $B = 512$ differs</p>', context=0) == ["$", "$"]
