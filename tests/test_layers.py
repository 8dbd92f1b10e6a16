"""The package's layers import downward only, and no module imports itself back
through others. Read from the sources with ``ast`` (imports inside functions
count too), so a lazy import cannot hide a layer violation."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "opendml"

#: Lowest first. A module may import modules of its own layer and of lower ones.
LAYERS = ["_version", "model", "plan", "ops", "jsonform", "runtime", "arrays", "device", "dxdispatch", "torch", "jax",
          "cli", "__main__"]


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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
            found.add(target)
            # `from . import x` imports the submodule x where one exists
            for a in node.names:
                sub = f"{target}.{a.name}"
                if (ROOT.parent / pathlib.Path(*sub.split("."))).with_suffix(".py").exists() or \
                        (ROOT.parent / pathlib.Path(*sub.split(".")) / "__init__.py").exists():
                    found.add(sub)
    return found


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


def test_no_import_cycles():
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    # a package's __init__ importing its own submodules is not a cycle of concern
    state: dict = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for t in graph[m]:
            if m.startswith(t + ".") or t.startswith(m + ".") and state.get(t) == 1:
                continue
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2
    for m in graph:
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_section_dividers_do_not_leak_into_help():
    """A ``# -- section ---`` comment right above a def shows up in help() of
    that function (inspect.getcomments); every divider is followed by a blank line."""
    import importlib
    import inspect
    leaks = []
    for name in MODULES:
        if name.endswith(("torch", "jax", "dask_adapter", "torch_adapter", "jax_adapter", "cupy_adapter")) \
                or ".cuda" in name:
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
