"""One module per operator: its DirectML-shaped description, its rules and
support tables, and its lowering to a plan."""
from ._common import OperatorDesc, SupportRow
from .slice import SliceOperatorDesc
from .slice1 import Slice1OperatorDesc, max_copied_elements
from .unfold import UnfoldOperatorDesc

OPERATORS = {cls.OPERATOR: cls for cls in (SliceOperatorDesc, Slice1OperatorDesc, UnfoldOperatorDesc)}

__all__ = ["OperatorDesc", "SupportRow", "SliceOperatorDesc", "Slice1OperatorDesc",
           "UnfoldOperatorDesc", "max_copied_elements", "OPERATORS"]
