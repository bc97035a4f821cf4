"""Every chart on every page of the built (smoke) book draws something, draws it inside its
plotting area, fits the page's column at 1280 px, and each facet draws only its own data
(chart_check.js, run in headless Chromium on the rendered SVG)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdp import Browser
from test_book import BOOK, FLAGS, _chromium, pages

CHECK = (Path(__file__).with_name("chart_check.js")).read_text()
READY = ("Array.from(document.querySelectorAll('div.tempo-chart')).every(d => d.getAttribute('data-rendered') === '1')"
         " && document.readyState === 'complete'")


@pytest.fixture(scope="module")
def browser():
    b = Browser(_chromium(), FLAGS)
    yield b
    b.close()


def _problems(b, url: str) -> list[str]:
    b.open(url, 1280)
    b.wait_for(READY, timeout=60)
    return b.eval(CHECK)


@pytest.mark.parametrize("page", [p for p in pages() if "tempo-chart" in p.read_text()],
                         ids=lambda p: str(p.relative_to(BOOK)))
def test_charts_have_marks_inside_their_axes(browser, page):
    problems = _problems(browser, page.as_uri())
    assert not problems, f"{page.name}: " + "; ".join(problems)


def _page(tmp_path, specs) -> str:
    """A page of charts drawn by the book's own renderer (figures.spec_html) and bundle."""
    from tempo.book.figures import spec_html

    bundle = BOOK.parent.parent.parent / "_static" / "vega-bundle.js"
    if not bundle.exists():
        bundle = Path(__file__).resolve().parents[2] / "_static" / "vega-bundle.js"
    if not bundle.exists():
        pytest.skip("no _static/vega-bundle.js (make book builds it)")
    body = "".join(f'<div class="cell_output" style="overflow-x:auto">{spec_html(s, static=False)}</div>' for s in specs)
    f = tmp_path / "charts.html"
    f.write_text(f'<html><body style="width:676px"><script src="{bundle.as_uri()}"></script>{body}</body></html>')
    return f.as_uri()


def test_the_check_fails_broken_charts(browser, tmp_path):
    import altair as alt
    import pandas as pd

    df = pd.DataFrame({"g": [1, 1, 8, 8], "x": [1, 2, 1, 2], "y": [10.0, 11.0, 80.0, 90.0]})
    good = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q", color="g:N").properties(width=300)
    empty = alt.Chart(df).mark_bar().encode(y="g:N", x=alt.X("y:Q", scale=alt.Scale(type="log")))  # zero-width bars
    clipped = alt.Chart(df).mark_point().encode(x="x:Q", y=alt.Y("y:Q", scale=alt.Scale(domain=[0, 20]))).properties(width=300)
    wide = good.properties(width=900)
    own = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q")
    leaky = alt.layer(own).properties(width=200).facet(facet="g:N", data=df)   # layers carry their own data
    split = alt.layer(alt.Chart().mark_line().encode(x="x:Q", y="y:Q")).properties(width=200).facet(facet="g:N", data=df)
    specs = [c.to_dict() for c in (good, empty, clipped, wide, leaky, split)]
    browser.open(_page(tmp_path, specs), 1280)
    browser.wait_for(READY, timeout=60)
    problems = browser.eval(CHECK)
    by_chart = {i: [p for p in problems if p.startswith(f"chart {i} of 6")] for i in range(1, 7)}
    assert not by_chart[1], by_chart[1]
    assert any("no marks" in p for p in by_chart[2]), by_chart[2]
    assert any("outside the plotting area" in p for p in by_chart[3]), by_chart[3]
    assert any("wider than the page" in p for p in by_chart[4]), by_chart[4]
    assert any("another facet's data" in p for p in by_chart[5]), by_chart[5]
    assert not by_chart[6], by_chart[6]
