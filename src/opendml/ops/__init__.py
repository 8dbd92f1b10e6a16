"""One module per operator: its DirectML-shaped description (a frozen
dataclass), its rules and support tables, and its lowering to a plan; the
shared rule helpers are in ``_common``. ``OPERATORS`` maps DirectML's names
(the JSON form, the command line) to the descriptions: adding an operator is
one module plus one line here. May import ``opendml.model`` and
``opendml.plan`` only."""
from ._common import Field, OperatorDesc, SupportRow
from .fold import FoldOperatorDesc
from .slice import SliceOperatorDesc
from .slice1 import Slice1OperatorDesc, max_copied_elements
from .slice_grad import SliceGradOperatorDesc
from .unfold import UnfoldOperatorDesc

OPERATORS: dict[str, type[OperatorDesc]] = {
    cls.OPERATOR: cls for cls in (SliceOperatorDesc, Slice1OperatorDesc, UnfoldOperatorDesc, FoldOperatorDesc,
                                  SliceGradOperatorDesc)
}

__all__ = ["OperatorDesc", "SupportRow", "Field", "SliceOperatorDesc", "Slice1OperatorDesc",
           "UnfoldOperatorDesc", "FoldOperatorDesc", "SliceGradOperatorDesc", "max_copied_elements", "OPERATORS"]
