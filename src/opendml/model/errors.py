"""One exception hierarchy for everything opendml rejects.

``ValidationError`` is what DirectML reports as E_INVALIDARG: a description
breaks a rule. ``UnsupportedError``: the description is valid, but not at the
requested feature level or on this backend. ``BindingError``: a buffer binding
breaks a binding rule. All derive from ``DmlError``; ``ValidationError`` and
``BindingError`` are also ``ValueError`` so generic callers can catch them.
"""


class DmlError(Exception):
    """Base class of every error opendml raises on purpose."""


class ValidationError(DmlError, ValueError):
    """A description or argument breaks a rule of the specification
    (DirectML's E_INVALIDARG). Also a ``ValueError``."""


class UnsupportedError(DmlError):
    """Valid, but not supported: at this feature level, on this backend (a
    device kind, CUDA where CuPy is missing), or for this array's data type."""


class BindingError(DmlError, ValueError):
    """A buffer binding breaks a binding rule (offset alignment, range, size,
    count, overlap, device). Also a ``ValueError``."""
