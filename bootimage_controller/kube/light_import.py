"""kubernetes_asyncio without its eager imports: 60 MiB of the daemon's memory (issue 36, item 4).

`import kubernetes_asyncio` runs package `__init__` files that import every generated API class and
every model (859 modules in 36.1, 61 MiB resident before anything is cached); the daemon needs 27
of them (6 API classes, 5 models; core/v1 goes through `kube/core_api.py`) and reads JSON, not
models. `install()` puts a finder in front of the normal one for exactly four packages (`kubernetes_asyncio`, `.client`, `.client.api`, `.client.models`): each is
created empty, and a name it would have imported (`CoreV1Api`, `V1ConfigMap`, `client`...) is
imported from its own module the first time it is asked for (PEP 562 `__getattr__`). The table of
names is read from the package's own `__init__.py`, so a new kubernetes_asyncio release brings its
own; a name the table does not know makes the package run its real `__init__` once (the eager
import, correct and only slower), never an AttributeError that the eager package would not raise.

Installed by `bootimage_controller/__init__.py`; the finder itself imports nothing, so commands that
never talk to a cluster (`plan` on files) still import no part of kubernetes_asyncio.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

LIGHT_PACKAGES = frozenset({
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
})

_FROM_IMPORT = re.compile(r"^from (kubernetes_asyncio[\w.]*) import (\w+)(?: as (\w+))?\s*$", re.MULTILINE)
_IMPORT_AS = re.compile(r"^import (kubernetes_asyncio[\w.]*) as (\w+)\s*$", re.MULTILINE)
_VERSION = re.compile(r"^__version__ = [\"']([^\"']+)[\"']", re.MULTILINE)


def names_in(source: str) -> dict[str, tuple[str, str | None]]:
    """name -> (module, attribute in it; None: the module itself), as the `__init__` imports them."""
    names: dict[str, tuple[str, str | None]] = {}
    for module, attribute, alias in _FROM_IMPORT.findall(source):
        names[alias or attribute] = (module, attribute)
    for module, alias in _IMPORT_AS.findall(source):
        names[alias] = (module, None)
    return names


class _LightLoader(importlib.abc.Loader):
    def __init__(self, real: importlib.machinery.ModuleSpec) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        origin = self.real.origin
        assert origin is not None
        with open(origin, encoding="utf-8") as f:
            source = f.read()
        names = names_in(source)
        version = _VERSION.search(source)
        if version is not None:
            module.__version__ = version.group(1)  # type: ignore[attr-defined]
        eager: list[bool] = []

        def __getattr__(name: str) -> Any:  # a module's __getattr__ (PEP 562)
            found = names.get(name)
            if found is not None:
                target = importlib.import_module(found[0])
                value = target if found[1] is None else getattr(target, found[1])
            elif name.startswith("__"):
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            elif importlib.util.find_spec(f"{module.__name__}.{name}") is not None:
                value = importlib.import_module(f"{module.__name__}.{name}")  # a submodule (`rest`)
            elif eager:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            else:
                # Not in the table: run the real `__init__` once, as a plain import would have.
                eager.append(True)
                exec(compile(source, origin, "exec"), module.__dict__)  # the package's own file
                value = module.__dict__.get(name)
                if value is None:
                    raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            setattr(module, name, value)
            return value

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _LightFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in LIGHT_PACKAGES:
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is None or real.origin is None or not real.submodule_search_locations:
            return None  # not the package layout this was written for: import it as usual
        spec = importlib.machinery.ModuleSpec(fullname, _LightLoader(real), origin=real.origin, is_package=True)
        spec.submodule_search_locations = list(real.submodule_search_locations)
        spec.has_location = True
        return spec


_FINDER = _LightFinder()


def install() -> None:
    """Idempotent. Without effect on a package already imported (eagerly) in this process."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def is_light(module_name: str = "kubernetes_asyncio.client") -> bool:
    """Whether `module_name` was imported light (for tests and the benchmark report)."""
    spec = getattr(sys.modules.get(module_name), "__spec__", None)
    return spec is not None and isinstance(spec.loader, _LightLoader)
