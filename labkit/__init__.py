"""labkit — measure and teach how data moves between CPUs and GPUs and between GPUs.

Import is cheap on purpose: torch, NVML and widgets are imported inside the functions that need
them, so `import labkit` works on any machine. The layout (docs/design.md): core modules here
(units, timing, models, collectives, reference, runtime, plots, widgets, check, system, launch,
provenance), one subpackage per topic a notebook reads (copies, overlap, p2p, allreduce, hierarchy),
and the tools on top (cli, benches, record, compare, student, soak, notebooks, doctor).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
