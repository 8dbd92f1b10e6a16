"""The PyTorch wing's dtype tables, in one place (the adapter and the ``torch.library`` operators read them): which
PyTorch dtypes have a DirectML data type (``DTYPES``, to NumPy's; ``TORCH_DTYPES`` back), and ``numpy_dtype``, the
one check that names what DirectML cannot take; and the PyTorch version check, run at this module's import, which
every way into the wing (the adapter, ``opendml.torch``) reaches through ``dynamic`` before any module that depends
on PyTorch's version."""
from __future__ import annotations

import re

import numpy as np
import torch

from ...model.errors import UnsupportedError
from .._contract import DTYPE_NAMES, argument_of

#: The oldest PyTorch the wing is written for (its tests run on 2.11 and 2.13).
MIN_TORCH = (2, 11)


def check_torch_version(version: str) -> None:
    """``UnsupportedError`` for a PyTorch older than ``MIN_TORCH`` (``version``: ``torch.__version__``)."""
    m = re.match(r"(\d+)\.(\d+)", str(version))
    if m is None or tuple(map(int, m.groups())) < MIN_TORCH:
        raise UnsupportedError(f"PyTorch {version}: opendml's PyTorch support needs PyTorch "
                               f"{MIN_TORCH[0]}.{MIN_TORCH[1]} or later")


check_torch_version(torch.__version__)

__all__ = ["DTYPES", "TORCH_DTYPES", "SUPPORTED_DTYPES", "numpy_dtype", "torch_dtype", "check_device", "device_error"]

#: PyTorch dtypes with a DirectML data type (PyTorch and NumPy name each alike).
DTYPES = {getattr(torch, name): np.dtype(name) for name in DTYPE_NAMES.values()}
SUPPORTED_DTYPES = ", ".join(DTYPE_NAMES.values())
#: NumPy dtype -> its PyTorch dtype.
TORCH_DTYPES = {v: k for k, v in DTYPES.items()}


def numpy_dtype(x, name: str = "array API", argument: str | int = "x") -> np.dtype:
    """The NumPy dtype of ``x``'s elements, or an ``UnsupportedError`` naming what DirectML cannot take (dtype, layout,
    conjugate view); ``argument``: ``x``'s name in the call of ``name``, or its position there (named by
    ``_contract.argument_of``)."""
    dtype = DTYPES.get(x.dtype)
    if dtype is not None and x.layout is torch.strided and not x.is_nested:
        return dtype
    if type(argument) is int:
        argument = argument_of(name, argument)
    a = argument
    if x.is_nested:
        raise UnsupportedError(f"{name}: nested PyTorch tensors are not supported (opendml reads strided, dense "
                               f"tensors); pass {a}.to_padded_tensor(0) or the tensors of {a}.unbind()")
    if x.layout is not torch.strided:
        raise UnsupportedError(f"{name}: PyTorch tensors of layout {x.layout} are not supported (opendml reads "
                               f"strided, dense tensors); pass {a}.to_dense()")
    if x.is_complex() and x.is_conj():
        raise UnsupportedError(f"{name}: a conjugated complex tensor ({a}.is_conj()) of dtype {x.dtype} is not "
                               f"supported: DirectML has no complex types; supported dtypes: {SUPPORTED_DTYPES}")
    raise UnsupportedError(f"{name}: PyTorch dtype {x.dtype} has no DirectML data type; supported dtypes "
                           f"(the 11 DirectML types): {SUPPORTED_DTYPES}")


def check_device(x, name: str) -> None:
    """The ``UnsupportedError`` of a tensor on a device other than cpu, cuda or meta."""
    if x.device.type not in ("cpu", "cuda", "meta"):
        raise UnsupportedError(f"{name}: PyTorch tensors on {x.device} are not supported; use cpu or cuda")


def device_error(where: str, device, got, slot: str) -> UnsupportedError:
    """The error of a call given tensors on two devices: ``device`` (the first tensor's) and ``got`` (``slot``'s)."""
    return UnsupportedError(f"{where}: every tensor must be on one device; got {device} and {got} ({slot})")


def torch_dtype(t) -> torch.dtype:
    """The PyTorch dtype of a ``TensorDesc``'s data type."""
    return TORCH_DTYPES[t.data_type.numpy_dtype]
