"""Every operator on a never-seen NumPy shape against NumPy's own function
(issue 31's CPU target: at most 3x NumPy's time): ``python -m
benchmarks.newshape_cpu [--calls N] [--rounds R] [--only NAMES] [--out DIR]``.

Each call is on a (1, C, H, W) float32 array of a shape no earlier call of the
process used (C, H, W random, each shape drawn once: a miss of the plan
cache, the move cache (``planner``) and the C call cache, so the whole route runs:
validation, lowering, the kernels' parameters, a new output, the kernels).
The NumPy peer runs on the same array right after opendml's call:
``np.ascontiguousarray`` of the strided view (SLICE, SLICE1), a padded
``sliding_window_view`` copied (UNFOLD), zeros and strided adds (FOLD), zeros
and a strided assignment (SLICE_GRAD), ``x.copy()`` (IDENTITY), ``astype``
(CAST, its dtype spelt as a NumPy type, a string and a ``DataType``),
``np.pad`` in the same mode, ``np.concatenate``, ``np.split``
materialised, ``np.tile``, reshape + transpose + copy (SPACE_TO_DEPTH,
DEPTH_TO_SPACE), ``np.take``, ``np.take_along_axis``, ``np.put_along_axis``,
advanced indexing, ``np.eye(depth)[indices]``, a reversed copy and a
diagonal assignment (the index-driven operators, their index arrays drawn
from the input's shape before either side is timed). Every output is checked equal to NumPy's.

Per operator: the first call of the process (``cold``: its imports, first
lowering, first kernel set-up) on its own line, then the new-shape rows:
microseconds per call, the lowest total over ``--rounds`` rounds of
``--calls`` calls (fresh shapes every call), opendml's and NumPy's measured in
the same rounds, interleaved, each side first on every other array (the
second side to read an array finds it in the cache the first brought it to:
until session 18 NumPy always ran second); ratio = opendml / NumPy (``--timer process``
counts this process's CPU time instead of wall time: steadier on a busy
machine). Writes
``newshape-cpu.json`` into ``--out`` and ``newshape-cpu.png`` where matplotlib
is installed.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time

import numpy as np

import opendml as dml

ROOT = pathlib.Path(__file__).resolve().parent
TARGET = 3.0


class Shapes:
    """(1, C, H, W) shapes never given before in this process, C, H, W drawn
    from ``rng`` with H and W even and C a multiple of 4 where asked."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.seen: set = set()

    def new(self, even: bool = False, c4: bool = False) -> tuple:
        for _ in range(200_000):               # (the last of 10368 shapes is missed with odds e^-19)
            c = int(self.rng.integers(1, 9)) * (4 if c4 else 1)
            h, w = (int(v) for v in self.rng.integers(4, 40, size=2))
            if even:
                h, w = h & ~1, w & ~1
            s = (1, c, h, w)
            if s not in self.seen:
                self.seen.add(s)
                return s
        raise SystemExit(f"newshape_cpu: no (1, C, H, W) shape left that this process has not used ({len(self.seen)} "
                         f"used, of 8 x 36 x 36 = 10368 in all); ask for fewer --calls or --rounds")


def _fold_peer(cols, c, h, w):
    """col2im of a 3x3 window, stride 1, padding 1, with NumPy: 9 strided adds."""
    out = np.zeros((1, c, h + 2, w + 2), cols.dtype)
    blocks = cols.reshape(1, c, 3, 3, h, w)
    for i in range(3):
        for j in range(3):
            out[:, :, i:i + h, j:j + w] += blocks[:, :, i, j]
    return out[:, :, 1:-1, 1:-1].copy()


def _unfold_peer(x):
    n, c, h, w = x.shape
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    return np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3)).reshape(n, c * 9, h * w)


def _slice_grad_peer(g, shape):
    out = np.zeros(shape, g.dtype)
    out[:, :, 1::2, ::-1] = g
    return out


def _pad_rows():
    rows = []
    for mode, npmode in (("constant", "constant"), ("edge", "edge"), ("reflect", "reflect"),
                         ("symmetric", "symmetric"), ("wrap", "wrap")):
        rows.append((f"pad {mode}", "np.pad", {},
                     lambda x, mode=mode: dml.pad(x, (0, 0, 1, 2), (0, 0, 2, 1), mode=mode),
                     lambda x, npmode=npmode: np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode=npmode)))
    return rows


def _slice_grad_args(x):
    n, c, h, w = x.shape
    return [0, 0, 1, 0], [n, c, h - 1, w], [1, 1, 2, -1]


def rows():
    """(name, peer name, shape options, opendml(x), numpy(x)) per row; x a fresh (1, C, H, W) float32 array."""
    def sliced(x):
        n, c, h, w = x.shape
        return dml.slice(x, [0, 0, 1, 1], [n, c, h // 2, w - 1], [1, 1, 2, 1])

    def slice_grad(x):
        grad = np.ascontiguousarray(x[:, :, 1::2, ::-1])     # (slice1's output for the window below)
        return dml.slice_grad(grad, list(x.shape), *_slice_grad_args(x))

    def slice_grad_peer(x):
        return _slice_grad_peer(np.ascontiguousarray(x[:, :, 1::2, ::-1]), x.shape)

    def _cols(x):
        """(1, C * 9, H * W) columns made from x (each column element repeated 9 times)."""
        n, c, h, w = x.shape
        return np.ascontiguousarray(np.broadcast_to(x.reshape(1, c, 1, h * w), (1, c, 9, h * w))).reshape(
            1, c * 9, h * w)

    def fold(x):
        n, c, h, w = x.shape
        return dml.fold(_cols(x), (h, w), 3, 1, 1, 1, 1)

    def fold_peer(x):
        n, c, h, w = x.shape
        return _fold_peer(_cols(x), c, h, w)

    base = [
        ("slice", "np.ascontiguousarray(x[..., 1::2, 1:])", {}, sliced,
         lambda x: np.ascontiguousarray(x[:, :, 1:1 + 2 * (x.shape[2] // 2):2, 1:])),
        ("slice1 reversing H", "np.ascontiguousarray(x[:, :, ::-1])", {},
         lambda x: dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]),
         lambda x: np.ascontiguousarray(x[:, :, ::-1])),
        ("unfold 3x3 pad 1", "padded sliding_window_view copied", {},
         lambda x: dml.unfold(x, 3, 1, 1, 1, 1), _unfold_peer),
        ("fold 3x3 pad 1", "zeros + 9 strided adds", {}, fold, fold_peer),
        ("slice_grad", "zeros + strided assignment", {}, slice_grad, slice_grad_peer),
        ("identity", "x.copy()", {}, lambda x: dml.identity(x), lambda x: x.copy()),
        ("identity of a strided view", "x.copy()", {}, lambda x: dml.identity(x[:, :, ::2]),
         lambda x: x[:, :, ::2].copy()),
        ("cast float32->float16", "x.astype(float16)", {}, lambda x: dml.cast(x, np.float16),
         lambda x: x.astype(np.float16)),
        ("cast float32->int32", "x.astype(int32)", {}, lambda x: dml.cast(x, np.int32),
         lambda x: x.astype(np.int32)),
        ("cast to 'int32' (a string)", "x.astype('int32')", {}, lambda x: dml.cast(x, "int32"),
         lambda x: x.astype("int32")),
        ("cast to DataType.INT8", "x.astype(int8)", {}, lambda x: dml.cast(x, dml.DataType.INT8),
         lambda x: x.astype(np.int8)),
        *_pad_rows(),
        ("join axis 1", "np.concatenate", {}, lambda x: dml.join([x, x[:, :1]], 1),
         lambda x: np.concatenate([x, x[:, :1]], 1)),
        ("split axis 3", "np.split materialised", {},
         lambda x: dml.split(x, 3, [1, x.shape[3] - 1]),
         lambda x: [a.copy() for a in np.split(x, [1], 3)]),
        ("tile (1, 1, 2, 2)", "np.tile", {}, lambda x: dml.tile(x, (1, 1, 2, 2)),
         lambda x: np.tile(x, (1, 1, 2, 2))),
        ("space_to_depth b2 DCR", "reshape + transpose + copy", {"even": True},
         lambda x: dml.space_to_depth(x, 2),
         lambda x: x.reshape(1, x.shape[1], x.shape[2] // 2, 2, x.shape[3] // 2, 2).transpose(0, 3, 5, 1, 2, 4)
         .reshape(1, 4 * x.shape[1], x.shape[2] // 2, x.shape[3] // 2).copy()),
        ("depth_to_space b2 DCR", "reshape + transpose + copy", {"c4": True},
         lambda x: dml.depth_to_space(x, 2),
         lambda x: x.reshape(1, 2, 2, x.shape[1] // 4, x.shape[2], x.shape[3]).transpose(0, 3, 4, 1, 5, 2)
         .reshape(1, x.shape[1] // 4, 2 * x.shape[2], 2 * x.shape[3]).copy()),
    ]
    return base + _index_rows()


#: Row name -> the index arrays it draws per input (``_index_rows``' ``memo``s).
INDEX_ROWS: dict = {}


def _index_rows():
    """The index-driven operators, each beside NumPy's equivalent, with
    index arrays drawn from the input's shape."""
    rng = np.random.default_rng(7)

    def ints(hi, shape, dtype=np.int64):
        return rng.integers(0, hi, shape).astype(dtype)

    def nd(x):
        c = x.shape[1]
        idx = np.unique(ints(c, (max(1, c // 2), 1)), axis=0)
        return np.concatenate([np.zeros_like(idx), idx], 1)

    def scatter_nd_peer(x, idx, upd):
        y = x.copy()
        y[idx[:, 0], idx[:, 1]] = upd
        return y

    def diag_peer(x):
        y = x.copy()
        r = np.arange(min(x.shape[-2:]))
        y[..., r, r] = 0
        return y

    def memo(make):
        """``make(x)``'s arrays, made once per x (both sides get the same;
        ``measure`` makes them before timing either side: see ``prime``)."""
        seen = {}

        def get(x):
            if id(x) not in seen or seen[id(x)][0] is not x:
                if len(seen) > 4096:
                    seen.clear()
                seen[id(x)] = (x, make(x))
            return seen[id(x)][1]
        return get

    gather_i = memo(lambda x: ints(x.shape[1], (max(1, x.shape[1] // 2),)))
    elem_i = memo(lambda x: ints(x.shape[2], x.shape))
    perm_i = memo(lambda x: np.argsort(rng.random(x.shape), axis=2))       # no duplicates: one answer
    nd_i = memo(nd)
    upd = memo(lambda x: rng.standard_normal((nd_i(x).shape[0], *x.shape[2:]), dtype=np.float32))
    hot = memo(lambda x: ints(x.shape[3], x.shape[1:3]))
    lengths = memo(lambda x: np.full((1, x.shape[1], 1, x.shape[3]), x.shape[2], np.uint32))
    INDEX_ROWS.update({"gather axis 1": (gather_i,), "gather_elements axis 2": (elem_i,),
                       "scatter_elements axis 2": (perm_i,), "gather_nd": (nd_i,), "scatter_nd": (nd_i, upd),
                       "one_hot": (hot,), "reverse_subsequences axis 2": (lengths,)})
    return [
        ("gather axis 1", "np.take", {}, lambda x: dml.gather(x, gather_i(x), 1),
         lambda x: np.take(x, gather_i(x), 1)),
        ("gather_elements axis 2", "np.take_along_axis", {}, lambda x: dml.gather_elements(x, elem_i(x), 2),
         lambda x: np.take_along_axis(x, elem_i(x), 2)),
        ("scatter_elements axis 2", "copy + np.put_along_axis", {},
         lambda x: dml.scatter_elements(x, perm_i(x), x[:, :, ::-1], 2),
         lambda x: _put(x, perm_i(x), x[:, :, ::-1])),
        ("gather_nd", "advanced indexing", {}, lambda x: dml.gather_nd(x, nd_i(x)),
         lambda x: x[nd_i(x)[:, 0], nd_i(x)[:, 1]]),
        ("scatter_nd", "copy + index assignment", {}, lambda x: dml.scatter_nd(x, nd_i(x), upd(x)),
         lambda x: scatter_nd_peer(x, nd_i(x), upd(x))),
        ("one_hot", "np.eye(depth)[indices]", {},
         lambda x: dml.one_hot(hot(x), x.shape[3], np.array([0, 1], np.float32)),
         lambda x: np.eye(x.shape[3], dtype=np.float32)[hot(x)]),
        ("reverse_subsequences axis 2", "x[:, :, ::-1] copied", {},
         lambda x: dml.reverse_subsequences(x, lengths(x), 2), lambda x: x[:, :, ::-1].copy()),
        ("diagonal_matrix zeroing the diagonal", "copy + diagonal assignment", {},
         lambda x: dml.diagonal_matrix(x, value=0, begin=0, end=1), diag_peer),
    ]


def _put(x, idx, values):
    y = x.copy()
    np.put_along_axis(y, idx, values, 2)
    return y


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def measure(calls: int, rounds: int, only: str = "", seed: int = 0, clock=time.perf_counter) -> list:
    shapes = Shapes(seed)
    rng = np.random.default_rng(seed + 1)
    out = []
    for name, peer_name, opts, ours, peer in rows():
        if only and not any(s.strip() and s.strip() in name for s in only.split(",")):
            continue
        x = rng.standard_normal(shapes.new(**opts), dtype=np.float32)
        for get in INDEX_ROWS.get(name, ()):
            get(x)
        t = clock()
        got = ours(x)
        cold = clock() - t
        t = clock()
        want = peer(x)
        cold_peer = clock() - t
        if not _same(got, want):
            raise SystemExit(f"{name}: opendml's output differs from NumPy's")
        best_ours = best_peer = float("inf")
        for _ in range(rounds):
            xs = [rng.standard_normal(shapes.new(**opts), dtype=np.float32) for _ in range(calls)]
            t_ours = t_peer = 0.0
            for get in INDEX_ROWS.get(name, ()):         # the index arrays, made before either side is timed
                for x in xs:
                    get(x)
            for i, x in enumerate(xs):                    # interleaved: one machine state for both
                # each side goes first on every other array: the second to read x finds it in the cache
                # the first brought it to, so a fixed order would favour the side that always runs second
                if i % 2:
                    t = clock()
                    want = peer(x)
                    t_peer += clock() - t
                t = clock()
                got = ours(x)
                t_ours += clock() - t
                if not i % 2:
                    t = clock()
                    want = peer(x)
                    t_peer += clock() - t
                if not _same(got, want):
                    raise SystemExit(f"{name}: opendml's output differs from NumPy's on {x.shape}")
            best_ours, best_peer = min(best_ours, t_ours / calls), min(best_peer, t_peer / calls)
        out.append({"name": name, "peer": peer_name, "cold_us": cold * 1e6, "cold_peer_us": cold_peer * 1e6,
                    "opendml_us": best_ours * 1e6, "numpy_us": best_peer * 1e6, "ratio": best_ours / best_peer})
    return out


def table(res: list) -> str:
    lines = [f"{'operator (new shape, float32)':34} {'opendml us':>11} {'numpy us':>9} {'ratio':>6} "
             f"{'cold us':>9} {'cold ratio':>10}  peer"]
    for r in res:
        flag = "" if r["ratio"] <= TARGET else "  > 3x"
        lines.append(f"{r['name']:34} {r['opendml_us']:11.1f} {r['numpy_us']:9.1f} {r['ratio']:6.2f} "
                     f"{r['cold_us']:9.0f} {r['cold_us'] / r['cold_peer_us']:10.1f}  {r['peer']}{flag}")
    return "\n".join(lines)


def plot(res: list, path: pathlib.Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [r["name"] for r in res]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(res) + 1.5))
    ax.barh(names, [r["ratio"] for r in res], color=["tab:blue" if r["ratio"] <= TARGET else "tab:red" for r in res])
    ax.axvline(TARGET, color="k", linestyle="--", linewidth=1, label=f"target {TARGET:g}x")
    ax.invert_yaxis()
    ax.set_xlabel("opendml time / NumPy time on a never-seen shape (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # (every operator's rows take 1 + calls x rounds shapes of the 10368 there are: 200 x 5 ran out of them)
    p.add_argument("--calls", type=int, default=50, help="new shapes per round and operator")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated substrings of row names")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timer", choices=("wall", "process"), default="wall",
                   help="wall: perf_counter; process: this process's CPU time (steadier on a shared machine)")
    p.add_argument("--out", default=str(ROOT / "results"))
    a = p.parse_args(argv)
    res = measure(a.calls, a.rounds, a.only, a.seed, time.perf_counter if a.timer == "wall" else time.process_time)
    print(table(res))
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": sys.version.split()[0], "numpy": np.__version__, "machine": platform.machine(),
            "calls": a.calls, "rounds": a.rounds, "timer": a.timer, "config": str(dml.config())}
    (out / "newshape-cpu.json").write_text(json.dumps({"meta": meta, "rows": res}, indent=1))
    drawn = plot(res, out / "newshape-cpu.png")
    print(f"wrote {out / 'newshape-cpu.json'}" + (f" and {out / 'newshape-cpu.png'}" if drawn else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
