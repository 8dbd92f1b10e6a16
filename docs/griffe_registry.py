"""A Griffe extension for the API reference (mkdocs.yml): opendml puts each
registered operator's array function and description class in the package by
a loop over the operator registry (``opendml.arrays.FUNCTIONS``,
``opendml.ops.DESCRIPTIONS``), which Griffe's static analysis cannot follow,
and the array functions themselves are generated from the operator modules'
bindings (``opendml.arrays.front``). This imports the package and adds them to
what Griffe read from the sources: each generated function as Python sees it
(signature and docstring), each name of ``opendml`` and ``opendml.arrays`` as
an alias of the object it names, and ``opendml.jax``'s and
``opendml.torch``'s window functions (read from the registry too). The rest of the reference stays static."""
from __future__ import annotations

import importlib

import griffe


class RegisteredOperators(griffe.Extension):
    def on_package(self, *, pkg, loader, **kwargs) -> None:
        if pkg.name != "opendml":
            return
        package = importlib.import_module("opendml")
        front = package.arrays.front
        # generated functions as Python sees them: the array API's, and ``opendml.jax``'s (each the array
        # function taking a JAX array, where JAX is installed)
        generated = [(front, front.FUNCTIONS)]
        try:
            jax_module = importlib.import_module("opendml.jax")
            generated.append((jax_module, jax_module._WINDOW))
        except ImportError:
            pass
        for module, names in generated:
            inspected = griffe.inspect(module.__name__, docstring_parser=loader.docstring_parser,
                                       docstring_options=loader.docstring_options)
            static = pkg[module.__name__.removeprefix("opendml.")]
            for name in names:
                static.set_member(name, inspected[name])
        torch_names = {}
        try:                                          # ``opendml.torch``'s functions are the array API's own
            torch_names = {n: package.arrays.FUNCTIONS[n] for n in importlib.import_module("opendml.torch")._WINDOW}
        except ImportError:
            pass
        for module, names in ((pkg, {**package.arrays.FUNCTIONS, **package.ops.DESCRIPTIONS}),
                              (pkg["arrays"], package.arrays.FUNCTIONS), (pkg["torch"], torch_names)):
            for name, obj in names.items():
                module.set_member(name, griffe.Alias(name, f"{obj.__module__}.{obj.__qualname__}", parent=module))
