"""Every example of the specification pages, through the array API and through
the device flow, against the outputs printed on the pages."""
import json
import pathlib
import re

import numpy as np
import pytest

import opendml as dml
from opendml.cli import EXAMPLE_ORDER, examples
from opendml.jsonform import from_json

EXAMPLES = examples()
SPEC = pathlib.Path(__file__).resolve().parents[2] / "shared" / "spec"


@pytest.mark.parametrize("name", EXAMPLE_ORDER)
def test_example_through_device_flow(name, backend):
    ex = EXAMPLES[name]
    desc = from_json(ex)
    x = np.array(ex["Input"], dtype=np.float32)
    got = dml.Device(backend, feature_level="6_4").run(desc, x)
    assert np.array_equal(got, np.array(ex["ExpectedOutput"], dtype=np.float32))


def api_call(ex, x):
    op = ex["Operator"]
    if op == "SLICE":
        return dml.slice(x, ex["Offsets"], ex["Sizes"], ex["Strides"])
    if op == "SLICE1":
        return dml.slice1(x, ex["InputWindowOffsets"], ex["InputWindowSizes"], ex["InputWindowStrides"],
                          ex["OutputTensor"]["Sizes"])
    return dml.unfold(x, ex["WindowSizes"], ex["Strides"], ex["Dilations"], ex["StartPadding"], ex["EndPadding"])


@pytest.mark.parametrize("name", EXAMPLE_ORDER)
def test_example_through_array_api(name):
    ex = EXAMPLES[name]
    got = api_call(ex, np.array(ex["Input"], dtype=np.float32))
    assert got.dtype == np.float32
    assert np.array_equal(got, np.array(ex["ExpectedOutput"], dtype=np.float32))


def test_slice1_examples_copied_elements():
    # Example 2's worked lines: Output[0,0,1,0] = Input[{0,0,1,1}] = 6 (erratum 1: start row is 3).
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    out = dml.slice1(x, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])
    assert out[0, 0, 1, 0] == x[0, 0, 1, 1] == 6 and out[0, 0, 0, 0] == x[0, 0, 3, 1] == 14


def _page_blocks(text):
    """Bracketed arrays printed after "OutputTensor:" lines of a page."""
    blocks = []
    for m in re.finditer(r"OutputTensor: \(Sizes:\{([\d, ]+)\}, DataType:FLOAT32\)\s*\n(\[[\[\]\d.,\s]+\])", text):
        blocks.append(np.array(json.loads(re.sub(r"(\d)\.(?!\d)", r"\1", m[2]).replace(" ", "")), dtype=np.float32))
    return blocks


@pytest.mark.skipif(not SPEC.is_dir(), reason="the specification folder is not beside this checkout")
@pytest.mark.parametrize("page, names", [
    ("000_a2d9ae65c4208f79.txt", ["slice1-positive-strides", "slice1-negative-strides"]),
    ("001_40d47db3f06def9f.txt", ["unfold", "unfold-padded"]),
])
def test_bundled_expected_outputs_are_the_pages(page, names):
    blocks = _page_blocks((SPEC / page).read_text(encoding="utf-8"))
    assert len(blocks) == len(names)
    for block, name in zip(blocks, names):
        assert np.array_equal(block, np.array(EXAMPLES[name]["ExpectedOutput"], dtype=np.float32))
