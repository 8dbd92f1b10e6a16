"""opendml inside PyTorch on the CPU: ``python -m benchmarks.cpu_torch [--quick] [--out DIR]``.

The workloads of ``benchmarks.gpu_torch`` at CPU sizes: host cost per call
of ``dml.slice1`` / ``dml.unfold`` on a 1x1x4x4 tensor beside ``torch.flip``
/ ``F.unfold`` (and beside opendml's NumPy path on the tensor's ``x.numpy()``
view, which is what the PyTorch call adds to), the (1, 64, 64, 64) window,
and the im2col training step (forward + backward through fold) in 2-D and
3-D at small sizes. Writes ``results-torch-cpu.json`` (and a PNG).
"""
from __future__ import annotations

import pathlib
import sys

if __package__ in (None, ""):                     # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.gpu_torch import main  # noqa: E402


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--device" in args:
        sys.exit("cpu_torch runs on the CPU only; use benchmarks.gpu_torch for --device")
    main(["--device", "cpu", *args])
