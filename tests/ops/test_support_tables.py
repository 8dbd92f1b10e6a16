"""The operators' support tables (``SUPPORT``, written with ``ops.support``)
against a golden copy of DirectML's pages, row by row: level, ranks, element
types and the index tensors' own types. The type columns are spelt out here
as the pages list them, independently of the constants in ``ops._common``."""
import pytest

from opendml.model.data_type import DataType
from opendml.model.feature_level import FeatureLevel
from opendml.ops import OPERATORS, SupportRow, support

F = "FLOAT32 FLOAT16"                                     # the 1_0/2_0 tables of most pages
F6 = "FLOAT32 FLOAT16 INT32 INT16 UINT32 UINT16"          # JOIN, SPLIT, SLICE at 1_0
E8 = F6 + " INT8 UINT8"                                   # 2_1: the eight 8- to 32-bit types
A11 = E8 + " FLOAT64 INT64 UINT64"                        # all 11
C6 = "FLOAT32 FLOAT16 INT16 INT8 UINT16 UINT8"            # CAST at 1_0
C10 = C6 + " INT64 INT32 UINT64 UINT32"                   # CAST at 3_0
T10 = E8 + " INT64 UINT64"                                # TILE at 4_1 (no FLOAT64)
U32, I4 = {"IndicesTensor": "UINT32"}, {"IndicesTensor": "INT64 INT32 UINT64 UINT32"}


def _index(first: str, first_types: str) -> list:
    rows = [(first, 4, 4, first_types, U32)] if first != "2_1" else []
    return rows + [("2_1", 4, 4, E8, U32), ("3_0", 1, 8, E8, I4), ("4_1", 1, 8, A11, I4)]


GOLDEN = {
    "CAST": [("1_0", 4, 4, C6), ("3_0", 4, 4, C10), ("3_1", 1, 8, C10), ("4_1", 1, 8, A11)],
    "DEPTH_TO_SPACE": [("1_0", 4, 4, F), ("2_1", 4, 4, E8), ("5_0", 4, 4, A11)],
    "DEPTH_TO_SPACE1": [("2_1", 4, 4, E8), ("5_0", 4, 4, A11)],
    "DIAGONAL_MATRIX": [("2_0", 4, 4, F), ("2_1", 4, 4, E8), ("4_0", 2, 4, E8), ("5_1", 2, 4, A11)],
    "DIAGONAL_MATRIX1": [("5_1", 2, 4, A11)],
    "ELEMENT_WISE_IDENTITY": [("1_0", 4, 5, F), ("2_1", 4, 5, E8), ("3_0", 1, 8, E8), ("4_1", 1, 8, A11)],
    "FOLD": [("6_4", 3, 8, A11)],
    "GATHER": _index("1_0", F),
    "GATHER_ELEMENTS": _index("2_1", E8),
    "GATHER_ND": _index("2_1", E8),
    "GATHER_ND1": _index("2_1", E8)[1:],
    "JOIN": [("1_0", 4, 4, F6), ("2_1", 4, 4, E8), ("3_0", 4, 5, E8), ("3_1", 1, 8, E8), ("4_1", 1, 8, A11)],
    "ONE_HOT": _index("2_0", F),
    "PADDING": [("1_0", 4, 5, F), ("2_1", 4, 5, E8), ("3_1", 1, 8, E8), ("5_0", 1, 8, A11)],
    "PADDING1": [("5_0", 1, 8, A11)],
    "REVERSE_SUBSEQUENCES": [(lv, lo, hi, ts, {"SequenceLengthsTensor": "UINT32"})
                             for lv, lo, hi, ts in (("2_1", 4, 4, E8), ("3_0", 4, 5, E8), ("4_0", 1, 8, E8))]
                            + [("5_0", 1, 8, A11, {"SequenceLengthsTensor": "UINT32 UINT64"})],
    "SCATTER_ELEMENTS": _index("2_0", F),
    "SCATTER_ND": _index("2_1", E8),
    "SLICE": [("1_0", 4, 5, F6), ("2_1", 4, 5, E8), ("3_0", 1, 8, E8), ("4_1", 1, 8, A11)],
    "SLICE1": [("2_1", 4, 5, E8), ("3_0", 1, 8, E8), ("4_1", 1, 8, A11)],
    "SLICE_GRAD": [("3_0", 1, 8, E8), ("4_1", 1, 8, A11)],
    "SPACE_TO_DEPTH": [("1_0", 4, 4, F), ("2_1", 4, 4, E8), ("5_0", 4, 4, A11)],
    "SPACE_TO_DEPTH1": [("2_1", 4, 4, E8), ("5_0", 4, 4, A11)],
    "SPLIT": [("1_0", 4, 4, F6), ("2_1", 4, 4, E8), ("3_0", 1, 8, E8), ("4_1", 1, 8, A11)],
    "TILE": [("1_0", 4, 4, F), ("2_1", 4, 4, E8), ("3_1", 1, 8, E8), ("4_1", 1, 8, T10)],
    "UNFOLD": [("6_4", 3, 8, A11)],
}


def _types(names: str) -> frozenset:
    return frozenset(DataType[n] for n in names.split())


def _row(level, lo, hi, types, slots=None) -> SupportRow:
    return SupportRow(FeatureLevel[f"FL_{level}"], range(lo, hi + 1), _types(types),
                      tuple((name, _types(ts)) for name, ts in (slots or {}).items()))


def test_every_operator_has_a_golden_table():
    assert sorted(GOLDEN) == sorted(OPERATORS)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_support_table_matches_the_page(name):
    cls = OPERATORS[name]
    assert cls.SUPPORT == tuple(_row(*r) for r in GOLDEN[name])
    assert cls.INTRODUCED == cls.SUPPORT[0].level


def test_support_rows_only_where_something_changes():
    # a step that repeats the value in force makes no row; the first level's types come from the latest step
    rows = support({"1_0": 4, "2_0": 4, "3_0": (1, 8)}, types={"1_0": _types(F), "2_1": _types(F)})
    assert rows == (_row("1_0", 4, 4, F), _row("3_0", 1, 8, F))
    assert support({"5_0": (1, 8)}) == (_row("5_0", 1, 8, A11),)
    assert support({"1_0": 4}, first=_types(F), wide="5_0") == (
        _row("1_0", 4, 4, F), _row("2_1", 4, 4, E8), _row("5_0", 4, 4, A11))
    assert support({"3_0": 2}, X={"1_0": _types("UINT32"), "6_4": _types("INT8")}) == (
        _row("3_0", 2, 2, E8, {"X": "UINT32"}), _row("4_1", 2, 2, A11, {"X": "UINT32"}),
        _row("6_4", 2, 2, A11, {"X": "INT8"}))


def test_support_needs_every_fact_at_the_first_level():
    with pytest.raises(ValueError, match="support: types not given at the first level 1_0"):
        support({"1_0": 4})                     # the family's types start at 2_1
    with pytest.raises(ValueError, match="support: X's types not given at the first level 2_1"):
        support({"2_1": 4}, X={"3_0": _types("UINT32")})
