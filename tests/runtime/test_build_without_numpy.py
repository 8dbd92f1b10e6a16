"""The extension's C files compile without NumPy's headers (setup.py leaves ODML_NUMPY undefined there): the
call cache then serves nothing, but the module still builds and loads. Checked with the C compiler's syntax pass,
no build needed."""
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "opendml" / "runtime"
SOURCES = sorted(p for d in ("native", "cpu", "cpu/indexed") for p in (RUNTIME / d).glob("*.c"))
CC = shutil.which("gcc") or shutil.which("cc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_compiles_without_numpy_headers(source):
    include = sysconfig.get_paths()["include"]
    out = subprocess.run([CC, "-std=c99", "-fsyntax-only", "-Wall", "-Wno-unused-function", f"-I{RUNTIME}",
                          f"-I{include}", str(source)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
