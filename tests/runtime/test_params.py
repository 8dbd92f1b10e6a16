"""params.h and runtime/params.py declare the same parameter blocks."""
import ctypes
import re

import pytest

from opendml.runtime import params


def header_structs() -> dict:
    text = params.HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    defines = dict(re.findall(r"#define\s+(ODML_\w+)\s+(\d+)", text))
    out = {}
    for body, name in re.findall(r"typedef struct \w+ \{(.*?)\} (\w+);", text, flags=re.S):
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            m = re.fullmatch(r"(\w+)\s+(\w+)(?:\[(\w+)\])?", decl)
            assert m, decl
            ctype, fname, length = m.groups()
            fields.append((ctype, fname, int(defines.get(length, length)) if length else None))
        out[name] = fields
    return out


@pytest.mark.parametrize("name", list(params.STRUCTS))
def test_mirror_matches_header(name):
    header = header_structs()[name]
    mirror = params.STRUCTS[name]
    assert [f for _, f, _ in header] == [f for f, _ in mirror._fields_]
    for (ctype, fname, length), (_, t) in zip(header, mirror._fields_):
        if ctype == "odml_i64":
            assert (t is ctypes.c_int64) if length is None else (t._type_ is ctypes.c_int64 and t._length_ == length)
        else:
            assert t._type_ is params.STRUCTS[ctype] and t._length_ == length


def test_every_header_struct_is_mirrored():
    assert set(header_structs()) == set(params.STRUCTS)
    assert params.MAX_RANK == 8 and params.MAX_SPATIAL == 6


def header_kernels() -> list:
    text = params.HEADER.read_text()
    body = re.search(r"#define ODML_CPU_KERNELS\(X\)(.*?)\n\n", text, flags=re.S)
    assert body, "params.h declares no ODML_CPU_KERNELS list"
    return re.findall(r"X\((\w+), (\w+), (\w+)\)", body.group(1))


def test_kernel_list_mirror_matches_header():
    """params.h's X-macro list of CPU kernels and params.py's KERNELS: the same
    kernels, in the same order (each kernel's code is its position), with the
    same parameter structs; the extension has each (and its code count)."""
    header = header_kernels()
    assert len(header) >= 4
    assert [(name, params.STRUCTS[struct]) for _, name, struct in header] == list(params.KERNELS)
    assert all(upper == name.upper() for upper, name, _ in header)
    from opendml.runtime.cpu.backend import _load_native
    native = _load_native()
    if native is not None:
        sizes = native.param_sizes()
        for name, struct in params.KERNELS:
            assert callable(getattr(native, name))
            assert sizes[next(s for _, n, s in header if n == name)] == ctypes.sizeof(struct)
