"""The explorers in the built book, driven in headless Chromium (offline, through the DevTools
protocol: ``cdp.py``): chapter 01's instance explorer shows the library's makespans for its
presets and redraws when the reader changes a count, the replication or a replica, and its step
control replays TEMPO's paper preset to the makespan its row shows; chapter 04's
phase explorer shows this build's ``phase_grid`` results for three cells, and its chart and
numbers change with the skew and with the reader's own b and beta; no console error; nothing
wider than a 390 px phone screen.  Screenshots go to build/screenshots/explorers-*.png."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from cdp import Browser
from test_book import BOOK, FLAGS, ROOT, SHOTS, _chromium

from tempo.core.cost import CostModel
from tempo.core.instance import Instance
from tempo.policies import solve

CH01 = BOOK / "book" / "generated" / "01_balance_time.html"
CH04 = BOOK / "book" / "generated" / "04_2_phase_diagram.html"
INST = '.tempo-explorer[data-explorer="instance"]'
PHASE = '.tempo-explorer[data-explorer="phase"]'


@pytest.fixture(scope="module")
def browser():
    if not CH01.exists() or not CH04.exists():
        pytest.fail(f"no built chapters 01 and 04 under {BOOK}: run `make book PROFILE=smoke`")
    b = Browser(_chromium(), FLAGS)
    yield b
    b.close()


def _set(b, selector: str, value, event: str = "input") -> None:
    """Set an input's value (or a checkbox's state) as a reader would, firing its event."""
    prop = "checked" if isinstance(value, bool) else "value"
    b.eval(f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.{prop} = {json.dumps(value if isinstance(value, bool) else str(value))};"
           f" el.dispatchEvent(new Event({json.dumps(event)}, {{bubbles: true}})); }})()")


def _makespans(b) -> dict:
    return b.eval(f"""(() => {{ const out = {{}};
      document.querySelectorAll('{INST} [data-role=makespans] tr[data-policy]').forEach(tr => {{
        const td = tr.querySelector('td[data-value]'); out[tr.dataset.policy] = td ? +td.dataset.value : null; }});
      return out; }})()""")


def _html(b, selector: str) -> str:
    return b.eval(f"document.querySelector({json.dumps(selector)}).innerHTML")


def _library(counts, replicas, g, model) -> dict:
    width = max(len(r) for r in replicas)
    inst = Instance(counts, [r + [-1] * (width - len(r)) for r in replicas], g)
    out = {}
    rows = {"static": ("static", {}), "static_sglang": ("static_sglang", {}), "uniform": ("uniform", {}),
            "metro": ("metro", {}), "llep": ("llep", {}), "round_robin": ("round_robin", {}), "token_lp": ("token_lp", {}),
            "tempo_paper": ("tempo", {"options": "paper"}), "optimum": ("milp", {"mip_rel_gap": 1e-9})}
    for row, (p, kw) in rows.items():
        try:
            d = solve(inst, model, p, **kw)
        except ValueError:
            out[row] = None
            continue
        out[row] = model.makespan(inst, d)
    return out


def _agree(page: dict, lib: dict) -> None:
    for p, v in lib.items():
        if v is None:
            assert page[p] is None, p
        else:
            assert page[p] == pytest.approx(v, rel=1e-9, abs=1e-9), p


def _no_overflow(b, selector: str) -> list:
    """Elements of ``selector`` that stick out of the window (right edge past its width)."""
    return b.eval(f"""(() => {{ const W = document.documentElement.clientWidth, bad = [];
      document.querySelectorAll({json.dumps(selector + ' *')}).forEach(el => {{
        const r = el.getBoundingClientRect(); if (r.width && r.right > W + 1) bad.push(el.tagName + '.' + el.className + ' ' + Math.round(r.right)); }});
      return bad.slice(0, 10); }})()""")


def test_instance_explorer(browser):
    b = browser
    b.open(CH01.as_uri(), 1280)
    b.wait_for(f"document.querySelector('{INST}[data-rendered=\"1\"]') !== null")
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.eval(f"document.querySelector('{INST}').scrollIntoView()")
    b.screenshot(SHOTS / "explorers-01-toy-1280.png", INST)
    toy = _makespans(b)
    assert toy["token_lp"] == pytest.approx(105.0) and toy["metro"] == pytest.approx(69.0)
    assert toy["tempo_paper"] == pytest.approx(60.0) and toy["optimum"] == pytest.approx(60.0)
    _agree(toy, _library([600] + [30] * 6, [[0, 1]] * 7, 2, CostModel(a=0, b=15, c=0, beta=0.1)))
    label = b.eval(f"document.querySelector('{INST} tr[data-policy=optimum]').textContent")
    note = b.eval(f"document.querySelector('{INST} tr[data-policy=optimum] [data-role=note]').textContent")
    assert "exact optimum (Eq. 3)" in label and "exhaustive search" in note
    assert 'options="paper"' in b.eval(f"document.querySelector('{INST} tr[data-policy=tempo_paper]').textContent")
    # the reader types a count: the numbers, the dispatch drawing and the count chart change
    before = (_html(b, f"{INST} [data-role=dispatch]"), _html(b, f"{INST} [data-role=count-chart]"))
    _set(b, f"{INST} input[data-role=count][data-expert='0']", 1500)
    after = _makespans(b)
    assert after != toy and after["optimum"] > toy["optimum"]
    menu = b.eval(f"(() => {{ const s = document.querySelector('{INST} select[data-role=preset]'); return s.options[s.selectedIndex].text; }})()")
    assert menu == "your own batch (edited)"
    assert _html(b, f"{INST} [data-role=dispatch]") != before[0] and _html(b, f"{INST} [data-role=count-chart]") != before[1]
    _agree(after, _library([1500] + [30] * 6, [[0, 1]] * 7, 2, CostModel(a=0, b=15, c=0, beta=0.1)))
    # restricted replication: round robin no longer applies; a replica ticked off changes the dispatch
    _set(b, f"{INST} select[data-role=replication]", "restricted", "change")
    assert b.eval(f"document.querySelectorAll('{INST} input[data-role=replica]').length") == 14
    restricted = _makespans(b)
    assert restricted["round_robin"] is None
    assert "HiGHS" in b.eval(f"document.querySelector('{INST} tr[data-policy=token_lp] [data-role=note]').textContent")
    _set(b, f"{INST} input[data-role=replica][data-expert='0'][data-gpu='1']", False, "change")
    alone = _makespans(b)
    assert alone != restricted
    # the restricted preset (DSv3 fit) at 1280 px and at phone width
    _set(b, f"{INST} select[data-role=preset]", "restricted", "change")
    page = _makespans(b)
    _agree(page, _library([400, 150, 90, 60, 40, 30, 20, 10], [[0, 1, 2, 3], [1, 2], [0], [1], [2], [3], [3], [0]], 4,
                          CostModel.named("dsv3-offline")))
    assert page["optimum"] <= page["tempo_paper"]
    assert page["optimum"] < min(v for p, v in page.items() if p not in ("optimum", "tempo_paper") and v is not None)
    b.eval(f"document.querySelector('{INST}').scrollIntoView()")
    b.screenshot(SHOTS / "explorers-01-restricted-1280.png", INST)
    assert not b.errors, b.errors


def _step(b) -> dict:
    return b.eval(f"""(() => {{ const q = r => document.querySelector('{INST} [data-role=' + r + ']');
      return {{k: +q('steps').dataset.step, count: q('step-count').textContent, text: q('step-text').textContent,
               ms: +q('step-makespan').dataset.value, next: q('step-next').disabled, prev: q('step-prev').disabled,
               slow: [...document.querySelectorAll('{INST} [data-role=step-gpus] .te-gpu')].map(g => g.classList.contains('te-slow')),
               moved: document.querySelectorAll('{INST} [data-role=step-gpus] .te-moved').length}}; }})()""")


def test_instance_explorer_steps(browser):
    """The step control replays tempo_fast.js's paper preset on the toy batch: the seed, each
    move, the ensemble; the last step's makespan is the tempo_paper row's (and the library's)."""
    b = browser
    b.open(CH01.as_uri(), 1280)
    b.wait_for(f"document.querySelector('{INST}[data-rendered=\"1\"]') !== null")
    row = _makespans(b)["tempo_paper"]
    lib = _library([600] + [30] * 6, [[0, 1]] * 7, 2, CostModel(a=0, b=15, c=0, beta=0.1))["tempo_paper"]
    assert row == pytest.approx(lib, rel=1e-12)
    first = _step(b)
    assert first["k"] == 0 and first["prev"] and not first["next"] and first["text"].startswith("Stage 1, the seed")
    n = int(first["count"].split(" of ")[1])
    seen, texts = [first], {first["text"]}
    for k in range(1, n):
        b.eval(f"document.querySelector('{INST} [data-role=step-next]').click()")
        st = _step(b)
        assert st["k"] == k and st["count"] == f"step {k + 1} of {n}" and st["text"] and any(st["slow"])
        texts.add(st["text"])
        seen.append(st)
    last = seen[-1]
    assert last["next"] and last["ms"] == pytest.approx(row, rel=1e-12)
    assert last["text"].startswith("Stage 4, the ensemble") and len(texts) == n
    # the toy: 7 experts seeded (66 us), one 2-step chain that splits e0 (60 us), the ensemble keeps it
    assert [s["text"].split(",")[0] for s in seen].count("Stage 1") == 7 and seen[6]["ms"] == pytest.approx(66.0)
    assert any("2-step chain" in s["text"] and s["moved"] >= 3 for s in seen)
    # previous goes back to the same pictures
    b.eval(f"document.querySelector('{INST} [data-role=step-prev]').click()")
    assert _step(b) == seen[-2]
    b.eval(f"document.querySelector('{INST}').scrollIntoView()")
    b.screenshot(SHOTS / "explorers-01-steps-1280.png", f"{INST} [data-role=steps]")
    # a new batch restarts the replay at its seed
    _set(b, f"{INST} select[data-role=preset]", "restricted", "change")
    st = _step(b)
    assert st["k"] == 0 and st["text"].startswith("Stage 1, the seed")
    b.eval(f"document.querySelector('{INST} [data-role=step-last]').click()")
    assert _step(b)["ms"] == pytest.approx(_makespans(b)["tempo_paper"], rel=1e-12)
    assert not b.errors, b.errors


def test_phase_explorer(browser):
    b = browser
    b.open(CH04.as_uri(), 1280)
    b.wait_for(f"document.querySelector('{PHASE}[data-rendered=\"1\"]') !== null")
    data = json.loads(b.eval(f"document.querySelector('{PHASE} script.tempo-explorer-data').textContent"))
    size = b.eval(f"document.querySelector('{PHASE} [data-role=grid-size]').textContent")
    n_cells = len(data["columns"]) * len(data["tokens"])
    assert f"{len(data['tokens'])} batch sizes" in size and f"= {n_cells} cells" in size and data["profile"] in size
    from tempo.studies.phase_grid import phase_grid_means

    results = ROOT / "build" / "results" / data["profile"] / "phase_grid.csv"
    means = phase_grid_means(pd.read_csv(results)).set_index(["shape", "ep", "replication", "skew", "B"])
    assert len(means) == n_cells
    picks = [(0, 0, 0, 0, 0), (len(data["shapes"]) - 1, len(data["eps"]) - 1, len(data["replications"]) - 1,
                                len(data["skews"]) - 1, len(data["tokens"]) - 1),
             (len(data["shapes"]) // 2, 0, len(data["replications"]) - 1, len(data["skews"]) // 2, len(data["tokens"]) // 2)]
    charts = set()
    for sh, ep, rep, sk, bi in picks:
        for role, v, ev in (("shape", sh, "change"), ("ep", ep, "change"), ("replication", rep, "change"),
                            ("skew", sk, "input"), ("batch", bi, "input")):
            _set(b, f"{PHASE} [data-role={role}]", v, ev)
        vals = b.eval(f"""(() => {{ const out = {{}}; document.querySelectorAll('{PHASE} [data-role=cell-values] tr[data-policy]')
            .forEach(tr => {{ out[tr.dataset.policy] = +tr.querySelector('td[data-value]').dataset.value; }}); return out; }})()""")
        key = (data["shapes"][sh]["label"], data["eps"][ep], data["replications"][rep], data["skews"][sk], data["tokens"][bi])
        row = means.loc[key]
        for p in ("metro", "token_lp", "uniform", "tempo"):
            assert vals[p] == pytest.approx(row[f"ms_{p}"], rel=1e-9), (key, p)
        title = b.eval(f"document.querySelector('{PHASE} [data-role=cell-title]').textContent")
        best = min(row[f"ms_{p}"] for p in data["fixed"])   # a tie names every tied policy, as Fig. 6 does
        tied = [p for p in data["fixed"] if row[f"ms_{p}"] <= best + data["tie_rel"] * abs(best)]
        winner = tied[0] if len(tied) == 1 else " + ".join(tied) + ", tied"
        assert f"best fixed policy ({winner})" in title, (key, title)
        charts.add(_html(b, f"{PHASE} [data-role=times-chart]"))
    assert len(charts) == 3
    # the skew moves the chart and the numbers; the reader's own b and beta move B* and the values
    _set(b, f"{PHASE} [data-role=skew]", 0, "input")
    one = (_html(b, f"{PHASE} [data-role=times-chart]"), _html(b, f"{PHASE} [data-role=cell-values]"))
    _set(b, f"{PHASE} [data-role=skew]", len(data["skews"]) - 1, "input")
    two = (_html(b, f"{PHASE} [data-role=times-chart]"), _html(b, f"{PHASE} [data-role=cell-values]"))
    assert one[0] != two[0] and one[1] != two[1]
    m0 = _html(b, f"{PHASE} [data-role=winner-map]")
    _set(b, f"{PHASE} [data-role=own-b]", 40)
    _set(b, f"{PHASE} [data-role=own-beta]", 0.05)
    assert b.eval(f"document.querySelector('{PHASE} [data-role=own]').checked")
    assert _html(b, f"{PHASE} [data-role=winner-map]") != m0
    assert "upper bound" in b.eval(f"document.querySelector('{PHASE} [data-role=model-note]').textContent")
    _set(b, f"{PHASE} [data-role=own]", False, "change")
    # both presets, named: the library default's values are its rows of the grid
    presets = [p["key"] for p in data["presets"]]
    assert presets == ["tempo", "tempo_default"] and 'options="paper"' in data["presets"][0]["label"]
    _set(b, f"{PHASE} [data-role=tempo-preset]", "tempo_default", "change")
    title = b.eval(f"document.querySelector('{PHASE} [data-role=cell-title]').textContent")
    assert "TEMPO (default preset) gains" in title
    assert 'tempo.solve(inst, model, "tempo")' in b.eval(f"document.querySelector('{PHASE} [data-role=model-note]').textContent")
    vals = b.eval(f"""(() => {{ const out = {{}}; document.querySelectorAll('{PHASE} [data-role=cell-values] tr[data-policy]')
        .forEach(tr => {{ out[tr.dataset.policy] = +tr.querySelector('td[data-value]').dataset.value; }}); return out; }})()""")
    st = b.eval(f"document.querySelector('{PHASE}').explorer.state")
    row = means.loc[(st["shape"], st["ep"], st["rep"], data["skews"][st["si"]], data["tokens"][st["bi"]])]
    assert vals["tempo_default"] == pytest.approx(row.ms_tempo_default, rel=1e-9) and vals["tempo"] == pytest.approx(row.ms_tempo, rel=1e-9)
    # the recorded routing profiles, placed at their Zipf-equivalent skew on their shape's grid
    assert {p["name"] for p in data["profiles"]} == {"dsv3-sglang-decode", "dsv3-sglang-prefill", "esft-dsv2lite"}
    for i, p in enumerate(data["profiles"]):
        _set(b, f"{PHASE} [data-role=routing]", i, "change")
        st = b.eval(f"document.querySelector('{PHASE}').explorer.state")
        assert st["shape"] == p["shape"] and data["skews"][st["si"]] == p["column"]
        note = b.eval(f"document.querySelector('{PHASE} [data-role=routing-note]').textContent")
        assert p["name"] in note and f"s = {p['skew']:.2f}" in note and f"s = {p['column']:g}" in note
        assert b.eval(f"document.querySelector('{PHASE} [data-role=profile-line]') !== null")
    _set(b, f"{PHASE} [data-role=routing]", "", "change")
    assert b.eval(f"document.querySelector('{PHASE} [data-role=profile-line]') === null")
    b.eval(f"document.querySelector('{PHASE}').scrollIntoView()")
    b.screenshot(SHOTS / "explorers-04-phase-1280.png", PHASE)
    assert not b.errors, b.errors


@pytest.mark.parametrize("page,selector", [(CH01, INST), (CH04, PHASE)], ids=["01", "04"])
def test_explorers_fit_a_phone(browser, page, selector):
    b = browser
    b.open(page.as_uri(), 390, 844, mobile=True)
    b.wait_for(f"document.querySelector('{selector}[data-rendered=\"1\"]') !== null")
    assert not _no_overflow(b, selector), _no_overflow(b, selector)
    if selector == INST:
        _set(b, f"{INST} select[data-role=preset]", "restricted", "change")
        assert not _no_overflow(b, selector), _no_overflow(b, selector)
    b.eval(f"document.querySelector('{selector}').scrollIntoView()")
    b.screenshot(SHOTS / f"explorers-{page.stem[:2]}-390.png", selector)
    assert not b.errors, b.errors
