"""The ``opendml`` command: run, validate and inspect DirectML operator descriptions.

    opendml run                          # every example of the specification pages
    opendml run SPEC.json [--input x.npy] [--output y.npy] [--device cpu|cuda] [--feature-level 6_4]
    opendml run --list | --example NAME
    opendml validate SPEC.json [--feature-level 6_4]
    opendml info

Exit codes: 0 success; 1 an output differs from the documented one; 2 bad
input (a usage error, malformed JSON, an invalid description, a bad file).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from importlib import resources

import numpy as np

from ._version import __version__
from .device import Device
from .jsonform import from_json, loads, tensor_to_json, to_json
from .ops import OPERATORS
from .model.errors import DmlError
from .model.feature_level import FeatureLevel
from .model.tensor_desc import TensorDesc


class UsageError(Exception):
    """A user mistake outside the description itself (files, flags)."""


def _ok_mark() -> tuple[str, str]:
    enc = (getattr(sys.stdout, "encoding", None) or "").lower()
    return ("\u2713", "\u2717") if "utf" in enc else ("OK", "FAIL")


# -- bundled examples --------------------------------------------------------------

def examples() -> dict[str, dict]:
    out = {}
    for f in sorted(resources.files("opendml.examples").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".json"):
            obj = json.loads(f.read_text(encoding="utf-8"))
            out[obj["Name"]] = obj
    return out


EXAMPLE_ORDER = ("slice-contiguous", "slice-strided", "slice1-positive-strides",
                 "slice1-negative-strides", "unfold", "unfold-padded")


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


def fmt_fields(desc) -> list[str]:
    d = to_json(desc)
    return [f"{k} = {{{', '.join(map(str, v))}}}" for k, v in d.items() if k not in ("Operator", *desc.TENSORS)]


# -- running --------------------------------------------------------------------------

def default_input(desc) -> np.ndarray:
    """The pages' convention: 1..N (0..N-1 for UNFOLD and FOLD), in the input's type."""
    t = desc.input_tensor
    n = math.prod(t.sizes)
    return (np.arange(n, dtype=np.int64) + desc.DEFAULT_INPUT_START).astype(t.data_type.numpy_dtype).reshape(t.sizes)


def load_input(path: str | None, obj: dict, desc) -> np.ndarray:
    t = desc.input_tensor
    if path is not None:
        try:
            x = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--input {path}: cannot read a .npy array: {e}") from None
        if x.shape != t.sizes:
            raise UsageError(f"--input {path}: shape {list(x.shape)} must equal InputTensor.Sizes {list(t.sizes)}")
        if x.dtype != t.data_type.numpy_dtype:
            raise UsageError(f"--input {path}: dtype {x.dtype} must match InputTensor.DataType "
                             f"{t.data_type.name} ({t.data_type.numpy_dtype})")
        return x
    if "Input" in obj:
        try:
            x = np.array(obj["Input"], dtype=t.data_type.numpy_dtype)
        except (TypeError, ValueError, OverflowError):
            raise UsageError("$.Input: must be a nested array of numbers") from None
        if x.shape != t.sizes:
            raise UsageError(f"$.Input: shape {list(x.shape)} must equal InputTensor.Sizes {list(t.sizes)}")
        return x
    return default_input(desc)


def run_one(obj: dict, args, device: Device, out) -> bool | None:
    """Run a description; True/False when it has an ExpectedOutput, else None."""
    desc = from_json(obj)
    x = load_input(getattr(args, "input", None), obj, desc)
    y = device.run(desc, x)
    ok_mark, bad_mark = _ok_mark()
    if "Title" in obj:
        print(f"== {obj['Title']}" + (f"  [{obj['Source']}]" if "Source" in obj else ""), file=out)
    print(f"Operator: {desc.OPERATOR}", file=out)
    print(f"{desc.TENSORS[0]}: {fmt_tensor(desc.input_tensor)}", file=out)
    print(fmt_array(x), file=out)
    for line in fmt_fields(desc):
        print(line, file=out)
    print(f"{desc.TENSORS[1]}: {fmt_tensor(desc.output_tensor)}", file=out)
    print(fmt_array(y), file=out)
    if getattr(args, "output", None):
        np.save(args.output, y)
    if "ExpectedOutput" in obj:
        expected = np.array(obj["ExpectedOutput"], dtype=y.dtype)
        good = expected.shape == y.shape and np.array_equal(expected, y)
        print(f"{ok_mark} matches the documented output" if good else
              f"{bad_mark} differs from the documented output:\n{fmt_array(expected)}", file=out)
        return good
    return None


def read_spec(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a UTF-8 text file") from None
    return loads(text)


def cmd_run(args) -> int:
    exs = examples()
    if args.list:
        for name in EXAMPLE_ORDER:
            print(f"{name:26s} {exs[name]['Title']}")
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
    if args.example is not None:
        if args.example not in exs:
            raise UsageError(f"--example: unknown example {args.example!r}; "
                             f"`opendml run --list` names them: {', '.join(EXAMPLE_ORDER)}")
        obj = exs[args.example]
    else:
        obj = read_spec(args.spec)
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
    for name, t in zip(desc.TENSORS, (desc.input_tensor, desc.output_tensor)):
        print(f"{name}: {fmt_tensor(t)}")
        print(f"  DMLCalcBufferTensorSize: {t.min_size_in_bytes} bytes; binding: SizeInBytes >= "
              f"{t.total_tensor_size_in_bytes}, Offset a multiple of {t.required_alignment}")
    print("output description (JSON): " + json.dumps(to_json(desc)[desc.TENSORS[1]]))
    return 0


def cmd_info(args) -> int:
    from .runtime import config, cuda_status
    print(f"opendml {__version__} (Python {sys.version.split()[0]}, NumPy {np.__version__})")
    cfg = config()
    if cfg.cpu_kernels == "compiled":
        limit = cfg.output_cache_bytes
        kernels = (f"compiled kernels, {cfg.threads} threads, output cache "
                   + (f"up to {limit / 2**20:g} MiB" if limit else "off"))
    else:
        why = "selected" if cfg.compiled_available else "compiled kernels not installed"
        kernels = f"NumPy kernels ({why})"
    print(f"backend cpu: available ({kernels})")
    ok, what = cuda_status()
    print(f"backend cuda: {'available: ' + what if ok else 'unavailable (' + what + ')'}")
    print("feature levels: " + ", ".join(level.label for level in FeatureLevel))
    for name, cls in OPERATORS.items():
        print(f"operator {name} (DML_OPERATOR_TYPE {cls.TYPE_VALUE}): from feature level {cls.INTRODUCED.label}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opendml", description="Run, validate and inspect DirectML operator "
                                "descriptions (SLICE, SLICE1, UNFOLD) without DirectML.")
    p.add_argument("--version", action="version", version=f"opendml {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{run,validate,info}")
    r = sub.add_parser("run", help="run the bundled examples or one JSON description",
                       description="Run every bundled example of the specification pages (no arguments), "
                       "one bundled example (--example), or a description in DirectML's JSON field names (SPEC). "
                       "Prints the description, its input and its output; exits 1 if an output differs from "
                       "its documented ExpectedOutput.")
    r.add_argument("spec", nargs="?", metavar="SPEC.json", help="a JSON description (DirectML's field names)")
    r.add_argument("--input", metavar="X.npy", help="input array (.npy) of InputTensor's sizes and data type; "
                   "default: the file's \"Input\", else 1..N (0..N-1 for UNFOLD) as the pages do")
    r.add_argument("--output", metavar="Y.npy", help="save the output array here (.npy)")
    r.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to run (default: cpu)")
    r.add_argument("--feature-level", default="6_4", metavar="L",
                   help="DirectML feature level to validate against, e.g. 6_4, 6.4 or FL_6_4 (default: 6_4)")
    r.add_argument("--list", action="store_true", help="list the bundled examples and exit")
    r.add_argument("--example", metavar="NAME", help="run one bundled example by name (see --list)")
    r.set_defaults(func=cmd_run)
    v = sub.add_parser("validate", help="check a JSON description without running it",
                       description="Check a description; print the output description, DMLCalcBufferTensorSize "
                       "of every tensor, the required binding sizes and the lowest valid feature level.")
    v.add_argument("spec", metavar="SPEC.json", help="a JSON description (DirectML's field names)")
    v.add_argument("--feature-level", default=None, metavar="L",
                   help="also require validity at this feature level (e.g. 6_4)")
    v.set_defaults(func=cmd_validate)
    i = sub.add_parser("info", help="version, backends and feature levels",
                       description="Print the version, the backends present (with the GPU name where CUDA "
                       "works) and the feature levels supported.")
    i.set_defaults(func=cmd_info)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DmlError, UsageError) as e:
        print(f"opendml: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `opendml run | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
