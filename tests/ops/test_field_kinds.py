"""The plain field kinds' JSON rule (``_spec.FieldKind.from_json``): what each
accepts, what it makes of it, and the message naming the path otherwise."""
import decimal

import numpy as np
import pytest

from opendml.ops._spec import Bool, Field, Float, Int, UInt


class Fail(Exception):
    pass


@pytest.mark.parametrize("kind, value, expected", [
    (UInt("A", "a"), 3, 3), (Int("A", "a"), -3, -3), (Float("V", "v"), 1, 1.0), (Float("V", "v"), 2.5, 2.5),
    (Bool("B", "b"), 0, False), (Bool("B", "b"), 1.0, True), (Bool("B", "b"), True, True),
    (Field("S", "s"), [1, 2], [1, 2]),
])
def test_accepted_values(kind, value, expected):
    got = kind.from_json(value, "op.X", {}, Fail)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("kind, value, message", [
    (UInt("A", "a"), True, "op.X: must be an integer; got true"),
    (Int("A", "a"), None, "op.X: must be an integer; got null"),
    (Float("V", "v"), "x", 'op.X: must be a number; got "x"'),
    (Float("V", "v"), 10 ** 400, "op.X: must be a number within the double range"),
    (Bool("B", "b"), 2, "op.X: must be true or false; got 2"),
    (Bool("B", "b"), [1], r"op.X: must be true or false; got \[1\]"),
    (Field("S", "s"), [1, True], r"op.X: must be an array of integers; got \[1, true\]"),
    (Field("S", "s"), "x", 'op.X: must be an array of integers; got "x"'),
])
def test_refused_values_name_the_path(kind, value, message):
    with pytest.raises(Fail, match=message):
        kind.from_json(value, "op.X", {}, Fail)


@pytest.mark.parametrize("kind, value, message", [
    (Bool("B", "b"), np.int64(2), r"op.X: must be true or false; got np.int64\(2\)"),
    (Float("V", "v"), decimal.Decimal(1), r"op.X: must be a number; got Decimal\('1'\)"),
    (Field("S", "s"), {1, 2}, r"op.X: must be an array of integers; got \{1, 2\}"),
])
def test_a_value_json_cannot_write_is_named_by_its_repr(kind, value, message):
    # a parsed description given as a dict may hold what JSON has no form for: the message's
    # json.dumps raised a bare TypeError
    with pytest.raises(Fail, match=message):
        kind.from_json(value, "op.X", {}, Fail)


def test_a_finite_long_double_beyond_the_double_range_is_refused_as_10_to_400_is():
    # float() makes it infinite (no OverflowError): PADDING's value 1e4000 padded with inf
    from opendml.ops._spec import to_float
    with pytest.raises(Fail, match=r"V: must be a number within the double range .*got np.longdouble\('1e\+4000'\)"):
        to_float(np.longdouble("1e4000"), "V:", Fail)
    assert to_float(np.longdouble("inf"), "V:", Fail) == float("inf")
    assert to_float(np.longdouble("1e300"), "V:", Fail) == 1e300
    import opendml as dml
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        with pytest.raises(dml.ValidationError, match="PADDING1: PaddingValue must be a number within the double"):
            dml.pad(x, [1, 0], [0, 0], value=np.longdouble("-1e4000"))
