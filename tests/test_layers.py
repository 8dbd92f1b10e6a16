"""The package's layers import downward only, and no module imports itself back
through others. Read from the sources with ``ast``: imports inside functions
count too, and so does a module loaded by name (``importlib.import_module``
with a table of module names), so neither a lazy import nor an ``importlib``
table can hide a layer violation or a cycle; a package's ``__init__`` is a
module like any other (its edges to its submodules count)."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "opendml"

#: Lowest first. A module may import modules of its own layer and of lower ones.
LAYERS = ["_version", "model", "plan", "ops", "jsonform", "runtime", "arrays", "device", "dxdispatch", "torch", "jax",
          "cli", "_stub", "__main__"]


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: pathlib.Path) -> set[str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "opendml")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "opendml":
                target = node.module
            else:
                continue
            # `from . import x` imports the submodule x where one exists (the
            # package itself only where a name is not a submodule)
            subs = [f"{target}.{a.name}" for a in node.names]
            subs = [sub for sub in subs if is_module(sub)]
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(target)
    if "import_module" in source:
        # a table of module names loaded with importlib: each name that is a
        # module of this package (or of the package below it) is an import
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and all(
                    part.isidentifier() for part in node.value.split(".")):
                for base in (package, name):
                    if is_module(f"{base}.{node.value}") and f"{base}.{node.value}" != name:
                        found.add(f"{base}.{node.value}")
    return found


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module of the source tree (a ``.py`` file, a
    package, or a compiled extension built in place, such as ``_native``)."""
    path = ROOT.parent / pathlib.Path(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists() or dotted in EXTENSIONS


#: The compiled extensions setup.py declares (modules without a .py file).
EXTENSIONS = set(re.findall(r'Extension\("([\w.]+)"', (ROOT.parents[1] / "setup.py").read_text(encoding="utf-8")))


def layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None                       # the top-level package gathers everything
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def test_every_module_belongs_to_a_layer():
    assert [m for m in MODULES if m != "opendml" and layer(m) is None and m.split(".")[1] != "examples"] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    src = layer(module)
    if src is None:
        return
    bad = [t for t in imports(MODULES[module]) if t == "opendml" or (layer(t) is not None and layer(t) > src)]
    assert bad == [], f"{module} (layer {LAYERS[src]}) imports higher layers: {bad}"


#: Import cycles known today, each with why it is there; the test below fails
#: on any other cycle, and on one of these once it is gone (drop it here then).
KNOWN_CYCLES: dict = {}


def cycles_of(graph: dict) -> set:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    found = cycles_of(graph)
    assert sorted(map(sorted, found - set(KNOWN_CYCLES))) == [], "new import cycles"
    assert sorted(map(sorted, set(KNOWN_CYCLES) - found)) == [], "cycles gone: drop them from KNOWN_CYCLES"


def test_the_import_graph_sees_importlib_tables_lazy_imports_and_package_edges():
    """The reader the two tests above rely on: a module loaded by name, an
    import inside a function and a package's ``__init__`` are all edges, so
    the array front's old cycle (``opendml.arrays`` loading the adapters by
    name, the PyTorch and JAX adapters importing ``opendml.arrays`` back) is
    seen."""
    front = imports(MODULES["opendml.arrays"])
    assert {"opendml.arrays.torch.adapter", "opendml.arrays.jax_adapter", "opendml.arrays.dask_adapter",
            "opendml.arrays.cupy_adapter"} <= imports(MODULES["opendml.arrays.front"])   # a dotted importlib name
    assert "opendml.arrays.front" in front
    assert "opendml.runtime.cuda" in imports(MODULES["opendml.runtime"])            # a lazy import
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    graph["opendml.arrays.torch.adapter"] = graph["opendml.arrays.torch.adapter"] | {"opendml.arrays"}
    assert frozenset({"opendml.arrays", "opendml.arrays.torch.adapter"}) <= max(
        (c for c in cycles_of(graph) if "opendml.arrays" in c), key=len)
    for name in ("torch.adapter", "torch.library", "jax_adapter", "dask_adapter", "cupy_adapter", "engine"):
        # no adapter (nor the engine below them) imports the front: the engine they share lies below it
        assert not {"opendml.arrays", "opendml.arrays.front", "opendml.arrays.index_ops"} & imports(
            MODULES[f"opendml.arrays.{name}"]), name


def test_section_dividers_do_not_leak_into_help():
    """A ``# -- section ---`` comment right above a def shows up in help() of
    that function (inspect.getcomments); every divider is followed by a blank line."""
    import importlib
    import inspect
    leaks = []
    for name in MODULES:
        if name.endswith(("torch", "jax", "dask_adapter", "jax_adapter", "cupy_adapter")) \
                or ".cuda" in name or ".arrays.torch." in name:
            continue                      # optional frameworks: checked by reading the source below
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            if getattr(obj, "__module__", None) != name:
                continue
            members = [obj] + ([v for v in vars(obj).values() if callable(v)] if inspect.isclass(obj) else [])
            for m in members:
                try:
                    comments = inspect.getcomments(m) or ""
                except (TypeError, OSError):
                    continue
                if "# --" in comments:
                    leaks.append(f"{name}.{getattr(m, '__qualname__', m)}")
    import re
    for name, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines[:-1]):
            if re.match(r"^\s*# --.*-{6,}$", line) and lines[i + 1].strip():
                leaks.append(f"{name}:{i + 1}")
    assert leaks == []
