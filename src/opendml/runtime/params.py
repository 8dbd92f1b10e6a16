"""The kernels' parameter blocks, mirrored from ``params.h`` (one ctypes
structure per C struct, fields in the same order). A backend fills one of these
and hands its bytes to a kernel: ``bytes(p)`` for the C kernels, the structure
by value for the CUDA kernels (``cuda/launch.py``). ``tests/runtime/test_params.py``
parses the header and checks it against these declarations."""
from __future__ import annotations

import ctypes
import math
import pathlib

__all__ = ["HEADER", "MAX_RANK", "MAX_SPATIAL", "MAX_MOVE_RANK", "SUM_INTEGER", "SUM_FLOAT", "CopyParams",
           "WindowDim", "UnfoldParams", "FoldParams", "ScatterParams", "MoveDim", "MoveParams", "STRUCTS",
           "copy_params", "scatter_params", "unfold_params", "fold_params"]

HEADER = pathlib.Path(__file__).with_name("params.h")
MAX_RANK = 8
MAX_SPATIAL = 6
MAX_MOVE_RANK = 16
SUM_INTEGER = 0
SUM_FLOAT = 1

i64 = ctypes.c_int64


def _fields(*names: str, **arrays) -> list:
    return [(n, i64) for n in names] + [(n, t) for n, t in arrays.items()]


class CopyParams(ctypes.Structure):
    _fields_ = _fields("element_size", "rank", "count", "in_offset", "out_offset",
                       sizes=i64 * MAX_RANK, in_strides=i64 * MAX_RANK, out_strides=i64 * MAX_RANK)


class WindowDim(ctypes.Structure):
    _fields_ = _fields("size", "image_stride", "window", "stride", "dilation", "start_padding", "blocks",
                       "box", "box_extent", "box_count")


class UnfoldParams(ctypes.Structure):
    _fields_ = _fields("element_size", "dims", "batch", "channels", "window_count", "block_count",
                       "work_items", "in_offset", "in_batch_stride", "in_channel_stride", "out_offset",
                       "out_batch_stride", "out_row_stride", "out_column_stride", "column_tiles",
                       "tile_columns", dim=WindowDim * MAX_SPATIAL)


class FoldParams(ctypes.Structure):
    _fields_ = _fields("element_size", "sum_kind", "dims", "batch", "channels", "window_count", "block_count",
                       "work_items", "in_offset", "in_batch_stride", "in_row_stride", "in_column_stride",
                       "out_offset", "out_batch_stride", "out_channel_stride", dim=WindowDim * MAX_SPATIAL)


class ScatterParams(ctypes.Structure):
    _fields_ = _fields("element_size", "rank", "count", "in_offset", "out_offset",
                       sizes=i64 * MAX_RANK, out_strides=i64 * MAX_RANK, first=i64 * MAX_RANK,
                       step=i64 * MAX_RANK, taken=i64 * MAX_RANK, in_strides=i64 * MAX_RANK)


class MoveDim(ctypes.Structure):
    _fields_ = _fields("size", "src_stride", "dst_stride", "map_mode", "map_shift", "map_size", "div_magic",
                       "div_shift")


class MoveParams(ctypes.Structure):
    _fields_ = _fields("rank", "count", "src_offset", "dst_offset", "src_type", "dst_type", "scale_bias",
                       "scale32", "bias32", "scale64", "bias64", "fill_bits", dim=MoveDim * MAX_MOVE_RANK)


def _plain(cls, p, names):
    """The block of a ``CopyPlan`` or ``ScatterPlan`` as it is (callers pass its canonical form): its fields, then
    the per-dimension arrays ``names``."""
    q = cls(element_size=p.element_size, rank=len(p.sizes), count=p.count, in_offset=p.in_offset,
            out_offset=p.out_offset)
    for name in names:
        getattr(q, name)[:len(p.sizes)] = getattr(p, name)
    return q


def copy_params(p) -> CopyParams:
    return _plain(CopyParams, p, ("sizes", "in_strides", "out_strides"))


def scatter_params(p) -> ScatterParams:
    return _plain(ScatterParams, p, ("sizes", "out_strides", "first", "step", "taken", "in_strides"))


def _set_window_dims(params, plan, image_strides):
    """``params.dim`` from the window axes of an UnfoldPlan or FoldPlan;
    ``image_strides``: the image's element strides per spatial axis (the
    input's for UNFOLD, the output's for FOLD). The tile fields (box...)
    are left to the caller."""
    for d, w in enumerate(plan.window):
        dim = params.dim[d]
        dim.size, dim.image_stride, dim.window, dim.stride = plan.spatial[d], image_strides[d], w, plan.strides[d]
        dim.dilation, dim.start_padding, dim.blocks = plan.dilations[d], plan.start_padding[d], plan.blocks[d]
    return params


def unfold_params(plan, work_items: int = 0, **tiles) -> UnfoldParams:
    """The block of an ``UnfoldPlan`` (``tiles``: the CPU kernel's column_tiles, tile_columns)."""
    on, orow, ocol = plan.out_strides
    n_s, c_s, *sp_s = plan.in_strides
    return _set_window_dims(UnfoldParams(
        element_size=plan.element_size, dims=len(plan.window), batch=plan.batch, channels=plan.channels,
        window_count=math.prod(plan.window), block_count=plan.columns, work_items=work_items,
        in_offset=plan.in_offset, in_batch_stride=n_s, in_channel_stride=c_s, out_offset=plan.out_offset,
        out_batch_stride=on, out_row_stride=orow, out_column_stride=ocol, **tiles), plan, sp_s)


def fold_params(plan, work_items: int = 0) -> FoldParams:
    """The block of a ``FoldPlan``."""
    isn, isr, isc = plan.in_strides
    osn, osc, *sp_s = plan.out_strides
    return _set_window_dims(FoldParams(
        element_size=plan.element_size, sum_kind=plan.sum_kind, dims=len(plan.window), batch=plan.batch,
        channels=plan.channels, window_count=math.prod(plan.window), block_count=plan.columns,
        work_items=work_items, in_offset=plan.in_offset, in_batch_stride=isn, in_row_stride=isr,
        in_column_stride=isc, out_offset=plan.out_offset, out_batch_stride=osn, out_channel_stride=osc), plan, sp_s)


#: C struct name -> its mirror.
STRUCTS = {"odml_copy_params": CopyParams, "odml_window_dim": WindowDim, "odml_unfold_params": UnfoldParams,
           "odml_fold_params": FoldParams, "odml_scatter_params": ScatterParams,
           "odml_move_dim": MoveDim, "odml_move_params": MoveParams}

#: The CPU kernels taking these blocks, in their code order: (name, parameter
#: struct) as params.h's ODML_CPU_KERNELS declares them (the kernel's code is
#: its position; tests/runtime/test_params.py checks the two lists agree).
KERNELS = (("copy", CopyParams), ("windows", UnfoldParams), ("window_sums", FoldParams), ("scatter", ScatterParams))
