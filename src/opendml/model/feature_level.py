"""DML_FEATURE_LEVEL: the 15 levels, ordered, with DirectML's values."""
from __future__ import annotations

import enum
import re

from ._checks import _short
from .errors import ValidationError


class FeatureLevel(enum.IntEnum):
    """A DirectML feature level (``DML_FEATURE_LEVEL``) with DirectML's values (``FL_6_4 == 0x6400``), ordered (``FL_3_0
    < FL_4_1``). An operator exists from the level that introduced it; each level's support table says which ranks and
    data types it takes (``OperatorDesc.validate``).
    """

    FL_1_0 = 0x1000
    FL_2_0 = 0x2000
    FL_2_1 = 0x2100
    FL_3_0 = 0x3000
    FL_3_1 = 0x3100
    FL_4_0 = 0x4000
    FL_4_1 = 0x4100
    FL_5_0 = 0x5000
    FL_5_1 = 0x5100
    FL_5_2 = 0x5200
    FL_6_0 = 0x6000
    FL_6_1 = 0x6100
    FL_6_2 = 0x6200
    FL_6_3 = 0x6300
    FL_6_4 = 0x6400

    @property
    def label(self) -> str:
        """``"6_4"``: the form DirectML's pages use."""
        return self.name[3:]

    @classmethod
    def parse(cls, value) -> "FeatureLevel":
        """The feature level ``value`` names: a member, its value (``0x6400``), or ``"6_4"``, ``"6.4"``, ``"FL_6_4"``
        or ``"DML_FEATURE_LEVEL_6_4"``; else ``ValidationError``, listing the 15 levels."""
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        elif isinstance(value, str):
            m = re.fullmatch(r"(?:DML_FEATURE_LEVEL_|FL_)?(\d+)[._](\d+)", value.strip().upper())
            if m and f"FL_{m[1]}_{m[2]}" in cls.__members__:
                return cls[f"FL_{m[1]}_{m[2]}"]
        raise ValidationError(
            f"FeatureLevel: unknown feature level {_short(value)}; expected one of "
            f"{', '.join(level.label for level in cls)} (as \"6_4\", \"6.4\" or \"FL_6_4\")")

