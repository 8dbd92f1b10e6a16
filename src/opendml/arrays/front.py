"""The array API's front: one function per bound operator (``slice``, ``unfold``, ``pad``, ``split``...;
``FUNCTIONS``) on NumPy, CuPy, PyTorch, JAX and Dask arrays, each building one ``Call`` that the array's adapter
runs. Each is generated from its operator module's ``BINDING`` (``opendml.ops._spec.Binding``) as a plain function
compiled from its own source, so ``help``, ``inspect`` and completion read it as a ``def``; nothing here names an
operator.

Every function takes, in order: the C call cache (``runtime.calls``: a call seen before is served from C); the C
new-shape route (a never-seen shape in its simple forms lowered, run and recorded in C, anything else declined); the
contract's checks (``_contract``); snapshots of every list argument, read once so that another thread changing it
cannot mix values (``_snaps``, ``_snapshot``); then the route of the array's framework (``adapter_for``,
``run_list``; the index functions through ``index_ops.run``).

Every ``opendml.configure()`` empties the caches; a replaced ``engine.execute`` (a spy) is given every family call.
The adapters never import this module: they call these functions again through ``_dispatch.front``. No framework
is imported here.
"""
from __future__ import annotations

import ast
import enum as _enum
import importlib
import importlib.abc
import importlib.util
import inspect
import linecache
import sys
import types
from collections.abc import Mapping, Set
from collections.abc import MutableSequence as _MutableSequence
from typing import Any, Sequence, Union

import numpy as np

from ..model._checks import NOT_NUMBERS
from ..model.data_type import DataType
from ..model.errors import ValidationError
from ..ops import OPERATORS
from ..ops._spec import Enum
from ..ops._spec import per_axis  # noqa: F401 - the array API's spelling of a scalar over the spatial axes
from ..runtime import calls as _calls
from ..runtime import get_backend
from . import _contract, _dispatch, engine as _engine, index_ops as _index, numpy_adapter, planner
from .engine import ADJOINT_API, PLAN_KEY, Call, _many_out, adjoint, fixed, run_numpy  # noqa: F401
from .engine import _EXECUTE  # noqa: F401 - read by the generated functions' code (below)
from .index_ops import NO_ARRAY as _NO_ARRAY
from .planner import plan_cache_info

#: An int, or one int per axis.
Ints = Union[int, Sequence[int]]


# -- frameworks: one adapter each ------------------------------------------------------------------

#: ``_dispatch.framework_of``'s name of a framework -> opendml's adapter module for it.
_ADAPTERS = {"numpy": "numpy_adapter", "torch": "torch.adapter", "cupy": "cupy_adapter", "jax": "jax_adapter",
             "dask.array": "dask_adapter"}

#: Adapter per array type already seen (types are few; lookups are per call).
_BY_TYPE: dict = {}


def adapter_for(x, function: str = "array API", argument: str = "x"):
    """The adapter module that runs operators on ``x``'s framework; ``ValidationError`` (``function: argument must be
    a NumPy, CuPy, PyTorch, JAX or Dask array; got ...``) for anything else."""
    adapter = _BY_TYPE.get(type(x))
    if adapter is not None:
        return adapter
    kind = _contract.framework_of(x)
    if kind is None:
        raise _contract.not_an_array(x, function, argument)
    return _BY_TYPE.setdefault(type(x), importlib.import_module(f"{__package__}.{_ADAPTERS[kind]}"))


def _framework(x, where: str, argument: str | int = "x"):
    """``adapter_for``, None for NumPy (whose move route is ``run_numpy``); ``argument``: the array's name, or its
    position in the call, named by ``_contract.argument_of`` where a message needs it."""
    adapter = _BY_TYPE.get(type(x)) or adapter_for(
        x, where, _contract.argument_of(where, argument) if type(argument) is int else argument)
    return None if adapter is numpy_adapter else adapter


def _one_framework(name: str, arrays, check: bool = False):
    """The adapter of ``arrays``' one framework (None: NumPy); with ``check``, after the contract's checks of
    their dtypes and ranks (``_contract.check_inputs``), made before the call's arguments are read."""
    first = arrays[0]
    fw = _framework(first, name, 0)
    for i, x in enumerate(arrays[1:], 1):
        if type(x) is not type(first) and _framework(x, name, i) is not fw:
            raise ValidationError(f"{name}: every array must be of one framework; got {_contract._type_name(first)} "
                                  f"and {_contract._type_name(x)} ({_contract.argument_of(name, i)})")
    if check:
        _contract.check_inputs(name, arrays)
    return fw


def run_list(call: Call, arrays) -> list:
    """Run ``call`` on ``arrays`` (one framework); the outputs as a list."""
    arrays = list(arrays)
    return _route(_one_framework(call.name, arrays), call, arrays)


def _route(fw, call: Call, arrays) -> list:
    """``call`` on ``arrays`` by the adapter ``fw``'s one route (``run``); NumPy's (``fw`` None): ``run_numpy``."""
    return run_numpy(call, arrays) if fw is None else fw.run(call, arrays)


# -- snapshots -------------------------------------------------------------------------------------

def _snaps(values) -> tuple:
    """A private copy of each mutable argument, read once, that every later step of a call reads. Lists stay lists
    and NumPy arrays stay arrays (messages show them as given); immutable values are kept."""
    out = []
    for value in values:
        t = type(value)
        if t is list:
            value = value[:]                  # one C-level copy under the GIL
        elif t is int or t is tuple or value is None:
            pass
        elif isinstance(value, np.ndarray):
            value = value.copy()
        elif isinstance(value, (list, _MutableSequence)):
            try:                              # another mutable sequence: its items, read once
                value = list(value)
            except Exception:                 # noqa: BLE001 - validation then names what is wrong with it
                pass
        out.append(value)
    return tuple(out)


def _snapshot(value):
    """A list argument read once, as a tuple (a 1-D NumPy array as a tuple of its items); anything else as given
    (validation names what is wrong with it)."""
    if isinstance(value, np.ndarray):
        return tuple(value.tolist()) if value.ndim == 1 else value
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, (str, bytes, Mapping, Set)) or not hasattr(value, "__iter__"):
        return value
    try:
        return tuple(value)
    except Exception:  # noqa: BLE001 - the description's checks then name the argument
        return value


# -- the C call cache and the C new-shape route -----------------------------------------------------

#: ``_cached(op, x, *args)``/``_move(op, x, *args)``: a repeated call served by the C call cache, or None.
_cached = _calls.call
_OPS = _calls.OPS

_move = _calls.move
# Members of these key by identity in the C call cache (PyTorch's dtype type joins at its first use).
_MOVE_TYPES = tuple(sorted({DataType} | {f.enum for cls in OPERATORS.values() for f in cls.FIELDS
                                          if isinstance(f, Enum)}, key=lambda t: t.__name__))
_calls.register_move_types(_MOVE_TYPES)


#: ``_new(op, x, args)``: a never-seen shape lowered, run and recorded in C, or None (the Python route).
_move_new = _calls.move_new
# each lowering with its support table's element types (bit 8 + DataType value), and LOWER_SEQUENCE where the arrays
# come as one list or tuple
_LOWER = {_calls.OPS[k]: v | sum(1 << (8 + int(t)) for t in _contract.supported_row(_contract.OPERATOR_OF[k]).types)
          | (_calls.LOWER_SEQUENCE if _contract.BINDING[k].array == "arrays" or _contract.BINDING[k].route == "index"
             else 0)
          for k, v in (*_calls.MOVE_LOWERINGS.items(),
                       *((k, _calls.LOWER_PLAIN | i) for i, k in enumerate(_calls.PLAIN_LOWERED)))}
_generation_now = _engine._generation_now
_count_planned = planner.count_planned
_cuda_conf = _calls.cuda_conf


def _new(op: int, x, args: tuple):
    state = _engine.NEW_SETTINGS
    if state[0] != _generation_now():
        state = _engine.new_settings()
    lower = _LOWER.get(op)
    # no C lowering, or a replaced prepare (a spy): the Python route (state[2] None: the NumPy kernels, so CUDA
    # inputs alone take the C route)
    if lower is None or "prepare" in state[3]:
        return None
    out = _move_new(op, lower, x, args, state[0], state[2], _cuda_conf)
    if type(out) is str:
        out = _calls.compiled_first(lambda: _move_new(op, lower, x, args, state[0], state[2], _cuda_conf), x, out)
    if out is not None:
        _count_planned()                    # validated and planned, in C: a plan-cache miss
    return out


def _key_by_identity(value) -> None:
    """Let the C call cache key PyTorch dtypes (singletons) by identity from now on."""
    global _MOVE_TYPES
    kind = type(value)
    if kind.__module__ == "torch" and kind not in _MOVE_TYPES:
        _MOVE_TYPES = (*_MOVE_TYPES, kind)
        _calls.register_move_types(_MOVE_TYPES)


# -- the two routes past the C call cache, for every function ------------------------------------

#: Operator code (``runtime.calls.OPS``) -> the array-API function's name.
_NAMES: dict = {}


def _plan(op: int, x, args: tuple):
    """A call of the first five past the C call cache and new-shape route: snapshots, the contract's checks, the
    description's maker, then the adapter's route (recorded in the C call cache by the arguments as snapshotted)."""
    name = _NAMES[op]
    args = _snaps(args)
    known = type(x) in _BY_TYPE
    fw = _one_framework(name, (x,), True)
    if not known and _engine.execute is _EXECUTE:
        # the array type's first call (the body offers the C new-shape route only a type it has seen): its adapter,
        # now loaded, has registered the framework with the C routes
        out = _new(op, x, args)
        if out is not None:
            return out
    return _route(fw, plan_call(name, x, args), [x])[0]


def plan_call(name: str, x, args: tuple) -> Call:
    """The ``Call`` of the window function ``name`` (route "plan") on ``x`` and ``args``, its arguments checked
    (nothing run): the plan route's, and the checked lax forms' (``opendml.jax``)."""
    return Call(name, _BUILD[name](ARGUMENT_API, x, *args), key=PLAN_KEY, ccall=(name, args, False), args=args)


def _move_call(op: int, x, args: tuple):
    """A family call past the C call cache and new-shape route (``_family_call``), run by its adapter's route."""
    name = _NAMES[op]
    fw, call, arrays = _family_call(name, x, args)
    outs = _route(fw, call, arrays)
    return outs if name in _MULTI else outs[0]


def _family_call(name: str, x, args: tuple):
    """(framework, ``Call``, the arrays as a list) of a family function's call, nothing run: the contract's checks on
    the inputs (a sequence where the binding's array is ``arrays``), the list arguments snapshotted, the description
    its operator class's ``arguments`` make, keyed for the Python cache and the C call cache (by the snapshots)."""
    seq = name in _SEQUENCES
    arrays = _contract.array_sequence(x, name) if seq else (x,)
    fw = _one_framework(name, arrays, True)
    snap = _SNAPSHOTS[name]
    args = tuple(_snapshot(v) if i in snap else v for i, v in enumerate(_contract.concrete(args)))
    make, key = _BUILD[name](ARGUMENT_API, arrays[0], *args)
    return fw, Call(name, make, name in _MULTI, planner.call_key(name, *key), (name, args, seq)), list(arrays)


def family_call(name: str, x, args: tuple) -> Call:
    """The ``Call`` of the family function ``name`` (route "move") on ``x`` (a sequence for JOIN) and ``args``
    (the arguments after ``x``, as the function takes them), checked as a call is, nothing run: an adapter's
    traced operator rebuilds a call from its text with it (``arrays/torch/dynamic.py``)."""
    family_function(name, args)
    return _family_call(name, x, tuple(args))[1]


def family_function(name: str, args: tuple):
    """The family function ``name`` (route "move"), checked to take ``args`` after its array (a
    ``ValidationError`` otherwise)."""
    b = _contract.BINDING.get(name) if type(name) is str else None
    if b is None or b.route != "move":
        raise ValidationError(f"family_call: {name!r} is not a data-movement family function (one of "
                              f"{', '.join(n for n in FUNCTIONS if _contract.BINDING[n].route == 'move')})")
    code = FUNCTIONS[name].__code__                        # (positional parameters only: the generated def's)
    params = code.co_varnames[1:code.co_argcount]
    if len(args) != len(params):
        raise ValidationError(f"family_call: {name} takes {len(params)} argument{'s' * (len(params) != 1)} after "
                              f"its array ({', '.join(params)}); got {len(args)}")
    return FUNCTIONS[name]


def _index_call(op: int, given: tuple, args: tuple):
    """An index function's call past the C call cache and new-shape route: the contract's checks, its operator
    class's ``arguments``, then the index route (``index_ops.run``); a call whose sizes a tracer keeps symbolic goes
    to its adapter's ``traced_index`` (PyTorch's: ``opendml::family``) instead, before ``arguments`` reads them."""
    name = _NAMES[op]
    given, args, traced = _index_checked(name, given, args)
    if traced is not None:
        out = traced(name, given, args)
        if out is not None:
            return out[0]
    make, arrays, shape, fields = _BUILD[name](ARGUMENT_API, *given, *args)
    return _index.run(name, make, arrays, shape, fields, given, args)


def _index_checked(name: str, given: tuple, args: tuple):
    """(given, args, the adapter's ``traced_index`` or None) of an index function's call, the contract's checks made."""
    args = _contract.concrete(args)
    if name in _index.CHECKED:                    # the switch itself: a bool, not anything with a truth value
        flag = args[0]
        if not isinstance(flag, (bool, np.bool_)):
            raise _contract.field_error(name, "check_indices", "be True or False", flag)
        args = (bool(flag), *args[1:])
    if given[0] is not _NO_ARRAY:
        if _contract.framework_of(given[0]) is None:
            raise _contract.not_an_array(given[0], name, _contract.BINDING[name].array)
        for a in given:             # each framework's adapter loaded first: its READABLE check (a nested tensor)
            if type(a) not in _BY_TYPE and _contract.framework_of(a) is not None:
                adapter_for(a)
        _contract.check_input(name, given[0])
        _contract.check_others(name, **dict(zip(_contract.BINDING[name].others, given[1:])))
    # a NumPy subclass (np.matrix, which stays 2-D when reshaped) as the plain ndarray it holds; a masked
    # array goes on as given (the route refuses it: its mask would be dropped)
    given = tuple(a.view(np.ndarray) if isinstance(a, np.ndarray) and type(a) is not np.ndarray and
                  not isinstance(a, np.ma.MaskedArray) else a for a in given)
    traced = None if given[0] is _NO_ARRAY else getattr(_framework(given[0], name), "traced_index", None)
    return given, args, traced


def index_function(name: str, given, args) -> int:
    """The code of the index function ``name`` (route "index"), checked to take ``given`` (its arrays, a sequence) and
    ``args`` (its other arguments as its body offers them: keyword-only first), else a ``ValidationError``."""
    if name not in _INDEX:
        raise ValidationError(f"family_call: {name!r} is not an index function (one of {', '.join(sorted(_INDEX))})")
    code = FUNCTIONS[name].__code__                        # (the generated def's parameters: its arrays first)
    arrays = 1 + len(_contract.BINDING[name].others)
    others = code.co_argcount + code.co_kwonlyargcount - arrays
    if len(given) != arrays or len(args) != others:
        raise ValidationError(f"family_call: {name} takes {arrays} array(s) and {others} other argument(s); got "
                              f"{len(given)} and {len(args)}")
    return _OPS[name]


def index_run(name: str, given, args):
    """The index function ``name``'s body on ``given`` and ``args`` (as ``index_function`` checks them)."""
    op, given = index_function(name, given, args), tuple(given)
    out = _index.offer(op, given, tuple(args))
    return out if out is not None else _index_call(op, given, tuple(args))


def index_parts(name: str, given, args) -> tuple:
    """(the description's maker, the arrays it is made for, the result's shape) of an index function's call,
    checked as the call is (the index values excepted: nothing is read of them), nothing run."""
    index_function(name, given, args)
    given, args, _ = _index_checked(name, tuple(given), tuple(args))
    if name in _index.CHECKED:
        args = (False, *args[1:])
    return _BUILD[name](ARGUMENT_API, *given, *args)[:3]


# -- the functions, generated from the operator modules' bindings -------------------------------------

#: What an operator class's ``arguments`` may call (``opendml.ops._spec.Binding``): the contract's checks and
#: messages, handed down so that the operator modules never import the array layer.
ARGUMENT_API = types.SimpleNamespace(axis=_contract.axis, rank_of=_contract.rank_of,
                                     field_error=_contract.field_error, sizes_of=_contract.sizes_of,
                                     dtype_argument=_contract.dtype_argument, key_by_identity=_key_by_identity,
                                     count=_index.count, lead=_index.lead, check_indices=_index.check,
                                     no_array=_NO_ARRAY, snapshot=_snapshot, data_type=_contract.data_type)

#: The routes' bodies: the C call cache offered the arguments as received, then the route (the index functions
#: offer their arrays as one tuple and the other arguments as another, keyword-only ones first).
_BODIES = {
    "plan": "    if _engine.execute is _EXECUTE:\n"
            "        out = _cached({code}, {array}, {args})\n"
            "        if out is None and type({array}) in _BY_TYPE:\n"
            "            out = _new({code}, {array}, ({args},))\n"
            "        if out is not None:\n"
            "            return out\n"
            "    return _plan({code}, {array}, ({args},))\n",
    "move": "    if _engine.execute is _EXECUTE:\n"
            "        out = _move({code}, {array}, {args})\n"
            "        if out is None:\n"
            "            out = _new({code}, {array}, ({args},))\n"
            "        if out is not None:\n"
            "            return out\n"
            "    return _move_call({code}, {array}, ({args},))\n",
    "index": "    out = _index.offer({code}, {given}, {offered})\n"
             "    return out if out is not None else _index_call({code}, {given}, {offered})\n",
}

_ARRAYS = "numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array"

#: The docstring's parts every function shares; ``Binding.doc`` gives the summary and the other parameters, the
#: binding and the operator's support table the rest.
_DOC = """{summary}

    Parameters
    ----------
    {array} : {array_type}
        {shape}, of any strides (read where it lies, negative strides included) and a dtype the operator's
        support table lists: {types}.{params}

    Returns
    -------
    {result}
        {one} packed (C-contiguous) array {returns}, {home}

    Raises
    ------
    UnsupportedError
        If the dtype of {subject} is missing from the operator's support table at the newest feature level
        (bool, bfloat16, complex...: the message names the supported ones), or the array is one opendml cannot
        read (a PyTorch tensor on a device other than cpu, cuda or meta, or sparse, nested or conjugated; a JAX
        array sharded over several devices).
    ValidationError
        If {subject} is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a rank the support table lacks (it
        takes {ranks}), a dimension of size 0 or more than 2**32 - 1 elements (DirectML's tensor limits), or an
        argument breaks one of the operator's rules ({rules}): the message names the field and the rule.
        Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a ``MemoryError``) naming the operator, the
        output's shape and its bytes, if an output cannot be allocated.
    """

#: Where the result lies and how it differentiates (``_DOC``'s ``home``), unless a caller says otherwise.
_HOME = """of {owner}
        framework and device; for a Dask array, a lazy Dask array (nothing is computed until it is). Where the
        operator is linear for the dtypes, a PyTorch result is differentiable (autograd, forward-mode AD and the
        ``torch.func`` transforms; under ``torch.compile`` the call goes through opendml's custom operators) and
        a JAX result in reverse mode (``jax.grad``; see ``opendml.jax``)."""


def _docstring(b, cls, array_type: str | None = None, result: str | None = None, home: str | None = None) -> str:
    """The docstring of ``b``'s function; ``array_type``, ``result`` and ``home`` (the array's type, the result's,
    and where it lies) replace the array API's for a function that converts its array (``opendml.jax``'s)."""
    summary, _, params = b.doc.partition("\n\n    Parameters\n    ----------\n")
    row = _contract.supported_row(cls)
    many, multi = b.array == "arrays", _many_out(cls)
    ranks = range(max(0, row.ranks.start - b.added_axes), row.ranks.stop - b.added_axes)
    owner = "the inputs'" if many else f"``{b.array}``'s"
    return _DOC.format(
        summary=summary, array=b.array, array_type=array_type or (
            "sequence of arrays" if many else _ARRAYS + (", optional" if b.optional else "")),
        shape=("A non-empty sequence of arrays of one framework, dtype and rank" if many
               else b.shape or "The input"), types=_contract.type_list(row.types_of(b.slot)),
        params="\n" + params if params else "", result=result or ("list of arrays" if multi else "array"),
        one="One new" if multi else "A new", returns=b.returns, home=home or _HOME.format(owner=owner),
        subject="an entry of ``arrays``" if many else f"``{b.array}``",
        ranks=f"{ranks.start} to {ranks.stop - 1} dimensions" if len(ranks) > 1 else f"{ranks.start} dimensions",
        rules=b.rules + ("; with ``check_indices``, the first index out of range, named with its value and position"
                         if b.function in _index.CHECKED else ""))


def _generate(b, cls) -> Any:
    """The array function ``b`` (a ``Binding``) declares: a real function (its own signature, docstring and source, as
    ``inspect`` reads them) whose body offers the arguments as received to the C call cache, else takes ``b.route``."""
    spec = ast.parse(f"def f({b.params}): pass").body[0].args
    if (spec.kwonlyargs and b.route != "index") or spec.vararg or spec.kwarg or spec.posonlyargs:
        raise TypeError(f"{b.function}: a binding's params are plain positional-or-keyword parameters "
                        f"(the generated body forwards those only; keyword-only ones on the index route); "
                        f"got {b.params!r}")
    positional = [a.arg for a in spec.args]
    args = ", ".join(positional)
    given = [b.array, *(n for n in positional if n in b.others)]
    offered = [a.arg for a in spec.kwonlyargs] + [n for n in positional if n not in b.others]
    result = "list" if _many_out(cls) else "Any"
    array = f"{b.array}: {'Sequence[Any]' if b.array == 'arrays' else 'Any'}{' = _NO_ARRAY' if b.optional else ''}"
    body = _BODIES[b.route].format(code=_OPS[b.function], array=b.array, args=args,
                                   given=f"({', '.join(given)},)", offered=f"({', '.join(offered)},)")
    src = f"def {b.function}({array}, {b.params}) -> {result}:\n" + body
    if b.members:
        # what Dynamo traces in the function's place (``_STAND_INS``) calls the second, which enters a graph whole,
        # with the arguments read as enum members as ``_member`` tuples; it reads them back (``_unmember``), so
        # their enum survives the graph. An eager call runs the function as it is. The stand-in passes the call's
        # arguments on as given: Dynamo cannot hold every default (the generator's no-array one)
        whole = f"_{b.function}_whole"
        places = [(n, [b.array, *positional].index(n) if n in positional else None) for n in b.members]
        src += (f"def {whole}({array}, {b.params}) -> {result}:\n"
                + "".join(f"    {n} = _unmember({n})\n" for n in b.members) + body
                + f"def _{b.function}_traced(*args, **kwargs):\n"
                + "".join(f"    if len(args) > {i}:\n"
                          f"        args = (*args[:{i}], _member(args[{i}]), *args[{i + 1}:])\n"
                          for n, i in places if i is not None)
                + "".join(f"    if {n!r} in kwargs:\n        kwargs[{n!r}] = _member(kwargs[{n!r}])\n"
                          for n, _ in places)
                + f"    return {whole}(*args, **kwargs)\n")
    filename = f"<opendml.{b.function}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(src, filename, "exec"), globals(), namespace)       # noqa: S102 - our own bindings' text
    fn = namespace[b.function]
    fn.__doc__ = _docstring(b, cls)
    if not b.members:
        return fn, fn, None
    whole = globals()[f"_{b.function}_whole"] = namespace[f"_{b.function}_whole"]     # what the third calls
    return fn, whole, namespace[f"_{b.function}_traced"]


def _member(value):
    """An enum member as a tuple of strings (its enum's module and qualified name, its own name, its value's
    repr), which a graph passes on as it is; any other value as it is."""
    if isinstance(value, _enum.Enum):
        return (_MEMBER, type(value).__module__, type(value).__qualname__, value.name, repr(value))
    return value


class _Unreachable:
    """A member of an enum ``_unmember`` cannot reach by its names (one defined in a function): no spelling of any
    argument, shown as the member was."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _unmember(value):
    """The enum member a ``_member`` tuple names (a stand-in showing it where its enum cannot be reached); any other
    value as it is."""
    if type(value) is not tuple or len(value) != 5 or value[0] != _MEMBER:
        return value
    _, module, qualname, name, text = value
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, _enum.Enum) and name in found.__members__:
        return found[name]
    return _Unreachable(text)


#: The first item of a ``_member`` tuple: a string no caller passes by chance.
_MEMBER = f"\0opendml.member.{id(_unmember):x}"
#: The function entering a graph whole -> (the array function, what Dynamo traces in its place), for functions
#: with arguments read as enum members (``_on_dynamo``).
_STAND_INS: dict = {}


#: Array-API function name -> its operator class's ``arguments`` (the description from the arguments).
_BUILD: dict = {}
#: The generated functions, by name, in the registry's order.
FUNCTIONS: dict = {}
#: Which functions take a sequence of arrays (``Binding.array == "arrays"``: JOIN), return a list (an operator with
#: a list of outputs: SPLIT), are index functions (route "index": ``opendml::family`` runs them by ``index_run``),
#: and which arguments are lists to snapshot (those the signature types as sequences).
_SEQUENCES: set = set()
_MULTI: set = set()
_INDEX: set = set()
_SNAPSHOTS: dict = {}


def bind(cls) -> Any:
    """The array function ``cls``'s ``BINDING`` declares, generated and entered in every table a call reads (the
    call cache's code, the builders, the snapshots, ``ADJOINT_API``, the functions that enter a ``torch.compile``
    graph whole). The registry's operators are bound as this module loads; one registered later is bound by this."""
    b = _contract.BINDING[cls.BINDING.function]
    name = b.function
    fn, whole, traced = _generate(b, cls)
    FUNCTIONS[name] = globals()[name] = fn
    _NAMES[_OPS[name]], _BUILD[name] = name, cls.arguments
    if b.array == "arrays":
        _SEQUENCES.add(name)
    if b.route == "index":
        _INDEX.add(name)
    if _many_out(cls):
        _MULTI.add(name)
    _SNAPSHOTS[name] = frozenset(i for i, p in enumerate(list(inspect.signature(fn).parameters.values())[1:])
                                 if "Sequence" in str(p.annotation) or "Ints" in str(p.annotation))
    setattr(_engine._AdjointApi, name, staticmethod(fn))     # what the operators' ``adjoint`` may call
    setattr(_dispatch.front, name, fn)                      # what the adapters call again
    if traced is not None:
        _STAND_INS[whole] = (fn, traced)
    _dispatch.enter_graph_whole([whole])
    return fn


def cpu_output_cache(limit: int | None = None) -> dict:
    """The CPU array API's output-block cache, and optionally a new size limit.

    With the compiled CPU kernels, outputs of 1 MiB and up are put in memory blocks that, once the output (and every
    view of it) is released, are kept for the next output of a similar size: a fresh large allocation costs page
    faults and zero-filling on first touch, about as much as the operator itself. ``limit``: the new limit in bytes
    (the setting ``opendml.configure(output_cache_bytes=...)``; 0 turns reuse off and frees the blocks held), or
    None (the default) to leave it as it is. Returns ``{'limit', 'blocks', 'bytes', 'hits', 'misses'}`` (ints): the
    limit in bytes, the released blocks kept and their bytes, and the cache's hit and miss counts (outputs that got
    a kept block, or did not); all 0 with the NumPy kernels.

    Raises
    ------
    TypeError
        If ``limit`` is not an int (a bool is not) or None.
    ValidationError
        If ``limit`` is outside [0, 2**62].
    UnsupportedError
        If the configuration asks for the compiled CPU kernels
        (``OPENDML_CPU_KERNELS=compiled``) and they are not installed.
    """
    from ..runtime.config import MAX_CACHE_BYTES, configure
    if limit is not None:
        if isinstance(limit, NOT_NUMBERS) or not isinstance(limit, (int, np.integer)):
            raise TypeError(f"cpu_output_cache: limit must be an int (bytes) or None; got {type(limit).__name__}")
        if not 0 <= limit <= MAX_CACHE_BYTES:
            raise ValidationError(f"cpu_output_cache: limit must be in [0, {MAX_CACHE_BYTES}] (bytes) or None; "
                                  f"got {limit}")
        configure(output_cache_bytes=int(limit))
    return get_backend("cpu").cache_info()


for _cls in _contract.OPERATOR_OF.values():
    if _cls.BINDING.params is not None:
        bind(_cls)
#: The move program's functions (a list result where the operator has several outputs), the index ones included.
FAMILY = tuple(name for name in FUNCTIONS if _contract.BINDING[name].route != "plan")
__all__ = [*FUNCTIONS, "bind", "cpu_output_cache", "plan_cache_info", "adapter_for"]

# What the layers below read through ``_dispatch.front``.
_dispatch.front.run_list = run_list
_dispatch.front.family_call = family_call
_dispatch.front.family_function = family_function
_dispatch.front.index_run = index_run
_dispatch.front.index_parts = index_parts
_dispatch.front.INDEX = _INDEX
_dispatch.front.framework = _framework
_dispatch.front.new_shape = lambda op, x, args: _new(op, x, args)      # the one read at call time
# torch.compile takes every function into a graph whole: Dynamo cannot trace the C call cache, and
# AOTAutograd then runs the call on fake tensors, which take the PyTorch adapter's custom operators.


class _OnDynamo(importlib.abc.MetaPathFinder):
    """A one-shot import hook telling Dynamo (``allow_in_graph``) about the functions that enter a graph whole the
    moment it is imported, whatever was imported first, without importing it here."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)       # the finders after this one
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _on_dynamo(module)
            spec.loader.exec_module = exec_module
        return spec


def _on_dynamo(module) -> None:
    """Tell ``torch._dynamo``, now imported, which functions enter a graph whole (those registered so far and
    later), and what it traces in the place of those with arguments read as enum members: where a traced frame
    calls the function, its stand-in (``torch.compiler.substitute_in_graph``: an eager call runs the function as it
    is). A PyTorch without it (before 2.5; the PyTorch wing refuses any before ``arrays.torch.dtypes.MIN_TORCH``) is
    left alone."""
    if not hasattr(importlib.import_module("torch.compiler"), "substitute_in_graph"):
        return

    def enter(f):
        module.allow_in_graph(f)
        if f in _STAND_INS:
            fn, traced = _STAND_INS[f]
            importlib.import_module("torch.compiler").substitute_in_graph(fn)(traced)
    _dispatch.on_enter_graph_whole(enter)


if "torch._dynamo" in sys.modules:
    _on_dynamo(sys.modules["torch._dynamo"])
else:
    sys.meta_path.insert(0, _OnDynamo())
