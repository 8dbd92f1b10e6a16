"""What one operator costs in source files (issue 31: "a new operator costs
its module, its tests and one registry line").

For every registered operator, the source files of ``src/opendml`` (the
bundled examples left out) whose code names it: its description class, its
DirectML name (a string ``"TILE"`` or ``"DML_OPERATOR_TILE"``, an identifier
``TILE``, a C identifier ``TILE`` or ``ODML_<KIND>_TILE``), or its
array-API function (a ``def tile``, a name imported, a string ``"tile"`` in
a table that names other operators too). Comments, docstrings and C string
literals do not count; attribute uses (``api.tile(...)``) are not matched,
since ``str.join``/``str.split`` cannot be told apart from the operators by
their text. Numeric type values are not matched either
(a bare number is no name; ``tests/test_engine_registry.py`` pins them).

An operator may be named in its own module, on one line of
``ops/__init__.py`` (its registry line), and in the modules of other
operators (whose adjoints are written with other operators by design);
anywhere else it is a file that must change when an operator is added.
Today's offenders are strict xfails (``KNOWN``) listing the files: an entry
flips to a failure once its operator's footprint is down to its module and
its registry line, and must then be removed.
"""
from __future__ import annotations

import functools
import io
import pathlib
import re
import tokenize

import pytest

import opendml as dml
from opendml.ops import OPERATORS

SRC = pathlib.Path(dml.__file__).parent
CODE_SUFFIXES = (".py", ".c", ".h", ".cu", ".cpp")
#: Every operator's array-API function, where it declares one (``BINDING``).
FUNCTIONS = {name: cls.__dict__["BINDING"].function for name, cls in OPERATORS.items() if "BINDING" in cls.__dict__}


def _module_file(cls) -> str:
    return str(pathlib.Path(cls.__module__.replace(".", "/")).relative_to("opendml")) + ".py"


OWN = {name: _module_file(cls) for name, cls in OPERATORS.items()}
OPERATOR_MODULES = set(OWN.values())


_STATEMENT_START = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


@functools.lru_cache(maxsize=None)
def _python_code(text: str):
    """The code tokens of Python source, per logical line: a list of
    ``(line, kind, value)`` lists, kind "name" (a NAME not after a dot),
    "def" (a def or class name; a method, whose first parameter is
    ``self``, left out), "import" (a name on an import line) or
    "string" (a string literal that is not a statement of its own: no
    docstrings). Comments are not tokens."""
    out, statement = [], []
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    prev = tokenize.NEWLINE
    importing = False
    for i, t in enumerate(toks):
        if t.type == tokenize.NAME:
            if t.string in ("import", "from") and prev in _STATEMENT_START:
                importing = True
            before = toks[i - 1].string if i else ""
            method = before == "def" and [u.string for u in toks[i + 1:i + 3]] == ["(", "self"]
            if before != "." and not method:
                kind = "def" if before in ("def", "class") else "import" if importing else "name"
                statement.append((t.start[0], kind, t.string))
        elif t.type == tokenize.STRING and prev not in _STATEMENT_START:
            try:
                value = eval(t.string, {})           # noqa: S307 - a string literal of our own sources
            except Exception:                         # noqa: BLE001 - f-strings and the like: their text
                value = t.string
            if isinstance(value, str):
                statement.append((t.start[0], "string", value))
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            importing = False
            if statement:
                out.append(statement)
            statement = []
        if t.type not in (tokenize.COMMENT, tokenize.NL):
            prev = t.type
    return out


#: Every registry name: DirectML names, class names, array functions.
REGISTRY_NAMES = set(OPERATORS) | {cls.__name__ for cls in OPERATORS.values()} | set(FUNCTIONS.values())

_C_NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"", re.S)


@functools.lru_cache(maxsize=None)
def _c_code(text: str) -> str:
    """C source without comments and string literals (line breaks kept)."""
    return _C_NOISE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _names(name: str, cls, path: pathlib.Path, text: str) -> list[int]:
    """The lines of ``text`` (the file at ``path``) whose code names the
    operator. Python: its class name; its DirectML name as a string; its
    array function as a ``def``, an imported name, or a string in a
    statement that names another operator too (a table of operators: a
    lone ``"pad"`` or ``"gather"`` is an attribute or a kind, not the
    operator). C: its class name, ``ODML_<KIND>_<NAME>`` or an X-macro row
    ``X(NAME, ...)`` with its DirectML or function name in capitals
    (comments and string literals left out; a bare ``TILE`` is as often a
    tile size)."""
    lines = []
    function = FUNCTIONS.get(name)
    if path.suffix == ".py":
        for statement in _python_code(text):
            table = len({v for _, k, v in statement if v in REGISTRY_NAMES and k != "name"}) > 1
            for line, kind, value in statement:
                if (value == cls.__name__
                        or (kind == "string" and value in (name, f"DML_OPERATOR_{name}"))
                        or (function is not None and value == function
                            and (kind in ("def", "import") or (kind == "string" and table)))):
                    lines.append(line)
    else:
        code = _c_code(text)
        suffixes = [re.escape(name)] + ([re.escape(function.upper())] if function else [])
        alts = "|".join(suffixes)
        pattern = re.compile(rf"\b(?:{re.escape(cls.__name__)}|ODML_[A-Z]+_(?:{alts}))\b|\bX\(\s*(?:{alts})\s*,")
        lines = [code.count("\n", 0, m.start()) + 1 for m in pattern.finditer(code)]
    return sorted(set(lines))


@functools.cache
def footprint() -> dict[str, dict[str, list[int]]]:
    """operator -> {file (relative to src/opendml): the lines naming it}."""
    files = {p: p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*"))
             if p.suffix in CODE_SUFFIXES and "examples" not in p.relative_to(SRC).parts}
    out = {}
    for name, cls in OPERATORS.items():
        out[name] = {}
        for p, text in files.items():
            lines = _names(name, cls, p, text)
            if lines:
                out[name][str(p.relative_to(SRC))] = lines
    return out


#: The C copies of the operators' lowerings that serve the new-shape route,
#: in one folder, each naming the Python function it mirrors and tested
#: against it (tests/test_newshape_*.py): where the issue keeps them.
C_LOWERINGS = {"runtime/native/newshape.c", "runtime/native/newshape.h", "runtime/native/newshape_move.c"}


def offenders(name: str) -> dict[str, list[int]]:
    """The files beyond the operator's module, its registry line and the
    other operators' modules, with the lines naming it (``ops/__init__.py``
    where it takes more than one line)."""
    out = {}
    for f, lines in footprint()[name].items():
        if f == OWN[name] or (f in OPERATOR_MODULES and f != "ops/__init__.py") or f in C_LOWERINGS:
            continue
        if f == "ops/__init__.py" and len(lines) == 1:
            continue
        out[f] = lines
    return out


#: Today's offenders, per operator: the files its name, class or function is written in.
KNOWN: dict[str, list[str]] = {}


def _params():
    out = []
    for name in sorted(OPERATORS):
        if name in KNOWN:
            reason = f"{name} is named in {', '.join(KNOWN[name])}"
            out.append(pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=reason)))
        else:
            out.append(pytest.param(name, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_an_operator_is_named_in_its_module_and_its_registry_line_only(name):
    assert offenders(name) == {}, f"{name} is named in {offenders(name)} (file: lines)"


def test_every_operator_is_named_where_it_is_declared():
    """The scan finds each operator in its own module and on the registry's
    lines (the test above could not pass by finding nothing)."""
    from opendml import ops
    for name in OPERATORS:
        files = footprint()[name]
        assert OWN[name] in files, name
        # the registry line: the module's line in ops/__init__.py
        assert pathlib.Path(OWN[name]).stem in ops._MODULES, name


def test_known_offenders_are_operators():
    assert set(KNOWN) <= set(OPERATORS), set(KNOWN) - set(OPERATORS)


def test_the_scanner_reads_code_not_prose():
    cls = OPERATORS["TILE"]
    code = ('"""TILE and TileOperatorDesc in a docstring."""\n'
            'import os  # TILE in a comment\n'
            'x = ",".join(["a"]).split(",")\n'
            'y = {"TILE": 1}\n'
            'z = getattr(x, "tile")\n'
            '__all__ = ["tile", "pad"]\n'
            'def tile(): pass\n'
            'class B:\n'
            '    def tile(self): pass\n'
            'TILE = "tile"\n')
    assert _names("TILE", cls, pathlib.Path("x.py"), code) == [4, 6, 7]
    c = ('/* TILE */ int ODML_TILE_BLOCKS = 1; // TILE\n'
         'int k = ODML_LOWER_TILE;\n'
         'char *s = "TILE in a message";\n'
         'X(TILE, tile)\n'
         'template <int TILE> int f() { return TILE; }\n')
    assert _names("TILE", cls, pathlib.Path("x.c"), c) == [2, 4]


if __name__ == "__main__":                           # the table for a report
    for name in sorted(OPERATORS):
        rest = offenders(name)
        print(f"{name}: {len(rest)} file(s) beyond its module and registry line")
        for f, lines in rest.items():
            print(f"    {f}: lines {lines}")
