"""An operator's tensor slots are its dataclass fields named ``*_tensor``
(``indices_tensor`` is ``IndicesTensor``) unless it gives ``TENSORS`` or
``SLOTS``; every registered operator's slots name its fields."""
import dataclasses

from opendml.model.tensor_desc import TensorDesc
from opendml.ops import OPERATORS
from opendml.ops._common import OperatorDesc


def test_tensors_read_from_the_fields():
    @dataclasses.dataclass(frozen=True)
    class Made(OperatorDesc):
        input_tensor: TensorDesc
        sequence_lengths_tensor: TensorDesc
        output_tensor: TensorDesc | None
        axis: int

    assert Made.TENSORS == ("InputTensor", "SequenceLengthsTensor", "OutputTensor")
    assert [(s.json, s.attr, s.role) for s in Made.SLOTS] == [
        ("InputTensor", "input_tensor", "input"), ("SequenceLengthsTensor", "sequence_lengths_tensor", "input"),
        ("OutputTensor", "output_tensor", "output")]


def test_given_tensors_are_kept():
    @dataclasses.dataclass(frozen=True)
    class Given(OperatorDesc):
        input_tensor: TensorDesc
        output_tensor: TensorDesc

        TENSORS = ("InputTensor", "OutputTensor")
        OUTPUT_DERIVABLE = False

    assert Given.TENSORS == ("InputTensor", "OutputTensor") and not Given.SLOTS[-1].optional


def test_every_operator_s_slots_are_its_fields():
    for name, cls in OPERATORS.items():
        fields = [f.name for f in dataclasses.fields(cls) if f.name.endswith("_tensor") or f.name.endswith("_tensors")]
        assert [s.attr for s in cls.SLOTS] == fields, name
