"""Draw the operator pages' figures from real runs of opendml.

    python docs/figures.py           # run opendml, write docs/figures/*.png and docs/figures/manifest.json
    python docs/figures.py --check   # run opendml only; exit 1 if the runs no longer give manifest.json

Every highlighted cell comes from what opendml returned, not from a formula
written here: inputs hold their own flat index plus one (0 stands for a
padding element), so each output value says which input element it read.
``manifest.json`` keeps the numbers each figure was drawn from;
``tests/test_docs.py`` runs ``compute()`` and compares, so a change of
behaviour that would make a figure wrong fails the test suite. Drawing needs
matplotlib (the ``docs`` extra); computing needs only opendml and NumPy.
"""
from __future__ import annotations

import json
import pathlib
import sys
import textwrap

import numpy as np

import opendml as dml

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "figures"
MANIFEST = OUT / "manifest.json"


def _ints(a) -> list:
    return np.asarray(a).astype(np.int64).tolist()


# -- the runs ----------------------------------------------------------------------------------------------

def slice_examples() -> dict:
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    runs = []
    for title, off, size, stride in (("Example 1: contiguous slice", [0, 0, 1, 2], [1, 1, 3, 2], [1, 1, 1, 1]),
                                     ("Example 2: strided slice", [0, 0, 1, 0], [1, 1, 2, 2], [1, 1, 2, 3])):
        out = dml.slice(x, offsets=off, sizes=size, strides=stride)
        runs.append({"title": title, "fields": f"Offsets {off[2:]}, Sizes {size[2:]}, Strides {stride[2:]}",
                     "input": _ints(x[0, 0]), "output": _ints(out[0, 0]), "reads": _ints(out[0, 0] - 1)})
    return {"runs": runs}


def slice1_examples() -> dict:
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    runs = []
    for title, off, size, stride, out_sizes in (
            ("Example 1: positive strides", [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, 2, 2], None),
            ("Example 2: negative strides", [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2], None),
            ("Both strides negative, output 2x3", [0, 0, 1, 0], [1, 1, 3, 4],
             [1, 1, -1, -1], [1, 1, 2, 3])):
        out = dml.slice1(x, off, size, stride, output_sizes=out_sizes)
        runs.append({"title": title,
                     "fields": f"offsets {off[2:]}, sizes {size[2:]}, strides {stride[2:]}"
                               + (f", output {out_sizes[2:]}" if out_sizes else ""),
                     "window": [off[2], off[3], size[2], size[3]],
                     "input": _ints(x[0, 0]), "output": _ints(out[0, 0]), "reads": _ints(out[0, 0] - 1)})
    return {"runs": runs}


def _unfold_reads(shape, **kw) -> dict:
    """UNFOLD of an input whose values are flat index + 1: each output value
    names the input element read, 0 a padding element."""
    x = np.arange(1, 1 + int(np.prod(shape)), dtype=np.int32).reshape(shape)
    cols = dml.unfold(x, **kw)
    return {"input_shape": list(shape), "columns": _ints(cols[0])}


def unfold_padded() -> dict:
    """UNFOLD example 2 of DirectML's page (the page's values and the reads)."""
    kw = dict(window_sizes=[3, 3], start_padding=[1, 0], end_padding=[1, 0])
    page = dml.unfold(np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5), **kw)
    d = _unfold_reads((1, 1, 5, 5), **kw)
    d.update(page_output=_ints(page[0]), blocks=[0, 14], **{k: v for k, v in kw.items()})
    return d


def unfold_dilated() -> dict:
    """A window with strides, dilations and asymmetric padding."""
    kw = dict(window_sizes=[2, 3], strides=[2, 3], dilations=[3, 2], start_padding=[1, 2], end_padding=[0, 1])
    d = _unfold_reads((1, 1, 6, 9), **kw)
    d.update(blocks=[0, 1, 4], **kw)
    return d


def fold_overlaps() -> dict:
    """How many window elements each FOLD output element sums (FOLD of ones),
    and the values of the page's examples 1 and 2."""
    runs = []
    for title, blocks, kw in (("Example 1: no padding", 4, {}),
                              ("Example 2: StartPadding {1, 0}, EndPadding {1, 0}", 8,
                               dict(start_padding=[1, 0], end_padding=[1, 0]))):
        ones = dml.fold(np.ones((1, 9, blocks), np.float32), [4, 4], 3, **kw)
        page = dml.fold(np.arange(9 * blocks, dtype=np.float32).reshape(1, 9, blocks), [4, 4], 3, **kw)
        runs.append({"title": title, "counts": _ints(ones[0, 0]), "output": _ints(page[0, 0])})
    return {"runs": runs}


def slice_grad_example() -> dict:
    window = dict(window_offsets=[0, 0, 0, 1], window_sizes=[1, 1, 4, 3], window_strides=[1, 1, -2, 2])
    grad = np.array([[[[14, 16], [6, 8]]]], np.float32)
    out = dml.slice_grad(grad, [1, 1, 4, 4], **window)
    # where each gradient element lands: SLICE_GRAD of 1..4
    marks = dml.slice_grad(np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2), [1, 1, 4, 4], **window)
    return {"grad": _ints(grad[0, 0]), "output": _ints(out[0, 0]), "lands": _ints(marks[0, 0] - 1),
            **{k: v[2:] for k, v in window.items()}}


# -- the data-movement family -------------------------------------------------------------------------------

def identity_strided() -> dict:
    """ELEMENT_WISE_IDENTITY reading a transposed view: InputTensor Sizes
    {4, 3}, Strides {1, 4} over a 3x4 buffer of 1..12."""
    buf = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    view = buf.T
    out = dml.identity(view)
    return {"buffer": _ints(buf), "sizes": list(view.shape), "strides": [s // view.itemsize for s in view.strides],
            "output": _ints(out), "reads": _ints(out - 1)}


CAST_VALUES = [-1.5, 2.7, 300.0, -300.0, -0.5, float("nan"), float("inf"), float("-inf")]


def cast_rules() -> dict:
    """CAST of special float32 values to INT8, UINT8 and INT16."""
    x = np.array(CAST_VALUES, np.float32)
    return {"input": [str(v) for v in x],
            "outputs": {t: _ints(dml.cast(x, t)) for t in ("int8", "uint8", "int16")}}


PAD_MODES = ["constant", "edge", "reflection", "symmetric", "wrap"]


def padding_modes() -> dict:
    """PADDING1 of a 2x3 input (1..6), two elements on every side, in each
    mode; the constant mode pads with 0, so 0 marks a padding value."""
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    return {"input": _ints(x), "start_padding": [2, 2], "end_padding": [2, 2],
            "modes": {m: _ints(dml.pad(x, [2, 2], [2, 2], mode=m)) for m in PAD_MODES}}


def join_split() -> dict:
    """JOIN of three inputs along axis 1 (their values continue each other's:
    each output value says which input and element it came from), and SPLIT
    of the result back into the same three sizes."""
    widths = [2, 3, 1]
    parts, start = [], 1
    for w in widths:
        parts.append(np.arange(start, start + 2 * w, dtype=np.int32).reshape(2, w))
        start += 2 * w
    joined = dml.join(parts, 1)
    back = dml.split(joined, 1, widths)
    return {"inputs": [_ints(p) for p in parts], "output": _ints(joined), "split": [_ints(b) for b in back]}


def tile_example() -> dict:
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    return {"input": _ints(x), "repeats": [2, 3], "output": _ints(dml.tile(x, [2, 3]))}


def space_depth() -> dict:
    """SPACE_TO_DEPTH1 of a {1, 2, 2, 4} input (1..16), BlockSize 2, in both
    orders (the output {1, 8, 1, 2} drawn one channel per row), and
    DEPTH_TO_SPACE1 of each back."""
    x = np.arange(1, 17, dtype=np.int32).reshape(1, 2, 2, 4)
    runs = {}
    for order in ("DCR", "CRD"):
        depth = dml.space_to_depth(x, 2, order=order)
        runs[order] = {"depth_shape": list(depth.shape), "channels": _ints(depth[0].reshape(depth.shape[1], -1)),
                       "back": _ints(dml.depth_to_space(depth, 2, order=order))}
    return {"input": _ints(x[0]), "block_size": 2, "orders": runs}


# -- the index-driven operators ------------------------------------------------------------------------------

def _index_run(title, fields, **grids) -> dict:
    """One run of an index-driven operator: its arrays as nested lists (a 1-D
    array as one row), in the order drawn."""
    return {"title": title, "fields": fields,
            "grids": {k: _ints(np.atleast_2d(v)) for k, v in grids.items()}}


def gather_examples() -> dict:
    """GATHER, GATHER_ELEMENTS and GATHER_ND of a 3x4 input (1..12): each
    output value names the input element it read."""
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    rows, elems, nd = (np.array([2, 0, 2], np.int32), np.array([[3, 0], [1, 1], [2, 0]], np.int32),
                       np.array([[0, 1], [2, 3]], np.int64))
    return {"runs": [
        _index_run("GATHER, Axis 0: whole rows", "dml.gather(x, indices, 0)", input=x, indices=rows,
                   output=dml.gather(x, rows, 0)),
        _index_run("GATHER_ELEMENTS, Axis 1: one element per index", "dml.gather_elements(x, indices, 1)",
                   input=x, indices=elems, output=dml.gather_elements(x, elems, 1)),
        _index_run("GATHER_ND: an index tuple per element", "dml.gather_nd(x, indices)", input=x,
                   indices=nd, output=dml.gather_nd(x, nd))]}


def scatter_examples() -> dict:
    """SCATTER_ELEMENTS and SCATTER_ND into a 3x4 input (1..12), updates from
    21 and 31: an output value above 20 is an update written there."""
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    ei, eu = np.array([[2, 0, 1, 2]], np.int32), np.array([[21, 22, 23, 24]], np.int32)
    ni, nu = np.array([[0, 1], [2, 3]], np.int64), np.array([31, 32], np.int32)
    return {"runs": [
        _index_run("SCATTER_ELEMENTS, Axis 0", "dml.scatter_elements(x, indices, updates, 0)", input=x,
                   indices=ei, updates=eu, output=dml.scatter_elements(x, ei, eu, 0)),
        _index_run("SCATTER_ND: an index tuple per update", "dml.scatter_nd(x, indices, updates)",
                   input=x, indices=ni, updates=nu, output=dml.scatter_nd(x, ni, nu))]}


def one_hot_example() -> dict:
    """ONE_HOT of five indices, depth 4, OffValue 0 and OnValue 1: -1 counts
    from the end, 5 is outside [-4, 4) and gives an all-off row."""
    i = np.array([0, 3, 2, -1, 5], np.int32)
    out = dml.one_hot(i, 4, np.array([0, 1], np.int32))
    return {"runs": [_index_run("ONE_HOT, depth 4, values [0, 1]", "dml.one_hot(indices, 4, values), values [0, 1]",
                                indices=i[:, None], output=out)]}


def reverse_subsequences_example() -> dict:
    """REVERSE_SUBSEQUENCES of a 3x4 input (1..12) along axis 1, a length per row."""
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    lengths = np.array([2, 4, 3], np.uint32)
    return {"runs": [_index_run("REVERSE_SUBSEQUENCES, Axis 1", "dml.reverse_subsequences(x, sequence_lengths, 1)",
                                input=x, sequence_lengths=lengths[:, None],
                                output=dml.reverse_subsequences(x, lengths, 1))]}


def diagonal_matrix_example() -> dict:
    """DIAGONAL_MATRIX1 without and with an input (1..20): a diagonal strip
    of 7s, the strictly upper triangle kept, an inverted range keeping the
    main diagonal."""
    x = np.arange(1, 21, dtype=np.int32).reshape(4, 5)
    return {"runs": [
        _index_run("no input, Value 7, [0, 3): a strip of three diagonals",
                   "dml.diagonal_matrix(shape=(4, 5), dtype='int32', value=7, begin=0, end=3)",
                   output=dml.diagonal_matrix(shape=(4, 5), dtype="int32", value=7, begin=0, end=3)),
        _index_run("Value 0, [INT32_MIN, 1): the strictly upper triangle kept",
                   "dml.diagonal_matrix(x, value=0, begin=-2**31, end=1)", input=x,
                   output=dml.diagonal_matrix(x, value=0, begin=-2 ** 31, end=1)),
        _index_run("Value 0, [1, 0) inverted: all but the main diagonal filled",
                   "dml.diagonal_matrix(x, value=0, begin=1, end=0)", input=x,
                   output=dml.diagonal_matrix(x, value=0, begin=1, end=0))]}


def index_clamp() -> dict:
    """GATHER with indices outside the dimension, unchecked
    (``check_indices=False``): a negative index counts from the end, then the
    kernels clamp to the nearest edge."""
    x = np.arange(1, 5, dtype=np.int32)
    i = np.array([-1, 5, 1, -7], np.int64)
    return {"runs": [_index_run("GATHER of 1..4 with out-of-range indices",
                                "dml.gather(x, indices, 0, check_indices=False)", input=x, indices=i,
                                output=dml.gather(x, i, 0, check_indices=False))]}


FIGURES = {
    "slice-examples": slice_examples,
    "slice1-examples": slice1_examples,
    "unfold-padded": unfold_padded,
    "unfold-dilated": unfold_dilated,
    "fold-overlaps": fold_overlaps,
    "slice-grad": slice_grad_example,
    "identity-strided": identity_strided,
    "cast-rules": cast_rules,
    "padding-modes": padding_modes,
    "join-split": join_split,
    "tile": tile_example,
    "space-depth": space_depth,
    "gather": gather_examples,
    "scatter": scatter_examples,
    "one-hot": one_hot_example,
    "reverse-subsequences": reverse_subsequences_example,
    "index-clamp": index_clamp,
    "diagonal-matrix": diagonal_matrix_example,
}


def compute() -> dict:
    """The numbers of every figure, from opendml runs on the CPU."""
    return {name: make() for name, make in FIGURES.items()}


# -- drawing -------------------------------------------------------------------------------------------------

COLORS = ["#7fb2e5", "#f08c8c", "#8fd19e", "#c3a6e0", "#ffbf80", "#c9a38f"]
READ = "#ffd966"
PAD = "#e6e6e6"


def _grid(ax, values, *, fill=None, labels=None, title=None, origin=(0, 0), fontsize=10, edge="#555555"):
    """Cells of ``values`` (rows x cols) at ``origin``; ``fill[r][c]`` a colour
    or None, ``labels[r][c]`` small text in the cell's corner."""
    from matplotlib.patches import Rectangle
    rows, cols = len(values), len(values[0])
    x0, y0 = origin
    for r in range(rows):
        for c in range(cols):
            color = fill[r][c] if fill is not None and fill[r][c] else "white"
            ax.add_patch(Rectangle((x0 + c, y0 - r - 1), 1, 1, facecolor=color, edgecolor=edge, lw=0.8))
            v = values[r][c]
            if v is not None:
                ax.text(x0 + c + 0.5, y0 - r - 0.5, str(v), ha="center", va="center", fontsize=fontsize)
            if labels is not None and labels[r][c]:
                ax.text(x0 + c + 0.06, y0 - r - 0.1, labels[r][c], ha="left", va="top", fontsize=6.5,
                        color="#444444")
    if title:
        ax.text(x0 + cols / 2, y0 + 0.35, title, ha="center", va="bottom", fontsize=9.5)


def _axes(ax, width, height):
    ax.set_xlim(-0.3, width + 0.3)
    ax.set_ylim(-height - 0.3, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")


def _save(fig, name):
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / f"{name}.png", dpi=110, bbox_inches="tight", metadata={"Software": None})


def _out_labels(shape):
    return [[f"{r},{c}" for c in range(shape[1])] for r in range(shape[0])]


def draw_slice_like(name, data, *, windows=False):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    runs = data["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(4.3 * len(runs), 3.4))
    for ax, run in zip(np.atleast_1d(axes), runs):
        inp, out, reads = run["input"], run["output"], run["reads"]
        rows, cols = len(inp), len(inp[0])
        fill = [[None] * cols for _ in range(rows)]
        labels = [[""] * cols for _ in range(rows)]
        for r, row in enumerate(reads):
            for c, flat in enumerate(row):
                fill[flat // cols][flat % cols] = READ
                labels[flat // cols][flat % cols] = f"{r},{c}"
        _grid(ax, inp, fill=fill, labels=labels, title="InputTensor (1..16)")
        if windows:
            top, left, h, w = run["window"]
            ax.add_patch(Rectangle((left, -top - h), w, h, fill=False, edgecolor=COLORS[1], lw=2.4))
        ox = cols + 1.2
        _grid(ax, out, fill=[[READ] * len(out[0]) for _ in out], labels=_out_labels((len(out), len(out[0]))),
              title="OutputTensor", origin=(ox, 0))
        ax.text((cols + 1.2 + len(out[0])) / 2, -rows - 0.45, run["fields"], ha="center", va="top", fontsize=8.5)
        ax.set_title(run["title"], fontsize=10)
        _axes(ax, ox + len(out[0]), rows + 0.9)
    caption = ("yellow: elements read; the small label is the output coordinate (row, column) that "
               "receives the element" + ("; red frame: the input window" if windows else ""))
    fig.text(0.5, 0.01, caption, ha="center", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def draw_unfold(name, data, title):
    import matplotlib.pyplot as plt
    n, c, h, w = data["input_shape"]
    sp, ep = data["start_padding"], data["end_padding"]
    cols = data["columns"]
    ph, pw = h + sp[0] + ep[0], w + sp[1] + ep[1]
    # the padded image: input values 0..N-1, padding cells empty and grey
    values = [[None] * pw for _ in range(ph)]
    fill = [[PAD] * pw for _ in range(ph)]
    for r in range(h):
        for q in range(w):
            values[r + sp[0]][q + sp[1]] = r * w + q
            fill[r + sp[0]][q + sp[1]] = None
    labels = [[""] * pw for _ in range(ph)]
    ws = data["window_sizes"]
    strides = data.get("strides", [1, 1])
    dil = data.get("dilations", [1, 1])
    bw = (pw - dil[1] * (ws[1] - 1) - 1) // strides[1] + 1
    out_fill = [[None] * len(cols[0]) for _ in cols]
    for i, b in enumerate(data["blocks"]):
        color = COLORS[i % len(COLORS)]
        # window element k of block b: where the run says it read from
        for k in range(len(cols)):
            out_fill[k][b] = color
            ki, kj = divmod(k, ws[1])
            r = (b // bw) * strides[0] + ki * dil[0]
            q = (b % bw) * strides[1] + kj * dil[1]
            read = cols[k][b] - 1
            expect = (r - sp[0]) * w + (q - sp[1]) if 0 <= r - sp[0] < h and 0 <= q - sp[1] < w else -1
            if read != expect:
                raise AssertionError(f"{name}: block {b} element {k} read {read}, drawn at {expect}")
            if labels[r][q]:
                raise AssertionError(f"{name}: the windows of the blocks drawn overlap at ({r}, {q})")
            fill[r][q] = color if read >= 0 else _lighten(color)
            labels[r][q] = f"k{k}"
    shown = [[v - 1 if v else 0 for v in row] for row in cols]
    nb = len(cols[0])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(0.5 * (pw + nb) + 1.5, 1.6 + 0.5 * max(ph, len(cols))),
                                 gridspec_kw={"width_ratios": [pw + 0.6, nb + 0.6]})
    _grid(a1, values, fill=fill, labels=labels, fontsize=8, title=f"InputTensor {h}x{w}, padding in grey")
    _axes(a1, pw, max(ph, len(cols)))
    row_labels = [[f"k{k}" if j == 0 else "" for j in range(nb)] for k in range(len(cols))]
    _grid(a2, shown, fill=out_fill, labels=row_labels, fontsize=7.5,
          title=f"OutputTensor (1, {len(cols)}, {nb}): column b = block b")
    for j in range(nb):
        a2.text(j + 0.5, 0.05, f"b{j}", ha="center", va="bottom", fontsize=6.5, color="#444444")
    _axes(a2, nb, max(ph, len(cols)))
    fig.suptitle(title, fontsize=10.5)
    fields = ", ".join(f"{k} {data[k]}" for k in ("window_sizes", "strides", "dilations", "start_padding",
                                                   "end_padding") if k in data)
    caption = (fields + ". In colour: the windows of blocks " + ", ".join(f"b{b}" for b in data["blocks"])
               + " (k = window element; pale: padding, read as 0) and the output columns they fill. "
               "The output shows the element read (0 for padding).")
    fig.text(0.5, 0.0, textwrap.fill(caption, 120), ha="center", va="top", fontsize=8)
    _save(fig, name)
    plt.close(fig)


def _lighten(color: str) -> str:
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(v + (255 - v) * 0.7):02x}" for v in rgb)


def draw_fold(name, data):
    import matplotlib.pyplot as plt
    import matplotlib
    runs = data["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 3.2))
    cmap = matplotlib.colormaps["YlOrRd"]
    for ax, run in zip(axes, runs):
        counts, out = run["counts"], run["output"]
        fill = [[_hex(cmap(cnt / 9.0)) for cnt in row] for row in counts]
        _grid(ax, counts, fill=fill, title="window elements summed")
        _grid(ax, out, fill=fill, origin=(5.2, 0), title="FOLD of 0, 1, 2, ...")
        ax.set_title(run["title"], fontsize=10)
        _axes(ax, 9.2, 4.6)
    fig.text(0.5, 0.02, "FOLD (3x3 windows, 4x4 output): the count is FOLD of an input of ones, the values "
             "the page's example; darker = more overlapping windows", ha="center", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def _hex(rgba) -> str:
    return "#" + "".join(f"{int(round(v * 255)):02x}" for v in rgba[:3])


def draw_slice_grad(name, data):
    import matplotlib.pyplot as plt
    grad, out, lands = data["grad"], data["output"], data["lands"]
    fill = [[None] * 4 for _ in range(4)]
    labels = [[""] * 4 for _ in range(4)]
    for i, row in enumerate(lands):
        for j, g in enumerate(row):          # g: the gradient element landing at (i, j), -1 for none
            if g >= 0:
                fill[i][j], labels[i][j] = READ, f"{g // 2},{g % 2}"
    fig, ax = plt.subplots(figsize=(5.4, 3.2))
    _grid(ax, grad, fill=[[READ] * 2 for _ in range(2)], labels=_out_labels((2, 2)), title="InputGradientTensor")
    _grid(ax, out, fill=fill, labels=labels, origin=(3.2, 0), title="OutputGradientTensor")
    _axes(ax, 7.2, 4.6)
    ax.set_title("SLICE_GRAD: SLICE1 example 2 read backwards", fontsize=10)
    fig.text(0.5, 0.02, f"offsets {data['window_offsets']}, sizes {data['window_sizes']}, strides "
             f"{data['window_strides']}; the label is the gradient element each position receives, "
             "every other element is 0", ha="center", fontsize=8)
    _save(fig, name)
    plt.close(fig)


# -- the data-movement family's figures ----------------------------------------------------------------------

def _flat_labels(rows, cols):
    return [[f"{r},{c}" for c in range(cols)] for r in range(rows)]


def draw_identity(name, data):
    """The buffer with each element's output coordinate, and the output."""
    import matplotlib.pyplot as plt
    buf, out, reads = data["buffer"], data["output"], data["reads"]
    rows, cols = len(buf), len(buf[0])
    labels = [[""] * cols for _ in range(rows)]
    fill = [[None] * cols for _ in range(rows)]
    for r, row in enumerate(reads):
        for c, flat in enumerate(row):
            labels[flat // cols][flat % cols] = f"{r},{c}"
            fill[flat // cols][flat % cols] = COLORS[r % len(COLORS)]
    out_fill = [[COLORS[r % len(COLORS)]] * len(out[0]) for r in range(len(out))]
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    _grid(ax, buf, fill=fill, labels=labels, title="input buffer (3x4 in memory)")
    ox = cols + 1.6
    _grid(ax, out, fill=out_fill, labels=_out_labels((len(out), len(out[0]))), origin=(ox, 0),
          title="OutputTensor")
    _axes(ax, ox + len(out[0]), len(out) + 0.4)
    ax.set_title(f"ELEMENT_WISE_IDENTITY of InputTensor Sizes {{{data['sizes'][0]}, {data['sizes'][1]}}}, "
                 f"Strides {{{data['strides'][0]}, {data['strides'][1]}}}", fontsize=10)
    fig.text(0.5, 0.0, "a transpose is one identity: the label is the output coordinate (row, column)\n"
             "that receives the element; one colour per output row", ha="center", va="top", fontsize=8)
    _save(fig, name)
    plt.close(fig)


def draw_cast(name, data):
    """A table: the float32 inputs and each integer type's outputs, coloured
    by the rule that gave them."""
    import matplotlib.pyplot as plt
    inputs = data["input"]
    types = list(data["outputs"])
    ranges = {t: (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in types}
    rule_colors = {"truncated": COLORS[2], "saturated": COLORS[1], "NaN -> 0": COLORS[3]}
    values = [inputs] + [[str(v) for v in data["outputs"][t]] for t in types]
    fill = [[PAD] * len(inputs)]
    for t in types:
        lo, hi = ranges[t]
        row = []
        for text in inputs:
            v = float(text)
            if v != v:
                rule = "NaN -> 0"
            elif not np.isfinite(v) or not lo <= int(np.trunc(v)) <= hi:
                rule = "saturated"
            else:
                rule = "truncated"
            row.append(rule_colors[rule])
        fill.append(row)
    fig, ax = plt.subplots(figsize=(9.2, 2.9))
    _grid(ax, values, fill=fill, fontsize=7.5, origin=(1.6, 0))
    for r, label in enumerate(["FLOAT32"] + [t.upper() for t in types]):
        ax.text(1.45, -r - 0.5, label, ha="right", va="center", fontsize=8.5)
    _axes(ax, 1.6 + len(inputs), len(values))
    ax.set_title("CAST from FLOAT32 to integer types", fontsize=10)
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(facecolor=c, edgecolor="#555555", label=k) for k, c in rule_colors.items()],
               loc="lower center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.02))
    _save(fig, name)
    plt.close(fig)


def draw_padding(name, data):
    """One panel per mode: the input framed, each cell the input element read
    (0: the constant's padding value)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    sp = data["start_padding"]
    h, w = len(data["input"]), len(data["input"][0])
    modes = data["modes"]
    fig, axes = plt.subplots(1, len(modes), figsize=(2.9 * len(modes), 3.0))
    for ax, (mode, out) in zip(axes, modes.items()):
        fill = [[None if v == 0 else COLORS[(v - 1) % len(COLORS)] for v in row] for row in out]
        for r, row in enumerate(out):
            for c, v in enumerate(row):
                if not (sp[0] <= r < sp[0] + h and sp[1] <= c < sp[1] + w):
                    fill[r][c] = _lighten(fill[r][c]) if fill[r][c] else PAD
        _grid(ax, out, fill=fill, fontsize=9)
        ax.add_patch(Rectangle((sp[1], -sp[0] - h), w, h, fill=False, edgecolor="#222222", lw=2.2))
        ax.set_title(mode.upper(), fontsize=10)
        _axes(ax, len(out[0]), len(out))
    fig.text(0.5, 0.02, f"PADDING1 of a {h}x{w} input (1..{h * w}, framed), StartPadding {sp}, EndPadding "
             f"{data['end_padding']}; each cell shows the input element it holds (pale: padding), "
             "CONSTANT pads with 0", ha="center", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def draw_join_split(name, data):
    """The inputs, the joined output coloured by the input each element came
    from, and SPLIT's outputs (the same inputs again)."""
    import matplotlib.pyplot as plt
    inputs, out, back = data["inputs"], data["output"], data["split"]
    owner = {v: i for i, part in enumerate(inputs) for row in part for v in row}
    fig, ax = plt.subplots(figsize=(9.0, 2.8))
    x = 0.0
    for i, part in enumerate(inputs):
        _grid(ax, part, fill=[[COLORS[i]] * len(part[0]) for _ in part], origin=(x, 0), title=f"input {i}")
        x += len(part[0]) + 0.5
    ax.annotate("", xy=(x + 0.9, -1), xytext=(x, -1), arrowprops={"arrowstyle": "->"})
    ax.text(x + 0.45, -0.55, "JOIN", ha="center", fontsize=7.5)
    x += 1.2
    _grid(ax, out, fill=[[COLORS[owner[v]] for v in row] for row in out], origin=(x, 0), title="JOIN, Axis 1")
    x += len(out[0]) + 0.3
    ax.annotate("", xy=(x + 0.9, -1), xytext=(x, -1), arrowprops={"arrowstyle": "->"})
    ax.text(x + 0.45, -0.55, "SPLIT", ha="center", fontsize=7.5)
    x += 1.2
    for i, part in enumerate(back):
        _grid(ax, part, fill=[[COLORS[owner[v]] for v in row] for row in part], origin=(x, 0),
              title=f"output {i}")
        x += len(part[0]) + 0.5
    _axes(ax, x, 2.6)
    fig.text(0.5, 0.04, "each colour is one input; SPLIT along Axis 1 with the same sizes gives the inputs back",
             ha="center", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def draw_tile(name, data):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    inp, out, reps = data["input"], data["output"], data["repeats"]
    h, w = len(inp), len(inp[0])
    color = {v: COLORS[(v - 1) % len(COLORS)] for row in inp for v in row}
    fig, ax = plt.subplots(figsize=(7.6, 3.0))
    _grid(ax, inp, fill=[[color[v] for v in row] for row in inp], title="InputTensor")
    ox = w + 1.2
    _grid(ax, out, fill=[[color[v] for v in row] for row in out], origin=(ox, 0),
          title=f"OutputTensor, Repeats {reps}")
    for i in range(reps[0]):
        for j in range(reps[1]):
            ax.add_patch(Rectangle((ox + j * w, -(i + 1) * h), w, h, fill=False, edgecolor="#222222", lw=1.8))
    _axes(ax, ox + len(out[0]), len(out) + 0.4)
    fig.text(0.5, 0.03, "TILE: each output element is Input[o mod InputTensor.Sizes]; framed: one copy of the input",
             ha="center", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def draw_space_depth(name, data):
    """The space tensor's two channels, coloured by position within the
    block, and the depth tensor in each order, one channel per row."""
    import matplotlib.pyplot as plt
    inp, b = data["input"], data["block_size"]
    where = {}
    for c, chan in enumerate(inp):
        for hh, row in enumerate(chan):
            for ww, v in enumerate(row):
                where[v] = (c, hh % b, ww % b)
    block_color = lambda v: COLORS[where[v][1] * b + where[v][2]]    # noqa: E731
    fig, ax = plt.subplots(figsize=(8.4, 4.4))
    x = 0.0
    for c, chan in enumerate(inp):
        _grid(ax, chan, fill=[[block_color(v) for v in row] for row in chan], origin=(x, 0),
              title=f"channel {c}")
        x += len(chan[0]) + 0.5
    ax.text(x / 2, -3.0, f"space {{1, {len(inp)}, {len(inp[0])}, {len(inp[0][0])}}}, BlockSize {b}",
            ha="center", fontsize=8.5)
    x += 1.0
    for order, run in data["orders"].items():
        chans = run["channels"]
        x += 1.2
        for k in range(len(chans)):
            ax.text(x - 0.12, -k - 0.5, f"ch {k}", ha="right", va="center", fontsize=7.5, color="#444444")
        _grid(ax, chans, fill=[[block_color(v) for v in row] for row in chans], origin=(x, 0),
              title=f"{order}", fontsize=9)
        ax.text(x + 1, -len(chans) - 0.4, "{1, 8, 1, 2}", ha="center", va="top", fontsize=7.5)
        x += len(chans[0]) + 0.6
    _axes(ax, x, 8.8)
    ax.set_title("SPACE_TO_DEPTH1 in both orders (DEPTH_TO_SPACE1 reads them back)", fontsize=10)
    fig.text(0.5, 0.02, "colour: the element's position (row, column) inside its 2x2 block; 1..8 are channel 0, "
             "9..16 channel 1.\nDCR orders the output channels by block position first, CRD by input channel first",
             ha="center", fontsize=8)
    _save(fig, name)
    plt.close(fig)


# -- the index-driven operators' figures ---------------------------------------------------------------------

#: How the index figures name their arrays.
_INDEX_TITLES = {"input": "InputTensor", "indices": "IndicesTensor", "updates": "UpdatesTensor",
                 "sequence_lengths": "SequenceLengthsTensor", "output": "OutputTensor"}


def draw_index(name, data, caption):
    """One row per run: the data arrays coloured by value (the same colour is
    the same element wherever it appears), the index arrays white."""
    import matplotlib
    import matplotlib.pyplot as plt
    runs = data["runs"]
    cmap = matplotlib.colormaps["tab20"]
    width = max(sum(len(g[0]) + 1.2 for g in run["grids"].values()) for run in runs)
    height = max(max(len(g) for g in run["grids"].values()) for run in runs)
    fig, axes = plt.subplots(len(runs), 1, figsize=(0.55 * width + 1.0, (0.55 * height + 1.1) * len(runs) + 0.4))
    for ax, run in zip(np.atleast_1d(axes), runs):
        data_grids = [k for k in run["grids"] if k in ("input", "updates", "output")]
        values = sorted({v for k in data_grids for row in run["grids"][k] for v in row} - {0})
        color = {v: _hex(cmap(i % 20)) for i, v in enumerate(values)}
        x = 0.0
        for key, grid in run["grids"].items():
            fill = ([[color.get(v) for v in row] for row in grid] if key in data_grids else None)
            _grid(ax, grid, fill=fill, origin=(x, 0), title=_INDEX_TITLES[key], fontsize=9)
            x += len(grid[0]) + 1.2
        ax.set_title(run["title"], fontsize=10, pad=14)
        ax.text(x / 2, -height - 0.35, run["fields"], ha="center", va="top", fontsize=8.5, family="monospace")
        _axes(ax, x, height + 0.9)
    fig.text(0.5, 0.0, caption, ha="center", va="top", fontsize=8.5)
    _save(fig, name)
    plt.close(fig)


def draw(data: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    draw_slice_like("slice-examples", data["slice-examples"])
    draw_slice_like("slice1-examples", data["slice1-examples"], windows=True)
    draw_unfold("unfold-padded", data["unfold-padded"], "UNFOLD example 2: 3x3 windows over a 5x5 input, "
                "StartPadding {1, 0}, EndPadding {1, 0}")
    draw_unfold("unfold-dilated", data["unfold-dilated"], "UNFOLD with strides, dilations and asymmetric padding")
    draw_fold("fold-overlaps", data["fold-overlaps"])
    draw_slice_grad("slice-grad", data["slice-grad"])
    draw_identity("identity-strided", data["identity-strided"])
    draw_cast("cast-rules", data["cast-rules"])
    draw_padding("padding-modes", data["padding-modes"])
    draw_join_split("join-split", data["join-split"])
    draw_tile("tile", data["tile"])
    draw_space_depth("space-depth", data["space-depth"])
    same = "the input holds 1..12 (its flat index + 1): a colour is one input element wherever it appears"
    draw_index("gather", data["gather"], same)
    draw_index("scatter", data["scatter"], "the input holds 1..12, the updates 21.. and 31..: each update's colour "
               "shows where it was written")
    draw_index("one-hot", data["one-hot"], "each row is one index's sequence: OnValue where the index points, "
               "OffValue elsewhere (all off for 5, outside [-4, 4))")
    draw_index("reverse-subsequences", data["reverse-subsequences"], "each row's first SequenceLengths[i] "
               "elements are reversed, the rest copied; a colour is one input element")
    draw_index("diagonal-matrix", data["diagonal-matrix"], "each element's diagonal is column - row; the filled "
               "diagonals hold Value, the others the input's element (or 0 without an input)")
    draw_index("index-clamp", data["index-clamp"], "-1 counts from the end (4), 5 is clamped to the last element, "
               "-7 (-3 after counting from the end) to the first")


def main(argv: list[str]) -> int:
    data = compute()
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if "--check" in argv:
        if not MANIFEST.exists() or MANIFEST.read_text(encoding="utf-8") != text:
            print(f"{MANIFEST} is out of date: run python docs/figures.py", file=sys.stderr)
            return 1
        return 0
    draw(data)
    MANIFEST.write_text(text, encoding="utf-8")
    print(f"wrote {len(FIGURES)} figures and {MANIFEST.name} to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
