"""The examples of DirectML's operator pages (and one SLICE_GRAD example), as JSON
descriptions with their documented inputs and outputs (``opendml run --list``).
Data only: nothing to import here, and this package imports nothing."""

__all__: list[str] = []
