"""Every bundled example (the specification pages', the FOLD page's as
directml-facts.md quotes them, and one SLICE_GRAD example of our own), through
the array API and through the device flow on every backend, against the
documented outputs."""
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


#: The examples of the first five operators (one input, one output, float32),
#: which ``api_call`` runs through their array functions; the family's go
#: through theirs in tests/test_family_examples.py.
FIVE = ("SLICE", "SLICE1", "UNFOLD", "FOLD", "SLICE_GRAD")
API_EXAMPLES = [n for n in EXAMPLE_ORDER if EXAMPLES[n]["Operator"] in FIVE]


def test_example_order_names_every_bundled_example_once():
    assert sorted(EXAMPLE_ORDER) == sorted(EXAMPLES) and len(set(EXAMPLE_ORDER)) == len(EXAMPLE_ORDER)
    assert len(API_EXAMPLES) == 10 and EXAMPLE_ORDER[:10] == tuple(API_EXAMPLES)


def _arrays(ex, desc):
    """Every input and expected output of an example, in slot order."""
    ins = ex["Inputs"] if "Inputs" in ex else [ex["Input"]]
    outs = ex["ExpectedOutputs"] if "ExpectedOutputs" in ex else [ex["ExpectedOutput"]]
    assert len(ins) == len(desc.inputs) and len(outs) == len(desc.outputs)
    return ([np.array(v, dtype=t.data_type.numpy_dtype) for v, t in zip(ins, desc.inputs)],
            [np.array(v, dtype=t.data_type.numpy_dtype) for v, t in zip(outs, desc.outputs)])


@pytest.mark.parametrize("name", EXAMPLE_ORDER)
def test_example_through_device_flow(name, backend):
    ex = EXAMPLES[name]
    desc = from_json(ex)
    xs, ys = _arrays(ex, desc)
    got = dml.Device(backend, feature_level="6_4").run_all(desc, *xs)
    assert len(got) == len(ys)
    for g, y in zip(got, ys):
        assert g.dtype == y.dtype and np.array_equal(g, y)


def api_call(ex, x):
    op = ex["Operator"]
    if op == "SLICE":
        return dml.slice(x, ex["Offsets"], ex["Sizes"], ex["Strides"])
    if op == "SLICE1":
        return dml.slice1(x, ex["InputWindowOffsets"], ex["InputWindowSizes"], ex["InputWindowStrides"],
                          ex["OutputTensor"]["Sizes"])
    if op == "SLICE_GRAD":
        return dml.slice_grad(x, ex["OutputGradientTensor"]["Sizes"], ex["InputWindowOffsets"],
                              ex["InputWindowSizes"], ex["InputWindowStrides"])
    window = (ex["WindowSizes"], ex["Strides"], ex["Dilations"], ex["StartPadding"], ex["EndPadding"])
    if op == "FOLD":
        return dml.fold(x, ex["OutputTensor"]["Sizes"][2:], *window)
    return dml.unfold(x, *window)


@pytest.mark.parametrize("name", API_EXAMPLES)
def test_example_through_array_api(name, backend):
    ex = EXAMPLES[name]
    x = np.array(ex["Input"], dtype=np.float32)
    if backend == "cuda":
        cupy = pytest.importorskip("cupy")
        got = api_call(ex, cupy.asarray(x))
        assert isinstance(got, cupy.ndarray)
        got = cupy.asnumpy(got)
    else:
        got = api_call(ex, x)
    assert got.dtype == np.float32
    assert np.array_equal(got, np.array(ex["ExpectedOutput"], dtype=np.float32))


def test_slice_grad_example_is_slice1_example_2_scattered_back():
    # slice_grad(slice1(x)) keeps exactly the elements SLICE1 reads; slice1 of it gives the gradient back
    ex, fwd = EXAMPLES["slice-grad"], EXAMPLES["slice1-negative-strides"]
    assert ex["Input"] == fwd["ExpectedOutput"]
    x = np.array(fwd["Input"], dtype=np.float32)
    mask = np.array(ex["ExpectedOutput"]) != 0
    assert np.array_equal(np.where(mask, x, 0), ex["ExpectedOutput"])
    back = dml.slice1(np.array(ex["ExpectedOutput"], dtype=np.float32), ex["InputWindowOffsets"],
                      ex["InputWindowSizes"], ex["InputWindowStrides"])
    assert np.array_equal(back, ex["Input"])


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


@pytest.mark.skipif(not (SPEC / "directml-facts.md").is_file(),
                    reason="the specification folder is not beside this checkout")
def test_bundled_fold_outputs_are_the_documented_ones():
    """The FOLD page's outputs, as directml-facts.md quotes them ("[[0,5,13,9],...]")."""
    text = (SPEC / "directml-facts.md").read_text(encoding="utf-8")
    section = text[text.index("## FOLD and SLICE_GRAD"):text.index("- **SLICE_GRAD**")]
    blocks = [np.array(json.loads(m), dtype=np.float32) for m in re.findall(r"\[\[[\d,\[\]]+\]\]", section)]
    assert len(blocks) == 3                       # examples 1 and 2; example 3's channel 1 (channel 0 is 2's)
    assert np.array_equal(EXAMPLES["fold-1"]["ExpectedOutput"], blocks[0][None, None])
    assert np.array_equal(EXAMPLES["fold-2-padded"]["ExpectedOutput"], blocks[1][None, None])
    assert np.array_equal(EXAMPLES["fold-3-channels"]["ExpectedOutput"], np.stack([blocks[1], blocks[2]])[None])
    for name, sizes in (("fold-1", [1, 9, 4]), ("fold-2-padded", [1, 9, 8]), ("fold-3-channels", [1, 18, 8])):
        ex = EXAMPLES[name]
        assert ex["InputTensor"]["Sizes"] == sizes
        assert np.array_equal(ex["Input"], np.arange(np.prod(sizes)).reshape(sizes))   # the page's arange input
