"""``calibrate --shape``: a registered name, or a JSON / YAML description of the expert, validated."""
import json

import pytest

from tempo import cli
from tempo.calib import shapes


@pytest.fixture(autouse=True)
def _forget_registered(monkeypatch):
    monkeypatch.setattr(shapes, "SHAPES", dict(shapes.SHAPES))


def test_a_registered_name_passes_through():
    assert shapes.shape_arg("dsv3") == ("dsv3", None)


def test_a_json_or_yaml_description_is_registered(tmp_path):
    doc = {"name": "mine", "hidden_size": 4096, "moe_intermediate_size": 1536, "dtype": "bf16"}
    assert shapes.shape_arg(json.dumps(doc)) == ("mine", "bf16")
    assert (shapes.SHAPES["mine"].d_model, shapes.SHAPES["mine"].d_ff) == (4096, 1536)
    y = tmp_path / "mine.yaml"
    y.write_text("name: mine2\nhidden_size: 2048\nmoe_intermediate_size: 768\n")
    assert shapes.shape_arg(str(y)) == ("mine2", None)
    assert shapes.shape("mine2").weights() == 3 * 2048 * 768


@pytest.mark.parametrize("text, says", [
    ('{"name": "mine", "hidden_size": 4096}', "'moe_intermediate_size' is a required property"),
    ('{"name": "mine", "hidden_size": 0, "moe_intermediate_size": 8}', "['hidden_size']: 0 is less than the minimum"),
    ('{"name": "mine", "hidden_size": 8, "moe_intermediate_size": 8, "dtype": "int4"}', "['dtype']: 'int4' is not one of"),
    ('{"name": "Mine/..", "hidden_size": 8, "moe_intermediate_size": 8}', "['name']: 'Mine/..' does not match"),
    ('{"name": "m", "hidden_size": 8, "moe_intermediate_size": 8, "d_ff": 3}', "Additional properties"),
    ('{"name": "dsv3", "hidden_size": 8, "moe_intermediate_size": 8}', "'dsv3' is a built-in shape"),
    ('{"name": ', "is not JSON"),
    ("nope", "unknown shape 'nope': give a registered name"),
    ("missing.yaml", "no such file 'missing.yaml'"),
])
def test_a_bad_shape_is_a_usage_error_naming_the_argument(text, says, capsys):
    assert cli.main(["calibrate", "--shape", text, "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "argument --shape: " in err and says in err, err


def test_a_dtype_the_backend_does_not_measure_is_a_usage_error(capsys):
    pytest.importorskip("torch")
    doc = '{"name": "mine", "hidden_size": 64, "moe_intermediate_size": 32, "dtype": "bf16"}'
    assert cli.main(["calibrate", "--shape", doc, "--backend", "cpu"]) == 2
    assert "argument --shape: the shape's dtype is bf16, but backend 'cpu' measures float32" in capsys.readouterr().err
