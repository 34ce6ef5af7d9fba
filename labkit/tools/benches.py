"""The experiments `labkit bench NAME` and `labkit record` run, and the one convention their modules follow.

An experiment is one module (CONTRIBUTING.md, "Adding an experiment"; the one to copy is
labkit/copies/bench_fidelity.py) that defines:

    add_arguments(parser)            the flags of `labkit bench NAME` (argparse)
    bench(args) -> iterable of dict  one JSON-able record per measurement (`--json` prints one per line)
    record(folder, quick, env)       optional: write this machine's datasets into a `labkit record`
                                     profile folder (labkit.provenance.measured_meta); return their
                                     names, or [] where this machine cannot run it
    text(record) -> str              optional: how `labkit bench NAME` prints a record without --json

and is listed once, below. `labkit record` runs, in this order, every experiment whose module defines
`record`.
"""

from __future__ import annotations

import importlib

#: `labkit bench NAME` → the module that runs it.
BENCHES = {
    "copy": "labkit.copies.bench_copy",
    "host": "labkit.copies.bench_host",
    "pinned": "labkit.copies.bench_pinned",
    "overlap": "labkit.overlap.bench_overlap",
    "p2p": "labkit.p2p.bench_p2p",
    "allreduce": "labkit.allreduce.bench_allreduce",
    "collectives": "labkit.allreduce.bench_collectives",
    "ladder": "labkit.hierarchy.bench_ladder",
    "soak": "labkit.tools.soak",
    "fidelity": "labkit.copies.bench_fidelity",
}


def load(module_name: str):
    """The experiment module, or None where this version of labkit lacks it (an optional part not installed)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            return None
        raise


def recorders(benches: dict[str, str] | None = None) -> dict[str, str]:
    """Experiment → module, for those whose module defines `record` (what `labkit record` runs), in order."""
    benches = BENCHES if benches is None else benches
    return {name: mod for name, mod in benches.items() if hasattr(load(mod), "record")}
