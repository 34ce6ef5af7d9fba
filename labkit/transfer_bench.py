"""`labkit bench copy` and `labkit bench host`: copy sweeps from the command line, and their recorder."""

from __future__ import annotations

from . import transfer
from .units import format_bytes, parse_sizes, pow2_sizes


def bench_arguments(p, name: str) -> None:
    if name == "copy":
        p.add_argument("--direction", default="h2d,d2h", help="h2d, d2h, d2d (comma-separated)")
        p.add_argument("--memory", default="pinned", help="pinned, pageable (comma-separated)")
        p.add_argument("--sizes", help="e.g. 4B,64KiB,1GiB (default: powers of two 4 B .. 1 GiB)")
        p.add_argument("--device", type=int, default=0)
    else:
        p.add_argument("--sizes", help="default: powers of four 64 B .. 256 MiB")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--quick", action="store_true")


def _sweeps(args, name):
    if name == "host":
        sizes = parse_sizes(args.sizes) if args.sizes else pow2_sizes(
            transfer.HOST_MIN_BYTES, transfer.HOST_QUICK_MAX_BYTES if args.quick else transfer.HOST_MAX_BYTES, step=2)
        yield transfer.host_copy_sweep(sizes, repeats=args.repeats, progress=not args.json)
        return
    sizes = parse_sizes(args.sizes) if args.sizes else pow2_sizes(
        transfer.SWEEP_MIN_BYTES, transfer.QUICK_MAX_BYTES if args.quick else transfer.SWEEP_MAX_BYTES, step=2)
    for d in args.direction.split(","):
        for mem in args.memory.split(","):
            yield transfer.gpu_copy_sweep(sizes, d.strip(), mem.strip(), repeats=args.repeats,
                                          device=args.device, progress=not args.json)


def bench(args, name: str):
    import sys

    for sweep in _sweeps(args, name):
        for note in sweep.skipped:
            print(f"skipped {note}", file=sys.stderr)
        for m in sweep.measurements:
            for w in m.warnings:
                print(f"warning: {w}", file=sys.stderr)
            yield {"experiment": name, "direction": sweep.direction, "memory": sweep.memory,
                   "device": sweep.device, "nbytes": m.nbytes, "size": format_bytes(m.nbytes),
                   "seconds": m.median_s, "iqr_s": m.iqr_s, "bandwidth_GBps": m.bandwidth_GBps,
                   "bandwidth_direction": "unidirectional", "timer": m.timer, "samples_s": list(m.samples_s)}
