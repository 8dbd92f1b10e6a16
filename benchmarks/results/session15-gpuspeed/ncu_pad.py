# Runs three launches for ncu: the default move_padr, a candidate, and the slice's strided_copy (1.0 of copy).
import sys, torch
import opendml as dml, opendml.torch  # noqa
from opendml.runtime.cuda import steps as cs, backend as cb
from opendml.ops import PaddingOperatorDesc, SliceOperatorDesc
from opendml.ops._spec import PaddingMode
from opendml.model.data_type import DataType
x = torch.randn(16, 64, 256, 256, device="cuda")
X = dml.TensorDesc(DataType.FLOAT32, list(x.shape))
def launch(desc, n_out, **knobs):
    old = {k: getattr(cs, k) for k in knobs}
    for k, v in knobs.items(): setattr(cs, k, v)
    be = cb.CudaBackend(0)
    out = torch.empty(n_out, device="cuda")
    rec = be.record_move(desc.lower(), [x.data_ptr()], [x.numel()], [out.data_ptr()], [n_out])
    for k, v in old.items(): setattr(cs, k, v)
    s = torch.cuda.current_stream().cuda_stream
    rec([x.data_ptr()], [out.data_ptr()], s)
    torch.cuda.synchronize()
    print(rec.names, flush=True)
pad = PaddingOperatorDesc(X, None, PaddingMode.REFLECTION, 0.0, [0, 0, 3, 3], [0, 0, 3, 3])
n = 16 * 64 * 262 * 262
launch(pad, n)
for w in sys.argv[1:]:
    launch(pad, n, PAD_ROWS=tuple(int(a) for a in w.split(",")))
launch(SliceOperatorDesc(X, None, [0, 0, 0, 1], [16, 64, 256, 255], [1, 1, 1, 1]), 16 * 64 * 256 * 255)
