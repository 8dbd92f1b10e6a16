"""The JSON form of a description, in DirectML's own field names, so a
description can be copied from C++ code:

    {"Operator": "SLICE1",
     "InputTensor":  {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
     "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
     "InputWindowOffsets": [0, 0, 0, 1], ...}

``OutputTensor`` (or just its ``Sizes``) may be left out: it is derived. Errors name the offending field's JSON path.
"""
from __future__ import annotations

import json
import math
import os
import stat
import tokenize

import numpy as np

from .ops import ALIASES, OPERATORS, OperatorDesc
from .ops._spec import OMIT, Field, snake
from .model._checks import _short, json_text, type_name
from .model.data_type import DataType
from .model.errors import DmlError, ValidationError
from .model.tensor_desc import MAX_RANK, TensorDesc, TensorFlags

TENSOR_FIELDS = ("DataType", "Flags", "DimensionCount", "Sizes", "Strides",
                 "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment")
#: Keys an example or test-vector file may carry beside the description.
EXTRA_FIELDS = ("Name", "Title", "Source", "Input", "ExpectedOutput", "Inputs", "ExpectedOutputs")


class JsonFormError(ValidationError):
    """A JSON description is malformed: the message names the JSON path."""


#: Containers may nest this deep (a description nests 3 levels; an 8-D "Input" 9); deeper JSON is refused before
#: anything walks it recursively.
MAX_DEPTH = 32
#: Python reads integers of at most this many digits (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300


def parse_int(text: str, error=None) -> int:
    """A JSON integer, refused (``error``, by default ``JsonFormError``) past ``MAX_INT_DIGITS`` digits."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise (error or JsonFormError)(f"malformed JSON: an integer of {digits} digits ({text[:12]}...) is longer than the "
                            f"{MAX_INT_DIGITS} digits that can be read (DirectML's fields have at most 20)")
    return int(text)


_TOO_DEEP = f"$: the JSON nests arrays and objects more than {MAX_DEPTH} levels deep"


def check_depth(obj, error=JsonFormError, too_deep: str = _TOO_DEEP) -> None:
    """Refuse (``error(too_deep)``) JSON nesting arrays and objects more than ``MAX_DEPTH`` deep (walked without
    recursion)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > MAX_DEPTH:
                raise error(too_deep)
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def loads(text: str) -> dict:
    """Parse a JSON description: a ``JsonFormError`` for malformed text, a key
    given twice in one object (JSON would keep the last silently), integers
    too long to read, nesting deeper than ``MAX_DEPTH``, and anything but an object."""
    return parse_object(text, parse_int=parse_int, object_pairs_hook=unique_keys(
        JsonFormError, lambda key: json.dumps(key)[:80], "the second would silently replace the first"))


def unique_keys(error, quote, why: str):
    """A JSON ``object_pairs_hook`` refusing a key given twice in one object:
    ``error`` naming the first repeated key (``quote(key)``) and ``why``."""
    def hook(pairs) -> dict:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise error(f"malformed JSON: the key {quote(key)} appears twice in one object ({why})")
        return out
    return hook


def parse_object(text: str, what: str = "$: a description", error=JsonFormError, too_deep: str = _TOO_DEEP,
                 **hooks) -> dict:
    """``json.loads(text, **hooks)``, which must be an object (``what``) of at
    most ``MAX_DEPTH`` levels (else ``error(too_deep)``)."""
    try:
        obj = json.loads(text, **hooks)
    except json.JSONDecodeError as e:
        raise error(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise error(too_deep) from None
    if not isinstance(obj, dict):
        raise error(f"{what} must be a JSON object; got {type_name(obj)}")
    check_depth(obj, error, too_deep)
    return obj


def array_from_json(value, data_type: DataType, path: str) -> np.ndarray:
    """A JSON array of numbers (``Input``, ``ExpectedOutput``) as a NumPy array of ``data_type``. It must be
    rectangular (every sub-array of a level the same length), nest at most 8 levels, and hold numbers that survive the
    conversion: integers (or integral numbers) within an integer type's range; for a float type any number whose
    magnitude does not overflow it (NaN and Infinity, which Python's JSON reads, are kept)."""
    dt = data_type.numpy_dtype
    if not isinstance(value, list):
        raise JsonFormError(f"{path}: must be an array of numbers; got {type_name(value)}")
    shape: list[int] = []
    level = [value]
    while level and isinstance(level[0], list):
        n = len(level[0])
        for p, item in enumerate(level):
            if not isinstance(item, list) or len(item) != n:
                where = _index_path(path, p, shape)
                got = f"an array of {len(item)}" if isinstance(item, list) else type_name(item)
                raise JsonFormError(f"{where}: the array must be rectangular: expected an array of {n} "
                                    f"entries like {_index_path(path, 0, shape)}; got {got}")
        shape.append(n)
        if len(shape) > MAX_RANK:
            raise JsonFormError(f"{path}: nests arrays more than {MAX_RANK} levels deep (a tensor has at "
                                f"most {MAX_RANK} dimensions)")
        level = [x for item in level for x in item]
    leaves = []
    integer = dt.kind in "iu"
    lo, hi = (int(np.iinfo(dt).min), int(np.iinfo(dt).max)) if integer else (None, float(np.finfo(dt).max))
    for p, x in enumerate(level):
        bad = None
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            bad = f"must be a number; got {type_name(x)} {_short(x)}"
        elif integer:
            if isinstance(x, float):
                if not math.isfinite(x) or x != math.floor(x):
                    bad = f"must be an integer for {data_type.name}; got {x!r}"
                else:
                    x = int(x)
            if bad is None and not lo <= x <= hi:
                bad = f"{_short(x)} is out of range for {data_type.name} [{lo}, {hi}]"
        else:
            try:
                f = float(x)
                with np.errstate(over="ignore"):
                    overflow = math.isfinite(f) and abs(f) > hi and bool(np.isinf(np.array(f).astype(dt)))
            except OverflowError:               # an integer beyond float64
                f, overflow = math.inf, True
            if overflow:
                bad = f"{_short(x)} is out of range for {data_type.name} (magnitude at most {hi:g})"
            x = f
        if bad is not None:
            raise JsonFormError(f"{_index_path(path, p, shape)}: {bad}")
        leaves.append(x)
    with np.errstate(over="ignore"):
        return np.array(leaves, dtype=np.float64 if not integer else dt).astype(dt).reshape(shape)


def _index_path(path: str, flat: int, shape) -> str:
    """``$.Input[0][2]``: the JSON path of entry ``flat`` of a level whose
    parents have ``shape``."""
    if not shape:
        return path
    index = np.unravel_index(flat, shape) if all(shape) else ()
    return path + "".join(f"[{int(i)}]" for i in index)


def open_regular(path):
    """``(file, None)``: ``path`` opened to read (binary) if a regular file, else ``(None, kind)``, ``kind`` naming
    what it is ("a folder", "a FIFO", "a device", "a socket" or "not a regular file"): checked on the file opened
    non-blocking, so a FIFO without a writer cannot hold the caller up. OSError (ValueError: a NUL in the path) where
    it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return os.fdopen(fd, "rb"), None
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None, file_kind(mode)


def file_kind(mode: int) -> str:
    """What a file that is no regular file is, by its ``st_mode``: "a folder", "a FIFO", "a device", "a socket" or
    "not a regular file"."""
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def open_checked(path, fail):
    """``open_regular(path)``'s file; where there is none, ``fail("open",
    why it cannot be opened)`` or ``fail("kind", what it is instead)``,
    which raises."""
    try:
        f, kind = open_regular(path)
    except (OSError, ValueError) as e:
        fail("open", getattr(e, "strerror", None) or e)
    if f is None:
        fail("kind", kind)
    return f


#: The default memory limit (``max_bytes``, --max-bytes; 2 GiB): what ``opendml run`` may touch, what a DxDispatch
#: model's resources may take.
DEFAULT_MAX_BYTES = 2 << 30


def text_limit(max_bytes: int) -> int:
    """The most bytes a JSON file (a description, a DxDispatch model) may hold under a memory limit of ``max_bytes``:
    a sixteenth of it, at least 1 MiB (parsed JSON takes up to about 16 bytes per byte of text: a list of numbers
    becomes Python objects)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise TypeError(f"max_bytes must be an int (bytes); got {type(max_bytes).__name__}")
    return max(max_bytes // 16, 1 << 20)


def read_regular(path, limit: int, fail, encoding: str = "utf-8") -> str:
    """The regular file ``path``'s text (see ``open_regular``), at most ``limit`` bytes, decoded. A refusal calls
    ``fail(reason, detail)``, which raises: ``"open"`` (why it cannot be opened or read), ``"kind"`` (what it is
    instead), ``"size"`` (its bytes, a count or "more than LIMIT"; checked before reading), ``"text"`` (not text in
    ``encoding``)."""
    f = open_checked(path, fail)
    try:
        with f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                fail("size", str(size))
            raw = f.read(limit + 1)
    except OSError as e:
        fail("open", e.strerror or e)
    if len(raw) > limit:
        fail("size", f"more than {limit}")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        fail("text", encoding)


class NpyError(ValueError):
    """Why ``npy_header`` cannot read a .npy header (its message)."""


#: The longest .npy header read (NumPy's own ``max_header_size``): a header describes one array in well under this.
MAX_NPY_HEADER = 10000


def npy_header(f, versions=((1, 0), (2, 0))):
    """``(shape, fortran order, dtype)`` of the .npy file ``f``, read from its start (``versions``: the format
    versions taken), or an ``NpyError`` saying why not: no NumPy magic (an empty file, a .npz archive), another
    version, a header cut short or malformed."""
    fmt = np.lib.format
    try:
        head = f.read(len(fmt.MAGIC_PREFIX))
        if head != fmt.MAGIC_PREFIX:
            raise NpyError("an empty file" if not head else "a .npz archive (zip); extract one of its .npy arrays"
                           if head.startswith(b"PK") else "not a .npy file (no NumPy magic)")
        f.seek(0)
        version = fmt.read_magic(f)
        if version not in versions:
            raise NpyError(f"format version {version[0]}.{version[1]} (versions "
                           f"{', '.join(f'{a}.{b}' for a, b in versions)} are read)")
        # The header's length (2 bytes, or 4 from version 2) is checked before NumPy reads that many bytes (a sparse
        # file claiming a 4 GiB header cost 8 GiB of memory).
        start, width = f.tell(), 2 if version == (1, 0) else 4
        field = f.read(width)
        if len(field) == width and (length := int.from_bytes(field, "little")) > MAX_NPY_HEADER:
            raise NpyError(f"a header of {length} bytes (at most {MAX_NPY_HEADER} are read)")
        f.seek(start)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(f, max_header_size=MAX_NPY_HEADER)
        if any(n < 0 for n in shape):   # (-2, -3) would pass as 6 elements; np.load refuses it
            raise NpyError(f"a malformed header (a negative dimension in the shape {list(shape)})")
        return shape, fortran, dtype
    except NpyError:
        raise
    except (ValueError, SyntaxError, EOFError, TypeError, MemoryError, RecursionError, UnicodeError,
            tokenize.TokenError) as e:                # a header cut short or malformed
        raise NpyError(f"a malformed header ({e.args[0]})" if isinstance(e, tokenize.TokenError) else
                       " ".join(str(e).split())[:200] or type(e).__name__) from None


def default_input(t: TensorDesc, start: int) -> np.ndarray:
    """The pages' example input for tensor ``t``: ``start, start + 1, ...`` in row-major order, in ``t``'s type
    (wrapping as C does). Dimensions of stride 0 hold one element in memory, so they count once and the values repeat
    along them (a read-only broadcast view of ``t``'s shape over the distinct elements)."""
    distinct = tuple(1 if s == 0 else n for n, s in zip(t.sizes, t.element_strides))
    with np.errstate(over="ignore"):
        x = np.arange(start, start + math.prod(distinct), dtype=np.int64).astype(t.data_type.numpy_dtype)
    x = x.reshape(distinct)
    return x if distinct == t.sizes else np.broadcast_to(x, t.sizes)


def _int_list(obj, key, path):
    v = obj[key]
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise JsonFormError(f"{path}.{key}: must be an array of integers; got {json_text(v)[:80]}")
    return v


def json_arrays(obj: dict, key: str, desc, side: str, error=JsonFormError) -> list[np.ndarray] | None:
    """``obj``'s ``key + "s"`` (a list, one array per ``side`` tensor) or ``key`` (the one ``side`` tensor's array),
    each checked against its tensor's sizes and type (``Input``/``Inputs``, ``ExpectedOutput``/``ExpectedOutputs``);
    None where ``obj`` has neither (both: an error)."""
    named = desc.named_tensors(side)
    if key in obj and key + "s" in obj:
        raise error(f"$: \"{key}\" and \"{key}s\" are both given (one array, or a list of one per tensor); "
                    f"give one of them")
    if key + "s" in obj:
        values = obj[key + "s"]
        if not isinstance(values, list) or len(values) != len(named):
            got = len(values) if isinstance(values, list) else type(values).__name__
            raise error(f"$.{key}s: must be a list of {len(named)} arrays (one per {side} tensor: "
                        f"{', '.join(n for n, _ in named)}); got {got}")
        wheres = [f"$.{key}s[{i}]" for i in range(len(named))]
    elif key in obj:
        if len(named) != 1:
            raise error(f"$.{key}: {desc.OPERATOR} {'takes' if side == 'input' else 'has'} {len(named)} "
                        f"{side}s; give them as \"{key}s\" (a list of {len(named)} arrays)")
        values, wheres = [obj[key]], [f"$.{key}"]
    else:
        return None
    out = []
    for v, where, (n, t) in zip(values, wheres, named):
        x = array_from_json(v, t.data_type, where)
        if x.shape != t.sizes:
            raise error(f"{where}: shape {list(x.shape)} must equal {n}.Sizes {list(t.sizes)}")
        out.append(x)
    return out


def check_keys(obj, allowed, path, required=(), error=JsonFormError, field=lambda path, k: (f"{path}.{k}", "")):
    """``obj`` is a JSON object with only ``allowed`` keys and every key of
    ``required``, else ``error``: ``field(path, key)`` gives the message's
    place and the words after the rule's name."""
    if not isinstance(obj, dict):
        raise error(f"{path}: must be an object; got {type_name(obj)}")
    for k in obj:
        if k not in allowed:
            at, name = field(path, k)
            raise error(f"{at}: unknown field{name}; expected one of {', '.join(allowed)}")
    for k in required:
        if k not in obj:
            at, name = field(path, k)
            raise error(f"{at}: missing required field{name}")


def check_count(value, n: int, path: str, what: str) -> None:
    """A count field (``DimensionCount``, ``InputCount``...): a JSON integer equal to ``n`` (``what``, such as "the
    length of Sizes"), else a ``JsonFormError`` at ``path`` (4.0 or true are no integers, though Python finds them
    equal to 4 and 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise JsonFormError(f"{path}: must be an integer ({what}, {n}); got {json_text(value)}")
    if value != n:
        raise JsonFormError(f"{path}: must equal {what} {n}; got {json_text(value)}")


def tensor_from_json(obj, path: str, *, default_type=None, sizes=None) -> TensorDesc:
    check_keys(obj, TENSOR_FIELDS, path, required=() if sizes is not None else ("DataType", "Sizes"))
    kw = {}
    dt = obj.get("DataType", default_type)
    if not isinstance(dt, (str, DataType)):
        raise JsonFormError(f"{path}.DataType: must be a string such as \"FLOAT32\"; got {json_text(dt)}")
    try:
        kw["data_type"] = DataType.parse(dt)
    except DmlError as e:
        raise JsonFormError(f"{path}.DataType: {e}") from None
    kw["sizes"] = _int_list(obj, "Sizes", path) if "Sizes" in obj else sizes
    if "Strides" in obj and obj["Strides"] is not None:
        kw["strides"] = _int_list(obj, "Strides", path)
    for key in ("TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment"):
        if key in obj:
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise JsonFormError(f"{path}.{key}: must be an integer; got {json_text(v)}")
            kw[snake(key)] = v
    if "Flags" in obj:
        f = obj["Flags"]
        if isinstance(f, str):
            name = f.upper().removeprefix("DML_TENSOR_FLAG_")
            if name not in TensorFlags.__members__:
                raise JsonFormError(f"{path}.Flags: unknown flag {f!r}; expected NONE or OWNED_BY_DML")
            f = TensorFlags[name]
        elif isinstance(f, bool) or not isinstance(f, int):
            raise JsonFormError(f"{path}.Flags: must be \"NONE\", \"OWNED_BY_DML\" or an integer; got {json_text(f)}")
        kw["flags"] = f
    if "DimensionCount" in obj and kw["sizes"] is not None:
        check_count(obj["DimensionCount"], len(kw["sizes"]), f"{path}.DimensionCount", "the length of Sizes")
    try:
        return TensorDesc(**kw)
    except DmlError as e:
        raise JsonFormError(f"{path}: {e}") from None


def from_json(obj) -> OperatorDesc:
    """An operator description from a parsed JSON object (or JSON text) in DirectML's field names, read generically from
    what the operator declares (``SLOTS``, ``FIELDS``, ``COUNTS``): a ``many`` slot is a JSON array of tensors, an enum
    a member's name, a scalar union a number typed by its sibling type field, a struct an object of its members. An
    output whose sizes can be derived may be left out, or given without ``Sizes``.

    Raises
    ------
    JsonFormError
        If a field is missing, unknown or of the wrong JSON type; the message
        names its JSON path (``$.InputTensor.Sizes``).
    ValidationError
        If the description breaks one of the operator's rules.
    """
    if isinstance(obj, str):
        obj = loads(obj)
    if not isinstance(obj, dict):
        raise JsonFormError(f"$: a description must be a JSON object; got {type_name(obj)}")
    if "Operator" not in obj:
        raise JsonFormError(f"$.Operator: missing required field; expected one of {', '.join(OPERATORS)}")
    name = obj["Operator"]
    if isinstance(name, str):
        name = name.upper().removeprefix("DML_OPERATOR_")
        name = ALIASES.get(name, name)          # DML_OPERATOR_SCATTER is SCATTER_ELEMENTS
    if not isinstance(name, str) or name not in OPERATORS:
        raise JsonFormError(f"$.Operator: unknown operator {json_text(name)}; expected one of {', '.join(OPERATORS)}")
    cls = OPERATORS[name]
    fields = cls.FIELDS
    allowed = ("Operator", *(s.json for s in cls.SLOTS), *cls.COUNTS, *(f.json for f in fields), *EXTRA_FIELDS)
    required = (*(s.json for s in cls.SLOTS if not s.optional), *(f.json for f in fields if f.required))
    check_keys(obj, allowed, "$", required)
    kw: dict = {}
    parsed: dict = {}
    for s in cls.slots("input"):           # an optional input (DIAGONAL_MATRIX1's) may be left out or null
        kw[s.attr] = parsed[s.json] = None if s.optional and obj.get(s.json) is None else _slot_from_json(obj, s)
    dims = None
    for f in fields:
        if f.json in obj:
            value = f.from_json(obj[f.json], f"$.{f.json}", parsed, JsonFormError)
            if isinstance(f, Field) and dims is None:
                dims = len(value)
        elif isinstance(f, Field):
            if dims is None:          # the first integer array is required
                raise JsonFormError(f"$.{f.json}: missing required field")
            value = [f.fill] * dims
        else:
            value = f.default_value(parsed)
        kw[f.attr] = parsed[f.json] = value
    for count, target in cls.COUNTS.items():
        value = parsed.get(target, obj.get(target))
        if count in obj and isinstance(value, (list, tuple)):
            what = "the number of" if any(s.json == target for s in cls.SLOTS) else "the length of"
            check_count(obj[count], len(value), f"$.{count}", f"{what} {target}")
    kw.update({s.attr: None for s in cls.slots("output")})
    for s in cls.slots("output"):
        o = obj.get(s.json)
        if o is None:
            if not s.optional:
                raise JsonFormError(f"$.{s.json}: required for {cls.OPERATOR} (its sizes cannot be derived)")
        elif not s.many and s.optional and isinstance(o, dict) and "Sizes" not in o:
            derived = getattr(cls(**{**kw, s.attr: None}), s.attr)
            kw[s.attr] = tensor_from_json(o, f"$.{s.json}", default_type=derived.data_type.name,
                                          sizes=derived.sizes)
        else:
            kw[s.attr] = _slot_from_json(obj, s)
    return cls(**kw)


def _slot_from_json(obj: dict, slot) -> "TensorDesc | tuple[TensorDesc, ...]":
    value = obj[slot.json]
    path = f"$.{slot.json}"
    if not slot.many:
        return tensor_from_json(value, path)
    if not isinstance(value, list) or not value:
        got = "an empty array" if isinstance(value, list) else type_name(value)
        raise JsonFormError(f"{path}: must be a non-empty array of tensor descriptions; got {got}")
    return tuple(tensor_from_json(t, f"{path}[{i}]") for i, t in enumerate(value))


def tensor_to_json(t: TensorDesc) -> dict:
    """The JSON form of a tensor description (``TypeError`` for anything else)."""
    if not isinstance(t, TensorDesc):
        raise TypeError(f"tensor_to_json: t must be a TensorDesc; got {type(t).__name__}")
    d = {"DataType": t.data_type.name, "Sizes": list(t.sizes)}
    if t.strides is not None:
        d["Strides"] = list(t.strides)
    if t.total_tensor_size_in_bytes != t.min_size_in_bytes:
        d["TotalTensorSizeInBytes"] = t.total_tensor_size_in_bytes
    if t.guaranteed_base_offset_alignment:
        d["GuaranteedBaseOffsetAlignment"] = t.guaranteed_base_offset_alignment
    if t.flags:
        d["Flags"] = "OWNED_BY_DML"
    return d


def to_json(desc: OperatorDesc) -> dict:
    """The JSON form of a description: its slots and fields in the struct's
    order (counts are implied by the arrays' lengths); ``TypeError`` for
    anything but a description."""
    if not isinstance(desc, OperatorDesc):
        raise TypeError(f"to_json: desc must be an operator description; got {type(desc).__name__}")
    d = {"Operator": desc.OPERATOR}
    for s in desc.SLOTS:
        v = getattr(desc, s.attr)
        if v is not None:
            d[s.json] = [tensor_to_json(t) for t in v] if s.many else tensor_to_json(v)
    for f in desc.FIELDS:
        v = f.to_json(getattr(desc, f.attr))
        if v is not OMIT:
            d[f.json] = v
    return d
