"""One module per operator: its DirectML-shaped description (a frozen
dataclass), its rules and support tables, and its lowering to the move
program (``plan.MovePlan``, every operator's one plan type).
``OPERATORS`` maps DirectML's names (the JSON form, the command line, the
DxDispatch runner) to the descriptions: adding an operator is one module plus
one line here. May import ``opendml.model`` and ``opendml.plan`` only.

What an operator class declares (see ``_common.OperatorDesc`` and ``_spec``):

* ``OPERATOR``: DirectML's name without ``DML_OPERATOR_`` (``"PADDING1"``);
  ``TYPE_VALUE``: its ``DML_OPERATOR_TYPE`` value in ``DirectML.h``;
  ``SUPPORT``: one ``SupportRow(level, ranks, types)`` per tensor-support
  table of its page, written as the steps its ranks and types take
  (``support({"1_0": 4, "3_0": (1, 8)}, first=FLOAT16_32)``); the first
  row's level is its ``INTRODUCED``, the level it came with.
* ``SLOTS``: its tensors in the struct's order, each a
  ``Tensor(json, attr, role="input"|"output", many=False, optional=False)``:
  ``json`` DirectML's field name, ``attr`` the dataclass attribute, ``many``
  for an array of tensors (JOIN's ``InputTensors``, SPLIT's
  ``OutputTensors``: the attribute holds a tuple), ``optional`` where the
  description may leave it None and the sizes are derived. An operator of
  single tensors, one output last, may give ``TENSORS`` (their names) and
  ``OUTPUT_DERIVABLE`` instead, ``SLOTS`` then derived from them; its
  ``TENSORS`` default to its dataclass fields named ``*_tensor``, in order
  (``indices_tensor`` is ``IndicesTensor``).
* ``FIELDS``: the other struct fields in order, each a kind of ``_spec`` with
  its DirectML name and attribute: ``Field``/``IntArray`` (an array of
  integers, with the ``fill`` used when the JSON leaves it out), ``UInt``,
  ``Int``, ``Float``, ``Bool``, ``Enum(enum=PaddingMode | DepthSpaceOrder |
  DataType)``, ``ScalarUnion(type_field=...)`` (a ``DML_SCALAR_UNION`` typed
  by a sibling ``DML_TENSOR_DATA_TYPE`` field: PADDING1's
  ``PaddingValueDataType``/``PaddingValue``), ``Struct(struct=ScaleBias)``
  (a ``_Maybenull_`` pointer to a struct: IDENTITY's ``ScaleBias``). Each has
  a ``default`` (``REQUIRED``, a value, or a callable of the values parsed so
  far).
* ``COUNTS``: DirectML's count fields mapped to the array each counts
  (``{"DimensionCount": "StartPadding"}``, ``{"InputCount": "InputTensors"}``);
  the JSON form accepts them and checks them, the description does not store
  them.
* ``DEFAULT_INPUT_START``: where the pages' example inputs start (1 or 0).
* ``C_LOWERING``/``C_INDEX``: the number of its never-seen shapes' C lowering
  (newshape.h's ``ODML_LOWER_*``; runtime/native/newshape_index.c's), where
  it has one; ``chunking()``: which input axes a block-wise run (Dask) needs
  in one chunk (0) or cut at multiples of m (m), or a kind of ``_spec``.
* The window operators (SLICE, SLICE1, SLICE_GRAD, UNFOLD, FOLD) declare
  their framework forms too: ``output_sizes_of`` (the one copy of the shape
  rule, for any int-like values), ``adjoint_call(input_sizes, args)`` (the
  adjoint as an array-API call ``(name, arguments, shape or None)``),
  ``batched_args`` (vmap), ``framework_call`` (the PyTorch operators'
  form), ``call_args()`` (the array API's arguments), and the new-shape
  route's ``plain_lowering(in_sizes, *args)``: the description-free plan of
  the common valid case, in index space (None for anything else, which the
  descriptions then name), run by ``PLAIN_KERNEL``; its caller has checked
  that ``TensorDesc(t, in_sizes)`` is valid. It is the reference of
  its C copy (``C_PLAIN``: newshape.h's ``ODML_PLAIN_*``), which the one
  C new-shape route runs (the move program's tuned pass, lowering number
  ``runtime.calls.LOWER_PLAIN | C_PLAIN``); tests/test_newshape_lowering.py
  compares the two.

A description offers ``inputs``/``outputs`` (every tensor in slot order) and
``named_tensors(role)`` (``("InputTensors[1]", desc)`` pairs), ``validate(level)``
(the support tables for every tensor, then the operator's own
``_validate_level``), and ``lower()`` (its move program: the passes its
``_passes(layouts)`` gives, framed by ``OperatorDesc.lower``).
"""
from ._common import OperatorDesc, SupportRow, support
from ._spec import (REQUIRED, Bool, DepthSpaceOrder, Enum, Field, Float, Int, IntArray, PaddingMode, ScalarUnion,
                    ScaleBias, Struct, Tensor, UInt)
from importlib import import_module as _import_module

from .slice1 import max_copied_elements

#: The operator modules, one line each (adding an operator is its module and
#: its line here): every public class of a module that declares ``OPERATOR``
#: is registered, a module's classes in the order of their DirectML type values.
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

#: Other names DirectML gives an operator (``DML_OPERATOR_SCATTER`` for
#: SCATTER_ELEMENTS), from each class's ``ALIASES``: the JSON form accepts them.
ALIASES: dict[str, str] = {alias: cls.OPERATOR for cls in OPERATORS.values() for alias in getattr(cls, "ALIASES", ())}

__all__ = ["OperatorDesc", "SupportRow", "support", "Field", "IntArray", "UInt", "Int", "Float", "Bool", "Enum", "ScalarUnion",
           "Struct", "Tensor", "REQUIRED", "PaddingMode", "DepthSpaceOrder", "ScaleBias", *DESCRIPTIONS,
           "max_copied_elements", "OPERATORS", "ALIASES"]
