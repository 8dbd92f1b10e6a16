"""A faster ``__init__`` for the frozen dataclasses built on every call.

A frozen dataclass's generated ``__init__`` stores each field through ``object.__setattr__``, which costs about as
much as the checks of a small description. ``stored_init`` gives such a class an ``__init__`` of the same signature
(names, order, defaults) that puts the fields straight into the instance's ``__dict__`` (what ``object.__setattr__``
does for these classes), then calls ``__post_init__`` where the class has one, as the generated one does. Instances
stay frozen: ``__setattr__`` still refuses assignment.
"""
from __future__ import annotations

import dataclasses


def stored_init(cls):
    """Class decorator, applied above ``@dataclasses.dataclass(frozen=True)``: replace its ``__init__`` as the
    module's docstring says. The class must have no ``InitVar``s, keyword-only or ``default_factory`` fields."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    unsupported = [name for name, t in getattr(cls, "__annotations__", {}).items()
                   if isinstance(t, dataclasses.InitVar) or (isinstance(t, str) and t.startswith("InitVar"))]
    unsupported += [f.name for f in fields if f.kw_only is True or f.default_factory is not dataclasses.MISSING]
    if unsupported:
        raise TypeError(f"stored_init: {cls.__name__} has InitVars, keyword-only or default_factory fields "
                        f"({', '.join(unsupported)})")
    params, body, names = [], [], {}
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            names[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    d[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = (f"def __init__(self, {', '.join(params)}):\n    d = self.__dict__\n" + "\n".join(body) + "\n")
    exec(source, names)               # noqa: S102 - the source is built above from field names only
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init
    return cls
