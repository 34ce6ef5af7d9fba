"""labkit — measure and teach how data moves between CPUs and GPUs and between GPUs.

Import is cheap on purpose: torch, NVML and widgets are imported inside the functions that need
them, so `import labkit` works on any machine.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
