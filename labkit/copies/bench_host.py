"""`labkit bench host`: the host-memory copy sweep (any CPU); `labkit record` records it with the GPU's (bench_copy)."""

from __future__ import annotations

import sys

from ..units import chosen_sizes, format_bytes
from .sweeps import HOST_MAX_BYTES, HOST_MIN_BYTES, HOST_QUICK_MAX_BYTES, host_copy_sweep


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", help="default: powers of four 64 B .. 256 MiB")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true")


def bench(args):
    """One record per size: median time, IQR, bandwidth (unidirectional) and the raw samples."""
    sizes = chosen_sizes(args.sizes, HOST_MIN_BYTES, HOST_QUICK_MAX_BYTES if args.quick else HOST_MAX_BYTES, step=2)
    sweep = host_copy_sweep(sizes, repeats=args.repeats, progress=not args.json)
    yield from records(sweep, "host")


def records(sweep, experiment: str):
    """`labkit bench` records of one copy sweep; the measurement's own warnings go to stderr."""
    for note in sweep.skipped:
        print(f"skipped {note}", file=sys.stderr)
    for m in sweep.measurements:
        for w in m.warnings:
            print(f"warning: {w}", file=sys.stderr)
        yield {
            "experiment": experiment,
            "direction": sweep.direction,
            "memory": sweep.memory,
            "device": sweep.device,
            "nbytes": m.nbytes,
            "size": format_bytes(m.nbytes),
            "seconds": m.median_s,
            "iqr_s": m.iqr_s,
            "bandwidth_GBps": m.bandwidth_GBps,
            "bandwidth_direction": "unidirectional",
            "timer": m.timer,
            "samples_s": list(m.samples_s),
        }
