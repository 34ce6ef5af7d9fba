"""Old import paths of the modules issue 14 moved into topic packages: they keep working for one release, with a warning.

`import labkit.transfer` (or `from labkit.latency_curve import Curve`) finds a stand-in module whose
attributes are looked up in the module(s) the code now lives in, and warns (DeprecationWarning) naming
the new place. Topic packages that kept an old module's name (labkit.overlap, labkit.p2p,
labkit.hierarchy) forward their old flat names the same way (`forward`). Nothing inside labkit uses
an old path (tests/test_layers.py checks it); labkit/__init__.py installs the finder.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

#: old module → the modules its names live in now (searched in order).
MOVED: dict[str, tuple[str, ...]] = {
    "labkit.transfer": ("labkit.copies.sweeps",),
    "labkit.latency_curve": ("labkit.copies.curves",),
    "labkit.pinned": (
        "labkit.copies.pinned",
        "labkit.copies.pinned_vs_pageable",
        "labkit.copies.pin_cost",
        "labkit.copies.dataloader",
        "labkit.copies.pitfall",
        "labkit.copies.bench_pinned",
    ),
    "labkit.fidelity": ("labkit.copies.fidelity", "labkit.copies.bench_fidelity"),
    "labkit.transfer_bench": ("labkit.copies.bench_copy", "labkit.copies.bench_host"),
    "labkit.transfer_record": ("labkit.copies.bench_copy",),
    "labkit.ring": ("labkit.allreduce.ring", "labkit.allreduce.correctness"),
    "labkit.ring_sim": ("labkit.allreduce.simulation", "labkit.allreduce.views"),
    "labkit.ring_views": ("labkit.allreduce.views",),
    "labkit.collectives_bench": ("labkit.allreduce.measure", "labkit.allreduce.bench_allreduce"),
    "labkit.hierarchical": ("labkit.hierarchy.hierarchical",),
    "labkit.hierarchy_worker": ("labkit.hierarchy.worker",),
    "labkit.ladder": ("labkit.hierarchy.ladder", "labkit.hierarchy.rungs"),
    "labkit.cluster": ("labkit.hierarchy.cluster",),
    "labkit.slowlink": ("labkit.hierarchy.slowlink",),
}


#: old module runnable with `python -m` → the module whose `main()` now runs (the notebooks' text names the old path).
RUNNABLE = {"labkit.hierarchy_worker": "labkit.hierarchy.worker"}


def _lookup(old: str, new: tuple[str, ...], name: str):
    for target in new:
        mod = importlib.import_module(target)
        if hasattr(mod, name):
            warnings.warn(
                f"{old}.{name} moved to {target}.{name} (labkit issue 14); the old path goes in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
            return getattr(mod, name)
    raise AttributeError(f"module {old!r} has no attribute {name!r} (its code moved to {', '.join(new)})")


def forward(old: str, new: tuple[str, ...]):
    """A module-level `__getattr__` for `old` that finds names in the `new` modules, with a warning."""

    def __getattr__(name: str):
        # `from . import submodule` asks the package first: a submodule's name is not an old name (and looking it
        # up in the new modules would import them, midway through importing one of them)
        if name.startswith("__") or _is_submodule(old, name):
            raise AttributeError(name)
        return _lookup(old, new, name)

    return __getattr__


def _is_submodule(package: str, name: str) -> bool:
    mod = sys.modules.get(package)
    if getattr(mod, "__path__", None) is None:  # a stand-in module, not a package
        return False
    return importlib.util.find_spec(f"{package}.{name}") is not None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module names in MOVED and makes each a stand-in that forwards to the new modules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return types.ModuleType(spec.name, f"Moved to {', '.join(MOVED[spec.name])} (labkit issue 14).")

    def exec_module(self, module):
        module.__getattr__ = forward(module.__name__, MOVED[module.__name__])

    def get_code(self, fullname):
        """What `python -m OLD` runs (runpy asks the loader for code): the new module's main()."""
        if fullname not in RUNNABLE:
            raise ImportError(f"{fullname} moved to {', '.join(MOVED[fullname])}; run that instead")
        return compile(f"import sys\nfrom {RUNNABLE[fullname]} import main\nsys.exit(main())\n", fullname, "exec")


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
