"""The examples of the specification pages, as JSON descriptions with their
documented inputs and outputs (``opendml run --list``)."""
