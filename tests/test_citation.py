"""Release metadata: CITATION.cff and .zenodo.json parse, agree with each
other and with the package, and carry what a deposit needs; the README says how to cite."""
import json

import yaml

from tempo.core import paths


def load():
    cff = yaml.safe_load((paths.ROOT / "CITATION.cff").read_text())
    zen = json.loads((paths.ROOT / ".zenodo.json").read_text())
    return cff, zen


def test_citation_cff_is_complete_and_matches_the_package():
    import tempo

    cff, _ = load()
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    for key in ("title", "version", "license", "authors", "abstract", "message", "date-released", "preferred-citation"):
        assert cff.get(key), f"CITATION.cff lacks {key}"
    assert tempo.__version__.startswith(cff["version"])
    pref = cff["preferred-citation"]
    assert len(pref["authors"]) == 8 and "arXiv:2608.13057" in str(pref["identifiers"])


def test_zenodo_metadata_agrees_with_citation_cff():
    cff, zen = load()
    for key in ("title", "upload_type", "version", "description", "creators", "license", "access_right", "keywords"):
        assert zen.get(key), f".zenodo.json lacks {key}"
    assert (zen["title"], zen["version"], zen["license"]) == (cff["title"], cff["version"], cff["license"])
    assert zen["upload_type"] == "software" and zen["access_right"] == "open"
    assert [c["name"] for c in zen["creators"]] == [a["name"] for a in cff["authors"]]
    assert {"identifier": "arXiv:2608.13057", "relation": "isSupplementTo", "resource_type": "publication-preprint",
            "scheme": "arxiv"} in zen["related_identifiers"]


def test_readme_says_how_to_cite_and_where_a_deposit_goes():
    readme = " ".join((paths.ROOT / "README.md").read_text().split())
    assert "## How to cite, and licence" in readme
    assert "`.zenodo.json` holds the deposit's metadata" in readme and "CITATION.cff" in readme
    assert "No deposit has been made yet." in readme
