"""opendml's benchmark suite: ``python -m benchmarks [--device cpu|cuda]``."""
