"""The package's type stub (``opendml/__init__.pyi``): the array functions are
generated at import time, so static tools (type checkers, editors) see them
only through the stub, which ``python -m opendml._stub`` writes from the
bindings. It must be what the bindings make today, and name every public
name of the package."""
import ast
import inspect

import opendml as dml
from opendml import _stub, arrays


def test_the_stub_is_what_the_bindings_make():
    assert _stub.PATH.read_text() == _stub.text(), "run `python -m opendml._stub` and commit the stub"


def test_the_stub_declares_every_public_name_with_its_signature():
    tree = ast.parse(_stub.PATH.read_text())
    defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    for name in dml.__all__:
        assert name in defined or name in imported, name
    for name, fn in arrays.FUNCTIONS.items():
        stub = defined[name]
        params = inspect.signature(fn).parameters
        assert [a.arg for a in stub.args.args + stub.args.kwonlyargs] == list(params), name
        assert [a.arg for a in stub.args.kwonlyargs] == [p for p, v in params.items() if v.kind is v.KEYWORD_ONLY]
        assert ast.get_docstring(stub).startswith(inspect.getdoc(fn).split("\n\n")[0]), name
