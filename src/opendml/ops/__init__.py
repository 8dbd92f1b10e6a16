"""One module per operator: its DirectML-shaped description (a frozen dataclass), rules, support tables, and lowering to
the move program (``plan.MovePlan``, every operator's one plan type). ``OPERATORS`` maps DirectML's names (for the JSON
form, the command line, the DxDispatch runner) to the descriptions: an operator is one module plus one line here.
Imports ``opendml.model`` and ``opendml.plan`` only.

``_common.OperatorDesc``'s docstring says what every operator class declares and a description offers; ``_spec`` the
slot and field kinds. Besides:

* ``C_LOWERING``/``C_INDEX``: the number of its never-seen shapes' C lowering (newshape.h's ``ODML_LOWER_*``;
  runtime/native/newshape_index.c's), where it has one; ``chunking()``: see ``_spec``.
* The window operators (SLICE, SLICE1, SLICE_GRAD, UNFOLD, FOLD) also declare their framework forms: ``output_sizes_of``
  (the shape rule's one copy, for any int-like values), ``adjoint_call(input_sizes, args)`` (the adjoint as an array-API
  call ``(name, arguments, shape or None)``), ``batched_args`` (vmap), ``framework_call`` (the PyTorch operators' form)
  and ``SCHEMA`` (its ``torch.library`` schema, after the name), ``call_args()`` (the array API's arguments after the
  array), and ``plain_lowering(in_sizes, *args)``: the description-free plan of the common valid case, in index space
  (None otherwise), run by ``PLAIN_KERNEL``, for an input its caller checked; the reference of its C copy (``C_PLAIN``:
  newshape.h's ``ODML_PLAIN_*``, run as lowering ``runtime.calls.LOWER_PLAIN | C_PLAIN``), which
  tests/test_newshape_lowering.py compares."""
from ._common import OperatorDesc, SupportRow, support
from ._spec import (REQUIRED, Bool, DepthSpaceOrder, Enum, Field, Float, Int, IntArray, PaddingMode, ScalarUnion,
                    ScaleBias, Struct, Tensor, UInt)
from importlib import import_module as _import_module

from .slice1 import max_copied_elements

#: The operator modules, one line each: every public class of a module that declares ``OPERATOR`` is registered, a
#: module's classes in the order of their DirectML type values.
_MODULES = (
    "slice",
    "slice1",
    "unfold",
    "fold",
    "slice_grad",
    "identity",
    "cast",
    "padding",
    "padding1",
    "join",
    "split",
    "tile",
    "space_depth",
    "gather",
    "gather_elements",
    "gather_nd",
    "scatter",
    "scatter_nd",
    "one_hot",
    "reverse_subsequences",
    "diagonal_matrix",
)


def _declared(module: str) -> list:
    mod = _import_module(f"{__name__}.{module}")
    return sorted((c for n, c in vars(mod).items() if isinstance(c, type) and c.__module__ == mod.__name__
                   and not n.startswith("_") and issubclass(c, OperatorDesc) and "OPERATOR" in c.__dict__),
                  key=lambda c: c.TYPE_VALUE)


#: DirectML's operator name -> its description class.
OPERATORS: dict[str, type[OperatorDesc]] = {cls.OPERATOR: cls for m in _MODULES for cls in _declared(m)}
#: The description classes by their Python names (``SliceOperatorDesc``...), exported here.
DESCRIPTIONS: dict[str, type[OperatorDesc]] = {cls.__name__: cls for cls in OPERATORS.values()}
globals().update(DESCRIPTIONS)

#: Other names DirectML gives an operator (``DML_OPERATOR_SCATTER`` for SCATTER_ELEMENTS), from each class's
#: ``ALIASES``: the JSON form accepts them.
ALIASES: dict[str, str] = {alias: cls.OPERATOR for cls in OPERATORS.values() for alias in getattr(cls, "ALIASES", ())}

__all__ = ["OperatorDesc", "SupportRow", "support", "Field", "IntArray", "UInt", "Int", "Float", "Bool", "Enum", "ScalarUnion",
           "Struct", "Tensor", "REQUIRED", "PaddingMode", "DepthSpaceOrder", "ScaleBias", *DESCRIPTIONS,
           "max_copied_elements", "OPERATORS", "ALIASES"]
