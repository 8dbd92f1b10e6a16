"""The index-driven passes on CUDA without a GPU: index.cu compiles with nvcc,
and the launches ``runtime/cuda/index.py`` plans (outer and inner dimensions,
16-byte words, slot numbering, each scatter strategy), executed by a NumPy
model of index.cu's kernels in place of the CPU backend's compiled index pass,
give the CPU backend's bytes for every index operator and gradient, and never
read or write outside a buffer (the model checks every access). The GPU
tests (``tests/test_cuda_index.py``) run the kernels themselves."""
from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

import opendml as dml
from opendml.runtime.cpu import backend as cpu_backend
from opendml.runtime.cuda import index as ix

from ..conftest import native_available
from ..test_index_ops import hostile
from . import nvcc

TYPES = {6: np.int32, 11: np.int64, 3: np.uint32, 10: np.uint64}
FLOATS = {1: np.float32, 2: np.float16, 9: np.float64}
SKIPPED = 2**64 - 1
THREADS = 256                                # index.cu's IX_THREADS


@functools.lru_cache(maxsize=None)
def _compiled(folder, text, arch="sm_90"):
    """nvcc's -c of index.cu's instantiations, index.cu taken from ``folder`` (its text ``text``: a changed file
    compiles again), with ptxas's report: the file's tests share one compile of it."""
    # (the compiler runs without the sanitizer pass's preloaded ASan runtime, which it does not survive)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    return subprocess.run(["nvcc", "-std=c++17", f"-arch={arch}", "--fmad=false", *nvcc.includes(folder), "-Xptxas",
                           "-v", "-c", str(nvcc.instances(ix.INDEX_KERNELS)), "-o", os.devnull],
                          capture_output=True, text=True, env=env)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_index_kernels_compile_with_nvcc():
    r = _compiled(ix.INDEX_KERNELS.parent, ix.INDEX_KERNELS.read_text(encoding="utf-8"))
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr


def ptxas_registers(folder=ix.INDEX_KERNELS.parent, arch="sm_90"):
    """{kernel: registers a thread} of every instantiation of index.cu (taken
    from ``folder``; tests/runtime/nvcc) as ptxas reports them."""
    r = _compiled(folder, (folder / "index.cu").read_text(encoding="utf-8"), arch)
    assert r.returncode == 0, r.stderr
    out, name = {}, None
    for line in r.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            out[name] = int(m.group(1))
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_reversal_tile_leaves_registers_for_three_blocks():
    """ix_reverse_tile's 64 KiB tiles (128-byte lines down 512 rows) fit 3
    blocks a multiprocessor; its registers must too (65536 a multiprocessor:
    at most 85 a thread of 3 x 256). Unbounded it took 96 and ran 2 blocks:
    on an H200 the (512, 256, 512) float32 reversal along axis 0 ran at 0.72
    of copy bandwidth, bounded at 0.79."""
    tiles = {k: n for k, n in ptxas_registers().items() if "ix_reverse_tile" in k}
    assert tiles and all(n * THREADS * 3 <= 65536 for n in tiles.values()), tiles


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_reversal_tile_of_4_byte_words_stores_8_bytes(tmp_path):
    """Can fail: ix_reverse_tile of 4-byte words writes two columns a thread
    (8-byte stores) where it can (on an H200, (512, 256, 512) float32 along
    axis 1: 0.942 of copy against 0.917 a column a thread); 2-byte words keep
    one column a thread."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    ptx = tmp_path / "i.ptx"
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "--fmad=false", *nvcc.includes(), "-ptx",
                        str(nvcc.instances(ix.INDEX_KERNELS)), "-o", str(ptx)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    bodies = {}
    for entry in re.split(r"\.visible \.entry ", ptx.read_text())[1:]:
        bodies[entry.split("(", 1)[0]] = entry
    u32 = [b for n, b in bodies.items() if "ix_reverse_tile" in n and "Ijj" in n]
    u16 = [b for n, b in bodies.items() if "ix_reverse_tile" in n and "It" in n]
    assert u32 and u16, list(bodies)
    assert all("st.global.v2.u32" in b for b in u32)
    assert not any("st.global.v2" in b for b in u16)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_fused_index_check_costs_no_registers(tmp_path):
    """Can fail: a kernel uses more registers with the index check's flag store in ix_coordinate_of (a checked
    axis setting ix_axis.flag) than without it (the same source with the store taken out): the unchecked
    calls pay for it in occupancy."""
    source = ix.INDEX_KERNELS.read_text(encoding="utf-8")
    store = "if (ax.flag) ix_flag_set(ax.flag);"
    assert source.count(store) == 2, "ix_coordinate_of's flag stores were not found"
    (tmp_path / "index.cu").write_text(source.replace(store, ""), encoding="utf-8")
    got, base = ptxas_registers(), ptxas_registers(tmp_path)
    assert got and got.keys() == base.keys()
    assert {k: n for k, n in got.items() if n > base[k]} == {}

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_reversal_along_rows_leaves_registers_for_its_blocks():
    """ix_reverse_rows stages 32 KiB of rows a block (REVERSE_ROWS): 6 blocks
    a multiprocessor; with 4-byte words its registers must fit 6 blocks too
    (allocated 8 at a time: at most 40 a thread of 6 x 256), with 8-byte words
    5 (48). Its 16-byte pieces took 44 unbounded (5 blocks of 4-byte words)."""
    rows = {k: n for k, n in ptxas_registers().items() if "ix_reverse_rows" in k}
    assert any("ix_reverse_rowsIj" in k for k in rows) and any("ix_reverse_rowsIy" in k for k in rows), rows
    for k, n in rows.items():
        blocks = 6 if "ix_reverse_rowsIj" in k else 5
        assert -(-n // 8) * 8 * THREADS * blocks <= 65536, (k, n)


def _coordinate(ax, values, at, e):
    """(keep, c): index.cu's ix_coordinate_of (of the value ix_load reads)."""
    assert 0 <= at < values.size, f"index read {at} outside {values.size}"
    v, b = int(values[at]), ax.bound
    if ax.mode == 1:
        n = min(max(v, 0), b)
        return True, n - 1 - e if e < n else e
    if values.dtype.kind == "i" and v < 0:
        v += b
    if 0 <= v < b:
        return True, v
    return (False, 0) if ax.skip else (True, 0 if v < 0 else b - 1)


def _outer(q, o, idx, indexed, gather):
    """index.cu's ix_outer: (source, destination) word offsets, or None (skipped)."""
    so, dd = q.src_offset, q.dst_offset
    at, e = [q.axes[a].offset for a in range(q.naxes)], [0] * q.naxes
    for k in reversed(range(q.outer)):
        o, c = (0, o) if k == 0 else divmod(o, q.sizes[k])
        so, dd = so + c * q.src_strides[k], dd + c * q.dst_strides[k]
        for a in range(q.naxes):
            at[a] += c * q.axes[a].strides[k]
            e[a] = c if q.axes[a].axis == k else e[a]
    for a in range(q.naxes if indexed else 0):
        keep, c = _coordinate(q.axes[a], idx[a], at[a], e[a])
        if gather:
            so += c * q.axes[a].stride
        elif not keep:
            return None
        else:
            dd += c * q.axes[a].stride
    return so, dd


def _inner(q, j):
    si = di = 0
    for k in reversed(range(q.inner)):
        j, c = (0, j) if k == 0 else divmod(j, q.isizes[k])
        si, di = si + c * q.isrc_strides[k], di + c * q.idst_strides[k]
    return si, di


def _words(q, items, positions=False):
    """(position or sorted member, inner word) of every thread's words
    (ix_split; ``positions``: ix_gather_positions, positions t, t + total, ...)."""
    if positions:
        for t in range(q.total):
            for u in range(items):
                if t + u * q.total < q.n_outer:
                    yield t + u * q.total, 0
        return
    for t in range(q.total):
        o, g = divmod(t, q.groups)
        for u in range(items):
            if g + u * q.groups < q.n_inner:
                yield o, g + u * q.groups


def _add(a, b, data_type, w):
    """a + b of two words of w bytes, element by element (index.cu's
    ix_add_words: an accumulating pass's widened words)."""
    es = dml.DataType(data_type).size
    if es < w:
        return np.frombuffer(b"".join(_add(x, y, data_type, es).tobytes() for x, y in zip(
            np.frombuffer(a.tobytes(), f"V{es}"), np.frombuffer(b.tobytes(), f"V{es}"))), f"V{w}")[0]
    if data_type in FLOATS:
        ft = FLOATS[data_type]
        x, y = np.frombuffer(a.tobytes(), ft)[0], np.frombuffer(b.tobytes(), ft)[0]
        with np.errstate(all="ignore"):
            s = (np.float32(x) + np.float32(y)).astype(np.float16) if ft is np.float16 else x + y
        return np.array([s], ft).view(f"V{w}")[0]
    return np.array([int.from_bytes(a.tobytes(), "little") + int.from_bytes(b.tobytes(), "little") & (1 << 8 * w) - 1],
                    f"<u{w}").view(f"V{w}")[0]


def run_model(step, plan, p, srcs, dsts, seen):
    """One ``IndexPass`` executed by the model on the CPU backend's word arrays."""
    q, w = step.params, {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "uint4": 16}[step.main.split("<")[1].split(",")[0]]
    items = int(step.main.rstrip(">").split(",")[-1])
    seen.add((step.main.split("<")[0], step.mode, w))
    seen.add(("outer", step.main, tuple(q.sizes[:q.outer])))
    dst = dsts[p.dst].view(np.uint8).view(f"V{w}")
    src = dst if step.const else srcs[p.src].view(np.uint8).view(f"V{w}")
    idx = [srcs[a.index].view(TYPES[plan.in_types[a.index]]) for a in p.indices]
    value = np.frombuffer((q.value_bits % 2**64).to_bytes(8, "little")[:w], f"V{w}")[0] if step.const else None

    def read(a, i):
        assert 0 <= i < a.size, f"read {i} outside {a.size}"
        return a[i]

    def write(a, i, v):
        assert 0 <= i < a.size, f"write {i} outside {a.size}"
        a[i] = v

    def slot(off):
        assert (off - q.key_base) % q.key_div == 0 and 0 <= (off - q.key_base) // q.key_div < step.slots
        return (off - q.key_base) // q.key_div
    flags = owner = None
    if step.mode == "sort":
        keys = []
        for o in range(q.n_outer):
            r = _outer(q, o, idx, True, bool(q.last_only))
            keys.append(SKIPPED if r is None else slot(r[0] if q.last_only else r[1]))
        keys = np.array(keys, np.uint64)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        if q.last_only:
            flags = np.empty(q.n_outer, bool)
            flags[order] = np.append(sk[1:] != sk[:-1], True)
        else:
            for i, j in _words(q, items):
                if sk[i] == SKIPPED or (i > 0 and sk[i - 1] == sk[i]):
                    continue
                end = i
                while end + 1 < q.n_outer and sk[end + 1] == sk[i]:
                    end += 1
                si, di = _inner(q, j)
                at = q.key_base + int(sk[i]) * q.key_div + di
                members = range(i, end + 1) if p.accumulate else [end]
                acc = read(dst, at) if p.accumulate else None
                for r in members:
                    v = value if step.const else read(src, _outer(q, int(order[r]), idx, False, False)[0] + si)
                    acc = _add(acc, v, q.data_type, w) if p.accumulate else v
                write(dst, at, acc)
            return
    if step.mode == "tile":                  # ix_reverse_tile: a block a column set, staged in shared memory
        ax, k = q.axes[0], q.outer
        lo, n_e = q.sizes[k - 1], q.sizes[k - 2]
        assert THREADS % lo == 0 and n_e == ax.bound and q.src_strides[k - 2] == 0 and ax.axis == k - 2
        sets = q.n_outer // q.members
        for g in range(sets):
            sb, db, ab, r = q.src_offset, q.dst_offset, ax.offset, g
            for d in reversed(range(k - 2)):
                r, c = (0, r) if d == 0 else divmod(r, q.sizes[d])
                sb, db, ab = sb + c * q.src_strides[d], db + c * q.dst_strides[d], ab + c * ax.strides[d]
            tile = [None] * (ax.bound * lo)
            for kk in range(lo):
                for c in range(ax.bound):
                    tile[c * lo + kk] = read(src, sb + kk * q.src_strides[k - 1] + c * ax.stride)
            assert ax.strides[k - 2] == 0 and step.smem == ax.bound * lo * w <= ix.TILE_SMEM
            for kk in range(lo):             # the column's length read and clamped once (ix_length)
                n = min(max(int(read(idx[0], ab + kk * ax.strides[k - 1])), 0), ax.bound)
                for e in range(n_e):
                    c = n - 1 - e if e < n else e
                    write(dst, db + kk * q.dst_strides[k - 1] + e * q.dst_strides[k - 2], tile[c * lo + kk])
        return
    if step.mode == "pieces":                # ix_reverse_pieces: a block `members` 16-byte pieces, read in place
        ax, k, V = q.axes[0], q.outer, 16 // w
        Q = ax.bound // V
        assert ax.mode == 1 and ax.axis == k - 1 and q.src_strides[k - 1] == 0 and ax.strides[k - 1] == 0
        assert ax.stride == 1 and q.dst_strides[k - 1] == 1 and ax.bound % V == 0 and step.smem == 0
        assert q.total * V == q.n_outer and q.members >= 1
        for first in range(0, q.total, q.members):
            for f in range(first, min(first + q.members, q.total)):
                r, qq = divmod(f, Q)
                sb, db, ab, rr = q.src_offset, q.dst_offset, ax.offset, r
                for d in reversed(range(k - 1)):
                    rr, c = (0, rr) if d == 0 else divmod(rr, q.sizes[d])
                    sb, db, ab = sb + c * q.src_strides[d], db + c * q.dst_strides[d], ab + c * ax.strides[d]
                n, j = min(max(int(read(idx[0], ab)), 0), ax.bound), qq * V

                def piece(a, sb=sb):         # the row's aligned piece a
                    assert 0 <= a < Q, (a, Q)
                    return [read(src, sb + a * V + m) for m in range(V)]
                if j >= n:
                    out = piece(qq)
                elif j + V <= n:
                    lo = n - V - j
                    both = piece(lo // V) + (piece(lo // V + 1) if lo % V else [])
                    out = [both[lo % V + V - 1 - m] for m in range(V)]
                else:
                    own, first_piece = piece(qq), piece(0)
                    out = [first_piece[n - 1 - j - m] if j + m < n else own[m] for m in range(V)]
                for m in range(V):
                    write(dst, db + j + m, out[m])
        return
    if step.mode == "rows":                  # ix_reverse_rows: a block `members` rows staged, a length a row
        ax, k = q.axes[0], q.outer
        n_rows, L = q.n_outer // ax.bound, ax.bound
        pad = -(-L * w // 16) * 16 // w
        assert ax.mode == 1 and ax.axis == k - 1 and q.src_strides[k - 1] == 0 and ax.strides[k - 1] == 0
        assert L == q.sizes[k - 1] and 1 <= q.members <= 64 and step.smem == q.members * pad * w
        for b in range(-(-n_rows // q.members)):
            first = b * q.members
            staged = {}
            for r in range(first, min(first + q.members, n_rows)):
                sb, db, ab, rr = q.src_offset, q.dst_offset, ax.offset, r
                for d in reversed(range(k - 1)):
                    rr, c = (0, rr) if d == 0 else divmod(rr, q.sizes[d])
                    sb, db, ab = sb + c * q.src_strides[d], db + c * q.dst_strides[d], ab + c * ax.strides[d]
                row = [read(src, sb + c * ax.stride) for c in range(L)]
                assert (r - first + 1) * pad * w <= step.smem
                staged[r] = (db, min(max(int(read(idx[0], ab)), 0), L), row)   # the length read once
            for r, (db, n, row) in staged.items():
                for j in range(L):
                    write(dst, db + j * q.dst_strides[k - 1], row[n - 1 - j if j < n else j])
        return
    if step.mode == "row":                   # ix_gather_row: a block a row, the source row staged (STAGE)
        ax, k, stage = q.axes[0], q.outer, step.main.rstrip(">").endswith(", 1")
        n = q.sizes[k - 1]
        assert q.src_strides[k - 1] == 0 and q.naxes == 1 and ax.mode == 0
        assert step.smem == (ax.bound * w if stage else 0)
        for g in range(q.n_outer // n):
            sb, db, ab, r = q.src_offset, q.dst_offset, ax.offset, g
            for d in reversed(range(k - 1)):
                r, c = (0, r) if d == 0 else divmod(r, q.sizes[d])
                sb, db, ab = sb + c * q.src_strides[d], db + c * q.dst_strides[d], ab + c * ax.strides[d]
            row = [read(src, sb + c * ax.stride) for c in range(ax.bound)] if stage else None
            for j in range(n):
                _, c = _coordinate(ax, idx[0], ab + j * ax.strides[k - 1], 0)
                assert 0 <= c < ax.bound
                write(dst, db + j * q.dst_strides[k - 1], row[c] if stage else read(src, sb + c * ax.stride))
        return
    if step.mode == "group":                 # ix_scatter_group: a block a group, owners in shared memory
        members, ax = q.members, q.axes[0]
        for first in range(0, q.n_outer, members):
            own = np.zeros(ax.bound, np.int64)
            d0 = _outer(q, first, idx, False, False)[1]
            for pss in (0, 1):
                for m in range(members):
                    r = _outer(q, first + m, idx, True, False)
                    if r is None:
                        continue
                    c, rem = divmod(r[1] - d0, ax.stride)
                    assert rem == 0 and 0 <= c < ax.bound, (r, d0, ax.stride)
                    if pss == 0:
                        own[c] = max(own[c], m + 1)
                    elif own[c] == m + 1:
                        write(dst, r[1], read(src, r[0]))
        return
    if step.mode == "owner":
        owner = np.zeros(step.slots, np.int64)
        for o in range(q.n_outer):
            r = _outer(q, o, idx, True, False)
            if r is not None:
                owner[slot(r[1])] = max(owner[slot(r[1])], o + 1)
    for o, j in _words(q, items, step.main.startswith("ix_gather_positions<")):
        si, di = _inner(q, j)
        r = _outer(q, o, idx, True, not step.scatter)
        if r is None or (owner is not None and owner[slot(r[1])] != o + 1):
            continue
        zero = flags is not None and not flags[o]
        v = np.zeros(1, f"V{w}")[0] if zero else value if step.const else read(src, r[0] + si)
        write(dst, r[1] + di, v)


class _Dev(np.ndarray):
    """A NumPy array standing for a CuPy one (``.data.ptr``)."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


#: What ``IndexPass.__call__`` takes from CuPy, on NumPy (scratch allocation,
#: the stable sort, streams): the call runs on the CPU with launches recorded.
FAKE_CUPY = types.SimpleNamespace(
    zeros=lambda n, dtype: np.zeros(n, dtype).view(_Dev), empty=lambda n, dtype: np.empty(n, dtype).view(_Dev),
    argsort=lambda a: np.argsort(a, kind="stable").view(_Dev), not_equal=np.not_equal, uint32=np.uint32,
    uint64=np.uint64, bool_=np.bool_, uint8=np.uint8,
    cuda=types.SimpleNamespace(ExternalStream=lambda ptr, device: contextlib.nullcontext(),
                               Stream=types.SimpleNamespace(null=contextlib.nullcontext()),
                               driver=types.SimpleNamespace(funcSetAttribute=lambda f, a, v: OPT_INS.append((a, v)))))
OPT_INS: list = []                           # (attribute, value) of each funcSetAttribute


@pytest.fixture
def model(monkeypatch):
    """The CPU backend's compiled index pass replaced by the model of the
    launches index.py plans; yields the (kernel, strategy, word bytes) seen.
    Each pass's ``IndexPass.__call__`` runs too (on FAKE_CUPY, its launches
    recorded as ("launch", kernel, (blocks, shared bytes)))."""
    if not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    seen = set()
    monkeypatch.setattr(ix, "_kernel", lambda device, name: types.SimpleNamespace(ptr=0))
    monkeypatch.setattr(ix, "_STREAMS", {})
    from opendml.arrays import index_ops
    monkeypatch.setattr(index_ops, "_C_INDEX", {})    # (a never-seen shape lowered in C would skip the pass too)
    monkeypatch.setattr(ix.IndexPass, "_launch", lambda self, name, count, q, stream_ptr, smem=0: seen.add(
        ("launch", name, (-(-count // ix.THREADS), smem))))
    fake = types.SimpleNamespace(device=contextlib.nullcontext(), index=0, cupy=FAKE_CUPY)

    def index_pass(self, plan, p, srcs, dsts):
        step = ix.IndexPass(fake, plan, p, [a.ctypes.data for a in srcs], [a.ctypes.data for a in dsts])

        def run():
            step([a.ctypes.data for a in srcs], [a.ctypes.data for a in dsts], 0)
            run_model(step, plan, p, srcs, dsts, seen)
        return run
    monkeypatch.setattr(cpu_backend.CpuBackend, "_index_pass", index_pass)
    with dml.configure(cpu_kernels="compiled", call_cache=False):   # (the C call cache would skip the pass)
        yield seen


def same(fn, *args, **kw):
    with dml.configure(cpu_kernels="numpy"):
        want = fn(*args, **kw)
    got = fn(*args, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("via", ["auto", "owner", "sort"])
@pytest.mark.parametrize("it", [np.int32, np.int64, np.uint32, np.uint64])
def test_the_planned_launches_give_the_cpu_bytes(model, monkeypatch, via, it):
    monkeypatch.setattr(ix, "SCATTER_VIA", via)
    monkeypatch.setattr(ix, "POSITION_MIN", 0)          # (small calls: ix_gather_positions too)
    rng = np.random.default_rng(2)
    lo = 0 if np.dtype(it).kind == "u" else -6

    def idx(shape, n):
        out = rng.integers(lo, n + 2, shape).astype(it)
        out.reshape(-1)[::5] = hostile(it, out.size)[::5]
        return out
    for dt in (np.float32, np.float16, np.int8, np.uint64):
        x = rng.standard_normal((4, 5, 6)).astype(dt) if dt in (np.float32, np.float16) else \
            rng.integers(0, 100, (4, 5, 6)).astype(dt)
        for axis in range(3):
            same(dml.gather, x, idx((3, 2), x.shape[axis]), axis, check_indices=False)
            shape = tuple(7 if k == axis else n for k, n in enumerate(x.shape))
            same(dml.gather_elements, x, idx(shape, x.shape[axis]), axis, check_indices=False)
            same(dml.scatter_elements, x, idx(shape, 3), np.ones(shape, dt), axis, check_indices=False)
        same(dml.gather_nd, x, idx((4, 3, 2), 5), 1, check_indices=False)
        same(dml.scatter_nd, x, idx((9, 1), 4), np.arange(9 * 30).astype(dt).reshape(9, 5, 6), check_indices=False)
        same(dml.scatter_nd, x, idx((9, 3), 4), np.arange(9).astype(dt), check_indices=False)
        rows = rng.integers(0, 9, (12, 16)).astype(dt)            # 16-byte words
        same(dml.gather, rows, idx((20,), 12), 0, check_indices=False)
        same(dml.scatter_nd, rows, idx((20, 1), 12), np.ones((20, 16), dt), check_indices=False)
        same(dml.one_hot, idx((3, 4), 5), 5, np.array([0, 1], dt), 1)
        if np.dtype(it).kind == "u":
            same(dml.reverse_subsequences, x, idx((1, 5, 6), 5), 0)
    assert {("ix_gather", "direct", 16), ("ix_gather_positions", "direct", 4), ("ix_gather_positions", "direct", 1),
            ("ix_scatter", "direct", 1)} <= model
    assert ("ix_apply", "sort", 16) in model if via == "sort" else ("ix_scatter", "owner", 16) in model
    if via == "auto":                        # scatter_elements along the last axis: a block a row
        assert {("ix_scatter_group", "group", 1), ("ix_scatter_group", "group", 2), ("ix_scatter_group", "group", 4),
                ("ix_scatter_group", "group", 8)} <= model, model


def test_the_accumulating_and_last_only_adjoints_give_the_cpu_bytes(model):
    """A gather's gradient (sorted, added in index order with the CPU's
    roundings) and a scatter's updates' gradient (0 where a later repeat
    wins: the last-only gather)."""
    from opendml.arrays.index_ops import index_adjoint
    from opendml.model.tensor_desc import TensorDesc
    rng = np.random.default_rng(4)
    for dt, t in ((np.float16, dml.DataType.FLOAT16), (np.float32, dml.DataType.FLOAT32),
                  (np.float64, dml.DataType.FLOAT64)):
        i = rng.integers(-4, 4, (1, 60, 9)).astype(np.int64)
        g = (rng.standard_normal((4, 60, 9)) * 50).astype(dt)
        primal = dml.GatherOperatorDesc(TensorDesc(t, [1, 4, 6]), TensorDesc(dml.DataType.INT64, [1, 60, 9]),
                                        None, 2, 2)
        same(index_adjoint, primal, 0, g, i)
        # embedding rows (16 elements): the sum widened into 16-byte words, added element by element
        rows = dml.GatherOperatorDesc(TensorDesc(t, [7, 16]), TensorDesc(dml.DataType.INT64, [1, 50]), None, 0, 1)
        g = (rng.standard_normal((50, 16)) * 50).astype(dt)
        g.reshape(-1)[::13] = np.array([np.inf, -np.inf, np.nan], dt)[rng.integers(0, 3, g.size)[::13]]
        same(index_adjoint, rows, 0, g, rng.integers(-7, 7, (1, 50)).astype(np.int64))
        pos = rng.integers(0, 5, (30, 1)).astype(np.int64)
        scatter = dml.ScatterNdOperatorDesc(TensorDesc(t, [5, 6]), TensorDesc(dml.DataType.INT64, [30, 1]),
                                            TensorDesc(t, [30, 6]), None, 2, 2)
        same(index_adjoint, scatter, 2, rng.standard_normal((5, 6)).astype(dt), pos)
    assert {("ix_apply", "sort", 2), ("ix_apply", "sort", 4), ("ix_apply", "sort", 8), ("ix_apply", "sort", 16)} <= \
        model, model
    assert any(k == "ix_gather" and m == "sort" for k, m, _ in model), model


@pytest.mark.parametrize("tile", [True, False])
def test_reverse_subsequences_walks_columns_down_the_reversed_axis(model, monkeypatch, tile):
    """An element-wise REVERSE_SUBSEQUENCES (lengths per column) walks its
    outer positions as (..., columns / lo, reversed axis, lo): staged in
    shared memory (``ix_reverse_tile``) with lo words of REVERSE_BYTES = 128
    bytes (whole lines), else with lo words of 32 bytes; and still gives the
    CPU bytes, along every axis, for every word size, with and without the
    split."""
    monkeypatch.setattr(ix, "REVERSE_TILE", tile)
    monkeypatch.setattr(ix, "REVERSE_BYTES", 128)
    rng = np.random.default_rng(7)
    for dt in (np.float32, np.int8, np.uint64, np.float16):
        for shape in ((5, 3, 64), (6, 3, 10), (4, 64), (3, 2, 4, 32), (3, 2, 256)):
            x = rng.integers(0, 100, shape).astype(dt)
            for axis in range(len(shape)):
                ls = tuple(1 if k == axis else n for k, n in enumerate(shape))
                same(dml.reverse_subsequences, x, rng.integers(0, shape[axis] + 3, ls).astype(np.uint32), axis)
    outer = {s for k, _, s in model if k == "outer"}
    assert (3, 6, 10) in outer              # 10 words: no split, the axis moved next to the last
    if tile:
        assert (3, 2, 5, 32) in outer       # (5, 3, 64) float32 along axis 0: (3, 64 / 32, 5, 32), 128 bytes
        assert (3, 5, 64) in outer          # int8: the whole 64-byte row
        assert (3, 4, 5, 16) in outer       # uint64: 16 words
        assert (2, 8, 3, 32) in outer       # (3, 2, 256) float32 along axis 0
        assert {("ix_reverse_tile", "tile", w) for w in (1, 2, 4, 8)} <= model, model
    else:
        assert (3, 8, 5, 8) in outer        # (5, 3, 64) float32 along axis 0: (3, 64 / 8, 5, 8)
        assert (3, 2, 5, 32) in outer       # int8: lo = 32
        assert (3, 4, 4, 2, 8) in outer     # (3, 2, 4, 32) float32 along axis 1: (3, 4, 32 / 8, 2, 8)
        assert not any(k == "ix_reverse_tile" for k, *_ in model)


#: The reversal kernels' settings (``benchmarks/gpu_index.py`` times each).
REVERSE_SETTINGS = ({}, {"REVERSE_BYTES": 64}, {"REVERSE_BYTES": 128}, {"REVERSE_ROWS": 0},
                    {"REVERSE_ROWS": 16384}, {"REVERSE_ROWS": 180})


@pytest.mark.parametrize("settings", REVERSE_SETTINGS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_each_reversal_kernel_gives_the_cpu_bytes(model, monkeypatch, settings):
    """Every reversal setting (two-buffer column sets a block, rows a block)
    gives the CPU bytes for hostile lengths (0, past the axis, the index
    type's extremes), every word size and non-contiguous layouts, and
    runs the kernel it names (``ix_reverse_pieces`` for rows of whole
    16-byte pieces under 32 words, ``ix_reverse_rows`` with a partial last
    block for the others, ``ix_gather_positions`` where REVERSE_ROWS is 0)."""
    for name, v in settings.items():
        monkeypatch.setattr(ix, name, v)
    monkeypatch.setattr(ix, "POSITION_MIN", 0)          # (small calls: ix_gather_positions too)
    rng = np.random.default_rng(21)
    for it in (np.uint32, np.uint64):                    # (the lengths' types)
        for dt in (np.float32, np.int8, np.uint64, np.float16):
            x = rng.integers(0, 100, (9, 5, 64)).astype(dt)
            for axis, ls in ((0, (1, 5, 64)), (2, (9, 5, 1)), (1, (9, 1, 64))):
                i = rng.integers(0, x.shape[axis] + 3, ls).astype(it)
                i.reshape(-1)[::4] = hostile(it, i.size)[::4]
                same(dml.reverse_subsequences, x, i, axis)
                same(dml.reverse_subsequences, x[:, ::-1, ::-1], i, axis)          # reversed views
                same(dml.reverse_subsequences, x[::-1, :, 1:], i[..., :63] if axis != 2 else i, axis)
            same(dml.reverse_subsequences, x[:, :, :16], rng.integers(0, 18, (9, 5, 1)).astype(it), 2)  # short rows
    x = rng.standard_normal((9, 40, 128)).astype(np.float32)     # 80 to 320 column sets, more than blocks
    same(dml.reverse_subsequences, x, rng.integers(0, 12, (1, 40, 128)).astype(np.uint32), 0)
    kernels = {k for k, *_ in model}
    assert "ix_reverse_tile" in kernels, kernels
    lo = ix.REVERSE_BYTES // 4               # (9, 40, 128) float32 along axis 0: sets of 9 x lo words
    assert ("launch", "ix_reverse_tile<u32, u32, 4>", (40 * 128 // lo, 9 * lo * 4)) in model, model
    rows_bytes = settings.get("REVERSE_ROWS", ix.REVERSE_ROWS)
    if rows_bytes:
        assert "ix_reverse_rows" in kernels, kernels
        per = min(64, rows_bytes // 64, 45)    # 45 rows of 64 int8 words (64 bytes)
        assert ("launch", "ix_reverse_rows<u8, u32, 3>", (-(-45 // per), per * 64)) in model, model
        pieces = max(1, rows_bytes // 16)    # 45 rows of 16 float32 words: 180 16-byte pieces, in place
        assert ("launch", "ix_reverse_pieces<u32, u32, 3>", (-(-180 // pieces), 0)) in model, model
        assert {("ix_reverse_pieces", "pieces", w) for w in (2, 4, 8)} <= model, model
    else:
        assert "ix_reverse_rows" not in kernels and "ix_gather_positions" in kernels, kernels


def test_a_long_reversed_axis_stages_32_byte_columns(model, monkeypatch):
    """Where 128-byte rows of the whole reversed axis pass TILE_SMEM, the tile
    takes 32-byte columns instead."""
    monkeypatch.setattr(ix, "TILE_SMEM", 4096)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((40, 2, 64)).astype(np.float32)          # 40 x 128 bytes > 4096, 40 x 32 below
    same(dml.reverse_subsequences, x, rng.integers(0, 45, (1, 2, 64)).astype(np.uint32), 0)
    assert (2, 8, 40, 8) in {s for k, _, s in model if k == "outer"}
    assert ("ix_reverse_tile", "tile", 4) in model


def test_wide_column_sets_halve_until_the_tile_fits(model, monkeypatch):
    """Can fail: REVERSE_BYTES wider than 128 stages lines of that width
    where the reversed axis's tile fits TILE_SMEM, else halves them down to
    128 bytes before the 32-byte sectors (256 rows of 256 bytes fit 64 KiB,
    512 rows take 128 bytes)."""
    monkeypatch.setattr(ix, "REVERSE_BYTES", 256)
    monkeypatch.setattr(ix, "TILE_SMEM", 65536)
    rng = np.random.default_rng(9)
    for rows, lo in ((256, 64), (512, 32)):
        x = rng.standard_normal((rows, 2, 128)).astype(np.float32)
        same(dml.reverse_subsequences, x, rng.integers(0, rows + 2, (1, 2, 128)).astype(np.uint32), 0)
        assert ("launch", "ix_reverse_tile<u32, u32, 4>", (2 * 128 // lo, rows * lo * 4)) in model, model


@pytest.mark.parametrize("stage", [True, False])
def test_gather_elements_along_rows_runs_a_block_a_row(model, monkeypatch, stage):
    """gather_elements along the last axis (rows of at least 128 positions):
    ``ix_gather_row``, the source row staged in shared memory or read in
    place, hostile indices clamped into the row, any layout."""
    monkeypatch.setattr(ix, "ROW_STAGE", stage)
    rng = np.random.default_rng(12)
    for it in (np.int64, np.int32, np.uint32, np.uint64):
        for dt in (np.float32, np.float16, np.uint64):
            x = rng.integers(0, 100, (3, 2, 150)).astype(dt)
            lo = 0 if np.dtype(it).kind == "u" else -160
            i = rng.integers(lo, 160, (3, 2, 200)).astype(it)
            i.reshape(-1)[::7] = hostile(it, i.size)[::7]
            same(dml.gather_elements, x, i, 2, check_indices=False)
            same(dml.gather_elements, x[::-1, :, ::-1], i[:, ::-1], 2, check_indices=False)
    assert {("ix_gather_row", "row", w) for w in (2, 4, 8)} <= model, model
    launched = {(n, grid) for k, n, grid in model if k == "launch" and n.startswith("ix_gather_row<")}
    assert (f"ix_gather_row<u32, u32, 3, {int(stage)}>", (6, 150 * 4 if stage else 0)) in launched, launched


def test_group_scatter_gives_the_cpu_bytes(model):
    """scatter_elements along the last axis, one block a row (owners in shared
    memory): repeats, hostile and skipped indices, reversed views, three dimensions."""
    rng = np.random.default_rng(9)
    for it in (np.int64, np.uint32):
        x = rng.standard_normal((3, 40)).astype(np.float32)
        i = rng.integers(0, 40, (3, 90)).astype(it)
        i.reshape(-1)[::7] = hostile(it, i.size)[::7]
        u = rng.standard_normal((3, 90)).astype(np.float32)
        same(dml.scatter_elements, x, i, u, 1, check_indices=False)
        same(dml.scatter_elements, x[::-1, ::-1], i[::-1], u[:, ::-1], 1, check_indices=False)
        x3 = rng.integers(0, 9, (2, 3, 8)).astype(np.int16)
        same(dml.scatter_elements, x3, rng.integers(0, 8, (2, 3, 20)).astype(it), np.ones((2, 3, 20), np.int16), 2,
             check_indices=False)
    assert ("ix_scatter_group", "group", 4) in model and ("ix_scatter_group", "group", 2) in model, model


def test_group_scatter_along_an_axis_before_the_last_gives_the_cpu_bytes(model):
    """Can fail: scatter_elements along an axis before the last, run as one ix_scatter_group launch over the
    outer dimensions reordered (the column's dimension moved last), gives other bytes than the CPU: repeats
    (the last in row-major order writes), hostile and skipped indices, reversed and strided views, 3-D and
    4-D; before the reordering these took an owner table."""
    rng = np.random.default_rng(29)
    for it in (np.int64, np.int32, np.uint64):
        for shape, axis in (((5, 6, 7), 0), ((5, 6, 7), 1), ((1, 3, 9, 4), 2), ((2, 3, 4, 5), 1)):
            ishape = tuple(n + 3 if d == axis else n for d, n in enumerate(shape))
            x = rng.standard_normal(shape).astype(np.float32)
            i = rng.integers(0, shape[axis], ishape).astype(it)
            i.reshape(-1)[::5] = hostile(it, i.size)[::5]
            u = rng.standard_normal(ishape).astype(np.float32)
            same(dml.scatter_elements, x, i, u, axis, check_indices=False)
            flip = (slice(None, None, -1),) * len(shape)
            same(dml.scatter_elements, x[flip], i[flip], u[flip], axis, check_indices=False)
    assert ("ix_scatter_group", "group", 4) in model, model
    assert not any("ix_owner" in str(seen) or "owner" in seen for seen in model), model


def test_small_element_wise_gathers_move_one_position_a_thread(model):
    """Can fail: an element-wise gather of fewer than POSITION_MIN positions runs as ix_gather_positions
    (POSITION_ITEMS positions a thread, fewer threads each taking longer: a checked call waits for the
    kernel) rather than as ix_gather, one position a thread, or gives other bytes than the CPU; from
    POSITION_MIN positions on it keeps ix_gather_positions."""
    rng = np.random.default_rng(31)
    x = rng.standard_normal((1, 8, 104, 104)).astype(np.float32)
    i = rng.integers(-104, 104, (1, 8, 104, 104))
    i.reshape(-1)[::9] = hostile(np.int64, i.size)[::9]
    same(dml.gather_elements, x, i, 2, check_indices=False)
    launched = {n for k, n, *_ in model if k == "launch"}
    assert "ix_gather<u32, u32, 4, 1, 1, 1>" in launched and not any("positions" in n for n in launched), launched
    big = rng.standard_normal((1, 8, 200, 200)).astype(np.float32)     # 320,000 positions: POSITION_MIN passed
    same(dml.gather_elements, big, rng.integers(0, 200, (1, 8, 200, 200)), 2, check_indices=False)
    assert any(n.startswith("ix_gather_positions<u32, u32, 4, 1, 4>") for k, n, *_ in model if k == "launch"), model


def test_each_strategy_s_call_queues_its_launches(model, monkeypatch):
    """``IndexPass.__call__`` of every strategy runs (scratch, sort and stream
    through CuPy's calls) and queues its kernels in order, with the grid and
    shared memory its kernel needs."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 40)).astype(np.float32)
    i = rng.integers(0, 40, (4, 50))
    u = rng.standard_normal((4, 50)).astype(np.float32)
    for via in ("auto", "owner", "sort"):
        monkeypatch.setattr(ix, "SCATTER_VIA", via)
        same(dml.scatter_elements, x, i, u, 1, check_indices=False)
    same(dml.reverse_subsequences, rng.standard_normal((6, 3, 16)).astype(np.float32),
         rng.integers(0, 8, (1, 3, 16)).astype(np.uint32), 0)
    launched = {(n.split("<")[0], grid) for k, n, grid in model if k == "launch"}
    assert ("ix_scatter_group", (4, 4 * 40)) in launched               # a block a row, 40 slots
    assert ("ix_owner", (1, 0)) in launched and ("ix_keys", (1, 0)) in launched and ("ix_apply", (1, 0)) in launched
    assert ("ix_reverse_tile", (3, 6 * 16 * 4)) in launched             # 3 column sets of 6 x 16 words


def test_a_tile_above_48_kib_opts_in(model):
    """A staged tile above the 48 KiB a block gets by default raises the
    kernel's dynamic shared memory limit to its size before it launches."""
    OPT_INS.clear()
    rng = np.random.default_rng(3)
    same(dml.reverse_subsequences, rng.standard_normal((500, 1, 32)).astype(np.float32),
         rng.integers(0, 520, (1, 1, 32)).astype(np.uint32), 0)
    assert ("ix_reverse_tile", (1, 500 * 128)) in {(n.split("<")[0], g) for k, n, g in model if k == "launch"}
    assert OPT_INS == [(8, 500 * 128)]
