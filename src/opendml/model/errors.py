"""One exception hierarchy for everything opendml rejects.

``ValidationError`` is DirectML's E_INVALIDARG: a description breaks a rule. ``UnsupportedError``: the description is
valid, but not at the requested feature level or on this backend. ``BindingError``: a buffer binding breaks a binding
rule. All derive from ``DmlError``; ``ValidationError`` and ``BindingError`` are also ``ValueError``s, for generic
callers.
"""


class DmlError(Exception):
    """Base class of every error opendml raises on purpose."""


class ValidationError(DmlError, ValueError):
    """A description or argument breaks a rule of the specification (DirectML's E_INVALIDARG); a ``ValueError``."""


class UnsupportedError(DmlError):
    """Valid, but unsupported: at this feature level, on this backend (a device kind, CUDA without CuPy), or for this
    array's data type."""


class BindingError(DmlError, ValueError):
    """A buffer binding breaks a binding rule (offset alignment, range, size, count, overlap, device); a
    ``ValueError``."""
