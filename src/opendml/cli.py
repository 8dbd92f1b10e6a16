"""The ``opendml`` command: run, validate and inspect DirectML operator descriptions.

    opendml run                          # every example of the specification pages
    opendml run SPEC.json [--input x.npy] [--output y.npy] [--device cpu|cuda] [--feature-level 6_4]
    opendml run --list | --example NAME
    opendml validate SPEC.json [--feature-level 6_4]
    opendml dispatch MODEL.json [--device cpu|cuda] [--feature-level 6_4] [--output-dir DIR]
    opendml dispatch --list | --example NAME [--print-model]
    opendml info

Exit codes: 0 success; 1 an output differs from the documented one; 2 bad input (a usage error, malformed JSON, an
invalid description, a bad file, a malformed OPENDML_* environment variable); 3 an internal error of opendml (a bug).
Errors are one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import stat
import sys
from importlib import resources

import numpy as np

from ._version import __version__
from .device import Device
from .jsonform import (DEFAULT_MAX_BYTES, NpyError, file_kind, from_json, json_arrays, loads, npy_header, open_checked,
                       read_regular, tensor_to_json, text_limit, to_json, default_input as pages_input)
from .ops import OPERATORS
from .model._checks import display_text
from .model.errors import DmlError
from .model.feature_level import FeatureLevel
from .model.tensor_desc import TensorDesc
from .runtime.config import config


class UsageError(Exception):
    """A user mistake outside the description itself (files, flags)."""


# -- bundled examples --------------------------------------------------------------

def examples() -> dict[str, dict]:
    out = {}
    for f in sorted(resources.files("opendml.examples").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".json"):
            obj = json.loads(f.read_text(encoding="utf-8"))
            out[obj["Name"]] = obj
    return out


#: The order `opendml run` runs and lists the bundled examples: the first five operators' in the order of their pages,
#: then every other bundled example (the data-movement family's) by name.
_FIRST = ("slice-contiguous", "slice-strided", "slice1-positive-strides", "slice1-negative-strides",
          "unfold", "unfold-padded", "fold-1", "fold-2-padded", "fold-3-channels", "slice-grad")
EXAMPLE_ORDER = _FIRST + tuple(sorted(n for n in examples() if n not in _FIRST))


# -- formatting -----------------------------------------------------------------------

def fmt_tensor(t: TensorDesc) -> str:
    """A tensor as the pages write it, from its JSON form: (Sizes:{1, 1, 4, 4}, DataType:FLOAT32)."""
    d = tensor_to_json(t)
    parts = [f"Sizes:{{{', '.join(map(str, d.pop('Sizes')))}}}", f"DataType:{d.pop('DataType')}"]
    for k, v in d.items():
        parts.append(f"{k}:{{{', '.join(map(str, v))}}}" if isinstance(v, list) else f"{k}:{v}")
    return f"({', '.join(parts)})"


def fmt_array(a: np.ndarray) -> str:
    with np.printoptions(threshold=1000, edgeitems=3, linewidth=100):
        return np.array2string(a, separator=", ")


# -- running --------------------------------------------------------------------------

def default_input(desc, max_bytes: int | None = None, tensor: TensorDesc | None = None,
                  name: str | None = None) -> np.ndarray:
    """``jsonform.default_input`` of an input (``tensor``/``name``; default: the first) from the operator's
    ``DEFAULT_INPUT_START`` (1..N, or 0..N-1 as UNFOLD's and the gathers' pages), refused where its distinct elements
    take more than ``max_bytes``."""
    t = tensor if tensor is not None else desc.input_tensor
    name = name if name is not None else desc.TENSORS[0]
    nbytes = math.prod(1 if s == 0 else n for n, s in zip(t.sizes, t.element_strides)) * t.element_size
    if max_bytes is not None and nbytes > max_bytes:
        raise UsageError(f"{name}: the default input would take {nbytes} bytes (Sizes {list(t.sizes)}); "
                         f"--max-bytes allows {max_bytes}: pass --input, or raise --max-bytes")
    return pages_input(t, desc.DEFAULT_INPUT_START)


def _refuse(what: str, limit: int = 0):
    """``jsonform.open_checked``/``read_regular``'s ``fail`` for a file named on the command line: a ``UsageError``
    about ``what``. Only regular files are read: a folder, a device (``/dev/zero``), a FIFO or a socket is refused
    first."""
    def fail(reason, detail):
        why = (f"must be a regular file; this is {detail}" if reason == "kind" else
               f"the file holds more than {limit} bytes; a description may hold at most {limit} (--max-bytes / 16, "
               f"at least 1 MiB)" if reason == "size" else "not a UTF-8 text file" if reason == "text" else detail)
        raise UsageError(f"{what}: {why}") from None
    return fail


def read_npy(path: str, t: TensorDesc, name: str, max_bytes: int | None = None) -> np.ndarray:
    """A .npy file of an array of ``t``'s sizes and data type (either byte order). The header and the file's length
    are checked before any data is read: a file claiming a huge array costs nothing."""
    what = f"--input {path}"
    try:
        with open_checked(path, _refuse(what)) as f:
            shape, fortran, dtype = npy_header(f)
            if tuple(shape) != t.sizes:
                raise UsageError(f"{what}: shape {list(shape)} must equal {name}.Sizes {list(t.sizes)}")
            want = t.data_type.numpy_dtype
            if dtype.hasobject or dtype.names or dtype.newbyteorder("=") != want:
                raise UsageError(f"{what}: dtype {dtype} must match {name}.DataType {t.data_type.name} ({want})")
            count = math.prod(shape)
            nbytes = count * dtype.itemsize
            if max_bytes is not None and nbytes > max_bytes:
                raise UsageError(f"{what}: the array has {nbytes} bytes; --max-bytes allows {max_bytes}")
            left = os.fstat(f.fileno()).st_size - f.tell()
            if left != nbytes:
                raise UsageError(f"{what}: cannot read a .npy array: the file holds {left} bytes of data; its "
                                 f"header promises {nbytes} ({list(shape)} of {dtype})")
            x = np.fromfile(f, dtype=dtype, count=count)
    except OSError as e:
        raise UsageError(f"{what}: cannot read a .npy array: {e.strerror or e}") from None
    except NpyError as e:
        raise UsageError(f"{what}: cannot read a .npy array: {e}") from None
    x = x.reshape(shape[::-1]).T if fortran else x.reshape(shape)
    return x.astype(want, copy=False)  # native byte order


def load_inputs(paths: list[str] | None, obj: dict, desc, max_bytes: int | None = None) -> list[np.ndarray]:
    """One array per input tensor, in slot order: the --input files (one per
    input), else the file's "Inputs" (a list, one per input) or "Input" (one
    input), else the pages' default values."""
    named = desc.named_tensors("input")
    if paths:
        if len(paths) != len(named):
            raise UsageError(f"--input: {desc.OPERATOR} takes {len(named)} input(s) "
                             f"({', '.join(n for n, _ in named)}); got {len(paths)} --input file(s)")
        return [read_npy(p, t, n, max_bytes) for p, (n, t) in zip(paths, named)]
    xs = json_arrays(obj, "Input", desc, "input", UsageError)
    return xs if xs is not None else [default_input(desc, max_bytes, t, n) for n, t in named]


def run_bytes(desc, xs) -> int:
    """Memory a run touches: the inputs' distinct host elements (a broadcast
    axis counts once) and buffer elements, the outputs' buffer elements and
    host copies."""
    total = 0
    for x, t in zip(xs, desc.inputs):
        total += math.prod(n for n, s in zip(x.shape, x.strides) if s != 0) * x.itemsize + t.min_size_in_bytes
    for o in desc.outputs:
        total += o.min_size_in_bytes + math.prod(o.sizes) * o.element_size
    return total


def run_one(obj: dict, args, device: Device, out) -> bool | None:
    """Run a description (any number of inputs and outputs: its slots, in order); True/False when it has expected
    outputs, else None. Every check (the description at the device's level, the output paths, the inputs, the expected
    outputs, the memory the run needs) comes first."""
    desc = from_json(obj)
    desc.validate(device.feature_level)
    out_named = desc.named_tensors("output")
    outputs = args.output or []
    if outputs and len(outputs) != len(out_named):
        raise UsageError(f"--output: {desc.OPERATOR} has {len(out_named)} output(s) "
                         f"({', '.join(n for n, _ in out_named)}); got {len(outputs)} --output path(s)")
    named_by: dict = {}                     # file -> the --output naming it first
    for path in outputs:                    # refused before anything runs
        if not path:
            raise UsageError("--output: must name a file; got an empty path")
        if os.path.isdir(path):
            raise UsageError(f"--output {path}: is a directory; give a file name")
        if not os.path.isdir(parent := os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"--output {path}: directory {parent} does not exist")
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:           # a new name (or a link to one)
            mode = None
        except OSError as e:                # a symbolic-link loop...
            raise UsageError(f"--output {path}: {e.strerror or e}") from None
        # a character device (/dev/null) takes the file; a FIFO would not (NumPy's .npy writer asks for the file's
        # position) and, with no process reading it, would hold the write up for ever
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            raise UsageError(f"--output {path}: must be a regular file, a character device or a new name; this is "
                             f"{file_kind(mode)}")
        if (first := named_by.get(real := os.path.realpath(path))) is not None:
            raise UsageError(f"--output {path}: names the same file as --output {first}; give each output its "
                             f"own file")
        named_by[real] = path
    max_bytes = args.max_bytes
    xs = load_inputs(args.input, obj, desc, max_bytes)
    expected = json_arrays(obj, "ExpectedOutput", desc, "output", UsageError)    # None where the file has none
    need = run_bytes(desc, xs)
    if need > max_bytes:
        sizes_in = [list(t.sizes) for t in desc.inputs]
        sizes_out = [list(t.sizes) for t in desc.outputs]
        shown = (f"{sizes_in[0]} -> {sizes_out[0]}" if len(sizes_in) == len(sizes_out) == 1 else
                 f"{sizes_in} -> {sizes_out}")
        raise UsageError(f"{desc.OPERATOR}: running it would touch {need} bytes of memory (input and output "
                         f"elements, {shown}); --max-bytes allows {max_bytes}")
    ys = device.run_all(desc, *xs)
    if "Title" in obj:
        print(f"== {_text(obj['Title'], out)}" + (f"  [{_text(obj['Source'], out)}]" if "Source" in obj else ""),
              file=out)
    print(f"Operator: {desc.OPERATOR}", file=out)
    for (name, t), x in zip(desc.named_tensors("input"), xs):
        print(f"{name}: {fmt_tensor(t)}", file=out)
        print(fmt_array(x), file=out)
    for k, v in to_json(desc).items():
        if k not in ("Operator", *desc.TENSORS):
            print(f"{k} = {{{', '.join(map(str, v))}}}" if isinstance(v, list) else f"{k} = {v}", file=out)
    for (name, t), y in zip(out_named, ys):
        print(f"{name}: {fmt_tensor(t)}", file=out)
        print(fmt_array(y), file=out)
    for path, y in zip(outputs, ys):        # .npy to exactly ``path`` (no suffix is added)
        try:
            with open(path, "wb") as f:
                np.save(f, y, allow_pickle=False)
        except OSError as e:
            raise UsageError(f"--output {path}: cannot write: {e.strerror or e}") from None
    if expected is None:
        return None
    return _compared([(name, y, e) for (name, _), y, e in zip(out_named, ys, expected)], out,
                     "s" if len(ys) > 1 else "", len(ys) > 1)


def _compared(checked, out, plural: str = "", named: bool = True) -> bool:
    """Print whether each ``(name, output, documented output)`` matches; True when all do."""
    utf = "utf" in (getattr(sys.stdout, "encoding", None) or "").lower()
    ok_mark, bad_mark = ("\u2713", "\u2717") if utf else ("OK", "FAIL")
    bad = [(name, want) for name, y, want in checked if not np.array_equal(want, y, equal_nan=y.dtype.kind == "f")]
    if not bad:
        print(f"{ok_mark} matches the documented output{plural}", file=out)
    for name, want in bad:
        print(f"{bad_mark} {name + ' ' if named else ''}differs from the documented output:\n{fmt_array(want)}",
              file=out)
    return not bad


def _text(value, out) -> str:
    """A Title or Source as one short line, whatever JSON value it is, as ``out`` can print it (``display_text``:
    JSON-escaped where it holds a control character or one the stream cannot write)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return display_text(" ".join(text.split())[:200], out)


def read_spec(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """A description file: a regular UTF-8 file of at most ``text_limit(max_bytes)`` bytes."""
    limit = text_limit(max_bytes)
    return loads(read_regular(path, limit, _refuse(path, limit)))


def _listed(args, exs) -> bool:
    """--list: print the bundled examples in ``EXAMPLE_ORDER`` with their titles
    (alone: a file or --example beside it would be ignored)."""
    if args.list:
        given = [what for what, value in (("MODEL.json" if hasattr(args, "model") else "SPEC.json",
                                           getattr(args, "model", getattr(args, "spec", None))),
                                          ("--example", args.example)) if value is not None]
        if given:
            raise UsageError(f"--list lists the bundled examples and exits: give it without {' or '.join(given)}")
        for name in EXAMPLE_ORDER:
            print(f"{name:26s} {exs[name].get('Title', '')}")
    return args.list


def _bundled(args, exs) -> dict:
    """The bundled example that --example names."""
    if args.example not in exs:
        raise UsageError(f"--example: unknown example {args.example!r}; "
                         f"`opendml {args.command} --list` names them: {', '.join(EXAMPLE_ORDER)}")
    return exs[args.example]


def cmd_run(args) -> int:
    exs = examples()
    if _listed(args, exs):
        return 0
    device = Device(args.device, feature_level=args.feature_level)
    if args.spec is not None and args.example is not None:
        raise UsageError("give either SPEC or --example, not both")
    if args.spec is None and args.example is None:
        if args.input or args.output:
            raise UsageError("--input and --output need SPEC or --example")
        results = []
        for name in EXAMPLE_ORDER:
            results.append(run_one(exs[name], args, device, sys.stdout))
            print()
        passed = sum(1 for r in results if r)
        print(f"{passed} of {len(results)} examples match their documented outputs")
        return 0 if passed == len(results) else 1
    obj = _bundled(args, exs) if args.example is not None else read_spec(args.spec, args.max_bytes)
    result = run_one(obj, args, device, sys.stdout)
    return 1 if result is False else 0


def cmd_validate(args) -> int:
    obj = read_spec(args.spec)
    desc = from_json(obj)
    lowest = desc.lowest_feature_level()
    if args.feature_level is not None:
        desc.validate(args.feature_level)
    print(f"{desc.OPERATOR} is valid" + (f" at feature level {FeatureLevel.parse(args.feature_level).label}"
                                         if args.feature_level else ""))
    print(f"lowest feature level: {lowest.label if lowest else 'none'}")
    # the first input (none for a generator) and the first output
    out_slot = desc.slots("output")[0].json
    for name, t in [(desc.TENSORS[0], t) for t in desc.inputs[:1]] + [(out_slot, desc.outputs[0])]:
        print(f"{name}: {fmt_tensor(t)}")
        print(f"  DMLCalcBufferTensorSize: {t.min_size_in_bytes} bytes; binding: SizeInBytes >= "
              f"{t.total_tensor_size_in_bytes}, Offset a multiple of {t.required_alignment}")
    print("output description (JSON): " + json.dumps(to_json(desc)[out_slot]))
    return 0


def cmd_dispatch(args) -> int:
    """A DxDispatch model (MODEL.json, or a bundled example as one): the
    commands' prints on stdout; --output-dir writes every resource."""
    from .dxdispatch import check_output_dir, dumps, example_model, example_outputs, load as load_model, \
        run as run_model, write_resources
    exs = examples()
    if _listed(args, exs):
        return 0
    if (args.model is None) == (args.example is None):
        raise UsageError("give MODEL.json or --example NAME (one of them)")
    example = None
    if args.example is not None:
        example = _bundled(args, exs)
        model, folder = example_model(example), os.getcwd()
        if args.print_model:
            print(dumps(model))
            return 0
    else:
        if args.print_model:
            raise UsageError("--print-model prints a bundled example as a model: use it with --example")
        model, folder = load_model(args.model, max_bytes=args.max_bytes)
    if args.output_dir is not None:
        resources_ = model.get("resources") if isinstance(model, dict) else None
        check_output_dir(args.output_dir, resources_ if isinstance(resources_, dict) else ())
    results = run_model(model, device=args.device, feature_level=args.feature_level, base_dir=folder,
                        max_bytes=args.max_bytes)
    if args.output_dir is not None:
        write_resources(results, args.output_dir)
    if example is None:
        return 0
    checked = [(name, y, want) for name, y, want in example_outputs(example, results) if want is not None]
    return 0 if not checked or _compared(checked, sys.stdout) else 1


def cmd_info(args) -> int:
    from .runtime import cuda_status
    cfg = config()
    print(f"opendml {__version__} (Python {sys.version.split()[0]}, NumPy {np.__version__})")
    if cfg.cpu_kernels == "compiled":
        limit = cfg.output_cache_bytes
        kernels = (f"compiled kernels, {cfg.threads} threads, output cache "
                   + (f"up to {limit / 2**20:g} MiB" if limit else "off"))
    else:
        why = "selected" if cfg.compiled_available else "compiled kernels not installed"
        kernels = f"NumPy kernels ({why})"
    print(f"backend cpu: available ({kernels})")
    from .runtime.calls import info as call_cache_info
    served = call_cache_info()
    print("call cache: " + ("on (repeated calls on NumPy arrays, PyTorch tensors and CuPy arrays served from C)"
                            if served["enabled"] and served["numpy"] else
                            "on (PyTorch CUDA tensors and CuPy arrays; built without NumPy's headers)"
                            if served["enabled"] else
                            "off (call_cache=False / OPENDML_CALL_CACHE=0)" if not cfg.call_cache else
                            "unavailable (compiled extension not installed)"))
    from importlib.util import find_spec
    from .arrays.torch.node import cache_folder
    print("pytorch autograd: " + ("PyTorch not installed" if find_spec("torch") is None else
                                  f"torch_node={cfg.torch_node} " + (
        "(always the Python autograd.Function)" if cfg.torch_node == "off" else
        f"(a C++ node compiled on first need into {cache_folder()}; the Python autograd.Function until then)")))
    ok, what = cuda_status()
    print(f"backend cuda: {'available: ' + what if ok else 'unavailable (' + what + ')'}")
    print("feature levels: " + ", ".join(level.label for level in FeatureLevel))
    for name, cls in OPERATORS.items():
        print(f"operator {name} (DML_OPERATOR_TYPE {cls.TYPE_VALUE}): from feature level {cls.INTRODUCED.label}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _byte_count(text: str) -> int:
    t = text.strip()
    digits = t.lstrip("0")
    if not (t.isascii() and t.isdigit()) or not digits:
        raise argparse.ArgumentTypeError(f"must be a positive integer number of bytes; got {text!r}")
    if len(digits) > 20:        # (read before int(): a huge text is not converted)
        raise argparse.ArgumentTypeError(f"must be at most 20 digits (no machine holds more bytes); got {text!r}")
    return int(digits)


def _running_options(q, positional, level_help: str, bytes_help: str, example_help: str) -> None:
    """``run``'s and ``dispatch``'s optional file (``positional``: name,
    metavar, help), --device, --feature-level, --max-bytes, --list and
    --example."""
    q.add_argument(positional[0], nargs="?", metavar=positional[1], help=positional[2])
    q.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to run (default: cpu)")
    q.add_argument("--feature-level", default="6_4", metavar="L", help=level_help)
    q.add_argument("--max-bytes", type=_byte_count, default=DEFAULT_MAX_BYTES, metavar="N", help=bytes_help)
    q.add_argument("--list", action="store_true", help="list the bundled examples and exit")
    q.add_argument("--example", metavar="NAME", help=example_help)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="opendml", description="Run, validate and inspect DirectML operator "
                "descriptions (" + ", ".join(OPERATORS) + ") without DirectML.",
                epilog="Exit codes: 0 success; 1 an output differs from its documented ExpectedOutput; "
                "2 bad input (usage, JSON, description, file, environment variable), with one line on stderr; "
                "3 an internal error of opendml (a bug: one line on stderr, please report it).")
    p.add_argument("--version", action="version", version=f"opendml {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{run,validate,dispatch,info}",
                           parser_class=_Parser)
    r = sub.add_parser("run", help="run the bundled examples or one JSON description",
                       description="Run every bundled example of the specification pages (no arguments), "
                       "one bundled example (--example), or a description in DirectML's JSON field names (SPEC). "
                       "Prints the description, its input and its output; exits 1 if an output differs from "
                       "its documented ExpectedOutput.")
    r.add_argument("--input", metavar="X.npy", action="append",
                   help="input array (.npy, not .npz) of InputTensor's sizes and data type; once per input "
                   "tensor, in order, for an operator of several (JOIN); default: the file's \"Input\" (or "
                   "\"Inputs\", a list), else 1..N (0..N-1 for " + ", ".join(
                       n for n, c in OPERATORS.items() if c.DEFAULT_INPUT_START == 0) + ") as the pages do, "
                   "dimensions of stride 0 counted once")
    r.add_argument("--output", metavar="Y.npy", action="append",
                   help="save the output array (.npy format) to exactly this path; no .npy suffix is added, the "
                   "directory must exist, the path must be a new name, a regular file or a character device such as "
                   "/dev/null; once per output tensor, in order, for an operator of several (SPLIT)")
    _running_options(r, ("spec", "SPEC.json", "a JSON description (DirectML's field names)"),
                     "DirectML feature level to validate against, e.g. 6_4, 6.4 or FL_6_4 (default: 6_4)",
                     "refuse a run that would touch more than N bytes of memory (the input and output "
                     "elements, on the host and in buffers), or a description file of more than N / 16 bytes (at "
                     f"least 1 MiB) (default: {DEFAULT_MAX_BYTES} = 2 GiB)",
                     "run one bundled example by name (see --list)")
    r.set_defaults(func=cmd_run)
    v = sub.add_parser("validate", help="check a JSON description without running it",
                       description="Check a description; print the output description, DMLCalcBufferTensorSize "
                       "and the required binding sizes of its first input and first output tensor, and the lowest "
                       "valid feature level.")
    v.add_argument("spec", metavar="SPEC.json", help="a JSON description (DirectML's field names)")
    v.add_argument("--feature-level", default=None, metavar="L",
                   help="also require validity at this feature level (e.g. 6_4)")
    v.set_defaults(func=cmd_validate)
    d = sub.add_parser("dispatch", help="run a DxDispatch model (Microsoft's operator-runner JSON)",
                       description="Run a DxDispatch model: its resources, its DML_OPERATOR_* dispatchables "
                       "(DirectML's field names) and its commands in order (dispatch, print, writeFile), with "
                       "DirectML's binding rules. File initialisers and writeFile targets must lie in the "
                       "model's folder. --example runs a bundled example of `opendml run` as a model.")
    d.add_argument("--output-dir", metavar="DIR", help="after the last command, write every resource as "
                   "DIR/NAME.npy (a 1-D array of its initialValuesDataType holding the whole buffer); all "
                   "files or none")
    _running_options(d, ("model", "MODEL.json", "a DxDispatch model"),
                     "DirectML feature level every dispatchable is validated at (default: 6_4)",
                     "refuse a model whose resources take more than N bytes, or a model file of more than N / 16 "
                     f"bytes (at least 1 MiB) (default: {DEFAULT_MAX_BYTES})",
                     "run a bundled example (see --list) as a DxDispatch model; exits 1 if its output differs "
                     "from the documented one")
    d.add_argument("--print-model", action="store_true", help="with --example: print the model and exit")
    d.set_defaults(func=cmd_dispatch)
    i = sub.add_parser("info", help="version, backends and feature levels",
                       description="Print the version, the backends present (with the GPU name where CUDA "
                       "works) and the feature levels supported.")
    i.set_defaults(func=cmd_info)
    for q in (r, v, d, i):
        q.set_defaults(parser=q)          # an argument left over is the subcommand's usage error
    return p


class _OutputError(UsageError):
    """Standard output cannot be written (a full disk)."""


class _Output:
    """Standard output while a command runs: a write or flush that fails (a full disk) is the command's error, exit 2
    with one line, not a bug of opendml; a closed pipe stays ``BrokenPipeError``."""

    def __init__(self, stream):
        self._stream = stream

    def _checked(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _OutputError(f"cannot write the output: {e.strerror or e}") from None

    def write(self, text):
        return self._checked(self._stream.write, text)

    def flush(self):
        return self._checked(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _drop_stdout() -> None:
    """Point standard output at the null device: what it still buffers cannot be written (a closed pipe, a full
    disk), and Python's flush at exit would report it again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv=None) -> int:
    """The command line, with the module docstring's exit codes; errors are
    one line on stderr, never a traceback."""
    args, extra = build_parser().parse_known_args(argv)
    if extra:
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    stdout = sys.stdout
    if stdout is not None:
        sys.stdout = _Output(stdout)
    try:
        config()  # a malformed OPENDML_* environment variable is bad input too
        code = args.func(args)
        if sys.stdout is not None:
            sys.stdout.flush()          # (an output that cannot be written fails here, not at exit)
        return code
    except (DmlError, UsageError) as e:
        if isinstance(e, _OutputError):
            _drop_stdout()
        print(f"opendml: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `opendml run | head`
        _drop_stdout()
        return 0
    except KeyboardInterrupt:
        print("opendml: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of opendml: one line, no traceback
        where = e.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = f" at {os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno}" if where else ""
        print(f"opendml: internal error: {type(e).__name__}: {_one_line(e)}{at} (a bug of opendml; "
              f"please report it)", file=sys.stderr)
        return 3
    finally:
        sys.stdout = stdout


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
