"""labkit — measure and teach how data moves between CPUs and GPUs and between GPUs.

Import is cheap on purpose: torch, NVML and widgets are imported inside the functions that need
them, so `import labkit` works on any machine. The path of a module says its layer: core modules are
`labkit/<module>.py` (and the log parsers, `labkit/logs/`), each other subpackage is a topic a notebook
reads, and the tools (the `labkit` command and what it drives) are in `labkit/tools/`. CONTRIBUTING.md
("Layout") lists every module, generated from the tree by `python scripts/module_map.py --markdown`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
