"""The book teaches from its own numbers: in the prose of chapters 01-03 and 08, the
reproduction map and the README, every number is either glued from the build (``{glue:text}``,
or a passage a chapter function writes from its results) or on the page's short allowlist of
constants below: the inputs of a worked example, the hand arithmetic of its solution, paper
section / table numbers, grid sizes fixed by the paper, and dated measurements that say where
and when they were taken.  A new number in these pages that states a result of this build fails
here until it is glued (or, if it truly is a constant, added below with the reason).

What is scanned: the Markdown prose, after removing front matter, fenced code and executed cells
(``{code-cell}``), directive headers, glue roles, term / ref roles, inline code, link targets and
references of the form "Table 8", "Section 4.2", "chapter 03", "Eq. 1"."""
import re
from collections import Counter

import pytest

from tempo.core import paths

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
DIRECTIVE = re.compile(r"^:::\{[^}]*\}.*$|^:class:.*$|^:tags:.*$|^\(.*\)=$", re.M)
FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)
GLUE = re.compile(r"\{glue:[a-z]+\}`[^`]*`")
ROLE = re.compile(r"\{(?:term|ref|doc|numref)\}`[^`]*`")
INLINE = re.compile(r"`[^`]*`")
LINK = re.compile(r"\]\([^)]*\)")
REF = re.compile(r"\b(?:Table|Tables|Fig\.|Figs\.|Figure|Eq\.|Eqs\.|Section|Sections|Appendix|chapter|chapters|Theorem|"
                 r"Lemma|Lemmas|Proposition|Exercise|Testbed|EP|top-|DSv|Qwen|Qwen3-|arXiv:?|Python|SGLang|sglang==|torch|"
                 r"H|A|step|steps)\s?[-\d][\d.,\- and]*", re.I)
NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")

#: per page, the numbers its prose may state without glue, grouped by why
ALLOWED = {
    "notebooks/01_balance_time.md": {
        "small counts, list items, exponents": "0 1 2 3 4 5 6 7 8",
        "DeepSeek-V3's router and expert sizes (definitions)": "256 7168 2048",
        "the toy batch of Fig. 1b: inputs (600, 30, b = 15, beta = 0.1) and hand arithmetic": "0.1 15 30 39 60 66 69 90 105 300 390 600 690",
        "exercise 4: its batch (37, 11, 35, 555, 123 tokens; b = 5, beta = 0.05) and the hand solution's "
        "arithmetic (N = 761, 380.5 tokens a GPU, the bound 19.025 us, the hot expert split 308.5 / 246.5)":
            "0.05 11 35 37 123 555 761 380.5 19.025 308.5 246.5",
        "the counterexample's inputs": "0.156 13.9 27 54 297",
        "Exercise 1: inputs and hand arithmetic": "510 1020 1.85 2000",
        "Exercise 3: inputs and hand arithmetic (bandwidths in TB/s, MB, us)": "4096 1536 4.8 3.35 18.9 3.93 110",
    },
    "notebooks/02_theory.md": {
        "small counts, list items": "0 1 2 3 4 5 6 7 8 10",
        "grid sizes of the probe suite and the synthetic batches (inputs)": "16 64 128 256 512 1.2",
        "the activated experts per GPU the paper observes (Section 5.13)": "13",
        "Exercise 1: Theorem 1's instance (inputs, T = 100 us) and hand arithmetic": "100 20 33.3",
        "Exercise 2: the toy batch and hand arithmetic": "0.1 15 30 39 60 69 90 120 600 690 780",
        "Exercise 3: input": "4000",
    },
    "notebooks/03_solver.md": {
        "small counts, list items": "0 1 2 3 4 8",
        "the toy batch and its stage-by-stage hand arithmetic": "0.1 15 30 45 60 66 75 300 600 660",
        "grid and scenario inputs (B, EP sizes, Zipf skew, slots, the 1% tolerance)": "1.0 1.5 16 64 128 256 512",
        "the ratio threshold the table uses": "0.999",
        "the activated experts per GPU the paper observes near B = 300 (Section 5.13)": "13",
        "the solver's iteration cap and the server's refresh period (ms), fixed settings": "200 300",
    },
    "notebooks/04_1_routing.md": {
        "small counts, list items": "1 8",
        "the workloads' inputs (Zipf skews, experts, tokens and pairs per GPU, the Dirichlet kappa, the recording's "
        "1,024-token steps, the redundant slots)": "1.0 1.2 16 64 128 256 512 1024 024 2000",
        "the mixed-batch thresholds (20%) and the calibration's inputs (G = 13 near B = 300, at B = 304; Section 5.13)":
            "20 13 300 304",
        "the drift's correlation time (300 windows), a setting of the timeline": "300",
        "Exercise 1: its inputs and hand arithmetic (n* of the paper's DSv3 fit)": "156",
    },
    "notebooks/04_2_phase_diagram.md": {
        "small counts, list items": "0 1 2 8",
        "a whole activation step, 100/k percent (the ledger causes' unit)": "100",
        "grid inputs (Zipf skews, the communication term's k_r in us per token, EP sizes up to 64, the s = 0 "
        "candidate's 64 measured batches)": "1.2 0.0037 64",
        "Exercise 1: its batch (600 and 15 x 20 tokens on 8 GPUs, 16 experts) and the hand arithmetic":
            "11 15 16 20 59 112.5 600 620 900",
        "Exercise 2: DSv3's shape (256 experts, 64 extra replicas, 320 slots) and the hand arithmetic":
            "4 5 32 256 320 626 782",
    },
    "notebooks/04_3_placement.md": {
        "small counts, list items": "0 1 2 3 4 8 10",
        "scenario inputs (drift and redundancy, scales in pairs per GPU, the 1.25x placement as R = 64 of 256, "
        "Zipf(1.0), the recorder's 16 hottest experts)": "1.0 16 64 128 256 512 1024",
        "the claims the paper computes on recorded routing (a count of claims.yaml, Section 5.4)": "28",
        "Exercise 1: the toy model (b = 15, beta = 0.1), its batches and the hand arithmetic":
            "0.1 15 30 34.5 45 60 64.5 345 600 645",
    },
    "notebooks/08_your_model.md": {
        "small counts, list items, chapter numbers": "0 1 2 3 4 5 8 05",
        "the grouped GEMM's 128-token tile (a kernel constant)": "128",
        "the batch's inputs (replication 1.25, 40 slots per GPU, 320 slots, 256 experts), HBM TB/s": "1.25 40 256 320 4.8",
        "the duplicate-slot exercise: its batch (100 and 10 tokens, beta = 0.1) and the hand arithmetic": "0.1 10 100",
        "Appendix B's calibration grid size": "149",
        "the restricted example: inputs and the hand prediction": "0.2 15 20 30 45 68 280 290 300 310 340 600 630 1020",
    },
    "notebooks/98_reproduction_map.md": {
        "small counts, list items, the paper's table / figure ranges": "1 2 3 6 11 13 24",
        "the calibration grid (149 cells: 117 on the grid, 32 at tiles; 30 replays; 128-token tiles), HBM TB/s": "30 32 117 128 149 4.8",
        "dated measurement of the full build (10 min 0 s on 2026-12-01)": "10 0 12 01 2026",
    },
    "README.md": {
        "a 2-core machine; about 2 minutes of compile and of make bench": "2",
        "measured times, each with how in CHANGELOG.md (the full book's notebooks about 11 minutes idle, "
        "make test 21 minutes under a load of 5-11)": "5 11 21",
    },
}




def prose_numbers(text: str) -> Counter:
    for pattern in (FRONT, FENCE, DIRECTIVE, GLUE, ROLE, INLINE):
        text = pattern.sub("", text)
    text = REF.sub("", LINK.sub("]", text))
    return Counter(NUM.findall(text))


@pytest.mark.parametrize("page", sorted(ALLOWED))
def test_every_number_in_the_prose_is_glued_or_an_allowed_constant(page):
    allowed = {n for group in ALLOWED[page].values() for n in group.split()}
    found = prose_numbers((paths.ROOT / page).read_text())
    stray = sorted(set(found) - allowed, key=float)
    assert not stray, (f"{page}: numbers in the prose that are neither glued nor allowed constants: {stray}; glue a "
                       "number of this build from its results, or add a true constant to ALLOWED with its reason")


def test_the_scanner_finds_what_it_should_and_skips_what_it_should():
    text = ("---\nx: 1\n---\nTable 8 and Section 4.2 say 17 us; chapter 03.\n```python\nx = 99\n```\n"
            "{glue:text}`svm_max:.4f` and `tempo.solve(x, 42)` and {term}`EP 64 <x>`.\n")
    assert set(prose_numbers(text)) == {"17"}


def test_gpu_walkthrough_expected_h200_numbers_match_the_reproduction_map():
    from tempo.book.chapters import ch98_reproduction_map as ch98

    g = ch98.expected_glue(4.8)
    readme = " ".join((paths.ROOT / "GPU.md").read_text().split())
    assert (f"DSv3 floor b about {g['h200_b_lo']:.1f}-{g['h200_b_hi']:.1f} us (roofline bound {g['h200_roof']:.1f} us "
            f"at 4.8 TB/s), inflection about {round(g['h200_ns_lo'], -1):.0f}-{round(g['h200_ns_hi'], -1):.0f}") in readme


def test_gpu_walkthrough_calibration_time_is_the_recordings():
    import json

    man = json.loads((paths.ROOT / "data/measured/nvidia-h200/2026-11-30-deep_gemm-dsv3/manifest.json").read_text())
    readme = " ".join((paths.ROOT / "GPU.md").read_text().split())
    assert f"a {man['cells']}-cell DSv3 grid took {man['duration_s']:.0f} s on one H200, measured {man['date']}" in readme
