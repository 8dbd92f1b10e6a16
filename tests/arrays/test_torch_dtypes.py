"""The PyTorch wing's version check (arrays/torch/dtypes.py): a PyTorch older
than the one the wing is written for is refused by name, never met as an
AttributeError deep inside an import; and Dynamo's hook leaves such a
PyTorch as it is."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml.arrays.torch import dtypes  # noqa: E402


@pytest.mark.parametrize("version", ["2.4.1", "2.10.0+cu128", "1.13.1", "2.10.0a0+git1234", "nightly"])
def test_an_older_pytorch_is_refused_by_name(version):
    with pytest.raises(dml.UnsupportedError, match=rf"PyTorch {re.escape(version)}: opendml's PyTorch support "
                                                   rf"needs PyTorch 2\.11 or later"):
        dtypes.check_torch_version(version)


@pytest.mark.parametrize("version", ["2.11.0", "2.11.0+cu130", "2.13.0+cpu", "2.14.0a0+gitabc", "3.0.0"])
def test_a_supported_pytorch_passes(version):
    dtypes.check_torch_version(version)


def test_the_installed_pytorch_passes():
    dtypes.check_torch_version(torch.__version__)


def test_an_older_pytorch_meets_the_error_on_its_first_tensor_and_dynamo_still_imports():
    """In a process whose PyTorch reports an old version and lacks substitute_in_graph: the first tensor an
    array function gets raises the version's UnsupportedError (every call, not only the first), and importing
    torch._dynamo afterwards works (opendml's hook leaves it)."""
    code = textwrap.dedent("""
        import torch, torch.compiler
        torch.__version__ = "2.4.0"
        del torch.compiler.substitute_in_graph
        import opendml as dml
        for _ in range(2):
            try:
                dml.identity(torch.ones(2))
            except dml.UnsupportedError as e:
                print("refused:", e)
        import torch._dynamo
        print("dynamo imported")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("refused: PyTorch 2.4.0: opendml's PyTorch support needs PyTorch 2.11 or later") == 2
    assert "dynamo imported" in out.stdout
