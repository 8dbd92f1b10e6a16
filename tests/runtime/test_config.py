"""``opendml.configure``'s counts against values that are not ints: the
documented ``TypeError`` naming the setting, whatever the value's own
``__index__`` says."""
import numpy as np
import pytest

import opendml as dml


@pytest.mark.parametrize("value, kind", [(np.array([2]), "numpy.ndarray"), (np.array(2.0), "numpy.ndarray"),
                                         (True, "bool"), (2.0, "float"), ("2", "str")])
def test_a_count_that_is_no_int_names_the_setting(value, kind):
    # NumPy's 1-element array has __index__, which raised its own "only integer scalar arrays can be
    # converted to a scalar index"
    before = dml.config()
    with pytest.raises(TypeError, match=rf"^configure: threads must be an int; got {kind}$"):
        dml.configure(threads=value)
    assert dml.config() == before


def test_an_integer_array_of_no_dimension_is_a_count():
    with dml.configure(threads=np.array(3)) as cfg:
        assert cfg.threads == 3 and type(cfg.threads) is int
