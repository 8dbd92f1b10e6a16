"""Every example of the family's pages (and opendml's own examples for the
pages that have none), as bundled `opendml run` examples, through the device
flow on every CPU path, against the outputs the pages print."""
import numpy as np
import pytest

import opendml as dml
from opendml.cli import examples
from opendml.jsonform import array_from_json, from_json, to_json

FAMILY = ("ELEMENT_WISE_IDENTITY", "CAST", "PADDING", "PADDING1", "JOIN", "SPLIT", "TILE", "SPACE_TO_DEPTH",
          "DEPTH_TO_SPACE", "SPACE_TO_DEPTH1", "DEPTH_TO_SPACE1")
EXAMPLES = {k: v for k, v in examples().items() if v["Operator"] in FAMILY}


def test_every_family_operator_has_an_example():
    assert {ex["Operator"] for ex in EXAMPLES.values()} == set(FAMILY)
    # each page example: 4 per padding page, 4 JOIN outputs, 2 SPLIT, 1 TILE, 1 + 1 + 2 + 2 space/depth
    assert len(EXAMPLES) == 24


def _arrays(ex, desc):
    ins = ex["Inputs"] if "Inputs" in ex else [ex["Input"]]
    outs = ex["ExpectedOutputs"] if "ExpectedOutputs" in ex else [ex["ExpectedOutput"]]
    xs = [array_from_json(v, t.data_type, "$.Input") for v, t in zip(ins, desc.inputs)]
    ys = [array_from_json(v, t.data_type, "$.ExpectedOutput") for v, t in zip(outs, desc.outputs)]
    assert len(xs) == len(desc.inputs) and len(ys) == len(desc.outputs)
    return xs, ys


# Each example through the device flow on every backend: tests/test_examples.py (all bundled examples).


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_json_round_trip_and_lowest_level(name):
    desc = from_json(EXAMPLES[name])
    assert from_json(to_json(desc)) == desc
    level = desc.lowest_feature_level()
    assert level is not None and level >= desc.INTRODUCED


def test_symmetric_example_needs_3_0_and_wrap_6_4():
    sym = from_json(EXAMPLES["padding-symmetric"])
    with pytest.raises(dml.UnsupportedError, match=r"^PADDING: PaddingMode SYMMETRIC was introduced in feature level "
                                                   r"3_0; got feature level 2_1$"):
        sym.validate("2_1")
    assert sym.lowest_feature_level() == dml.FeatureLevel.FL_3_0
    wrap = from_json(EXAMPLES["padding1-wrap"])
    with pytest.raises(dml.UnsupportedError, match=r"^PADDING1: PaddingMode WRAP was introduced in feature level "
                                                   r"6_4; got feature level 6_3$"):
        wrap.validate("6_3")
    assert from_json(EXAMPLES["padding1-edge"]).lowest_feature_level() == dml.FeatureLevel.FL_5_0


def test_device_on_cuda_runs_the_move_program_like_the_cpu():
    from tests.conftest import cuda_available
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    desc = from_json(EXAMPLES["tile"])
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    got = dml.Device("cuda").run(desc, x)
    want = dml.Device("cpu").run(desc, x)
    assert got.tobytes() == want.tobytes()
