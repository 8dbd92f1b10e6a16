"""The rules of the index-driven operators' linear maps (``IndexAdjointDesc``,
``IndexPrimalDesc``): the tensors they take must match the primal's, and
the messages say which and how."""
import math

import pytest

from opendml import DataType, TensorDesc, ValidationError
from opendml.ops._index import IndexAdjointDesc, IndexPrimalDesc
from opendml.ops.gather_elements import GatherElementsOperatorDesc
from opendml.ops.scatter import ScatterElementsOperatorDesc

F32, I32 = DataType.FLOAT32, DataType.INT32
X, IDX = TensorDesc(F32, (3, 4)), TensorDesc(I32, (2, 4))
PRIMAL = GatherElementsOperatorDesc(X, IDX, None, 0)


def test_adjoint_and_primal_outputs():
    adj = IndexAdjointDesc(PRIMAL, 0, TensorDesc(F32, (2, 4)), IDX)
    assert adj.input_tensor is adj.gradient_tensor and adj.output_tensor == TensorDesc(F32, (3, 4))
    lin = IndexPrimalDesc(PRIMAL, 0, X, IDX)
    assert lin.input_tensor is lin.data_tensor and lin.output_tensor == TensorDesc(F32, (2, 4))


@pytest.mark.parametrize("make, message", [
    (lambda: IndexAdjointDesc(X, 0, X, IDX), "primal must be a differentiable index-driven description; got TensorDesc"),
    (lambda: IndexAdjointDesc(PRIMAL, 1, X, IDX), r"wrt must name a data input of GATHER_ELEMENTS \(one of \[0\]\); got 1"),
    (lambda: IndexAdjointDesc(PRIMAL, 0, X, IDX),
     r"GradientTensor must have GATHER_ELEMENTS's output sizes \[2, 4\] and DataType FLOAT32; got "),
    (lambda: IndexAdjointDesc(PRIMAL, 0, TensorDesc(F32, (2, 4)), TensorDesc(DataType.UINT32, (2, 4))),
     r"IndicesTensor must have GATHER_ELEMENTS's index sizes \[2, 4\] and DataType INT32; got "),
    (lambda: IndexPrimalDesc(PRIMAL, 0, TensorDesc(F32, (2, 4)), IDX),
     r"DataTensor must have sizes \[3, 4\] and DataType FLOAT32; got "),
    (lambda: IndexPrimalDesc(PRIMAL, 0, X, None), r"IndicesTensor must have sizes \[2, 4\] and DataType INT32; got None"),
])
def test_mismatched_tensors_are_named(make, message):
    with pytest.raises(ValidationError, match=message):
        make()


def test_index_operators_are_linear_in_float_data_only():
    assert PRIMAL.linear_part() is PRIMAL
    ints = GatherElementsOperatorDesc(TensorDesc(I32, (3, 4)), IDX, None, 0)
    assert ints.linear_part() is None



@pytest.mark.parametrize("make, wrt, strided", [
    (lambda x: GatherElementsOperatorDesc(x, IDX, None, 0), 0, TensorDesc(F32, (3, 4), strides=(8, 2))),
    (lambda x: ScatterElementsOperatorDesc(x, IDX, TensorDesc(F32, (2, 4)), None, 0), 0,
     TensorDesc(F32, (3, 4), strides=(8, 2))),
    (lambda u: ScatterElementsOperatorDesc(X, IDX, u, None, 0), 2, TensorDesc(F32, (2, 4), strides=(1, 2))),
])
def test_adjoint_writes_its_packed_output_whatever_the_primal_input_strides(make, wrt, strided):
    packed = make(TensorDesc(F32, strided.sizes))
    grad = TensorDesc(F32, packed.output_tensor.sizes)
    want = IndexAdjointDesc(packed, wrt, grad, IDX).lower()
    assert IndexAdjointDesc(make(strided), wrt, grad, IDX).lower() == want
    assert want.out_spans() == [(0, math.prod(strided.sizes) - 1)]
